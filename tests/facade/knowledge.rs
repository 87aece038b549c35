//! `/api/knowledge` and the runs' `knowledge_search` over real HTTP: share rules on every route, each
//! document format indexed and found by Chinese and English queries, bad uploads refused with nothing
//! half-indexed, folder sources re-indexed by content hash, the agents' list rule, and a knowledge base
//! backed by a stand-in MCP retrieval service (the official SDK's server on loopback), and hybrid search
//! with a stand-in for an OpenAI-compatible embeddings endpoint.

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use tempfile::TempDir;
use yuxi_operator::access::Role;
use yuxi_operator::facade::http::auth::UserEntry;
use yuxi_operator::facade::services::catalog::KnowledgeCatalog;
use yuxi_operator::facade::services::knowledge::{Knowledge, KnowledgeSettings, PlatformObjects};
use yuxi_operator::facade::{AgentCatalog, FacadeParts, FacadeState, Users, router};
use yuxi_operator::knowledge::embeddings::Embeddings;
use yuxi_operator::resources::{Agent, KnowledgeBase};

use crate::support::repository::root;

struct Served {
    base: String,
    client: reqwest12::Client,
    knowledge: Arc<Knowledge>,
    dir: TempDir,
}

fn user(token: &str, uid: &str, role: Role, department_id: Option<i64>) -> UserEntry {
    UserEntry { token: token.into(), uid: uid.into(), role, department_id, username: None, password_hash: None }
}

fn object<T: serde::de::DeserializeOwned>(yaml: &str) -> T {
    serde_norway::from_str(yaml).expect("a manifest")
}

fn agents() -> Vec<Agent> {
    vec![
        object(
            "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {name: open}\nspec: {backend: ChatbotAgent, share: {readScope: {accessLevel: Global}}}",
        ),
        object(
            "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {name: listed}\nspec: {backend: ChatbotAgent, share: {readScope: {accessLevel: Global}}, context: {knowledges: [team-notes, mallory-private, no-such-base]}}",
        ),
        object(
            "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {name: none}\nspec: {backend: ChatbotAgent, share: {readScope: {accessLevel: Global}}, context: {knowledges: []}}",
        ),
    ]
}

/// A facade with `kbs` in its catalog, documents and indexes in a fresh folder, folder sources under
/// `<dir>/sources` and MCP tokens under `<dir>/secrets`.
async fn serve(kbs: Vec<KnowledgeBase>) -> Served {
    serve_with(kbs, Vec::new(), None).await
}

/// [`serve`], with `config_maps` among the manifests, searching by meaning too with `embeddings`.
async fn serve_with(
    kbs: Vec<KnowledgeBase>,
    config_maps: Vec<k8s_openapi::api::core::v1::ConfigMap>,
    embeddings: Option<Embeddings>,
) -> Served {
    // HTML and PDF are read as the roles read them: in limited subprocesses of the binary.
    yuxi_operator::knowledge::isolated::read_in_subprocesses(env!("CARGO_BIN_EXE_yuxi-operator").into());
    let users = Users::new(vec![
        user("alice-token", "alice", Role::User, Some(1)),
        user("bob-token", "bob", Role::User, Some(2)),
        user("mallory-token", "mallory", Role::User, Some(3)),
        user("admin-token", "ops", Role::Admin, None),
    ])
    .expect("users");
    let dir = TempDir::new().expect("dir");
    std::fs::create_dir_all(dir.path().join("sources")).expect("sources");
    let knowledge = Knowledge::new(
        KnowledgeCatalog::new(kbs),
        KnowledgeSettings {
            documents_dir: dir.path().join("documents"),
            index_dir: Some(dir.path().join("index")),
            sources_dir: Some(dir.path().join("sources")),
        },
        PlatformObjects::local(dir.path().join("secrets"), config_maps),
        None,
    );
    let knowledge = Arc::new(match embeddings {
        Some(embeddings) => knowledge.with_embeddings(embeddings),
        None => knowledge,
    });
    let mut parts = FacadeParts::new(users.into(), AgentCatalog::new(agents()), None);
    parts.knowledge = Some(knowledge.clone());
    let state: FacadeState = parts.into();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, router(state)).await.expect("serves") });
    Served { base: format!("http://{addr}"), client: reqwest12::Client::new(), knowledge, dir }
}

impl Served {
    async fn call(&self, method: &str, path: &str, token: &str, body: Option<Value>) -> (u16, Value) {
        let mut request =
            self.client.request(method.parse().expect("method"), format!("{}{path}", self.base)).bearer_auth(token);
        if let Some(body) = body {
            request = request.header("content-type", "application/json").body(body.to_string());
        }
        answer(request.send().await.expect("reaches the facade")).await
    }

