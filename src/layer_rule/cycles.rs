//! No two files of the library use each other, directly or through other files.
//!
//! A file *uses* another when its code names an item the other defines: through a `use` or a path
//! (`crate::…`, `super::…`, `self::…`, or a child module's name), with `pub use` re-exports followed to
//! the file that defines the item. Two things do not count: a `pub use` whose name the re-exporting file
//! never uses itself (re-exporting is not using), and a `pub(in crate::…)` visibility (it names a module
//! to limit who sees an item, not an item). Method calls name no path, so they add nothing: the rule is
//! about which file's items a file's code is written against.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A module path under the crate root: `["store", "memory"]` for `store/memory/mod.rs`.
type Module = Vec<String>;

/// The library's files by module path, each with its path under `src` and its code without comments
/// (the binary's `main.rs` and `cli/` are another crate).
fn library_files(src: &Path) -> BTreeMap<Module, (String, String)> {
    let mut found = Vec::new();
    super::sources(src, &mut found);
    let mut files = BTreeMap::new();
    for path in found {
        let relative = path.strip_prefix(src).expect("under src").to_string_lossy().replace('\\', "/");
        let mut parts: Vec<String> = relative.trim_end_matches(".rs").split('/').map(String::from).collect();
        if parts.last().is_some_and(|p| p == "mod") {
            parts.pop();
        }
        if parts == ["lib"] {
            parts.clear();
        }
        if parts == ["main"] || parts.first().is_some_and(|p| p == "cli") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("a source reads");
        files.insert(parts, (relative, blank_literals(&super::code(&text))));
    }
    files
}

/// `code` with the insides of its string and character literals blanked (each character a space, so
/// offsets stay), so that braces, `use` and paths in text are not read as code.
fn blank_literals(code: &str) -> String {
    let chars: Vec<char> = code.chars().collect();
    let mut out = String::with_capacity(code.len());
    let mut i = 0;
    let blank = |out: &mut String, c: char| out.push(if c == '\n' { '\n' } else { ' ' });
    while i < chars.len() {
        let c = chars[i];
        let word_before = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        // Raw strings: r"…", r#"…"#, br"…".
        if c == 'r' && !word_before || (c == 'b' && chars.get(i + 1) == Some(&'r') && !word_before) {
            let start = if c == 'b' { i + 2 } else { i + 1 };
            let hashes = chars[start..].iter().take_while(|h| **h == '#').count();
            if chars.get(start + hashes) == Some(&'"') {
                let body = start + hashes + 1;
                let mut end = body;
                while end < chars.len()
                    && !(chars[end] == '"'
                        && chars[end + 1..].iter().take(hashes).filter(|h| **h == '#').count() == hashes)
                {
                    end += 1;
                }
                out.extend(&chars[i..body]);
                chars[body..end.min(chars.len())].iter().for_each(|c| blank(&mut out, *c));
                i = end;
                continue;
            }
        }
        if c == '"' {
            out.push('"');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' && i + 1 < chars.len() {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
                blank(&mut out, chars[i]);
                i += 1;
            }
            continue;
        }
        // A character literal ('{', '\n', '\u{7b}'), not a lifetime ('a).
        if c == '\'' {
            let end = if chars.get(i + 1) == Some(&'\\') {
                chars[i + 2..].iter().position(|c| *c == '\'').map(|p| i + 2 + p)
            } else if chars.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            if let Some(end) = end {
                out.push('\'');
                chars[i + 1..end].iter().for_each(|c| blank(&mut out, *c));
                i = end;
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
    out
}

/// The paths a `use` tree names: `a::{b, c::{d, e as f}}` is `a::b`, `a::c::d`, `a::c::e`; none for
/// text that is not a use tree (the words "use {x}" in a string).
fn expand_use(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let tree_like = tree.chars().all(|c| c.is_alphanumeric() || "_:{},* \n\t".contains(c))
        && tree.matches('{').count() == tree.matches('}').count()
        && tree.find('{').is_none_or(|open| tree.rfind('}').is_some_and(|close| close > open));
    if tree.is_empty() || !tree_like {
        return Vec::new();
    }
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap_or(tree).trim();
        return vec![path.replace(char::is_whitespace, "")];
    };
    let prefix = tree[..open].replace(char::is_whitespace, "");
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let (mut parts, mut depth, mut current) = (Vec::new(), 0, String::new());
    for c in inner.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    parts.push(current);
    parts
        .iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(|p| expand_use(p))
        .map(|p| if p == "self" { prefix.trim_end_matches("::").to_string() } else { format!("{prefix}{p}") })
        .collect()
}

/// The statements `pub use …;` (any visibility) of `text`: their byte ranges and their trees.
fn pub_uses(text: &str) -> Vec<(usize, usize, String)> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find("pub") {
        let start = from + at;
        from = start + 3;
        if text[..start].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let mut rest = text[start + 3..].trim_start();
        if rest.starts_with('(') {
            let Some(close) = rest.find(')') else { continue };
            rest = rest[close + 1..].trim_start();
        }
        let Some(tree) = rest.strip_prefix("use ") else { continue };
        let Some(end) = tree.find(';') else { continue };
        let stop = text.len() - tree.len() + end + 1;
        found.push((start, stop, tree[..end].to_string()));
    }
    found
}

