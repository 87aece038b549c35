//! The verifier against an issuer stand-in on loopback (its discovery document and JWK set), with
//! ES256 keys made for the test and tokens signed by them.

use std::sync::{Arc, Mutex};

use base64::Engine;
use jsonwebtoken::{EncodingKey, Header, encode};
use serde_json::json;

use super::*;

struct Key {
    kid: String,
    pem: String,
    jwk: Value,
}

fn key(kid: &str) -> Key {
    let pair = rcgen::KeyPair::generate().expect("a P-256 key");
    let point = pair.public_key_raw();
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let jwk = json!({"kty": "EC", "crv": "P-256", "kid": kid, "alg": "ES256", "use": "sig",
                     "x": b64(&point[1..33]), "y": b64(&point[33..65])});
    Key { kid: kid.into(), pem: pair.serialize_pem(), jwk }
}

/// An issuer serving `keys` (changeable) at its JWKS address; answers its URL.
async fn issuer(keys: Arc<Mutex<Vec<Value>>>) -> String {
    issuer_counting(keys, Arc::default()).await
}

/// [`issuer`], counting the reads of its keys in `reads`.
async fn issuer_counting(keys: Arc<Mutex<Vec<Value>>>, reads: Arc<std::sync::atomic::AtomicUsize>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    let discovery = json!({"issuer": base, "jwks_uri": format!("{base}/keys")});
    let app = axum::Router::new()
        .route("/.well-known/openid-configuration", axum::routing::get(move || async move { axum::Json(discovery) }))
        .route(
            "/keys",
            axum::routing::get(move || {
                reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let keys = keys.lock().expect("lock").clone();
                async move { axum::Json(json!({"keys": keys})) }
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serves") });
    base
}

fn config(issuer: &str) -> OidcConfig {
    OidcConfig {
        issuer: issuer.into(),
        audiences: vec!["yuxi".into()],
        uid_claim: "preferred_username".into(),
        role_claim: Some("groups".into()),
        admin_values: vec!["platform".into()],
        superadmin_values: vec!["root".into()],
        department_claim: Some("dept".into()),
        leeway_seconds: 5,
        username_prefix: String::new(),
        groups_claim: Some("groups".into()),
        groups_prefix: "oidc:".into(),
        name_claim: "name".into(),
        certificate_authority: None,
        login: None,
        exchange_audiences: Vec::new(),
    }
}

fn now() -> i64 {
    jiff::Timestamp::now().as_second()
}

fn token(key: &Key, claims: Value) -> String {
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some(key.kid.clone());
    encode(&header, &claims, &EncodingKey::from_ec_pem(key.pem.as_bytes()).expect("a key")).expect("signed")
}

fn claims(issuer: &str) -> Value {
    json!({"iss": issuer, "aud": "yuxi", "sub": "u-1", "preferred_username": "alice", "groups": ["team-a", "platform"],
           "dept": "7", "exp": now() + 300, "nbf": now() - 5})
}

#[tokio::test]
async fn a_token_of_the_issuer_names_its_user_role_and_department() {
    let first = key("k1");
    let keys = Arc::new(Mutex::new(vec![first.jwk.clone()]));
    let base = issuer(keys).await;
    let verifier = OidcVerifier::new(config(&base)).expect("a verifier");
    let who = verifier.identify(&token(&first, claims(&base))).await.expect("accepted");
    let principal =
        Principal { username: "alice".into(), uid: None, groups: vec!["oidc:team-a".into(), "oidc:platform".into()] };
    assert_eq!(
        who,
        Identity { uid: "alice".into(), role: Role::Admin, department_id: Some(7), principal: Some(principal) }
    );
}

#[test]
fn the_username_is_the_prefix_and_the_claim_and_the_uid_its_mapped_form() {
    let mut config = config("https://issuer.example");
    config.username_prefix = "oidc:".into();
    let claims: BTreeMap<String, Value> =
        serde_json::from_value(json!({"preferred_username": "../alice@example.com", "groups": "team-a"}))
            .expect("claims");
    let who = identity_of(&config, &claims).expect("an identity");
    let principal = who.principal.expect("a principal");
    assert_eq!(principal.username, "oidc:../alice@example.com");
    assert_eq!(principal.groups, vec!["oidc:team-a".to_string()]);
    assert_eq!(who.uid, uid_of("oidc:../alice@example.com"));
    assert!(!who.uid.contains('/') && !who.uid.contains(':') && !who.uid.contains('@'), "{}", who.uid);
}

#[tokio::test]
async fn expired_early_foreign_audience_issuer_key_unsigned_and_symmetric_tokens_are_refused() {
    let first = key("k1");
    let keys = Arc::new(Mutex::new(vec![first.jwk.clone()]));
    let base = issuer(keys).await;
    let verifier = OidcVerifier::new(config(&base)).expect("a verifier");
    let with = |change: Value| {
        let mut c = claims(&base);
        c.as_object_mut().expect("object").extend(change.as_object().expect("object").clone());
        c
    };
    for (what, claims) in [
        ("expired", with(json!({"exp": now() - 60}))),
        ("not yet valid", with(json!({"nbf": now() + 60}))),
        ("another audience", with(json!({"aud": "someone-else"}))),
        ("another issuer", with(json!({"iss": "https://evil.example"}))),
    ] {
        let refused = verifier.identify(&token(&first, claims)).await;
        assert!(matches!(refused, Err(OidcError::Refused(_))), "{what}: {refused:?}");
    }
    // Signed by a key the issuer does not publish, under a published key id and under another.
    let stranger = Key { kid: "k1".into(), ..key("k1") };
    assert!(matches!(verifier.identify(&token(&stranger, claims(&base))).await, Err(OidcError::Refused(_))));
    let unknown = key("k9");
    assert!(matches!(verifier.identify(&token(&unknown, claims(&base))).await, Err(OidcError::Refused(_))));
    // `alg: none`, and a token signed with a shared secret.
    let body = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(claims(&base).to_string());
    let none = format!("eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.{body}.");
    assert!(matches!(verifier.identify(&none).await, Err(OidcError::Refused(_))));
    let hs =
        encode(&Header::new(Algorithm::HS256), &claims(&base), &EncodingKey::from_secret(b"k1").expect("a secret"))
            .expect("signed");
    assert!(matches!(verifier.identify(&hs).await, Err(OidcError::Refused(_))));
    // A token without the uid claim.
    let mut nameless = claims(&base);
    nameless.as_object_mut().expect("object").remove("preferred_username");
    assert!(matches!(verifier.identify(&token(&first, nameless)).await, Err(OidcError::Refused(_))));
}

#[tokio::test]
async fn a_key_rotated_at_the_issuer_is_followed_without_a_restart() {
    let first = key("k1");
    let keys = Arc::new(Mutex::new(vec![first.jwk.clone()]));
    let base = issuer(keys.clone()).await;
    let verifier = OidcVerifier::new(config(&base)).expect("a verifier");
    verifier.identify(&token(&first, claims(&base))).await.expect("the first key");
    let second = key("k2");
    *keys.lock().expect("lock") = vec![second.jwk.clone()];
    // The keys were read less than MIN_REFRESH ago: a token of the new key waits for the next read...
    let early = verifier.identify(&token(&second, claims(&base))).await;
    assert!(matches!(early, Err(OidcError::Refused(_))), "{early:?}");
    // ...which an unknown key id brings once MIN_REFRESH has passed.
    if let Some((at, _)) = verifier.refreshing.try_lock().expect("free").as_mut() {
        *at -= MIN_REFRESH;
    }
    let who = verifier.identify(&token(&second, claims(&base))).await.expect("the rotated key");
    assert_eq!(who.uid, "alice");
}

#[test]
fn roles_come_from_a_string_or_a_list_and_default_to_user() {
    let config = config("https://issuer");
    let claims = |groups: Value| -> BTreeMap<String, Value> {
        serde_json::from_value(json!({"preferred_username": "bob", "groups": groups})).expect("claims")
    };
    assert_eq!(identity_of(&config, &claims(json!("root"))).expect("ok").role, Role::Superadmin);
    assert_eq!(identity_of(&config, &claims(json!(["a", "platform"]))).expect("ok").role, Role::Admin);
    assert_eq!(identity_of(&config, &claims(json!(["a"]))).expect("ok").role, Role::User);
    assert_eq!(identity_of(&config, &claims(json!(["a"]))).expect("ok").department_id, None);
}

#[test]
fn a_configuration_without_a_username_prefix_is_refused_naming_it() {
    let refused = serde_norway::from_str::<OidcConfig>("issuer: https://issuer.example\naudiences: [yuxi]\n")
        .expect_err("no usernamePrefix");
    assert!(refused.to_string().contains("usernamePrefix"), "{refused}");
    let none: OidcConfig =
        serde_norway::from_str("issuer: https://issuer.example\naudiences: [yuxi]\nusernamePrefix: ''\n")
            .expect("accepted");
    assert_eq!(none.username_prefix, "");
}

#[tokio::test]
async fn tokens_with_made_up_key_ids_read_the_issuers_keys_once_per_interval() {
    let first = key("k1");
    let reads = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let base = issuer_counting(Arc::new(Mutex::new(vec![first.jwk.clone()])), reads.clone()).await;
    let verifier = Arc::new(OidcVerifier::new(config(&base)).expect("a verifier"));
    let mut calls = Vec::new();
    for n in 0..40 {
        let verifier = verifier.clone();
        let forged = token(&key(&format!("made-up-{n}")), claims(&base));
        calls.push(tokio::spawn(async move { verifier.identify(&forged).await }));
    }
    for call in calls {
        assert!(matches!(call.await.expect("joined"), Err(OidcError::Refused(_))));
    }
    assert_eq!(reads.load(std::sync::atomic::Ordering::SeqCst), 1, "one read of the keys for 40 made-up key ids");
}

#[test]
fn an_audience_runs_may_get_tokens_for_is_never_one_the_facade_accepts_and_the_issuer_is_https() {
    let mut shared = config("https://issuer.example");
    shared.exchange_audiences = vec!["notes".into(), "yuxi".into()];
    assert!(check_config(&shared).is_err_and(|why| why.starts_with("exchangeAudiences") && why.contains("yuxi")));
    shared.exchange_audiences = vec!["notes".into()];
    assert_eq!(check_config(&shared), Ok(()));
    for plain in ["http://issuer.example", "http://127.0.0.1.evil.example"] {
        assert!(check_config(&config(plain)).is_err_and(|why| why.starts_with("issuer")), "{plain}");
    }
    assert_eq!(check_config(&config("http://127.0.0.1:8080")), Ok(()));
}