    async fn upload(&self, slug: &str, token: &str, name: &str, bytes: &[u8]) -> (u16, Value) {
        let boundary = "yuxi-test-boundary";
        let mut body = format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
        )
        .into_bytes();
        body.extend_from_slice(bytes);
        body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
        let response = self
            .client
            .post(format!("{}/api/knowledge/{slug}/documents", self.base))
            .bearer_auth(token)
            .header("content-type", format!("multipart/form-data; boundary={boundary}"))
            .body(body)
            .send()
            .await
            .expect("reaches the facade");
        answer(response).await
    }

    /// The head of an upload declaring `length` bytes of body, sent with none of them: what the facade
    /// answers (its status line, headers and body as text).
    async fn declared_upload(&self, slug: &str, token: &str, length: usize) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let address = self.base.trim_start_matches("http://");
        let mut stream = tokio::net::TcpStream::connect(address).await.expect("connects");
        let head = format!(
            "POST /api/knowledge/{slug}/documents HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {token}\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: {length}\r\n\r\n"
        );
        stream.write_all(head.as_bytes()).await.expect("head");
        let mut answer = vec![0u8; 4096];
        let read = tokio::time::timeout(std::time::Duration::from_secs(10), stream.read(&mut answer))
            .await
            .expect("an answer before the body")
            .expect("reads");
        String::from_utf8_lossy(&answer[..read]).into_owned()
    }

    async fn search(&self, slug: &str, token: &str, query: &str) -> (u16, Value) {
        self.call("POST", &format!("/api/knowledge/{slug}/search"), token, Some(json!({"query": query, "top_k": 3})))
            .await
    }

    async fn documents(&self, slug: &str, token: &str) -> Vec<String> {
        let (status, list) = self.call("GET", &format!("/api/knowledge/{slug}/documents"), token, None).await;
        assert_eq!(status, 200, "{list}");
        list["documents"]
            .as_array()
            .expect("documents")
            .iter()
            .map(|d| d["name"].as_str().expect("name").to_string())
            .collect()
    }
}

async fn answer(response: reqwest12::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let text = response.text().await.expect("body");
    (status, if text.is_empty() { Value::Null } else { serde_json::from_str(&text).expect("a JSON answer") })
}

fn first_document(results: &Value) -> &str {
    results["results"][0]["document"].as_str().unwrap_or_default()
}

const LEASES_MD: &str = "# Operations\n\n## Leases\n\nA runner renews its lease every ten seconds so that no second runner starts.\n\n## Backups\n\nSnapshots of Redis are taken hourly.\n";

#[tokio::test]
async fn a_private_knowledge_base_answers_a_stranger_as_a_missing_one_on_every_route() {
    let served = serve(Vec::new()).await;
    let (status, created) = served
        .call("POST", "/api/knowledge", "alice-token", Some(json!({"name": "Alice notes", "description": "ops"})))
        .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["knowledge_base"]["slug"], "alice-notes");
    assert_eq!(served.upload("alice-notes", "alice-token", "ops.md", LEASES_MD.as_bytes()).await.0, 201);
    let missing = served.call("GET", "/api/knowledge/no-such-base", "bob-token", None).await;
    assert_eq!(missing.0, 404);
    let stranger = [
        served.call("GET", "/api/knowledge/alice-notes", "bob-token", None).await,
        served.call("PUT", "/api/knowledge/alice-notes", "bob-token", Some(json!({"name": "mine"}))).await,
        served.call("DELETE", "/api/knowledge/alice-notes", "bob-token", None).await,
        served.call("GET", "/api/knowledge/alice-notes/documents", "bob-token", None).await,
        served.upload("alice-notes", "bob-token", "x.md", b"# x\n\ntext").await,
        served.call("DELETE", "/api/knowledge/alice-notes/documents/ops.md", "bob-token", None).await,
        served.search("alice-notes", "bob-token", "lease").await,
    ];
    for (status, body) in stranger {
        assert_eq!(status, 404, "{body}");
        assert_eq!(body["message"], "knowledge base \"alice-notes\" does not exist", "{body}");
    }
    assert_eq!(missing.1["message"], "knowledge base \"no-such-base\" does not exist");
    let (_, list) = served.call("GET", "/api/knowledge", "bob-token", None).await;
    assert_eq!(list["knowledge_bases"], json!([]));
    // Shared for reading: bob searches, but may not change it.
    let share =
        json!({"share_config": {"version": 2, "read_scope": {"access_level": "user", "user_uids": ["alice", "bob"]}}});
    assert_eq!(served.call("PUT", "/api/knowledge/alice-notes", "alice-token", Some(share)).await.0, 200);
    let (status, found) = served.search("alice-notes", "bob-token", "lease").await;
    assert_eq!((status, first_document(&found)), (200, "ops.md"), "{found}");
    let reader = [
        served.call("PUT", "/api/knowledge/alice-notes", "bob-token", Some(json!({"name": "mine"}))).await,
        served.call("DELETE", "/api/knowledge/alice-notes", "bob-token", None).await,
        served.upload("alice-notes", "bob-token", "x.md", b"# x\n\ntext").await,
        served.call("DELETE", "/api/knowledge/alice-notes/documents/ops.md", "bob-token", None).await,
    ];
    for (status, body) in reader {
        assert_eq!(status, 403, "{body}");
    }
    assert_eq!(served.documents("alice-notes", "alice-token").await, ["ops.md"]);
    // Only administrators reach a folder of the documents volume or an MCP service, or share widely.
    for body in [
        json!({"name": "f", "source": {"documents": {"folder": "team"}}}),
        json!({"name": "m", "source": {"mcp": {"url": "http://127.0.0.1:1/mcp", "tool": "find"}}}),
        json!({"name": "g", "share_config": {"version": 2, "read_scope": {"access_level": "global"}}}),
    ] {
        let (status, refused) = served.call("POST", "/api/knowledge", "alice-token", Some(body)).await;
        assert_eq!(status, 403, "{refused}");
    }
    assert_eq!(served.call("DELETE", "/api/knowledge/alice-notes", "alice-token", None).await.0, 204);
    assert_eq!(served.search("alice-notes", "alice-token", "lease").await.0, 404);
}

