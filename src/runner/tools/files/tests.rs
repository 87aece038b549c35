//! The file tools on real folders: what they do, and that no path leaves its volume.

use std::os::unix::fs::symlink;
use std::path::Path;

use serde_json::json;
use tempfile::TempDir;

use super::*;

/// Four volume folders, plus a folder outside them holding a secret.
struct Fixture {
    _root: TempDir,
    paths: VolumePaths,
    outside: PathBuf,
    volumes: Arc<Volumes>,
}

fn fixture() -> Fixture {
    let root = TempDir::new().expect("temp dir");
    let paths = VolumePaths::under(root.path());
    paths.create_all().expect("mkdir");
    let outside = root.path().join("outside");
    std::fs::create_dir_all(&outside).expect("mkdir");
    std::fs::write(outside.join("secret.txt"), "the secret\n").expect("write");
    let volumes = Arc::new(Volumes::open(&paths).expect("volumes open"));
    Fixture { _root: root, paths, outside, volumes }
}

impl Fixture {
    async fn call(&self, op: FileOp, arguments: serde_json::Value) -> Result<String, ToolError> {
        FileTool::new(op, self.volumes.clone()).call(arguments).await
    }

    fn write(&self, scope: Scope, rel: &str, text: &str) {
        let path = self.paths.of(scope).join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

    fn read(&self, scope: Scope, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.paths.of(scope).join(rel)).ok()
    }
}

#[tokio::test]
async fn write_read_edit_round_trip() {
    let f = fixture();
    let out = f
        .call(FileOp::WriteFile, json!({"path": "/home/gem/user-data/outputs/notes/a.md", "content": "alpha\nbeta\n"}))
        .await;
    assert_eq!(out.expect("writes"), "wrote 11 bytes to /home/gem/user-data/outputs/notes/a.md");
    assert_eq!(f.read(Scope::Outputs, "notes/a.md").as_deref(), Some("alpha\nbeta\n"));

    let text =
        f.call(FileOp::ReadFile, json!({"path": "/home/gem/user-data/outputs/notes/a.md"})).await.expect("reads");
    assert_eq!(text, "     1\talpha\n     2\tbeta");
    let page = f
        .call(FileOp::ReadFile, json!({"path": "/home/gem/user-data/outputs/notes/a.md", "offset": 1, "limit": 1}))
        .await
        .expect("reads");
    assert_eq!(page, "     2\tbeta");

    f.call(
        FileOp::EditFile,
        json!({"path": "/home/gem/user-data/outputs/notes/a.md", "old_string": "beta", "new_string": "gamma"}),
    )
    .await
    .expect("edits");
    assert_eq!(f.read(Scope::Outputs, "notes/a.md").as_deref(), Some("alpha\ngamma\n"));
}

#[tokio::test]
async fn a_relative_path_is_in_the_workspace() {
    let f = fixture();
    f.call(FileOp::WriteFile, json!({"path": "draft.txt", "content": "x"})).await.expect("writes");
    assert_eq!(f.read(Scope::Workspace, "draft.txt").as_deref(), Some("x"));
}

#[tokio::test]
async fn edit_needs_a_unique_match_unless_replace_all() {
    let f = fixture();
    f.write(Scope::Workspace, "a.txt", "x y x");
    let err = f
        .call(FileOp::EditFile, json!({"path": "a.txt", "old_string": "x", "new_string": "z"}))
        .await
        .expect_err("ambiguous");
    assert!(err.0.contains("occurs 2 times"), "{err}");
    let err = f
        .call(FileOp::EditFile, json!({"path": "a.txt", "old_string": "w", "new_string": "z"}))
        .await
        .expect_err("absent");
    assert!(err.0.contains("does not occur"), "{err}");
    f.call(FileOp::EditFile, json!({"path": "a.txt", "old_string": "x", "new_string": "z", "replace_all": true}))
        .await
        .expect("replaces");
    assert_eq!(f.read(Scope::Workspace, "a.txt").as_deref(), Some("z y z"));
}

#[tokio::test]
async fn ls_glob_and_grep_see_the_volumes() {
    let f = fixture();
    f.write(Scope::Workspace, "src/main.rs", "fn main() {}\n// TODO: more\n");
    f.write(Scope::Workspace, "README.md", "# Title\nTODO: write\n");
    f.write(Scope::Uploads, "data.csv", "a,b\n");
    f.write(Scope::Skills, "claims/SKILL.md", "# Claims\n");

    let listing = f.call(FileOp::Ls, json!({})).await.expect("lists");
    assert_eq!(listing, "/home/gem/user-data/workspace/README.md\n/home/gem/user-data/workspace/src/");
    let above = f.call(FileOp::Ls, json!({"path": "/home/gem"})).await.expect("lists");
    assert_eq!(above, "/home/gem/skills/\n/home/gem/user-data/");

    let found = f.call(FileOp::Glob, json!({"pattern": "**/*.rs"})).await.expect("globs");
    assert_eq!(found, "/home/gem/user-data/workspace/src/main.rs");
    let everywhere =
        f.call(FileOp::Glob, json!({"pattern": "**/*.{csv,md}", "path": "/home/gem"})).await.expect("globs");
    assert_eq!(
        everywhere,
        "/home/gem/skills/claims/SKILL.md\n/home/gem/user-data/uploads/data.csv\n/home/gem/user-data/workspace/README.md"
    );

    let matches = f.call(FileOp::Grep, json!({"pattern": "TODO"})).await.expect("greps");
    assert_eq!(
        matches,
        "/home/gem/user-data/workspace/README.md:2:TODO: write\n/home/gem/user-data/workspace/src/main.rs:2:// TODO: more"
    );
    let filtered = f.call(FileOp::Grep, json!({"pattern": "TODO", "glob": "**/*.rs"})).await.expect("greps");
    assert_eq!(filtered, "/home/gem/user-data/workspace/src/main.rs:2:// TODO: more");
    let bad = f.call(FileOp::Grep, json!({"pattern": "("})).await.expect_err("bad regex");
    assert!(bad.0.contains("not a valid regular expression"), "{bad}");
}

