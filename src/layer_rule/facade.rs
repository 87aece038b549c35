//! The facade's own layers: a file of one unit may only name the units below it ([`facade_layers`]).
//! Each file's unit is its path:
//!
//! | file (under `src/facade/`) | unit | may name |
//! |---|---|---|
//! | `http/**` | the kernel | the kernel |
//! | `services/**` | the services | the kernel, the services |
//! | `features/<name>/**` | the feature `<name>` | the kernel, the services, itself |
//! | `features/mod.rs` | the list of features | the kernel, the services |
//! | `mod.rs`, `router.rs`, `openapi.rs` | the root | everything |
//!
//! Any other file under `src/facade/` is reported. A file names a unit by a `crate::facade::<unit>::...`
//! path (grouped `use` trees included; any other `crate::facade::` path names the root, such as its
//! re-export `crate::facade::FacadeState`). A `super::` path must stay inside its own unit (it is resolved
//! from the file's module, and from an inline `mod` block's within it): a reference to another unit is
//! written `crate::facade::...`, so that every one of them is seen here. Comments and string literals do
//! not count.

use std::collections::BTreeSet;
use std::path::Path;

use super::sources;

/// A unit of the facade (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Unit {
    /// `facade/http/**`.
    Kernel,
    /// `facade/services/**`.
    Services,
    /// `facade/features/<name>/**`.
    Feature(String),
    /// `facade/features/mod.rs`.
    Features,
    /// `facade/mod.rs`, `facade/router.rs`, `facade/openapi.rs`, and whatever else `crate::facade::` names.
    Root,
}

impl Unit {
    /// The unit of the module path `segments` under `facade` (`["http", "error", "ApiError"]`...).
    fn of<S: AsRef<str>>(segments: &[S]) -> Unit {
        match segments.iter().map(AsRef::as_ref).collect::<Vec<_>>().as_slice() {
            ["http", ..] => Unit::Kernel,
            ["services", ..] => Unit::Services,
            ["features"] => Unit::Features,
            ["features", name, ..] => Unit::Feature(name.to_string()),
            _ => Unit::Root,
        }
    }

    /// Whether a file of this unit may name `other`.
    fn may_use(&self, other: &Unit) -> bool {
        match (self, other) {
            (Unit::Root, _) | (_, Unit::Kernel) => true,
            (Unit::Kernel, _) => false,
            (_, Unit::Services) => true,
            (from, to) => from == to,
        }
    }

    /// How a message names it.
    fn name(&self) -> String {
        match self {
            Unit::Kernel => "http".into(),
            Unit::Services => "services".into(),
            Unit::Feature(name) => format!("feature {name}"),
            Unit::Features => "features".into(),
            Unit::Root => "root".into(),
        }
    }
}