#[tokio::test]
async fn a_document_whose_name_starts_with_a_dash_is_read_as_a_name() {
    let served = serve(Vec::new()).await;
    served.call("POST", "/api/knowledge", "alice-token", Some(json!({"name": "Dashes", "slug": "dashes"}))).await;
    let html = b"<html><body><p>A lease is renewed every ten seconds.</p></body></html>";
    for name in ["-h.html", "--help.html", "--name.html"] {
        let (status, uploaded) = served.upload("dashes", "alice-token", name, html).await;
        assert_eq!((status, uploaded["document"]["name"].as_str()), (201, Some(name)), "{name}: {uploaded}");
    }
}

#[tokio::test]
async fn every_format_is_indexed_and_found_by_english_and_chinese_queries() {
    let served = serve(Vec::new()).await;
    served.call("POST", "/api/knowledge", "alice-token", Some(json!({"name": "Formats", "slug": "formats"}))).await;
    let pdf = std::fs::read(root().join("tests/fixtures/knowledge/lease-renewal.pdf")).expect("fixture");
    let zh = "# 检索评估\n\n我们用召回率和平均倒数排名评估知识库检索。\n\n# 中文分词\n\n结巴分词的搜索模式会把长词切成短词。\n";
    let html = "<html><head><style>p{}</style></head><body><h1>Glossary</h1><p>A run token lasts as long as its run.</p></body></html>";
    let documents: [(&str, &[u8]); 5] = [
        ("ops.md", LEASES_MD.as_bytes()),
        ("notes.txt", b"Sandboxes hold no secret.\n\nCommands have deadlines and are killed with their process group."),
        ("glossary.html", html.as_bytes()),
        ("renewal.pdf", &pdf),
        ("评估.md", zh.as_bytes()),
    ];
    for (name, bytes) in documents {
        let (status, uploaded) = served.upload("formats", "alice-token", name, bytes).await;
        assert_eq!(status, 201, "{name}: {uploaded}");
        assert!(uploaded["document"]["chunks"].as_u64().unwrap_or_default() >= 1, "{uploaded}");
    }
    for (query, document) in [
        ("so that no second runner starts", "ops.md"),
        ("process group deadline", "notes.txt"),
        ("run token", "glossary.html"),
        ("renewal fails three times", "renewal.pdf"),
        ("召回率", "评估.md"),
        ("分词", "评估.md"),
    ] {
        let (status, found) = served.search("formats", "alice-token", query).await;
        assert_eq!(status, 200, "{found}");
        assert_eq!(first_document(&found), document, "{query}: {found}");
        assert_eq!(found["results"][0]["knowledge_base"], "formats");
    }
    let (_, found) = served.search("formats", "alice-token", "snapshots of redis").await;
    assert_eq!(found["results"][0]["location"], "Operations › Backups, line 9", "{found}");
    let (_, kb) = served.call("GET", "/api/knowledge/formats", "alice-token", None).await;
    assert_eq!(
        (kb["knowledge_base"]["status"]["ready"].as_bool(), kb["knowledge_base"]["status"]["documents"].as_u64()),
        (Some(true), Some(5))
    );
    let (status, bad) = served
        .call("POST", "/api/knowledge/formats/search", "alice-token", Some(json!({"query": "x", "top_k": 21})))
        .await;
    assert_eq!((status, bad["field"].as_str()), (422, Some("top_k")));
    let (status, bad) =
        served.call("POST", "/api/knowledge/formats/search", "alice-token", Some(json!({"query": "  "}))).await;
    assert_eq!((status, bad["field"].as_str()), (422, Some("query")));
}

#[tokio::test]
async fn a_bad_upload_is_refused_naming_why_and_leaves_the_knowledge_base_as_it_was() {
    let served = serve(Vec::new()).await;
    served.call("POST", "/api/knowledge", "alice-token", Some(json!({"name": "Docs", "slug": "docs"}))).await;
    assert_eq!(served.upload("docs", "alice-token", "ops.md", LEASES_MD.as_bytes()).await.0, 201);
    let (status, wrong) = served.upload("docs", "alice-token", "tool.exe", b"MZ\x90\x00").await;
    assert_eq!((status, wrong["field"].as_str()), (422, Some("file")), "{wrong}");
    assert!(wrong["message"].as_str().unwrap_or_default().contains(".pdf"), "{wrong}");
    let (status, empty) = served.upload("docs", "alice-token", "empty.txt", b" \n\n ").await;
    assert_eq!((status, empty["field"].as_str()), (422, Some("file")), "{empty}");
    let big = vec![b'a'; yuxi_operator::knowledge::extract::MAX_DOCUMENT_BYTES + 1];
    let (status, large) = served.upload("docs", "alice-token", "big.txt", &big).await;
    assert_eq!(status, 413, "{large}");
    assert!(large["message"].as_str().unwrap_or_default().contains("max_document_bytes"), "{large}");
    // A body declared larger than an upload may be is refused from its headers, before a byte is read.
    let refused =
        served.declared_upload("docs", "alice-token", yuxi_operator::facade::MAX_DOCUMENT_BODY_BYTES + 1).await;
    assert!(refused.starts_with("HTTP/1.1 413") && refused.contains("max_document_bytes"), "{refused}");
    // A PDF of a few kilobytes whose stream expands past the bound is refused before it is parsed.
    let (status, bomb) = served.upload("docs", "alice-token", "bomb.pdf", &pdf_bomb()).await;
    assert_eq!(status, 413, "{bomb}");
    assert!(bomb["message"].as_str().unwrap_or_default().contains("max_pdf_expanded_bytes"), "{bomb}");
    let long_name = format!("{}.md", "n".repeat(300));
    let (status, long) = served.upload("docs", "alice-token", &long_name, b"text").await;
    assert_eq!((status, long["field"].as_str()), (422, Some("file")), "{long}");
    assert!(long["message"].as_str().unwrap_or_default().contains("longer than"), "{long}");
    // A replacement that cannot be read keeps the document that was there.
    let (status, _) = served.upload("docs", "alice-token", "ops.md", &[0xff, 0xfe, 0x00]).await;
    assert_eq!(status, 422);
    assert_eq!(served.documents("docs", "alice-token").await, ["ops.md"]);
    let (_, found) = served.search("docs", "alice-token", "lease").await;
    assert_eq!(first_document(&found), "ops.md");
    let stored: Vec<String> = std::fs::read_dir(served.dir.path().join("documents/docs"))
        .expect("uploads folder")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(stored, ["ops.md"], "nothing else is stored, not even in part");
    assert_eq!(served.call("DELETE", "/api/knowledge/docs/documents/nope.md", "alice-token", None).await.0, 404);
    assert_eq!(served.call("DELETE", "/api/knowledge/docs/documents/ops.md", "alice-token", None).await.0, 204);
    assert!(served.documents("docs", "alice-token").await.is_empty());
    assert_eq!(served.search("docs", "alice-token", "lease").await.1["results"], json!([]));
}