/// Paths that must not reach outside the volumes, for a fixture whose workspace holds symlinks out.
fn escaping_paths(f: &Fixture) -> Vec<String> {
    symlink(&f.outside, f.paths.workspace.join("link-dir")).expect("symlink");
    symlink(f.outside.join("secret.txt"), f.paths.workspace.join("link-file")).expect("symlink");
    symlink("../outside/secret.txt", f.paths.uploads.join("relative-link")).expect("symlink");
    let outside = f.outside.display().to_string();
    vec![
        "../outside/secret.txt".to_string(),
        "/home/gem/user-data/workspace/../../../outside/secret.txt".to_string(),
        "/home/gem/user-data/outputs/../workspace/../../outside".to_string(),
        format!("{outside}/secret.txt"),
        "/etc/passwd".to_string(),
        "/home/gem/other/secret.txt".to_string(),
        "/home/gem/user-data/workspace/link-dir/secret.txt".to_string(),
        "/home/gem/user-data/workspace/link-file".to_string(),
        "/home/gem/user-data/uploads/relative-link".to_string(),
    ]
}

fn assert_outside_untouched(f: &Fixture) {
    let names: Vec<String> = std::fs::read_dir(&f.outside)
        .expect("outside readable")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["secret.txt"], "nothing was created outside the volumes");
    assert_eq!(
        std::fs::read_to_string(f.outside.join("secret.txt")).expect("secret"),
        "the secret\n",
        "the secret is unchanged"
    );
}

#[tokio::test]
async fn no_file_tool_escapes_its_volume() {
    let f = fixture();
    let paths = escaping_paths(&f);
    for path in &paths {
        let calls = [
            (FileOp::Ls, json!({"path": path})),
            (FileOp::ReadFile, json!({"path": path})),
            (FileOp::WriteFile, json!({"path": path, "content": "pwned"})),
            (FileOp::WriteFile, json!({"path": format!("{path}/new.txt"), "content": "pwned"})),
            (FileOp::EditFile, json!({"path": path, "old_string": "secret", "new_string": "pwned"})),
            (FileOp::Glob, json!({"pattern": "**/*", "path": path})),
            (FileOp::Grep, json!({"pattern": "secret", "path": path})),
        ];
        for (op, arguments) in calls {
            let result = f.call(op, arguments.clone()).await;
            if let Ok(output) = &result {
                assert!(!output.contains("the secret"), "{} {arguments} leaked: {output}", op.name());
            }
            // A folder symlink is listed as an entry, never followed; every other escaping call is an error.
            let listed_link = op == FileOp::Glob || op == FileOp::Grep;
            assert!(result.is_err() || listed_link, "{} {arguments} should be refused, got {result:?}", op.name());
        }
    }
    assert_outside_untouched(&f);
}

#[tokio::test]
async fn glob_and_grep_over_a_volume_do_not_follow_links_out() {
    let f = fixture();
    escaping_paths(&f);
    let found = f.call(FileOp::Glob, json!({"pattern": "**/*", "path": "/home/gem"})).await.expect("globs");
    assert!(!found.contains("secret"), "{found}");
    let matches = f.call(FileOp::Grep, json!({"pattern": "secret", "path": "/home/gem"})).await;
    assert!(!matches.expect("greps").contains("the secret"));
}

#[tokio::test]
async fn skills_are_read_only() {
    let f = fixture();
    f.write(Scope::Skills, "claims/SKILL.md", "# Claims\n");
    let read = f.call(FileOp::ReadFile, json!({"path": "/home/gem/skills/claims/SKILL.md"})).await.expect("reads");
    assert_eq!(read, "     1\t# Claims");
    for (op, arguments) in [
        (FileOp::WriteFile, json!({"path": "/home/gem/skills/claims/SKILL.md", "content": "x"})),
        (FileOp::WriteFile, json!({"path": "/home/gem/skills/new/SKILL.md", "content": "x"})),
        (
            FileOp::EditFile,
            json!({"path": "/home/gem/skills/claims/SKILL.md", "old_string": "Claims", "new_string": "x"}),
        ),
    ] {
        let err = f.call(op, arguments).await.expect_err("refused");
        assert!(err.0.contains("read-only"), "{err}");
    }
    assert_eq!(f.read(Scope::Skills, "claims/SKILL.md").as_deref(), Some("# Claims\n"));
    assert!(!Path::new(&f.paths.skills.join("new")).exists());
}

