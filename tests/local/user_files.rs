//! The users' files as the viewer and the workspace page read them, against what a run could leave in
//! its folders: links out of the scope (to another user's files, to the system's), links inside it,
//! `..` in every spelling a client could send, and files past each bound. Nothing outside the caller's
//! own scopes is ever answered, and what cannot be read answers as a missing file.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::local_mode::{Local, LocalStore, start_as_user};

crate::with_each_store!(links_and_dots_never_leave_the_callers_scopes, every_bound_answers_naming_itself);

/// `GET <path_and_query>` as `token`: the status, the body as JSON (or as a string), and the headers.
async fn get(local: &Local, token: &str, path_and_query: &str) -> (u16, Value, reqwest12::header::HeaderMap) {
    let response = local
        .client
        .get(format!("{}{path_and_query}", local.base))
        .bearer_auth(token)
        .send()
        .await
        .expect("reaches the facade");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.expect("a body");
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)), headers)
}

/// A new conversation of `token`'s user: its thread id.
async fn conversation(local: &Local, token: &str) -> String {
    let response = local
        .client
        .post(format!("{}/api/chat/thread", local.base))
        .bearer_auth(token)
        .json(&json!({"agent_id": "deep-research", "title": "files"}))
        .send()
        .await
        .expect("reaches the facade");
    assert_eq!(response.status().as_u16(), 200);
    response.json::<Value>().await.expect("JSON")["id"].as_str().expect("an id").to_string()
}

/// The folder of `scope` (`uploads`, `outputs`) of `uid`'s thread, or `uid`'s workspace, made.
fn folder(data: &Path, uid: &str, thread: Option<&str>, scope: &str) -> PathBuf {
    let path = match thread {
        Some(thread) => data.join(format!("users/{uid}/threads/{thread}/{scope}")),
        None => data.join(format!("users/{uid}/workspace")),
    };
    std::fs::create_dir_all(&path).expect("folders");
    path
}

fn names(body: &Value) -> Vec<String> {
    body["entries"].as_array().expect("entries").iter().map(|e| e["path"].as_str().expect("path").to_string()).collect()
}

async fn links_and_dots_never_leave_the_callers_scopes(store: LocalStore) {
    let local = start_as_user(TempDir::new().expect("dir"), store).await;
    let data = local.data.path().to_path_buf();
    let thread = conversation(&local, "alice-token").await;
    let outputs = folder(&data, "alice", Some(&thread), "outputs");
    std::fs::write(outputs.join("report.md"), "# Alice's report\n").expect("write");
    std::fs::create_dir_all(outputs.join("charts")).expect("dir");
    std::fs::write(outputs.join("charts/data.csv"), "a,b\n1,2\n").expect("write");
    // What a run of alice's could leave there: links to bob's workspace, to the system, to the data
    // folder's root, and one to her own report.
    let bobs = folder(&data, "bob", None, "workspace");
    std::fs::write(bobs.join("diary.md"), "bob's diary").expect("write");
    symlink(bobs.join("diary.md"), outputs.join("diary.md")).expect("link");
    symlink(&bobs, outputs.join("bob")).expect("link");
    symlink("/etc", outputs.join("etc")).expect("link");
    symlink("../../../../..", outputs.join("up")).expect("link");
    symlink("report.md", outputs.join("alias.md")).expect("link");
    let workspace = folder(&data, "alice", None, "workspace");
    std::fs::write(workspace.join("notes.md"), "alice's notes").expect("write");
    symlink(bobs.join("diary.md"), workspace.join("diary.md")).expect("link");

    let tree = |path: &str| format!("/api/viewer/filesystem/tree?thread_id={thread}&path={path}");
    let file = |path: &str| format!("/api/viewer/filesystem/file?thread_id={thread}&path={path}");
    let download = |path: &str| format!("/api/viewer/filesystem/download?thread_id={thread}&path={path}");

    // Links are not listed: only the folders and regular files the run made.
    let (status, body, _) = get(&local, "alice-token", &tree("/outputs/")).await;
    assert_eq!((status, names(&body)), (200, vec!["/outputs/charts/".to_string(), "/outputs/report.md".to_string()]));
    let (status, body, _) = get(&local, "alice-token", "/api/workspace/tree?path=/&recursive=true").await;
    assert_eq!((status, names(&body)), (200, vec!["/notes.md".to_string()]));

    // Every way through a link, or up with `..`, answers as a missing file or is refused naming the path.
    for route in [&file as &dyn Fn(&str) -> String, &download] {
        for path in [
            "/outputs/diary.md",
            "/outputs/bob/diary.md",
            "/outputs/etc/passwd",
            "/outputs/up/etc/passwd",
            "/outputs/alias.md",
        ] {
            let (status, body, _) = get(&local, "alice-token", &route(path)).await;
            assert_eq!((status, body["code"].as_str()), (404, Some("not_found")), "{path}: {body}");
            assert!(!body.to_string().contains("bob's diary"), "{path}: {body}");
        }
        for path in
            ["/outputs/../../../../bob/workspace/diary.md", "/outputs/%2e%2e/%2e%2e/x", "/..", "/outputs/..\\..\\x"]
        {
            let (status, body, _) = get(&local, "alice-token", &route(path)).await;
            assert_eq!((status, body["field"].as_str()), (422, Some("query.path")), "{path}: {body}");
        }
    }
    for path in ["/outputs/bob/", "/outputs/etc/", "/outputs/up/", "/outputs/up/users/bob/workspace/"] {
        let (status, body, _) = get(&local, "alice-token", &tree(path)).await;
        assert_eq!(status, 404, "{path}: {body}");
    }
    for path in ["/api/workspace/file?path=/diary.md", "/api/workspace/download?path=/diary.md"] {
        let (status, body, _) = get(&local, "alice-token", path).await;
        assert_eq!(status, 404, "{path}: {body}");
    }
    for path in ["/api/workspace/file?path=/../../bob/workspace/diary.md", "/api/workspace/tree?path=/%2E%2E/"] {
        let (status, body, _) = get(&local, "alice-token", path).await;
        assert_eq!((status, body["field"].as_str()), (422, Some("query.path")), "{path}: {body}");
    }
    // What is there opens, and its bytes come sandboxed.
    let (status, body, _) = get(&local, "alice-token", &file("/outputs/report.md")).await;
    assert_eq!((status, body["content"].as_str()), (200, Some("# Alice's report\n")));
    let (status, body, headers) = get(&local, "alice-token", &download("/outputs/charts/data.csv")).await;
    assert_eq!((status, body.as_str()), (200, Some("a,b\n1,2\n")));
    assert_eq!(headers["x-content-type-options"], "nosniff");
    assert!(headers["content-security-policy"].to_str().expect("ASCII").starts_with("sandbox"));
    assert!(headers["content-disposition"].to_str().expect("ASCII").starts_with("attachment"));
    let (status, body, _) =
        get(&local, "alice-token", "/api/workspace/file?path=/home/gem/user-data/workspace/notes.md").await;
    assert_eq!((status, body["content"].as_str()), (200, Some("alice's notes")));

    // A stranger's conversation answers exactly as one that never was; a stranger's workspace cannot be
    // named: bob's own is listed.
    let (status, stranger, _) = get(&local, "bob-token", &file("/outputs/report.md")).await;
    let (missing_status, missing, _) =
        get(&local, "bob-token", &file("/outputs/report.md").replace(&thread, "t-never-was")).await;
    assert_eq!((status, missing_status), (404, 404));
    assert_eq!(
        stranger["message"].as_str().map(|m| m.replace(&thread, "t-never-was")),
        missing["message"].as_str().map(String::from)
    );
    let (status, body, _) = get(&local, "bob-token", "/api/workspace/tree?path=/").await;
    assert_eq!((status, names(&body)), (200, vec!["/diary.md".to_string()]));
}