/// A PDF of one page whose content is `content`, Flate-compressed.
fn one_page_pdf(content: &[u8]) -> Vec<u8> {
    use flate2::{Compression, write::ZlibEncoder};
    use pdf_extract::{Dictionary, Document, Object, Stream};
    use std::io::Write;
    let mut encoder = ZlibEncoder::new(Vec::new(), Compression::best());
    encoder.write_all(content).expect("compresses");
    let mut doc = Document::with_version("1.5");
    let mut dict = Dictionary::new();
    dict.set("Filter", Object::Name(b"FlateDecode".to_vec()));
    let contents = doc.add_object(Object::Stream(Stream::new(dict, encoder.finish().expect("compresses"))));
    let pages = doc.new_object_id();
    let mut page = Dictionary::new();
    page.set("Type", Object::Name(b"Page".to_vec()));
    page.set("Parent", Object::Reference(pages));
    page.set("Contents", Object::Reference(contents));
    page.set("MediaBox", Object::Array([0, 0, 612, 792].map(Object::Integer).to_vec()));
    let page = doc.add_object(Object::Dictionary(page));
    let mut tree = Dictionary::new();
    tree.set("Type", Object::Name(b"Pages".to_vec()));
    tree.set("Kids", Object::Array(vec![Object::Reference(page)]));
    tree.set("Count", Object::Integer(1));
    doc.objects.insert(pages, Object::Dictionary(tree));
    let mut catalog = Dictionary::new();
    catalog.set("Type", Object::Name(b"Catalog".to_vec()));
    catalog.set("Pages", Object::Reference(pages));
    let catalog = doc.add_object(Object::Dictionary(catalog));
    doc.trailer.set("Root", Object::Reference(catalog));
    let mut file = Vec::new();
    doc.save_to(&mut file).expect("saves");
    file
}

#[tokio::test]
async fn a_document_whose_reading_passes_the_readers_limits_is_refused_and_the_facade_goes_on() {
    let served = serve(Vec::new()).await;
    served.call("POST", "/api/knowledge", "alice-token", Some(json!({"name": "Docs", "slug": "docs"}))).await;
    // A page of half a million `q` (save the graphics state), under every size bound: the parser
    // keeps a copy of its state for each, about 1.5 GB, past the reader's 1 GiB.
    let pdf = one_page_pdf(&b"q\n".repeat(1000 * 512));
    let (status, refused) = served.upload("docs", "alice-token", "states.pdf", &pdf).await;
    assert_eq!((status, refused["field"].as_str()), (422, Some("file")), "{refused}");
    assert!(refused["message"].as_str().unwrap_or_default().contains("passed a limit"), "{refused}");
    // The facade, and the next reading, go on.
    let pdf = std::fs::read(root().join("tests/fixtures/knowledge/lease-renewal.pdf")).expect("the fixture");
    let (status, read) = served.upload("docs", "alice-token", "lease-renewal.pdf", &pdf).await;
    assert_eq!(status, 201, "{read}");
    let (_, found) = served.search("docs", "alice-token", "renews its lease").await;
    assert_eq!(first_document(&found), "lease-renewal.pdf");
}

/// A PDF with one Flate stream that expands to just past `MAX_PDF_EXPANDED_BYTES`.
fn pdf_bomb() -> Vec<u8> {
    use flate2::{Compression, write::ZlibEncoder};
    use std::io::Write;
    let mut encoder = ZlibEncoder::new(Vec::new(), Compression::best());
    let block = vec![b'A'; 1 << 20];
    for _ in 0..=yuxi_operator::knowledge::extract::MAX_PDF_EXPANDED_BYTES >> 20 {
        encoder.write_all(&block).expect("compresses");
    }
    let mut pdf = b"%PDF-1.4\n1 0 obj\n<< /Filter /FlateDecode >>\nstream\n".to_vec();
    pdf.extend(encoder.finish().expect("compresses"));
    pdf.extend(b"\nendstream\nendobj\ntrailer << >>\n%%EOF\n");
    pdf
}

