//! OIDC in the local mode (`--oidc-config`) against the suite's provider (`tests/oidc-provider`): its
//! tokens name their people beside the users file's tokens, foreign, expired, unsigned and other
//! audiences' tokens are refused, a rotated key is followed, and an MCP server gets each user's own
//! exchanged token.

use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::local_mode::{LocalStore, command_over, free_port, launch};
use crate::support::oidc_provider::{PEOPLE, Provider};
use crate::support::openai_endpoint::{FakeOpenAi, Reply};
use crate::support::repository::root;

/// The local mode trusting the suite's provider (its certificate authority, its audiences
/// `yuxi-facade` and `yuxi-short`, one second of leeway, `extra` lines of configuration); the provider
/// and the local mode.
async fn with_provider(extra: &str) -> (Provider, crate::support::local_mode::Local, String) {
    with_provider_and(extra, &root().join("examples"), |_| {}).await
}

/// [`with_provider`], with `change` making the local mode's command its own, and `{redirect}` in `extra`
/// standing for the redirect address.
async fn with_provider_and(
    extra: &str,
    manifests: &std::path::Path,
    change: impl FnOnce(&mut std::process::Command),
) -> (Provider, crate::support::local_mode::Local, String) {
    let port = free_port();
    let redirect = format!("http://127.0.0.1:{port}/api/auth/oidc/callback");
    let dir = TempDir::new().expect("dir");
    let provider = Provider::start(dir.path(), &redirect, &["mcp-notes", "model-gateway"]);
    std::mem::forget(dir);
    let config = TempDir::new().expect("dir");
    let file = config.path().join("oidc.yaml");
    std::fs::write(
        &file,
        format!(
            "issuer: {}\naudiences: [yuxi-facade, yuxi-short]\nusernamePrefix: 'oidc:'\ngroupsClaim: groups\ngroupsPrefix: 'oidc:'\nroleClaim: yuxi_role\nadminValues: [admin]\ndepartmentClaim: yuxi_department\nleewaySeconds: 1\ncertificateAuthority: {}\n{extra}",
            provider.issuer,
            provider.ca_file.display()
        )
        .replace("{redirect}", &redirect),
    )
    .expect("write");
    std::mem::forget(config);
    let data = TempDir::new().expect("dir");
    let mut command = command_over(manifests, LocalStore::InProcess, port, data.path());
    command.arg("--oidc-config").arg(&file);
    change(&mut command);
    let local = launch(command, port, data, TempDir::new().expect("dir")).await;
    (provider, local, redirect)
}

async fn me(local: &crate::support::local_mode::Local, token: &str) -> (u16, Value) {
    let response =
        local.client.get(format!("{}/api/auth/me", local.base)).bearer_auth(token).send().await.expect("reaches");
    (response.status().as_u16(), response.json::<Value>().await.unwrap_or(Value::Null))
}

fn id_token(tokens: &Value) -> String {
    tokens["id_token"].as_str().expect("an ID token").to_string()
}