/// The inline modules of `text` (`mod tests { … }`): their byte ranges and names.
fn inline_modules(text: &str) -> Vec<(usize, usize, String)> {
    let mut found = Vec::new();
    for (at, _) in text.match_indices("mod ") {
        if text[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &text[at + 4..];
        let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        let after = rest[name.len()..].trim_start();
        if name.is_empty() || !after.starts_with('{') {
            continue;
        }
        let open = text.len() - after.len();
        let mut depth = 0;
        for (i, c) in text[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        found.push((at, open + i, name.clone()));
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    found
}

/// Resolves the path `segments`, written in module `here`, to the module it reaches and the rest of
/// the path; `None` when it starts with no module of the crate (`std::…`, a local name).
fn resolve(segments: &[&str], here: &[String], modules: &BTreeSet<Module>) -> Option<(Module, Vec<String>)> {
    let (mut current, mut i): (Module, usize) = match segments.first()? {
        &"crate" => (Vec::new(), 1),
        &"super" | &"self" => {
            let mut current = here.to_vec();
            let mut i = 0;
            while i < segments.len() && matches!(segments[i], "super" | "self") {
                if segments[i] == "super" {
                    current.pop();
                }
                i += 1;
            }
            (current, i)
        }
        first => {
            let mut child = here.to_vec();
            child.push(first.to_string());
            if !modules.contains(&child) {
                return None;
            }
            (here.to_vec(), 0)
        }
    };
    while i < segments.len() {
        let mut next = current.clone();
        next.push(segments[i].to_string());
        if !modules.contains(&next) {
            break;
        }
        current = next;
        i += 1;
    }
    Some((current, segments[i..].iter().map(|s| s.to_string()).collect()))
}

/// The file-to-file uses of the library under `src`: (user, used), by path under `src`.
fn edges(src: &Path) -> BTreeSet<(String, String)> {
    let library = library_files(src);
    let modules: BTreeSet<Module> = library.keys().cloned().collect();
    let files: BTreeMap<Module, String> = library.iter().map(|(m, (f, _))| (m.clone(), f.clone())).collect();
    let texts: BTreeMap<Module, String> = library.iter().map(|(m, (_, t))| (m.clone(), t.clone())).collect();
    // What each module re-exports, by name: the module and name it comes from.
    let mut reexports: BTreeMap<(Module, String), (Module, String)> = BTreeMap::new();
    for (module, text) in &texts {
        for (_, _, tree) in pub_uses(text) {
            for path in expand_use(&tree) {
                let segments: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
                if let (Some((target, rest)), Some(name)) = (resolve(&segments, module, &modules), segments.last())
                    && !rest.is_empty()
                    && *name != "*"
                {
                    reexports.insert((module.clone(), name.to_string()), (target, rest[0].clone()));
                }
            }
        }
    }
    let follow = |mut target: Module, mut rest: Vec<String>| {
        for _ in 0..10 {
            let Some(name) = rest.first() else { break };
            let Some((next, item)) = reexports.get(&(target.clone(), name.clone())) else { break };
            target = next.clone();
            rest[0] = item.clone();
        }
        target
    };
    let word = |text: &str, name: &str| {
        text.match_indices(name).any(|(at, _)| {
            let before = text[..at].chars().next_back();
            let after = text[at + name.len()..].chars().next();
            !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
                && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
        })
    };
    let mut found = BTreeSet::new();
    for (module, text) in &texts {
        let inline = inline_modules(text);
        let here = |at: usize| {
            let mut here = module.clone();
            here.extend(
                inline.iter().filter(|(start, end, _)| *start <= at && at <= *end).map(|(_, _, name)| name.clone()),
            );
            here
        };
        let uses = pub_uses(text);
        let in_pub_use = |at: usize| uses.iter().any(|(start, end, _)| *start <= at && at < *end);
        let outside: String = text.char_indices().map(|(i, c)| if in_pub_use(i) { ' ' } else { c }).collect();
        let mut references: Vec<(String, usize)> = Vec::new();
        // A re-export counts only when the file uses the name itself.
        for (start, _, tree) in &uses {
            for path in expand_use(tree) {
                let name = path.rsplit("::").next().unwrap_or(&path).to_string();
                if name != "*" && word(&outside, &name) {
                    references.push((path, *start));
                }
            }
        }
        // Paths in the rest of the code: `use` trees, and paths of two segments or more.
        let mut at = 0;
        let bytes = outside.as_bytes();
        while at < bytes.len() {
            let starts_word = (bytes[at].is_ascii_alphabetic() || bytes[at] == b'_')
                && (at == 0
                    || !(bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_' || bytes[at - 1] == b':'));
            if !starts_word {
                at += 1;
                continue;
            }
            if outside[at..].starts_with("use ") {
                let end = outside[at..].find(';').map_or(outside.len(), |e| at + e);
                for path in expand_use(&outside[at + 4..end]) {
                    references.push((path, at));
                }
                at = end;
                continue;
            }
            let len = outside[at..]
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(outside.len() - at);
            let path = outside[at..at + len].trim_end_matches(':');
            // `pub(in crate::x)` limits who sees an item; it names no item.
            let visibility = outside[..at].trim_end().ends_with("(in");
            if path.contains("::") && !visibility {
                references.push((path.to_string(), at));
            }
            at += len.max(1);
        }
        for (path, at) in references {
            let segments: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
            let Some((target, rest)) = resolve(&segments, &here(at), &modules) else { continue };
            let target = if rest.first().is_some_and(|r| r == "*") { target } else { follow(target, rest) };
            if target == *module || target.is_empty() {
                continue;
            }
            if let Some(file) = files.get(&target) {
                found.insert((files[module].clone(), file.clone()));
            }
        }
    }
    found
}

/// The groups of files that use each other (strongly connected components of more than one file),
/// each sorted, by Tarjan's algorithm.
pub fn cycles(src: &Path) -> Vec<Vec<String>> {
    let mut graph: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (from, to) in edges(src) {
        graph.entry(from).or_default().push(to.clone());
        graph.entry(to).or_default();
    }
    struct Tarjan<'g> {
        graph: &'g BTreeMap<String, Vec<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        found: Vec<Vec<String>>,
    }
    impl<'g> Tarjan<'g> {
        fn visit(&mut self, v: &'g str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in &self.graph[v] {
                if !self.index.contains_key(w.as_str()) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w.as_str()]);
                    self.low.insert(v, low);
                } else if self.on_stack.contains(w.as_str()) {
                    let low = self.low[v].min(self.index[w.as_str()]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut tarjan = Tarjan {
        graph: &graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !tarjan.index.contains_key(v.as_str()) {
            tarjan.visit(v);
        }
    }
    tarjan.found
}

#[test]
fn no_two_files_of_the_library_use_each_other() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = cycles(&src);
    assert!(found.is_empty(), "files that use each other: {found:?}");
    assert!(edges(&src).len() > 300, "the checker sees the library's uses");
}

#[test]
fn the_checker_sees_two_files_that_use_each_other_and_not_a_re_export_alone() {
    let dir = tempfile::TempDir::new().expect("a folder");
    let write = |path: &str, text: &str| {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("folders");
        std::fs::write(path, text).expect("writes");
    };
    write("lib.rs", "pub mod a;\npub mod b;\npub mod c;");
    write("a.rs", "use crate::b::B;\npub struct A;\nfn f(_: B) {}");
    write("b.rs", "pub struct B;\nfn g(_: super::a::A) {}");
    // c re-exports an item of its child and the child uses c's own item: not a cycle, for c never uses
    // what it re-exports; and `pub(in crate::c)` names no item.
    write("c/mod.rs", "mod d;\npub use d::D;\npub struct C;");
    write("c/d.rs", "use super::C;\npub(in crate::c) struct D(C);");
    assert_eq!(cycles(dir.path()), [vec!["a.rs".to_string(), "b.rs".to_string()]]);
}
