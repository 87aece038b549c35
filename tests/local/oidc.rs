//! OIDC bearer tokens in the local mode (`--oidc-config`): an issuer stand-in publishes an ES256 key;
//! its tokens name their user, the users file's tokens still work, and a token of another key is 401.

use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::local_mode::{LocalStore, command_over, free_port, launch};
use crate::support::repository::root;

struct Key {
    pem: String,
    jwk: Value,
}

fn key(kid: &str) -> Key {
    let pair = rcgen::KeyPair::generate().expect("a P-256 key");
    let point = pair.public_key_raw();
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let jwk = json!({"kty": "EC", "crv": "P-256", "kid": kid, "alg": "ES256", "use": "sig",
                     "x": b64(&point[1..33]), "y": b64(&point[33..65])});
    Key { pem: pair.serialize_pem(), jwk }
}

fn token(issuer: &str, key: &Key, user: &str) -> String {
    let now = jiff::Timestamp::now().as_second();
    let claims = json!({"iss": issuer, "aud": "yuxi", "sub": format!("id-{user}"), "preferred_username": user,
                        "groups": ["platform"], "exp": now + 300});
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some("k1".into());
    encode(&header, &claims, &EncodingKey::from_ec_pem(key.pem.as_bytes()).expect("a key")).expect("signed")
}

#[tokio::test]
async fn an_issuers_token_names_its_user_beside_the_users_files_tokens() {
    let published = key("k1");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let issuer = format!("http://{}", listener.local_addr().expect("address"));
    let discovery = json!({"issuer": issuer, "jwks_uri": format!("{issuer}/keys")});
    let keys = json!({"keys": [published.jwk.clone()]});
    let app = axum::Router::new()
        .route("/.well-known/openid-configuration", axum::routing::get(move || async move { axum::Json(discovery) }))
        .route("/keys", axum::routing::get(move || async move { axum::Json(keys) }));
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serves") });
    let config = TempDir::new().expect("dir");
    let file = config.path().join("oidc.yaml");
    std::fs::write(
        &file,
        format!("issuer: {issuer}\naudiences: [yuxi]\nuidClaim: preferred_username\nroleClaim: groups\nadminValues: [platform]\n"),
    )
    .expect("write");
    let port = free_port();
    let data = TempDir::new().expect("dir");
    let mut command = command_over(&root().join("examples"), LocalStore::InProcess, port, data.path());
    command.arg("--oidc-config").arg(&file);
    let local = launch(command, port, data, TempDir::new().expect("dir")).await;
    let me = |token: String| {
        let request = local.client.get(format!("{}/api/auth/me", local.base)).bearer_auth(token);
        async move {
            let response = request.send().await.expect("reaches");
            (response.status().as_u16(), response.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let (status, carol) = me(token(&issuer, &published, "carol")).await;
    assert_eq!(status, 200, "{carol}\n{}", local.log());
    assert_eq!((carol["uid"].as_str(), carol["role"].as_str()), (Some("carol"), Some("admin")), "{carol}");
    assert_eq!(me("alice-token".into()).await.0, 200, "the users file's tokens still work");
    assert_eq!(me(token(&issuer, &key("k1"), "mallory")).await.0, 401, "another key under the same id");
    local.stop();
}
