//! The suite's OpenID provider (`tests/oidc-provider`: zitadel's OIDC library, built from source by
//! `scripts/oidc-provider`), started on loopback over TLS with a certificate authority made here, and a
//! person's login through it as a browser makes one (authorization code with PKCE, the provider's own
//! login form), so the tokens the tests use are the provider's, signed by its keys.
//!
//! Its people ([`PEOPLE`]) carry `groups`, `yuxi_role` and `yuxi_department` claims; its clients are
//! `yuxi-facade` (the facade's), `yuxi-other` (another application: tokens for another audience) and
//! `yuxi-short` (tokens that expire in two seconds), all with [`SECRET`].

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};
use sha2::Digest;

/// The client secret of the provider's clients.
pub const SECRET: &str = "yuxi-test-client-secret";

/// A person of the provider: `(id, password, groups, role, department)`.
pub type Person = (&'static str, &'static str, &'static [&'static str], &'static str, Option<i64>);

/// The provider's people.
pub const PEOPLE: [Person; 3] = [
    ("alice", "alice-password", &["team-a"], "user", Some(1)),
    ("bob", "bob-password", &["team-b", "platform"], "admin", None),
    ("carol", "carol-password", &["team-a"], "user", Some(2)),
];

/// A running provider.
pub struct Provider {
    /// Its issuer URL (`https://127.0.0.1:<port>`), as its tokens' `iss` says it.
    pub issuer: String,
    /// The certificate authority of its TLS certificate, PEM.
    pub ca_pem: String,
    /// The same, as a file.
    pub ca_file: PathBuf,
    child: Child,
    http: reqwest::Client,
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The provider's binary, built once per test process.
fn binary() -> PathBuf {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY
        .get_or_init(|| {
            let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
            let output = Command::new(root.join("scripts/oidc-provider")).output().expect("scripts/oidc-provider");
            assert!(
                output.status.success(),
                "scripts/oidc-provider failed:\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
            let text = String::from_utf8_lossy(&output.stdout);
            PathBuf::from(text.lines().last().expect("a path").trim())
        })
        .clone()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("address").port()
}

impl Provider {
    /// Starts a provider keeping its files in `dir`, its clients accepting `redirect` as their
    /// redirect URI, `yuxi-facade` allowed to exchange a person's token for `exchange_audiences`;
    /// returns once its discovery document answers.
    pub fn start(dir: &Path, redirect: &str, exchange_audiences: &[&str]) -> Provider {
        std::fs::create_dir_all(dir).expect("provider folder");
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params.distinguished_name.push(rcgen::DnType::CommonName, "yuxi-test-oidc-ca");
        let ca_key = rcgen::KeyPair::generate().expect("key");
        let ca = ca_params.self_signed(&ca_key).expect("ca");
        let issuer_ca = rcgen::Issuer::new(ca_params, ca_key);
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).expect("params");
        params.subject_alt_names.push(rcgen::SanType::IpAddress("127.0.0.1".parse().expect("ip")));
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &issuer_ca).expect("serving certificate");
        let write = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).expect("write");
            path
        };
        let ca_file = write("ca.crt", &ca.pem());
        let cert_file = write("tls.crt", &cert.pem());
        let key_file = write("tls.key", &key.serialize_pem());
        let people: Vec<Value> = PEOPLE
            .iter()
            .map(|(id, password, groups, role, department)| {
                json!({"id": id, "password": password, "name": id.to_uppercase(), "groups": groups, "role": role,
                       "department": department})
            })
            .collect();
        let users = write("users.json", &Value::Array(people).to_string());
        let port = free_port();
        let issuer = format!("https://127.0.0.1:{port}");
        let log = std::fs::File::create(dir.join("provider.log")).expect("log");
        let child = Command::new(binary())
            .arg(format!("-issuer={issuer}"))
            .arg(format!("-cert={}", cert_file.display()))
            .arg(format!("-key={}", key_file.display()))
            .arg(format!("-users={}", users.display()))
            .arg(format!("-redirect={redirect}"))
            .arg(format!("-secret={SECRET}"))
            .arg(format!("-exchange-audiences={}", exchange_audiences.join(",")))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("the provider starts");
        yuxi_operator::tls::install_crypto_provider();
        let http = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(ca.pem().as_bytes()).expect("a certificate"))
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(10))
            .build()
            .expect("client");
        let provider = Provider { issuer, ca_pem: ca.pem(), ca_file, child, http };
        let discovery = format!("{}/.well-known/openid-configuration", provider.issuer);
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let ok = std::process::Command::new("curl")
                .args(["-sf", "--cacert", &provider.ca_file.display().to_string(), &discovery])
                .output()
                .is_ok_and(|o| o.status.success());
            if ok {
                return provider;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the provider did not answer:\n{}",
                std::fs::read_to_string(dir.join("provider.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// An HTTP client trusting the provider's certificate, following no redirects.
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// Makes a new signing key current (the old one stays published); its key id.
    pub async fn rotate_keys(&self) -> String {
        let answer = self.http.post(format!("{}/rotate-keys", self.issuer)).send().await.expect("rotate");
        assert!(answer.status().is_success());
        answer.text().await.expect("kid").trim().to_string()
    }

    /// `user`'s login with `password` at `client` through the provider's own pages, as a browser
    /// makes it with PKCE, `redirect` being the client's redirect URI: the token endpoint's answer
    /// (`id_token`, `access_token`).
    pub async fn login(&self, user: &str, password: &str, client: &str, redirect: &str) -> Value {
        let verifier = format!("v{}", uuid::Uuid::new_v4().simple());
        let challenge =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier.as_bytes()));
        let authorize = reqwest::Url::parse_with_params(
            &format!("{}/auth", self.issuer),
            &[
                ("client_id", client),
                ("response_type", "code"),
                ("scope", "openid"),
                ("redirect_uri", redirect),
                ("state", "s"),
                ("nonce", "n"),
                ("code_challenge", &challenge),
                ("code_challenge_method", "S256"),
            ],
        )
        .expect("url");
        let login_page = self.follow(authorize).await;
        let request_id = login_page
            .query_pairs()
            .find(|(k, _)| k == "authRequestID")
            .map(|(_, v)| v.into_owned())
            .unwrap_or_else(|| panic!("the provider sent the browser to {login_page}"));
        let answer = self
            .http
            .post(format!("{}/login/username", self.issuer))
            .form(&[("id", request_id.as_str()), ("username", user), ("password", password)])
            .send()
            .await
            .expect("the login form");
        let next = self.location(&answer);
        let back = self.follow(next).await;
        assert!(back.as_str().starts_with(redirect), "the provider sent the browser to {back}");
        let code = back.query_pairs().find(|(k, _)| k == "code").map(|(_, v)| v.into_owned()).expect("a code");
        let answer = self
            .http
            .post(format!("{}/oauth/token", self.issuer))
            .basic_auth(client, Some(SECRET))
            .form(&[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", redirect),
                ("code_verifier", &verifier),
            ])
            .send()
            .await
            .expect("the token endpoint");
        assert!(answer.status().is_success(), "the token endpoint answered {}", answer.status());
        answer.json().await.expect("tokens")
    }

    fn location(&self, answer: &reqwest::Response) -> reqwest::Url {
        let location = answer
            .headers()
            .get("location")
            .and_then(|l| l.to_str().ok())
            .unwrap_or_else(|| panic!("{} answered {} without a Location", answer.url(), answer.status()));
        answer.url().join(location).expect("a URL")
    }

    /// Follows the provider's redirects from `url` until one leaves it; that address.
    async fn follow(&self, mut url: reqwest::Url) -> reqwest::Url {
        for _ in 0..10 {
            if !url.as_str().starts_with(&self.issuer) || url.path().starts_with("/login/") {
                return url;
            }
            let answer = self.http.get(url.clone()).send().await.expect("the provider answers");
            if !answer.status().is_redirection() {
                return url;
            }
            url = self.location(&answer);
        }
        panic!("too many redirects")
    }
}