/// `text` with its comments and the contents of its string and character literals blanked (line breaks
/// kept), so that braces and paths are the code's own.
fn blank_comments_and_literals(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let (c, next) = (chars[i], chars.get(i + 1).copied());
        let before = if i == 0 { None } else { Some(chars[i - 1]) };
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if c == 'r'
            && matches!(next, Some('"' | '#'))
            && before.is_none_or(|b| !ident(b) || (b == 'b' && (i < 2 || !ident(chars[i - 2]))))
        {
            // A raw string: r"...", r#"..."#...
            let hashes = chars[i + 1..].iter().take_while(|c| **c == '#').count();
            if chars.get(i + 1 + hashes) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            out.push_str(&" ".repeat(2 + hashes));
            i += 2 + hashes;
            while i < chars.len() && !(chars[i] == '"' && chars[i + 1..].iter().take(hashes).all(|c| *c == '#')) {
                out.push(blank(chars[i]));
                i += 1;
            }
            out.push_str(&" ".repeat(1 + hashes));
            i += 1 + hashes;
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                let width = if chars[i] == '\\' { 2 } else { 1 };
                out.extend(chars[i..(i + width).min(chars.len())].iter().map(|c| blank(*c)));
                i += width;
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' && (next == Some('\\') || chars.get(i + 2) == Some(&'\'')) {
            // A character literal ('{', '\''); a lifetime ('a) has no closing quote this close.
            let end = chars[i + 2..].iter().position(|c| *c == '\'').map_or(chars.len(), |p| i + 2 + p);
            out.push_str(&" ".repeat(end + 1 - i));
            i = end + 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// The paths a use tree at the start of `code` names, as their segments: `a::{b, c::d}` is `a::b` and
/// `a::c::d` (a path ends where the tree does, before `;`, `(`, `<`...).
fn use_tree(code: &[u8], at: &mut usize) -> Vec<Vec<String>> {
    let skip_space = |at: &mut usize| {
        while *at < code.len() && code[*at].is_ascii_whitespace() {
            *at += 1;
        }
    };
    skip_space(at);
    if code.get(*at) == Some(&b'{') {
        *at += 1;
        let mut paths = Vec::new();
        loop {
            skip_space(at);
            match code.get(*at) {
                None => return paths,
                Some(b'}') => {
                    *at += 1;
                    return paths;
                }
                Some(b',') => *at += 1,
                Some(_) => {
                    let before = *at;
                    paths.extend(use_tree(code, at));
                    if *at == before {
                        *at += 1;
                    }
                }
            }
        }
    }
    let start = *at;
    while *at < code.len() && (code[*at].is_ascii_alphanumeric() || code[*at] == b'_' || code[*at] == b'*') {
        *at += 1;
    }
    let segment = String::from_utf8_lossy(&code[start..*at]).to_string();
    if segment.is_empty() {
        return vec![Vec::new()];
    }
    if code[*at..].starts_with(b"::") {
        *at += 2;
        return use_tree(code, at).into_iter().map(|rest| [vec![segment.clone()], rest].concat()).collect();
    }
    vec![vec![segment]]
}

/// The inline modules (`mod name { ... }`) of `code` as the byte span of their body and their name.
fn inline_modules(code: &str) -> Vec<(usize, usize, String)> {
    let bytes = code.as_bytes();
    let mut found = Vec::new();
    for (at, _) in code.match_indices("mod ") {
        if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
            continue;
        }
        let rest = &code[at + 4..];
        let name: String = rest.trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        let after = rest.trim_start()[name.len()..].trim_start();
        if name.is_empty() || !after.starts_with('{') {
            continue;
        }
        let open = code.len() - after.len();
        let mut depth = 0;
        let close = (open..bytes.len())
            .find(|&i| {
                match bytes[i] {
                    b'{' => depth += 1,
                    b'}' => depth -= 1,
                    _ => {}
                }
                depth == 0
            })
            .unwrap_or(bytes.len());
        found.push((open, close, name));
    }
    found
}

/// The violations of the facade's layers among `files`, each a path under `src` (`facade/http/error.rs`)
/// and its text: `file: what`, sorted, each once.
fn facade_layers(files: &[(String, String)]) -> Vec<String> {
    let mut found = BTreeSet::new();
    for (path, text) in files {
        let Some(inside) = path.strip_prefix("facade/").and_then(|p| p.strip_suffix(".rs")) else { continue };
        let mut module: Vec<&str> = inside.split('/').collect();
        if module.last() == Some(&"mod") {
            module.pop();
        }
        let unit = Unit::of(&module);
        if unit == Unit::Root && !matches!(module.as_slice(), [] | ["router"] | ["openapi"]) {
            found.insert(format!("{path}: facade file outside http, services, features and the root files"));
            continue;
        }
        if unit == Unit::Root {
            continue;
        }
        let code = blank_comments_and_literals(text);
        let bytes = code.as_bytes();
        let starts_path =
            |at: usize| at == 0 || !(bytes[at - 1].is_ascii_alphanumeric() || matches!(bytes[at - 1], b'_' | b':'));
        for (at, _) in code.match_indices("crate::facade").filter(|(at, _)| starts_path(*at)) {
            let mut end = at + "crate::facade".len();
            let paths = if code[end..].starts_with("::") {
                end += 2;
                use_tree(bytes, &mut end)
            } else {
                vec![Vec::new()]
            };
            for named in paths.iter().map(|segments| Unit::of(segments)) {
                if !unit.may_use(&named) {
                    found.insert(format!("{path}: facade {} uses {}", unit.name(), named.name()));
                }
            }
        }
        let modules = inline_modules(&code);
        for (at, _) in code.match_indices("super::").filter(|(at, _)| starts_path(*at)) {
            let mut here: Vec<String> = module.iter().map(|s| s.to_string()).collect();
            here.extend(
                modules.iter().filter(|(open, close, _)| *open < at && at < *close).map(|(_, _, name)| name.clone()),
            );
            let mut end = at;
            while code[end..].starts_with("super::") {
                end += "super::".len();
                if here.pop().is_none() {
                    here.push("..".into());
                    break;
                }
            }
            for rest in use_tree(bytes, &mut end) {
                let target = [here.clone(), rest].concat();
                let left = here.first().map(String::as_str) == Some("..") || Unit::of(&target) != unit;
                if left {
                    found.insert(format!("{path}: super:: leaves {}", unit.name()));
                }
            }
        }
    }
    found.into_iter().collect()
}