#[tokio::test]
async fn bad_arguments_name_the_argument() {
    let f = fixture();
    let err = f.call(FileOp::ReadFile, json!({})).await.expect_err("missing");
    assert_eq!(err.0, "argument path is required");
    let err = f.call(FileOp::ReadFile, json!({"path": 7})).await.expect_err("wrong type");
    assert_eq!(err.0, "argument path must be a string, not 7");
    let err = f.call(FileOp::ReadFile, json!({"path": "a.txt", "limit": -1})).await.expect_err("negative");
    assert!(err.0.starts_with("argument limit must be a non-negative integer"), "{err}");
    let err = f.call(FileOp::ReadFile, json!({"path": ""})).await.expect_err("empty");
    assert_eq!(err.0, "the path is empty");
}

#[tokio::test]
async fn binary_and_huge_files_are_refused_by_read() {
    let f = fixture();
    std::fs::write(f.paths.workspace.join("blob.bin"), [0xff, 0xfe, 0x00]).expect("write");
    let err = f.call(FileOp::ReadFile, json!({"path": "blob.bin"})).await.expect_err("binary");
    assert!(err.0.contains("not a UTF-8 text file"), "{err}");
    let big = std::fs::File::create(f.paths.workspace.join("big.txt")).expect("create");
    big.set_len(MAX_FILE_BYTES + 1).expect("grow");
    let err = f.call(FileOp::ReadFile, json!({"path": "big.txt"})).await.expect_err("huge");
    assert!(err.0.contains("more than"), "{err}");
}

#[test]
fn resolution_table() {
    let cases = [
        ("/", Ok(Target::Above("/"))),
        ("/home/gem/user-data", Ok(Target::Above(USER_DATA))),
        ("/home/gem/user-data/", Ok(Target::Above(USER_DATA))),
        ("notes.md", Ok(Target::In(Scope::Workspace, PathBuf::from("notes.md")))),
        ("./a/./b", Ok(Target::In(Scope::Workspace, PathBuf::from("a/b")))),
        ("/home/gem/user-data/outputs", Ok(Target::In(Scope::Outputs, PathBuf::new()))),
        ("/home/gem/skills/x/SKILL.md", Ok(Target::In(Scope::Skills, PathBuf::from("x/SKILL.md")))),
        ("/home/gem/user-data/workspacex/a", Err(())),
        ("/tmp/a", Err(())),
        ("a/../b", Err(())),
        ("", Err(())),
        ("a\0b", Err(())),
    ];
    for (path, expected) in cases {
        assert_eq!(resolve(path).map_err(|_| ()), expected, "{path:?}");
    }
}

#[tokio::test]
async fn a_fifo_in_a_volume_does_not_hang_a_tool() {
    let f = fixture();
    let fifo = std::ffi::CString::new(f.paths.workspace.join("pipe").to_str().expect("utf-8")).expect("path");
    // SAFETY: mkfifo only creates a file at the given NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let calls = [
        (FileOp::ReadFile, json!({"path": "pipe"})),
        (FileOp::WriteFile, json!({"path": "pipe", "content": "x"})),
        (FileOp::EditFile, json!({"path": "pipe", "old_string": "a", "new_string": "b"})),
    ];
    for (op, arguments) in calls {
        let result = tokio::time::timeout(std::time::Duration::from_secs(5), f.call(op, arguments.clone())).await;
        let err = result.expect("answers without blocking").expect_err("not a regular file");
        assert!(err.0.contains("not a regular file"), "{} {arguments}: {err}", op.name());
    }
    let grep =
        tokio::time::timeout(std::time::Duration::from_secs(5), f.call(FileOp::Grep, json!({"pattern": "x"}))).await;
    assert!(grep.expect("grep skips the FIFO without blocking").is_ok());
}

#[tokio::test]
async fn edit_refuses_a_result_over_the_size_limit() {
    let f = fixture();
    f.write(Scope::Workspace, "a.txt", &"a".repeat(100_000));
    let err = f
        .call(
            FileOp::EditFile,
            json!({"path": "a.txt", "old_string": "a", "new_string": "b".repeat(100), "replace_all": true}),
        )
        .await
        .expect_err("too large");
    assert!(err.0.contains("more than the 5242880 a tool writes"), "{err}");
    assert_eq!(f.read(Scope::Workspace, "a.txt").map(|t| t.len()), Some(100_000), "the file is unchanged");
}

#[tokio::test]
async fn a_huge_read_limit_is_not_an_overflow() {
    let f = fixture();
    f.write(Scope::Workspace, "a.txt", "one\ntwo\n");
    let text = f.call(FileOp::ReadFile, json!({"path": "a.txt", "offset": 1, "limit": u64::MAX})).await.expect("reads");
    assert_eq!(text, "     2\ttwo");
}
