//! Attacks on the local mode's facade, each measured by the facade process's own numbers (its resident
//! memory, now or at its peak, from `/proc/<pid>/status`), never by timings.

use serde_json::{Value, json};

use crate::support::local_mode::{Local, LocalStore, start};

/// The facade's peak resident memory so far (`VmHWM`), in KiB.
fn peak_kib(local: &Local) -> u64 {
    status_kib(local, "VmHWM:")
}

/// The facade's resident memory now (`VmRSS`), in KiB.
fn resident_kib(local: &Local) -> u64 {
    status_kib(local, "VmRSS:")
}

fn status_kib(local: &Local, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", local.child.id())).expect("the facade's status");
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("a field of /proc/<pid>/status")
}

/// Waits until every knowledge base the local mode started with is indexed: what it does at start
/// (reading the examples' documents, loading the word segmenter) is not counted against an attack.
async fn settled(local: &Local) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (status, list) = call(local, "GET", "/api/knowledge", None).await;
        let bases = list["knowledge_bases"].as_array().cloned().unwrap_or_default();
        if status == 200 && !bases.is_empty() && bases.iter().all(|b| b["status"]["ready"] == true) {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "the knowledge bases were not indexed: {list}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

async fn call(local: &Local, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut request = local
        .client
        .request(method.parse().expect("method"), format!("{}{path}", local.base))
        .bearer_auth("alice-token");
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("reaches the facade");
    (response.status().as_u16(), response.json().await.unwrap_or(Value::Null))
}

async fn upload(local: &Local, slug: &str, name: &str, bytes: &[u8]) -> (u16, Value) {
    let boundary = "yuxi-attack-boundary";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\nContent-Type: text/markdown\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let response = local
        .client
        .post(format!("{}/api/knowledge/{slug}/documents", local.base))
        .bearer_auth("alice-token")
        .header("content-type", format!("multipart/form-data; boundary={boundary}"))
        .body(body)
        .send()
        .await
        .expect("reaches the facade");
    (response.status().as_u16(), response.json().await.unwrap_or(Value::Null))
}

/// Six heading lines of 200 four-byte characters, then `x` paragraphs up to `bytes`.
fn deep_headings_then_tiny_paragraphs(bytes: usize) -> Vec<u8> {
    let mut text = String::new();
    for level in 1..=6 {
        text.push_str(&format!("{} {}\n", "#".repeat(level), "𝔸".repeat(200)));
    }
    while text.len() + 3 <= bytes {
        text.push_str("x\n\n");
    }
    text.into_bytes()
}

#[tokio::test]
async fn a_markdown_of_deep_headings_and_tiny_paragraphs_is_indexed_within_a_bounded_memory() {
    let local = start(LocalStore::InProcess, "scripted/echo", "[{content: unused}]").await;
    settled(&local).await;
    let (status, made) =
        call(&local, "POST", "/api/knowledge", Some(json!({"name": "Attack", "slug": "attack"}))).await;
    assert_eq!(status, 201, "{made}");
    // A first document loads what every indexing uses (the word segmenter's dictionary, a writer).
    let (status, answer) =
        upload(&local, "attack", "first.md", b"# Leases\n\nA lease is renewed every ten seconds.\n").await;
    assert_eq!(status, 201, "{answer}");
    let before = peak_kib(&local);
    // 256 KiB once took the facade from 114 MB to 609 MB; 1 MiB to 2 GB.
    for (name, size) in [("quarter.md", 256 * 1024), ("whole.md", 1024 * 1024)] {
        let (status, answer) = upload(&local, "attack", name, &deep_headings_then_tiny_paragraphs(size)).await;
        assert_eq!(status, 201, "{name}: {answer}");
        assert!(answer["document"]["chunks"].as_u64().unwrap_or(0) > 0, "{answer}");
    }
    let grown = peak_kib(&local).saturating_sub(before);
    eprintln!("the facade's peak memory grew by {grown} KiB");
    assert!(grown < 64 * 1024, "the facade's peak memory grew by {grown} KiB for 1.25 MiB of Markdown");
    let (status, found) =
        call(&local, "POST", "/api/knowledge/attack/search", Some(json!({"query": "x", "top_k": 1}))).await;
    assert_eq!(status, 200, "{found}");
    let location = found["results"][0]["location"].as_str().unwrap_or_default();
    assert!(location.contains('𝔸'), "the passage keeps its heading: {found}");
}

/// Opens a connection and sends a request's head and `body_bytes` bytes of its body in 64 KiB chunks,
/// never finishing it; `authorization` is sent as the bearer token when given. Returns the connection,
/// held open, and what it read of an answer within a moment (empty when none came).
async fn held_body(
    local: &Local,
    path: &str,
    authorization: Option<&str>,
    declared: usize,
    body_bytes: usize,
) -> (tokio::net::TcpStream, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", local.port)).await.expect("connects");
    let auth = authorization.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Content-Type: multipart/form-data; boundary=b\r\nContent-Length: {declared}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.expect("head");
    let chunk = vec![b'a'; 64 * 1024];
    let mut sent = 0;
    while sent < body_bytes {
        let n = chunk.len().min(body_bytes - sent);
        // The server may answer and stop reading at any point: what it took is what counts.
        match tokio::time::timeout(std::time::Duration::from_millis(500), stream.write_all(&chunk[..n])).await {
            Ok(Ok(())) => sent += n,
            _ => break,
        }
    }
    let mut answer = vec![0u8; 4096];
    let read = tokio::time::timeout(std::time::Duration::from_millis(300), stream.read(&mut answer)).await;
    let text = match read {
        Ok(Ok(n)) => String::from_utf8_lossy(&answer[..n]).into_owned(),
        _ => String::new(),
    };
    (stream, text)
}

#[tokio::test]
async fn bodies_without_credentials_are_refused_before_they_are_held() {
    let local = start(LocalStore::InProcess, "scripted/echo", "[{content: unused}]").await;
    settled(&local).await;
    let before = resident_kib(&local);
    let size = 8 * 1024 * 1024;
    let mut held = Vec::new();
    for _ in 0..60 {
        // 60 connections, each a near-whole 8 MiB upload that never ends, with no token.
        held.push(held_body(&local, "/api/knowledge/any/documents", None, size, size - 1024).await);
    }
    let grown = resident_kib(&local).saturating_sub(before);
    eprintln!("the facade's memory grew by {grown} KiB");
    assert!(grown < 64 * 1024, "60 held uploads without a token grew the facade by {grown} KiB");
    let (_, answer) = &held[0];
    assert!(answer.starts_with("HTTP/1.1 413") && answer.contains("max_anonymous_body_bytes"), "{answer}");
}

#[tokio::test]
async fn a_large_body_is_taken_only_once_its_caller_may_write_there_and_within_a_budget_of_bytes() {
    let data = tempfile::TempDir::new().expect("dir");
    let scripts = tempfile::TempDir::new().expect("dir");
    let port = crate::support::local_mode::free_port();
    let mut command =
        crate::support::local_mode::command(LocalStore::InProcess, port, data.path(), "scripted/echo", scripts.path());
    command.args(["--max-body-bytes-in-flight", &(10 * 1024 * 1024).to_string()]);
    let local = crate::support::local_mode::launch(command, port, data, scripts).await;
    // A knowledge base Alice cannot see: her upload is answered before its body is read.
    let size = 8 * 1024 * 1024;
    let (_open, answer) = held_body(&local, "/api/knowledge/nobodys/documents", Some("alice-token"), size, 0).await;
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    // Bodies of 1 MiB held unfinished by an authenticated caller: at most 10 MiB of them are held.
    settled(&local).await;
    let before = resident_kib(&local);
    let mut held = Vec::new();
    for _ in 0..20 {
        let mib = 1024 * 1024;
        held.push(held_body(&local, "/api/agent/runs", Some("alice-token"), mib, mib - 1).await);
    }
    let refused: Vec<&String> = held.iter().map(|(_, a)| a).filter(|a| !a.is_empty()).collect();
    assert!(!refused.is_empty(), "every body was held");
    for answer in &refused {
        assert!(answer.starts_with("HTTP/1.1 429") && answer.contains("max_body_bytes_in_flight"), "{answer}");
    }
    let grown = resident_kib(&local).saturating_sub(before);
    eprintln!("the facade's memory grew by {grown} KiB");
    assert!(grown < 16 * 1024, "20 held bodies of 1 MiB grew the facade by {grown} KiB");
}

#[tokio::test]
async fn a_small_knowledge_base_holds_little_memory_while_idle() {
    let local = start(LocalStore::InProcess, "scripted/echo", "[{content: unused}]").await;
    settled(&local).await;
    let document = "# Leases\n\nA lease is renewed every ten seconds by its keeper.\n\n租约每十秒续期一次。\n";
    let make = |n: usize| {
        let local = &local;
        async move {
            let slug = format!("kb-{n}");
            let (status, made) =
                call(local, "POST", "/api/knowledge", Some(json!({"name": format!("KB {n}"), "slug": slug}))).await;
            assert_eq!(status, 201, "{made}");
            let (status, answer) = upload(local, &slug, "leases.md", document.as_bytes()).await;
            assert_eq!(status, 201, "{answer}");
            let (status, found) =
                call(local, "POST", &format!("/api/knowledge/{slug}/search"), Some(json!({"query": "lease"}))).await;
            assert_eq!((status, found["results"].as_array().map(Vec::len)), (200, Some(1)), "{found}");
        }
    };
    // The first loads what every knowledge base shares (the word segmenter's dictionary).
    make(0).await;
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let before = resident_kib(&local);
    for n in 1..=15 {
        make(n).await;
    }
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let per_base = resident_kib(&local).saturating_sub(before) / 15;
    eprintln!("a small knowledge base holds {per_base} KiB while idle");
    assert!(per_base <= 2 * 1024, "a small knowledge base holds {per_base} KiB while idle");
}