/// The violations of the facade's layers in the sources under `src` (see [`facade_layers`]).
fn facade_violations(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    sources(&src.join("facade"), &mut files);
    let files: Vec<(String, String)> = files
        .iter()
        .map(|file| {
            let relative = file.strip_prefix(src).expect("under src").to_string_lossy().replace('\\', "/");
            (relative, std::fs::read_to_string(file).expect("a source reads"))
        })
        .collect();
    facade_layers(&files)
}

#[test]
fn the_facade_keeps_its_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = facade_violations(&src);
    assert!(found.is_empty(), "the facade's layer rule is broken:\n{}", found.join("\n"));
}

#[test]
fn the_facade_checker_sees_a_feature_using_another_a_service_using_a_feature_and_the_kernel_going_up() {
    let file = |path: &str, text: &str| (path.to_string(), text.to_string());
    let files = [
        file("facade/mod.rs", "pub use self::features::a::X; use crate::facade::features::b::Y;"),
        file("facade/router.rs", "fn api() { features::a::routes(crate::facade::features::b::routes(api)) }"),
        file("facade/features/mod.rs", "pub mod a;\npub mod b;"),
        file(
            "facade/features/a/mod.rs",
            "use crate::facade::features::b::x;\nuse crate::facade::services::s::y;\nuse crate::facade::http::e::E;",
        ),
        file(
            "facade/features/a/ok.rs",
            "use super::x::Y; // crate::facade::features::c in a comment\nconst S: &str = \"crate::facade::features::d\";\n\
             #[cfg(test)]\nmod tests {\n    use super::*;\n    use super::super::x::Z;\n}",
        ),
        file("facade/features/b/mod.rs", "use crate::facade::{\n    features::a::z,\n    http::limits::X,\n};"),
        file("facade/services/s.rs", "use crate::facade::features::a::y;\nfn f(s: &crate::facade::FacadeState) {}"),
        file("facade/services/t/u.rs", "use super::super::state::S;\nuse super::super::super::features::a::x;"),
        file("facade/http/x.rs", "use crate::facade::services::state::FacadeState;"),
        file("facade/http/y.rs", "fn f() -> crate::facade::features::a::Z { todo!() }\nuse super::error::E;"),
        file("facade/http/z.rs", "#[cfg(test)]\nmod tests {\n    use super::*;\n    const C: char = '{';\n}"),
        file("facade/extra.rs", ""),
    ];
    assert_eq!(
        facade_layers(&files),
        [
            "facade/extra.rs: facade file outside http, services, features and the root files",
            "facade/features/a/mod.rs: facade feature a uses feature b",
            "facade/features/b/mod.rs: facade feature b uses feature a",
            "facade/http/x.rs: facade http uses services",
            "facade/http/y.rs: facade http uses feature a",
            "facade/services/s.rs: facade services uses feature a",
            "facade/services/s.rs: facade services uses root",
            "facade/services/t/u.rs: super:: leaves services",
        ]
    );
}