#[tokio::test]
async fn the_providers_tokens_name_their_people_and_foreign_expired_unsigned_and_rotated_keys_are_judged() {
    let (provider, local, redirect) = with_provider("").await;
    let login = |user: &'static str, client: &'static str| {
        let (_, password, ..) = PEOPLE.iter().find(|p| p.0 == user).expect("a person");
        provider.login(user, password, client, &redirect)
    };
    let alice = id_token(&login("alice", "yuxi-facade").await);
    let (status, body) = me(&local, &alice).await;
    assert_eq!(status, 200, "{body}\n{}", local.log());
    assert_eq!(body["uid"].as_str(), Some(yuxi_operator::access::uid_of("oidc:alice").as_str()), "{body}");
    assert_eq!((body["role"].as_str(), body["department_id"].as_i64()), (Some("user"), Some(1)), "{body}");
    let (status, body) = me(&local, &id_token(&login("bob", "yuxi-facade").await)).await;
    assert_eq!((status, body["role"].as_str()), (200, Some("admin")), "{body}");
    assert_eq!(me(&local, "alice-token").await.0, 200, "the users file's tokens still work beside the issuer's");

    // Another application's token is for another audience.
    assert_eq!(me(&local, &id_token(&login("alice", "yuxi-other").await)).await.0, 401);
    // An unsigned copy of alice's token, and her claims signed by a key that is not the issuer's under
    // the issuer's key id.
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let parts: Vec<&str> = alice.split('.').collect();
    let header: Value =
        serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(parts[0]).expect("a header"))
            .expect("json");
    let unsigned = format!("{}.{}.", b64(br#"{"alg":"none","typ":"JWT"}"#), parts[1]);
    assert_eq!(me(&local, &unsigned).await.0, 401, "alg none");
    let claims: Value =
        serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(parts[1]).expect("claims"))
            .expect("json");
    let mut forged_header = Header::new(Algorithm::ES256);
    forged_header.kid = header["kid"].as_str().map(str::to_string);
    let foreign_key = rcgen::KeyPair::generate().expect("a P-256 key").serialize_pem();
    let forged = encode(&forged_header, &claims, &EncodingKey::from_ec_pem(foreign_key.as_bytes()).expect("key"))
        .expect("signed");
    assert_eq!(me(&local, &forged).await.0, 401, "a foreign key");
    // A token of another issuer (a second provider of the same program).
    let other_dir = TempDir::new().expect("dir");
    let other = Provider::start(other_dir.path(), &redirect, &[]);
    let (_, password, ..) = PEOPLE[0];
    let foreign = id_token(&other.login("alice", password, "yuxi-facade", &redirect).await);
    assert_eq!(me(&local, &foreign).await.0, 401, "another issuer");
    // A token that expires in two seconds: accepted, then refused.
    let short = id_token(&login("alice", "yuxi-short").await);
    assert_eq!(me(&local, &short).await.0, 200);
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    assert_eq!(me(&local, &short).await.0, 401, "expired");

    // The provider rotates its key: a token signed with the new one is accepted without a restart (once
    // the facade may read the keys again, at most every ten seconds).
    let kid = provider.rotate_keys().await;
    let fresh = id_token(&login("carol", "yuxi-facade").await);
    assert!(fresh.split('.').next().is_some_and(|h| {
        String::from_utf8_lossy(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(h).unwrap_or_default())
            .contains(&kid)
    }));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (status, body) = me(&local, &fresh).await;
        if status == 200 {
            assert_eq!(body["uid"].as_str(), Some(yuxi_operator::access::uid_of("oidc:carol").as_str()));
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the rotated key is not followed: {status} {body}\n{}",
            local.log()
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    assert_eq!(me(&local, &alice).await.0, 200, "the old key's tokens stay good while it is published");
    local.stop();
}

/// An MCP server that records the `Authorization` header of every request it is sent.
#[derive(Clone, Default)]
struct Recorder {
    seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl rmcp::ServerHandler for Recorder {
    fn get_info(&self) -> rmcp::model::ServerConfig {
        rmcp::model::ServerConfig::new(rmcp::model::ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _: Option<rmcp::model::PaginatedRequestParams>,
        _: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::ListToolsResult, rmcp::ErrorData> {
        let schema = json!({"type": "object", "properties": {}});
        Ok(rmcp::model::ListToolsResult::with_all_items(vec![rmcp::model::Tool::new(
            "read_notes",
            "The caller's notes",
            std::sync::Arc::new(schema.as_object().expect("object").clone()),
        )]))
    }
}

/// Serves [`Recorder`] on loopback; its URL and what it saw.
async fn serve_recorder() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
    let recorder = Recorder::default();
    let seen = recorder.seen.clone();
    let service: StreamableHttpService<Recorder, LocalSessionManager> = StreamableHttpService::new(
        move || Ok(recorder.clone()),
        Default::default(),
        StreamableHttpServerConfig::default(),
    );
    let record = seen.clone();
    let router = axum::Router::new().nest_service("/mcp", service).layer(axum::middleware::from_fn(
        move |request: axum::extract::Request, next: axum::middleware::Next| {
            let record = record.clone();
            async move {
                if let Some(value) = request.headers().get("authorization").and_then(|v| v.to_str().ok()) {
                    record.lock().expect("lock").push(value.to_string());
                }
                next.run(request).await
            }
        },
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, router).await.expect("serves") });
    (format!("http://{address}/mcp"), seen)
}

/// A folder of the examples' manifests and `extra` files `(name, text)`, and the OIDC configuration's
/// lines for the facade's client (its secret file in the same folder) and `exchangeAudiences`.
fn manifests_and_exchange(files: &TempDir, extra: &[(&str, &str)], audiences: &str) -> (std::path::PathBuf, String) {
    let secret = files.path().join("client-secret");
    std::fs::write(&secret, crate::support::oidc_provider::SECRET).expect("write");
    let manifests = files.path().join("manifests");
    std::fs::create_dir(&manifests).expect("dir");
    for file in crate::support::repository::yaml_files("examples") {
        std::fs::copy(&file, manifests.join(file.file_name().expect("name"))).expect("copy");
    }
    for (name, text) in extra {
        std::fs::write(manifests.join(name), text).expect("write");
    }
    let config = format!(
        "exchangeAudiences: [{audiences}]\nlogin:\n  clientId: yuxi-facade\n  clientSecretFile: {}\n  redirectUrl: '{{redirect}}'\n",
        secret.display()
    );
    (manifests, config)
}

#[tokio::test]
async fn an_mcp_server_receives_each_users_own_exchanged_token() {
    let (url, seen) = serve_recorder().await;
    let files = TempDir::new().expect("dir");
    let servers = files.path().join("mcp-servers.yaml");
    std::fs::write(
        &servers,
        format!("notes:\n  url: {url}\n  headers:\n    Authorization: {{caller: {{audience: mcp-notes}}, prefix: 'Bearer '}}\n"),
    )
    .expect("write");
    let agent = "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {name: notes-agent}\nspec:\n  backend: ChatbotAgent\n  context: {subagents: [], mcps: [notes]}\n  share: {readScope: {accessLevel: Global}}\n";
    let (manifests, extra) = manifests_and_exchange(&files, &[("notes-agent.yaml", agent)], "mcp-notes");
    let (provider, local, redirect) = with_provider_and(&extra, &manifests, |command| {
        command.env("YUXI_MCP_SERVERS", &servers);
    })
    .await;
    let mut people = Vec::new();
    for person in ["alice", "carol"] {
        let (_, password, ..) = PEOPLE.iter().find(|p| p.0 == person).expect("a person");
        let token = id_token(&provider.login(person, password, "yuxi-facade", &redirect).await);
        let run = local.start_run(&token, &[], json!({"query": "my notes?", "agent_slug": "notes-agent"})).await;
        let result = local.result_of(&run, &token).await;
        assert_eq!(result["status"], "completed", "{result}\n{}", local.log());
        people.push(person);
    }
    let seen = seen.lock().expect("lock").clone();
    let mut subjects = std::collections::BTreeSet::new();
    let keys: jsonwebtoken::jwk::JwkSet = provider
        .http()
        .get(format!("{}/keys", provider.issuer))
        .send()
        .await
        .expect("keys")
        .json()
        .await
        .expect("a JWK set");
    for header in &seen {
        let token = header.strip_prefix("Bearer ").unwrap_or_else(|| panic!("a bearer token: {header}"));
        let kid = jsonwebtoken::decode_header(token).expect("a JWT").kid.expect("a key id");
        let key = jsonwebtoken::DecodingKey::from_jwk(keys.find(&kid).expect("the provider's key")).expect("key");
        let mut validation = jsonwebtoken::Validation::new(Algorithm::RS256);
        validation.set_audience(&["mcp-notes"]);
        validation.set_issuer(&[provider.issuer.as_str()]);
        let claims = jsonwebtoken::decode::<Value>(token, &key, &validation)
            .expect("signed by the provider for mcp-notes")
            .claims;
        assert_eq!(claims["act"]["sub"], "yuxi-facade", "exchanged by the facade: {claims}");
        subjects.insert(claims["sub"].as_str().expect("sub").to_string());
    }
    assert_eq!(
        subjects,
        people.iter().map(|p| p.to_string()).collect(),
        "each user's run sent their own token: {seen:?}"
    );
    local.stop();
}

#[tokio::test]
async fn a_model_called_as_each_user_gets_each_users_own_token_as_its_key() {
    let endpoint = FakeOpenAi::start(vec![Reply::text(&["Hello alice."]), Reply::text(&["Hello carol."])]).await;
    let files = TempDir::new().expect("dir");
    let model = format!(
        "apiVersion: yuxi.dev/v1alpha1\nkind: Model\nmetadata: {{name: gateway}}\nspec:\n  provider: OpenAICompatible\n  preset: vllm\n  model: qwen3-8b\n  baseURL: {}\n  callerAudience: model-gateway\n  share: {{readScope: {{accessLevel: Global}}}}\n",
        endpoint.base_url
    );
    let agent = "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {name: gateway-agent}\nspec:\n  backend: ChatbotAgent\n  context: {model: gateway, subagents: []}\n  share: {readScope: {accessLevel: Global}}\n";
    let (manifests, extra) =
        manifests_and_exchange(&files, &[("gateway.yaml", &model), ("gateway-agent.yaml", agent)], "model-gateway");
    let (provider, local, redirect) = with_provider_and(&extra, &manifests, |_| {}).await;
    for person in ["alice", "carol"] {
        let (_, password, ..) = PEOPLE.iter().find(|p| p.0 == person).expect("a person");
        let token = id_token(&provider.login(person, password, "yuxi-facade", &redirect).await);
        let run = local.start_run(&token, &[], json!({"query": "hello", "agent_slug": "gateway-agent"})).await;
        let result = local.result_of(&run, &token).await;
        assert_eq!(result["status"], "completed", "{result}\n{}", local.log());
    }
    let subjects: Vec<String> = endpoint
        .authorizations()
        .iter()
        .map(|header| {
            let token = header.strip_prefix("Bearer ").expect("a bearer token");
            let claims = claims_of(token);
            assert_eq!(claims["aud"], json!(["model-gateway"]), "{claims}");
            claims["sub"].as_str().expect("sub").to_string()
        })
        .collect();
    assert_eq!(subjects, ["alice", "carol"], "each run called the model with its own user's token");
    local.stop();
}

/// The claims of a JWT, unverified (the provider's signature is checked by the MCP test).
fn claims_of(token: &str) -> Value {
    let payload = token.split('.').nth(1).expect("a JWT");
    serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).expect("base64"))
        .expect("json")
}