fn folder_base(name: &str, folder: &str, share: &str) -> KnowledgeBase {
    object(&format!(
        "apiVersion: yuxi.dev/v1alpha1\nkind: KnowledgeBase\nmetadata: {{name: {name}}}\nspec:\n  owner: ops\n  source: {{documents: {{folder: {folder}}}}}\n  share: {share}\n"
    ))
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::create_dir_all(dir).expect("folder");
    std::fs::write(dir.join(name), text).expect("write");
}

#[tokio::test]
async fn a_folder_source_is_reindexed_by_content_hash_and_refuses_uploads() {
    let everyone = "{readScope: {accessLevel: Global}}";
    let served =
        serve(vec![folder_base("team-notes", "team", everyone), folder_base("gone", "missing", everyone)]).await;
    let folder = served.dir.path().join("sources/team");
    write(&folder, "a.md", "# A\n\nThe lease is renewed every ten seconds.\n");
    write(&folder, "b.txt", "Backups run hourly.");
    write(&folder, "skip.sh", "echo not a document");
    served.knowledge.sync_all().await;
    assert_eq!(served.documents("team-notes", "bob-token").await, ["a.md", "b.txt"]);
    write(&folder, "a.md", "# A\n\nThe lease is renewed every five seconds now.\n");
    std::fs::remove_file(folder.join("b.txt")).expect("remove");
    write(&folder, "c.md", "# C\n\n召回率 measures retrieval.\n");
    served.knowledge.sync_all().await;
    assert_eq!(served.documents("team-notes", "bob-token").await, ["a.md", "c.md"]);
    let (_, found) = served.search("team-notes", "bob-token", "five seconds").await;
    assert!(found["results"][0]["text"].as_str().unwrap_or_default().contains("five seconds"), "{found}");
    assert_eq!(served.search("team-notes", "bob-token", "backups hourly").await.1["results"], json!([]));
    let (status, refused) = served.upload("team-notes", "admin-token", "x.md", b"# x\n\ny").await;
    assert_eq!(status, 409, "{refused}");
    // A folder that does not exist: not ready, and a search says why.
    let (status, not_ready) = served.search("gone", "bob-token", "anything").await;
    assert_eq!(status, 409, "{not_ready}");
    assert!(not_ready["message"].as_str().unwrap_or_default().contains("does not exist"), "{not_ready}");
    let (_, kb) = served.call("GET", "/api/knowledge/gone", "bob-token", None).await;
    assert_eq!(kb["knowledge_base"]["status"]["ready"], false);
}

#[tokio::test]
async fn a_config_map_source_indexes_its_keys_and_refuses_uploads() {
    let kb = |name: &str, config_map: &str| -> KnowledgeBase {
        object(&format!(
            "apiVersion: yuxi.dev/v1alpha1\nkind: KnowledgeBase\nmetadata: {{name: {name}}}\nspec:\n  owner: ops\n  source: {{documents: {{configMap: {{name: {config_map}}}}}}}\n  share: {{readScope: {{accessLevel: Global}}}}\n"
        ))
    };
    let pdf = std::fs::read(root().join("tests/fixtures/knowledge/lease-renewal.pdf")).expect("the PDF fixture");
    let faq: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "team-faq"},
        "data": {"faq.md": "# FAQ\n\n## Backups\n\nBackups run every hour and are kept for 30 days.\n",
                 "zh.txt": "知识库的检索使用中文分词。", "values.yaml": "not: a document"},
        "binaryData": {"lease.pdf": base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &pdf)},
    }))
    .expect("a ConfigMap");
    let served = serve_with(vec![kb("faq", "team-faq"), kb("lost", "no-such-map")], vec![faq], None).await;
    served.knowledge.sync_all().await;
    assert_eq!(served.documents("faq", "bob-token").await, ["faq.md", "lease.pdf", "zh.txt"]);
    let (_, found) = served.search("faq", "bob-token", "how long are backups kept").await;
    assert_eq!(found["results"][0]["document"], "faq.md", "{found}");
    assert!(found["results"][0]["location"].as_str().unwrap_or_default().contains("Backups"), "{found}");
    let (_, found) = served.search("faq", "bob-token", "中文分词").await;
    assert_eq!(found["results"][0]["document"], "zh.txt", "{found}");
    let (_, found) = served.search("faq", "bob-token", "renewal fails three times").await;
    assert_eq!(found["results"][0]["document"], "lease.pdf", "{found}");
    let (status, refused) = served.upload("faq", "admin-token", "x.md", b"# x\n\ny").await;
    assert_eq!(status, 409, "{refused}");
    // A ConfigMap that does not exist: not ready, and a search says why.
    let (status, not_ready) = served.search("lost", "bob-token", "anything").await;
    assert_eq!(status, 409, "{not_ready}");
    assert!(
        not_ready["message"].as_str().unwrap_or_default().contains("\"no-such-map\" does not exist"),
        "{not_ready}"
    );
    // Naming a ConfigMap reaches the platform's objects: administrators only.
    let body = json!({"name": "mine", "source": {"documents": {"config_map": {"name": "team-faq"}}}});
    let (status, refused) = served.call("POST", "/api/knowledge", "alice-token", Some(body.clone())).await;
    assert_eq!(status, 403, "{refused}");
    let (status, made) = served.call("POST", "/api/knowledge", "admin-token", Some(body)).await;
    assert_eq!(status, 201, "{made}");
    assert_eq!(made["knowledge_base"]["source"]["documents"]["config_map"]["name"], "team-faq", "{made}");
}

