//! The dependency rule of [`crate`], checked by reading the sources: each module's `crate::` paths may
//! only point down the layers, and the pure core uses no async runtime, HTTP server, Redis or Kubernetes
//! client.
//!
//! Inside the facade the same holds between its units: the kernel, the services, each feature and the
//! root ([`facade`]).
//!
//! No file under `src/` is longer than [`MAX_LINES`] lines unless its first line is a comment giving the
//! reason, `(Over 500 lines: ...)` ([`long_files`]); and no two files of the library use each other,
//! directly or through others ([`cycles`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod cycles;
mod facade;

/// The layer of each top-level module, lowest first. A module may use modules of lower layers, and
/// the core modules (layers 0 to 3) only the ones below them. Roles share layer 5 and never use each
/// other. `tls` is a leaf utility any layer may use.
const LAYERS: [(&str, u8); 13] = [
    ("resources", 0),
    ("access", 1),
    ("run", 2),
    ("delegation", 3),
    ("store", 4),
    ("knowledge", 4),
    ("endpoints", 4),
    ("controller", 5),
    ("facade", 5),
    ("runner", 5),
    ("webhook", 5),
    ("tls", 0),
    ("telemetry", 4),
];

/// What the pure core must not name: the async runtime, the HTTP server and client, Redis and the
/// Kubernetes client (kube's resource types and `ResourceExt` are fine: they are data).
const NOT_IN_CORE: [&str; 8] =
    ["tokio::", "axum::", "redis::", "reqwest::", "kube::Client", "kube::Api", "kube::runtime", "hyper::"];

fn layer(module: &str) -> Option<u8> {
    LAYERS.iter().find(|(name, _)| *name == module).map(|(_, layer)| *layer)
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("the source folder reads") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file without its comments (doc comments name other modules freely).
fn code(text: &str) -> String {
    text.lines().map(|line| line.split("//").next().unwrap_or_default()).collect::<Vec<_>>().join("\n")
}

/// Every `crate::<module>` a text names, with the module.
fn crate_paths(code: &str) -> Vec<String> {
    code.match_indices("crate::")
        .filter(|(at, _)| !code[..*at].ends_with(|c: char| c.is_alphanumeric() || c == '_'))
        .map(|(at, _)| code[at + "crate::".len()..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect())
        .collect()
}

/// The violations of the rule in the library's sources under `src`: `file: what`.
fn violations(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    sources(src, &mut files);
    let mut found = Vec::new();
    for file in files {
        let relative = file.strip_prefix(src).expect("under src");
        let top = relative.components().next().expect("a component").as_os_str().to_string_lossy().to_string();
        let module = top.trim_end_matches(".rs").to_string();
        // The binary (the CLI layer) and the crate root may use everything.
        if matches!(module.as_str(), "main" | "cli" | "lib" | "layer_rule") {
            continue;
        }
        let Some(own) = layer(&module) else {
            found.push(format!("{}: module {module:?} has no layer", relative.display()));
            continue;
        };
        let text = code(&std::fs::read_to_string(&file).expect("a source reads"));
        let mut named: BTreeMap<String, ()> = BTreeMap::new();
        for used in crate_paths(&text) {
            named.insert(used, ());
        }
        for used in named.keys().filter(|used| **used != module && used.as_str() != "tls") {
            match layer(used) {
                Some(other) if other < own => {}
                Some(_) => found.push(format!("{}: {module} uses {used}", relative.display())),
                None => found.push(format!("{}: {module} uses unknown module {used}", relative.display())),
            }
        }
        if own <= 3 {
            for banned in NOT_IN_CORE.iter().filter(|banned| text.contains(**banned)) {
                found.push(format!("{}: the core names {banned}", relative.display()));
            }
        }
    }
    found
}

/// The most lines a source file has without saying why on its first line.
const MAX_LINES: usize = 500;

/// Whether `text` is longer than [`MAX_LINES`] lines and its first line is not a comment saying why
/// (`(Over 500 lines: ...)`).
fn too_long(text: &str) -> bool {
    let first = text.lines().next().unwrap_or_default().trim_start();
    text.lines().count() > MAX_LINES && !(first.starts_with("//") && first.contains("(Over 500 lines"))
}

/// The files under `src` that are [`too_long`], by their path under `src`, sorted.
fn long_files(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    sources(src, &mut files);
    let mut long: Vec<String> = files
        .iter()
        .filter(|file| too_long(&std::fs::read_to_string(file).expect("a source reads")))
        .map(|file| file.strip_prefix(src).expect("under src").to_string_lossy().replace('\\', "/"))
        .collect();
    long.sort();
    long
}

#[test]
fn modules_only_use_modules_below_them_and_the_core_does_no_io() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = violations(&src);
    assert!(found.is_empty(), "the dependency rule is broken:\n{}", found.join("\n"));
}

#[test]
fn the_checker_sees_a_role_using_another_role_and_the_core_using_tokio() {
    let dir = tempfile::TempDir::new().expect("a folder");
    let write = |path: &str, text: &str| {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("folders");
        std::fs::write(path, text).expect("writes");
    };
    write("facade/mod.rs", "use crate::controller::x; // crate::runner in a comment is fine\nuse crate::store::Store;");
    write("run/mod.rs", "async fn f() { tokio::time::sleep(d).await; let _ = crate::resources::GROUP; }");
    write("access/mod.rs", "use crate::delegation::x;");
    write("resources/mod.rs", "fn f(x: &my_crate::facade::X) {}");
    let mut found = violations(dir.path());
    found.sort();
    assert_eq!(
        found,
        [
            "access/mod.rs: access uses delegation",
            "facade/mod.rs: facade uses controller",
            "run/mod.rs: the core names tokio::",
        ]
    );
}

#[test]
fn no_file_over_500_lines_without_a_reason_on_its_first_line() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let long = long_files(&src);
    assert!(long.is_empty(), "over {MAX_LINES} lines without a reason on the first line: {long:?}");
    let lines = |first: &str, n: usize| format!("{first}\n{}", "x\n".repeat(n - 1));
    assert!(too_long(&lines("//! A module.", MAX_LINES + 1)));
    assert!(!too_long(&lines("//! A module.", MAX_LINES)));
    assert!(!too_long(&lines("//! (Over 500 lines: one table of cases.)", MAX_LINES + 1)));
    assert!(too_long(&lines("fn f() {} // (Over 500 lines: not a comment line)", MAX_LINES + 1)));
}