async fn every_bound_answers_naming_itself(store: LocalStore) {
    let local = start_as_user(TempDir::new().expect("dir"), store).await;
    let data = local.data.path().to_path_buf();
    let thread = conversation(&local, "alice-token").await;
    let outputs = folder(&data, "alice", Some(&thread), "outputs");
    // Past the preview's bound, within the download's: a preview is refused, a download sent.
    let big = std::fs::File::create(outputs.join("big.txt")).expect("file");
    big.set_len(8 * 1024 * 1024 + 1).expect("size");
    let (status, body, _) =
        get(&local, "alice-token", &format!("/api/viewer/filesystem/file?thread_id={thread}&path=/outputs/big.txt"))
            .await;
    assert_eq!(status, 413, "{body}");
    assert!(body["message"].as_str().expect("a message").starts_with("max_preview_bytes"), "{body}");
    let response = local
        .client
        .get(format!("{}/api/viewer/filesystem/download?thread_id={thread}&path=/outputs/big.txt", local.base))
        .bearer_auth("alice-token")
        .send()
        .await
        .expect("reaches the facade");
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.bytes().await.expect("the file").len(), 8 * 1024 * 1024 + 1);
    // Past the download's bound (a sparse file: no disk is spent).
    let huge = std::fs::File::create(outputs.join("huge.bin")).expect("file");
    huge.set_len(256 * 1024 * 1024 + 1).expect("size");
    let (status, body, _) = get(
        &local,
        "alice-token",
        &format!("/api/viewer/filesystem/download?thread_id={thread}&path=/outputs/huge.bin"),
    )
    .await;
    assert_eq!(status, 413, "{body}");
    assert!(body["message"].as_str().expect("a message").starts_with("max_download_bytes"), "{body}");
    // A folder of more entries than a listing answers.
    let many = outputs.join("many");
    std::fs::create_dir_all(&many).expect("dir");
    for i in 0..=1000 {
        std::fs::write(many.join(format!("f{i:04}")), "").expect("write");
    }
    let (status, body, _) =
        get(&local, "alice-token", &format!("/api/viewer/filesystem/tree?thread_id={thread}&path=/outputs/many")).await;
    assert_eq!(status, 413, "{body}");
    assert!(body["message"].as_str().expect("a message").starts_with("max_tree_entries"), "{body}");
    // A recursive workspace listing is bounded alike.
    let workspace = folder(&data, "alice", None, "workspace");
    std::fs::rename(&many, workspace.join("many")).expect("move");
    let (status, body, _) = get(&local, "alice-token", "/api/workspace/tree?path=/&recursive=true").await;
    assert_eq!(status, 413, "{body}");
    let (status, body, _) = get(&local, "alice-token", "/api/workspace/tree?path=/").await;
    assert_eq!((status, names(&body)), (200, vec!["/many/".to_string()]));
}