async fn knowledge_search(served: &Served, token: &str, body: Value) -> (u16, Value) {
    served.call("POST", "/api/tools/knowledge_search", token, Some(body)).await
}

fn result_bases(answer: &Value) -> Vec<&str> {
    let mut bases: Vec<&str> = answer["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| r["knowledge_base"].as_str().expect("kb"))
        .collect();
    bases.dedup();
    bases
}

#[tokio::test]
async fn an_agent_searches_only_knowledge_bases_its_user_may_read_within_its_list() {
    let served = serve(vec![
        folder_base("team-notes", "team", "{readScope: {accessLevel: Global}}"),
        folder_base("mallory-private", "private", "{readScope: {accessLevel: User, userUids: [mallory]}}"),
        folder_base("dept-one", "dept", "{readScope: {accessLevel: Department, departmentIds: [1]}}"),
    ])
    .await;
    for folder in ["team", "private", "dept"] {
        write(
            &served.dir.path().join("sources").join(folder),
            "lease.md",
            &format!("# {folder}\n\nThe lease of {folder} is renewed.\n"),
        );
    }
    served.knowledge.sync_all().await;
    // Absent list: every knowledge base the user may read.
    let (status, alice) =
        knowledge_search(&served, "alice-token", json!({"agent": "open", "query": "lease", "top_k": 10})).await;
    assert_eq!(status, 200, "{alice}");
    assert_eq!(result_bases(&alice), ["dept-one", "team-notes"]);
    let (_, bob) = knowledge_search(&served, "bob-token", json!({"agent": "open", "query": "lease"})).await;
    assert_eq!(result_bases(&bob), ["team-notes"]);
    // A list: those it names that the user may read; one the user may not read is never searched.
    let (_, listed) = knowledge_search(&served, "alice-token", json!({"agent": "listed", "query": "lease"})).await;
    assert_eq!(result_bases(&listed), ["team-notes"], "{listed}");
    let (_, asked) = knowledge_search(
        &served,
        "alice-token",
        json!({"agent": "listed", "query": "lease", "knowledge_bases": ["mallory-private", "dept-one"]}),
    )
    .await;
    assert_eq!(asked["results"], json!([]), "{asked}");
    let messages: Vec<&str> =
        asked["errors"].as_array().expect("errors").iter().map(|e| e["message"].as_str().expect("message")).collect();
    assert_eq!(
        messages,
        [
            "knowledge base \"mallory-private\" is not one this agent may search",
            "knowledge base \"dept-one\" is not one this agent may search"
        ]
    );
    let (_, mallory) =
        knowledge_search(&served, "mallory-token", json!({"agent": "listed", "query": "lease", "top_k": 10})).await;
    assert_eq!(result_bases(&mallory), ["team-notes", "mallory-private"]);
    // An empty list: nothing to search, said to the model.
    let (status, none) = knowledge_search(&served, "alice-token", json!({"agent": "none", "query": "lease"})).await;
    assert_eq!((status, none["results"].clone()), (200, json!([])));
    assert_eq!(none["errors"][0]["message"], "this agent has no knowledge base to search");
    // The list and prompt a runner mounts.
    let (_, mounted) = served.call("GET", "/api/tools/knowledge_bases?agent=listed", "alice-token", None).await;
    assert_eq!(mounted["knowledge_bases"].as_array().map(Vec::len), Some(1), "{mounted}");
    assert_eq!(mounted["tool"]["name"], "knowledge_search");
    assert_eq!(mounted["tool"]["parameters"]["properties"]["knowledge_bases"]["items"]["enum"], json!(["team-notes"]));
    assert!(mounted["prompt"].as_str().unwrap_or_default().contains("`team-notes`"));
    let (_, unmounted) = served.call("GET", "/api/tools/knowledge_bases?agent=none", "alice-token", None).await;
    assert_eq!((unmounted["tool"].clone(), unmounted["prompt"].clone()), (Value::Null, Value::Null));
    let (status, _) = served.call("GET", "/api/tools/knowledge_bases?agent=nobody", "alice-token", None).await;
    assert_eq!(status, 404);
    // An agent's form offers the knowledge bases the caller may read, and says they apply.
    let (_, detail) = served.call("GET", "/api/agent/listed", "alice-token", None).await;
    let item = &detail["agent"]["configurable_items"]["knowledges"];
    let options: Vec<&str> =
        item["options"].as_array().expect("options").iter().map(|o| o["key"].as_str().expect("key")).collect();
    assert_eq!(options, ["dept-one", "team-notes"], "{item}");
    assert_eq!(item["applied"], true, "{item}");
}

mod retrieval_service {
    //! A stand-in retrieval service: an MCP server whose `find` tool answers JSON passages, behind a
    //! bearer token.

    use std::sync::Arc;

    use axum::http::StatusCode;
    use rmcp::model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult, PaginatedRequestParams,
        ServerCapabilities, ServerConfig, Tool,
    };
    use rmcp::service::RequestContext;
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
    use rmcp::{ErrorData, RoleServer, ServerHandler};
    use serde_json::json;

    #[derive(Clone)]
    struct Find;

    impl ServerHandler for Find {
        fn get_info(&self) -> ServerConfig {
            ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
        }

        async fn list_tools(
            &self,
            _: Option<PaginatedRequestParams>,
            _: RequestContext<RoleServer>,
        ) -> Result<ListToolsResult, ErrorData> {
            let schema =
                json!({"type": "object", "properties": {"text": {"type": "string"}, "limit": {"type": "integer"}}});
            Ok(ListToolsResult::with_all_items(vec![Tool::new(
                "find",
                "Find passages",
                Arc::new(schema.as_object().expect("object").clone()),
            )]))
        }

        async fn call_tool(
            &self,
            request: CallToolRequestParams,
            _: RequestContext<RoleServer>,
        ) -> Result<CallToolResponse, ErrorData> {
            let arguments = request.arguments.unwrap_or_default();
            let text = arguments.get("text").and_then(|q| q.as_str()).unwrap_or_default().to_string();
            let limit = arguments.get("limit").and_then(|l| l.as_u64()).unwrap_or(0);
            let answer = json!({"results": [
                {"content": format!("passage about {text}"), "metadata": {"source": "milvus://corpus/1"}, "score": 0.92},
                {"content": format!("limit was {limit}"), "metadata": {"source": "milvus://corpus/2"}, "score": 0.41},
            ]});
            Ok(CallToolResult::success(vec![ContentBlock::text(answer.to_string())]).into())
        }
    }

    /// Serves [`Find`] on a free loopback port behind `token`; returns its URL.
    pub async fn serve(token: &'static str) -> String {
        let service: StreamableHttpService<Find, LocalSessionManager> =
            StreamableHttpService::new(|| Ok(Find), Default::default(), StreamableHttpServerConfig::default());
        let router = axum::Router::new().nest_service("/mcp", service).layer(axum::middleware::from_fn(
            move |request: axum::extract::Request, next: axum::middleware::Next| async move {
                let expected = format!("Bearer {token}");
                match request.headers().get("authorization").and_then(|h| h.to_str().ok()) {
                    Some(header) if header == expected => next.run(request).await,
                    _ => axum::response::IntoResponse::into_response(StatusCode::UNAUTHORIZED),
                }
            },
        ));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move { axum::serve(listener, router).await.expect("MCP server serves") });
        format!("http://{addr}/mcp")
    }
}

