//! `POST /api/auth/token` in the local mode, over real HTTP: Yuxi's password login against the users
//! file's argon2 hashes, its refusals, its rate limit, and `yuxi-operator hash-password`.

use std::io::Write;

use serde_json::Value;
use yuxi_operator::access::Role;
use yuxi_operator::facade::http::auth::{UserEntry, hash_password};
use yuxi_operator::facade::{AgentCatalog, FacadeParts, FacadeState, Users, router};

struct Login {
    base: String,
    client: reqwest12::Client,
}

async fn start(users: Vec<UserEntry>) -> Login {
    let state: FacadeState =
        FacadeParts::new(Users::new(users).expect("users").into(), AgentCatalog::new(Vec::new()), None).into();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, router(state)).await.expect("serves") });
    Login { base: format!("http://{addr}"), client: reqwest12::Client::new() }
}

fn alice(hash: Option<String>) -> UserEntry {
    UserEntry {
        token: "alice-token".into(),
        uid: "alice".into(),
        role: Role::User,
        department_id: Some(3),
        username: Some("alice@example.com".into()),
        password_hash: hash,
    }
}

impl Login {
    async fn form(&self, body: &str) -> (u16, Value, Option<String>) {
        let response = self
            .client
            .post(format!("{}/api/auth/token", self.base))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body.to_string())
            .send()
            .await
            .expect("reaches the facade");
        let status = response.status().as_u16();
        let retry = response.headers().get("retry-after").map(|v| v.to_str().expect("ascii").to_string());
        (status, response.json().await.expect("JSON"), retry)
    }

    /// The login as Yuxi's web client sends it: a `FormData`, so `multipart/form-data`.
    async fn multipart(&self, username: &str, password: &str) -> (u16, Value) {
        let boundary = "yuxi-form-boundary";
        let part = |name: &str, value: &str| {
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n")
        };
        let body = format!("{}{}--{boundary}--\r\n", part("username", username), part("password", password));
        let response = self
            .client
            .post(format!("{}/api/auth/token", self.base))
            .header("content-type", format!("multipart/form-data; boundary={boundary}"))
            .body(body)
            .send()
            .await
            .expect("reaches the facade");
        (response.status().as_u16(), response.json().await.expect("JSON"))
    }
}

#[tokio::test]
async fn a_right_password_answers_the_users_token_in_yuxis_login_shape() {
    let api = start(vec![alice(Some(hash_password("correct horse").expect("hash")))]).await;
    let (status, body, _) = api.form("username=alice%40example.com&password=correct+horse").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!((body["access_token"].as_str(), body["token_type"].as_str()), (Some("alice-token"), Some("bearer")));
    assert_eq!((body["uid"].as_str(), body["username"].as_str()), (Some("alice"), Some("alice@example.com")));
    assert_eq!((body["role"].as_str(), body["department_id"].as_i64()), (Some("user"), Some(3)));
    let (status, body) = api.multipart("alice@example.com", "correct horse").await;
    assert_eq!((status, body["access_token"].as_str()), (200, Some("alice-token")), "{body}");
    let me = api
        .client
        .get(format!("{}/api/auth/me", api.base))
        .bearer_auth(body["access_token"].as_str().expect("token"))
        .send()
        .await
        .expect("me");
    assert_eq!(me.status(), 200, "the token it answers is a working bearer token");
}

#[tokio::test]
async fn a_failed_login_is_401_without_saying_which_part_was_wrong() {
    let api = start(vec![alice(Some(hash_password("correct horse").expect("hash"))), {
        let mut bob = alice(None);
        bob.token = "bob-token".into();
        bob.uid = "bob".into();
        bob.username = None;
        bob
    }])
    .await;
    let (wrong_password, a, _) = api.form("username=alice%40example.com&password=nope").await;
    let (unknown_user, b, _) = api.form("username=mallory&password=correct+horse").await;
    let (no_password_set, c, _) = api.form("username=bob&password=anything").await;
    assert_eq!((wrong_password, unknown_user, no_password_set), (401, 401, 401));
    assert_eq!(a["message"], b["message"]);
    assert_eq!(b["message"], c["message"]);
    let (status, missing, _) = api.form("username=alice%40example.com").await;
    assert_eq!((status, missing["field"].as_str()), (422, Some("password")));
    let response = api
        .client
        .post(format!("{}/api/auth/token", api.base))
        .json(&serde_json::json!({"username": "alice", "password": "x"}))
        .send()
        .await
        .expect("reaches");
    assert_eq!(response.status(), 400, "a JSON body is not a login form");
}

#[tokio::test]
async fn failed_logins_are_rate_limited_per_username_with_429_naming_the_limit() {
    let api = start(vec![alice(Some(hash_password("correct horse").expect("hash")))]).await;
    for _ in 0..5 {
        assert_eq!(api.form("username=alice%40example.com&password=guess").await.0, 401);
    }
    let (status, body, retry) = api.form("username=alice%40example.com&password=correct+horse").await;
    assert_eq!((status, body["field"].as_str()), (429, Some("login_attempts_per_user")), "{body}");
    assert_eq!(retry.as_deref(), Some("300"));
    assert_eq!(api.form("username=someone-else&password=guess").await.0, 401, "other usernames are not limited");
}

#[tokio::test]
async fn the_hash_password_command_makes_a_hash_the_login_accepts() {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_yuxi-operator"))
        .arg("hash-password")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("runs");
    child.stdin.take().expect("stdin").write_all(b"from the command line\n").expect("writes");
    let output = child.wait_with_output().expect("ends");
    assert!(output.status.success());
    let hash = String::from_utf8(output.stdout).expect("UTF-8").trim().to_string();
    assert!(hash.starts_with("$argon2id$"), "{hash}");
    let api = start(vec![alice(Some(hash))]).await;
    let (status, _, _) = api.form("username=alice%40example.com&password=from+the+command+line").await;
    assert_eq!(status, 200);

    let short = std::process::Command::new(env!("CARGO_BIN_EXE_yuxi-operator"))
        .arg("hash-password")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("runs");
    let output = {
        let mut short = short;
        short.stdin.take().expect("stdin").write_all(b"short\n").expect("writes");
        short.wait_with_output().expect("ends")
    };
    assert!(!output.status.success(), "a password under 8 characters is refused");
}