#[tokio::test]
async fn an_mcp_backed_knowledge_base_is_searched_through_its_tool_with_its_secret() {
    let url = retrieval_service::serve("s3cret").await;
    let mcp = |name: &str, secret: &str| -> KnowledgeBase {
        object(&format!(
            "apiVersion: yuxi.dev/v1alpha1\nkind: KnowledgeBase\nmetadata: {{name: {name}}}\nspec:\n  owner: ops\n  share: {{readScope: {{accessLevel: Global}}}}\n  source:\n    mcp: {{url: \"{url}\", tool: find, queryArgument: text, topKArgument: limit, authSecretRef: {{name: {secret}, key: token}}}}\n"
        ))
    };
    let served =
        serve(vec![mcp("corpus", "search-token"), mcp("wrong-token", "other-token"), mcp("no-secret", "absent")]).await;
    write(&served.dir.path().join("secrets/search-token"), "token", "s3cret\n");
    write(&served.dir.path().join("secrets/other-token"), "token", "guess");
    let (status, found) = served.search("corpus", "bob-token", "vector search").await;
    assert_eq!(status, 200, "{found}");
    assert_eq!(found["results"][0]["text"], "passage about vector search");
    assert_eq!(found["results"][0]["document"], "milvus://corpus/1");
    assert_eq!(found["results"][1]["text"], "limit was 3");
    let (status, refused) = served.search("wrong-token", "bob-token", "x").await;
    assert_eq!(status, 502, "{refused}");
    assert!(refused["message"].as_str().unwrap_or_default().contains("cannot be reached"), "{refused}");
    let (status, missing) = served.search("no-secret", "bob-token", "x").await;
    assert_eq!(status, 409, "{missing}");
    // Through the runs' tool, a service's failure is an entry the model reads.
    let (status, answer) = knowledge_search(
        &served,
        "bob-token",
        json!({"agent": "open", "query": "vector", "knowledge_bases": ["corpus", "wrong-token"]}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(result_bases(&answer), ["corpus"]);
    assert_eq!(answer["errors"][0]["knowledge_base"], "wrong-token");
}

/// A stand-in for an OpenAI-compatible `/v1/embeddings` endpoint: a text's vector counts its words of
/// three topics (leases, backups, anything else), so texts about one topic point one way whatever their
/// words. It counts the texts it embedded.
async fn embeddings_stand_in() -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    let embedded = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = embedded.clone();
    let topics: [&[&str]; 2] =
        [&["lease", "renew", "ownership", "alive", "续期"], &["snapshot", "backup", "hourly", "备份"]];
    let app = axum::Router::new().route(
        "/v1/embeddings",
        axum::routing::post(move |axum::Json(body): axum::Json<Value>| {
            let counter = counter.clone();
            async move {
                let inputs: Vec<String> = body["input"]
                    .as_array()
                    .expect("input")
                    .iter()
                    .map(|t| t.as_str().expect("text").to_lowercase())
                    .collect();
                counter.fetch_add(inputs.len(), std::sync::atomic::Ordering::SeqCst);
                let data: Vec<Value> = inputs
                    .iter()
                    .enumerate()
                    .map(|(index, text)| {
                        let mut vector: Vec<f32> = topics
                            .iter()
                            .map(|words| words.iter().filter(|w| text.contains(*w)).count() as f32)
                            .collect();
                        vector.push(0.1);
                        json!({"object": "embedding", "index": index, "embedding": vector})
                    })
                    .collect();
                axum::Json(json!({"object": "list", "data": data, "model": body["model"]}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serves") });
    (format!("http://{addr}/v1"), embedded)
}

#[tokio::test]
async fn with_embeddings_a_question_without_the_passages_words_finds_it_by_meaning() {
    let question = "keeping ownership alive periodically";
    let documents: [(&str, &[u8]); 2] = [
        ("ops.md", b"# Ops\n\nA runner renews its lease every ten seconds.\n"),
        ("backups.md", b"# Backups\n\nSnapshots of Redis are taken hourly.\n"),
    ];
    // By words alone, nothing matches.
    let plain = serve(Vec::new()).await;
    plain.call("POST", "/api/knowledge", "alice-token", Some(json!({"name": "Ops", "slug": "ops"}))).await;
    for (name, bytes) in documents {
        assert_eq!(plain.upload("ops", "alice-token", name, bytes).await.0, 201);
    }
    assert_eq!(plain.search("ops", "alice-token", question).await.1["results"], json!([]));

    let (url, embedded) = embeddings_stand_in().await;
    let team = folder_base("team-notes", "team", "{readScope: {accessLevel: Global}}");
    let hybrid =
        serve_with(vec![team], Vec::new(), Some(Embeddings::new(&url, "stand-in", None).expect("client"))).await;
    // A folder's documents get their vectors when they are indexed, too.
    write(
        &hybrid.dir.path().join("sources/team"),
        "care.md",
        "# Care

The lease must be renewed before it lapses.
",
    );
    hybrid.knowledge.sync_all().await;
    assert_eq!(first_document(&hybrid.search("team-notes", "bob-token", question).await.1), "care.md");
    hybrid.call("POST", "/api/knowledge", "alice-token", Some(json!({"name": "Ops", "slug": "ops"}))).await;
    for (name, bytes) in documents {
        assert_eq!(hybrid.upload("ops", "alice-token", name, bytes).await.0, 201);
    }
    let (status, found) = hybrid.search("ops", "alice-token", question).await;
    assert_eq!(status, 200, "{found}");
    assert_eq!(first_document(&found), "ops.md", "{found}");
    // And words still count: a query by words finds its passage first.
    assert_eq!(first_document(&hybrid.search("ops", "alice-token", "snapshots of redis").await.1), "backups.md");
    assert!(embedded.load(std::sync::atomic::Ordering::SeqCst) >= 6, "three passages and three queries were embedded");

    // An endpoint that fails refuses the upload, storing nothing.
    let broken =
        serve_with(Vec::new(), Vec::new(), Some(Embeddings::new("http://127.0.0.1:9/v1", "m", None).expect("client")))
            .await;
    broken.call("POST", "/api/knowledge", "alice-token", Some(json!({"name": "Ops", "slug": "ops"}))).await;
    let (status, refused) = broken.upload("ops", "alice-token", "ops.md", documents[0].1).await;
    assert_eq!(status, 502, "{refused}");
    assert!(broken.documents("ops", "alice-token").await.is_empty());
}

#[tokio::test]
async fn an_upload_for_a_knowledge_base_deleted_meanwhile_stores_nothing_in_its_successor() {
    let served = serve(Vec::new()).await;
    served.call("POST", "/api/knowledge", "bob-token", Some(json!({"name": "Race", "slug": "race"}))).await;
    // Bob's upload read the knowledge base, then waited; meanwhile it was deleted and Alice made hers.
    let bobs = served.knowledge.catalog.get("race").await.expect("catalog").expect("bob's");
    assert_eq!(served.call("DELETE", "/api/knowledge/race", "bob-token", None).await.0, 204);
    served.call("POST", "/api/knowledge", "alice-token", Some(json!({"name": "Race", "slug": "race"}))).await;
    let late =
        served.knowledge.upload(&bobs, "bob", "secret.md", b"# Bob\n\nbob confidential platypus\n".to_vec()).await;
    assert!(matches!(late, Err(yuxi_operator::facade::services::knowledge::sync::ChangeError::Gone(_))), "{late:?}");
    assert!(served.documents("race", "alice-token").await.is_empty());
    assert_eq!(served.search("race", "alice-token", "platypus").await.1["results"], json!([]));
    assert!(!served.dir.path().join("documents/race/secret.md").exists());
    // A name longer than a file system takes is refused by its length.
    let long = format!("{}.md", "é".repeat(150));
    let (status, refused) = served.upload("race", "alice-token", &long, b"# x\n\ny").await;
    assert_eq!((status, refused["field"].as_str()), (422, Some("file")), "{refused}");
}

#[tokio::test]
async fn an_upload_after_the_data_folder_went_says_so_and_makes_no_folder_again() {
    let served = serve(Vec::new()).await;
    served.call("POST", "/api/knowledge", "alice-token", Some(json!({"name": "Docs", "slug": "docs"}))).await;
    assert_eq!(served.upload("docs", "alice-token", "ops.md", LEASES_MD.as_bytes()).await.0, 201);
    for folder in ["documents", "index"] {
        std::fs::remove_dir_all(served.dir.path().join(folder)).expect("delete");
    }
    let (status, refused) = served.upload("docs", "alice-token", "more.md", b"# More\n\nLeases expire.").await;
    assert_ne!(status, 201, "{refused}");
    let said = refused["message"].as_str().unwrap_or_default();
    assert!(said.contains("is gone") && !said.to_lowercase().contains("lock"), "{refused}");
    assert!(!served.dir.path().join("documents").exists(), "the documents' folder was made again");
}
