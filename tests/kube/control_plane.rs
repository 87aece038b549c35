//! A real Kubernetes control plane: etcd, kube-apiserver and kube-controller-manager, built from the
//! pinned sources by `scripts/kube-bin` (`YUXI_KUBE_BIN` names their folder), serving on loopback and on
//! the node address `scripts/kube-netns` gives (`YUXI_KUBE_NODE_IP`).
//!
//! The API server runs as a cluster's does: TLS with its own CA, service-account tokens signed with a
//! key of its own (issuer `https://kubernetes.default.svc.cluster.local`), RBAC, and the admission
//! plugins of a real cluster (NamespaceLifecycle, ServiceAccount, PodSecurity, ValidatingAdmissionPolicy,
//! the admission webhooks). Static tokens stand for the test's people: `admin` (`system:masters`), and
//! `alice`, `bob` and `carol` (no rights until a test binds some). The controller manager runs the
//! garbage collector, the namespace and service-account controllers and the rest of its defaults.
//!
//! The API server also trusts the suite's OpenID provider (started with the plane, [`OIDC_AUDIENCE`]),
//! mapping its tokens' `sub` and `groups` to `oidc:`-prefixed users and groups as a cluster's
//! `AuthenticationConfiguration` would, and writes an audit log of the writes to Agents and AgentRuns
//! (`audit.log` in the plane's folder).

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType};

use super::processes::{Process, free_port, wait_until};

/// The static users of the API server: (token, name, uid, groups). The kubelet of `make e2e-local` is
/// the node `yuxi-node`.
pub const USERS: [(&str, &str, &str, &str); 5] = [
    ("admin-token", "admin", "admin-uid", "system:masters"),
    ("alice-token", "alice", "alice-uid", "team-a"),
    ("bob-token", "bob", "bob-uid", "team-a"),
    ("carol-token", "carol", "carol-uid", "yuxi:run-creators"),
    ("kubelet-token", "system:node:yuxi-node", "kubelet-uid", "system:nodes"),
];

/// The audience of the OpenID provider's tokens the API server accepts: the facade's client's.
pub const OIDC_AUDIENCE: &str = "yuxi-facade";
/// The prefix the API server (and the facade) give the provider's users and groups.
pub const OIDC_PREFIX: &str = "oidc:";

/// The service-account token issuer, as a cluster's.
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// The folder of the binaries `scripts/kube-bin` built.
pub fn kube_bin() -> PathBuf {
    PathBuf::from(std::env::var("YUXI_KUBE_BIN").expect(
        "YUXI_KUBE_BIN is not set: the real-cluster tests run with `make kube-test`, which builds the Kubernetes binaries (scripts/kube-bin) and runs them in a network namespace (scripts/kube-netns)",
    ))
}

/// The node's address (not loopback: the API server refuses loopback endpoints).
pub fn node_ip() -> String {
    std::env::var("YUXI_KUBE_NODE_IP")
        .expect("YUXI_KUBE_NODE_IP is not set: run the real-cluster tests with `make kube-test` (scripts/kube-netns)")
}

/// The certificate authority of one control plane, and what it signed.
pub struct Authority {
    /// The CA certificate, PEM.
    pub ca_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Authority {
    fn new(name: &str) -> Authority {
        let key = KeyPair::generate().expect("CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let ca = params.self_signed(&key).expect("CA certificate");
        Authority { ca_pem: ca.pem(), issuer: Issuer::new(params, key) }
    }

    /// A serving certificate for `dns` names and `ips`: (certificate PEM, key PEM).
    pub fn serving(&self, dns: &[&str], ips: &[IpAddr]) -> (String, String) {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(dns.iter().map(|d| d.to_string()).collect::<Vec<_>>()).expect("params");
        params.subject_alt_names.extend(ips.iter().map(|ip| SanType::IpAddress(*ip)));
        params.distinguished_name.push(DnType::CommonName, dns.first().copied().unwrap_or("server"));
        let cert = params.signed_by(&key, &self.issuer).expect("certificate");
        (cert.pem(), key.serialize_pem())
    }

    /// A client certificate for the user `name` in group `group`: (certificate PEM, key PEM).
    pub fn client(&self, name: &str, group: &str) -> (String, String) {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.distinguished_name.push(DnType::CommonName, name);
        params.distinguished_name.push(DnType::OrganizationName, group);
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params.signed_by(&key, &self.issuer).expect("certificate");
        (cert.pem(), key.serialize_pem())
    }
}

/// A running control plane.
pub struct ControlPlane {
    /// Its folder: certificates, etcd's data, logs, kubeconfigs.
    pub dir: PathBuf,
    /// `https://127.0.0.1:<port>`.
    pub server: String,
    /// The CA of the API server's certificate, PEM.
    pub ca_pem: String,
    /// The CA, which signs the node's certificates too.
    #[allow(dead_code)] // read by the node (tests/kube/node.rs), which the kube test binary does not start
    pub authority: Authority,
    etcd_url: String,
    /// The OpenID provider the API server trusts.
    pub oidc: crate::oidc_provider::Provider,
    etcd: Mutex<Process>,
    apiserver: Mutex<Process>,
    apiserver_command: Box<dyn Fn() -> Command + Send + Sync>,
    manager: Mutex<Process>,
}

impl ControlPlane {
    /// The control plane most tests share, started by the first to ask.
    pub fn shared() -> &'static ControlPlane {
        static SHARED: OnceLock<ControlPlane> = OnceLock::new();
        SHARED.get_or_init(|| ControlPlane::start("shared"))
    }

    /// Starts a control plane named `name` (its folder's name) and waits until the API server is ready
    /// and the controller manager has made the `default` service account.
    pub fn start(name: &str) -> ControlPlane {
        let bin = kube_bin();
        let node = node_ip();
        let dir = planes_dir().join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("control plane folder");
        let write = |file: &str, text: &str| {
            let path = dir.join(file);
            std::fs::write(&path, text).expect("write");
            path
        };

        let authority = Authority::new(&format!("yuxi-test-{name}-ca"));
        let ips: Vec<IpAddr> = vec!["127.0.0.1".parse().unwrap(), node.parse().unwrap(), "10.96.0.1".parse().unwrap()];
        let dns = [
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ];
        let (cert, key) = authority.serving(&dns, &ips);
        let ca_file = write("ca.crt", &authority.ca_pem);
        let cert_file = write("apiserver.crt", &cert);
        let key_file = write("apiserver.key", &key);
        let signing = KeyPair::generate().expect("service-account key");
        let sa_key = write("service-account.key", &signing.serialize_pem());
        let sa_public = write("service-account.pub", &signing.public_key_pem());
        let tokens = USERS.iter().map(|(t, n, u, g)| format!("{t},{n},{u},\"{g}\"\n")).collect::<String>();
        let token_file = write("tokens.csv", &tokens);
        // The API server's client certificate for kubelets (logs, exec).
        let (kubelet_client, kubelet_client_key) = authority.client("kube-apiserver-kubelet-client", "system:masters");
        let kubelet_client = write("apiserver-kubelet-client.crt", &kubelet_client);
        let kubelet_client_key = write("apiserver-kubelet-client.key", &kubelet_client_key);

        let oidc = crate::oidc_provider::Provider::start(&dir.join("oidc"), "http://127.0.0.1/callback", &[]);
        let authentication = write(
            "authentication.yaml",
            &serde_json::json!({
                "apiVersion": "apiserver.config.k8s.io/v1", "kind": "AuthenticationConfiguration",
                "jwt": [{
                    "issuer": {"url": oidc.issuer, "audiences": [OIDC_AUDIENCE], "certificateAuthority": oidc.ca_pem},
                    "claimMappings": {
                        "username": {"claim": "sub", "prefix": OIDC_PREFIX},
                        "groups": {"claim": "groups", "prefix": OIDC_PREFIX},
                    },
                }],
            })
            .to_string(),
        );
        let audit_policy = write(
            "audit-policy.yaml",
            &serde_json::json!({
                "apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived"],
                "rules": [
                    {"level": "Metadata", "verbs": ["create", "update", "delete"],
                     "resources": [{"group": "yuxi.dev", "resources": ["agents", "agentruns", "knowledgebases"]}]},
                    {"level": "None"},
                ],
            })
            .to_string(),
        );
        let etcd_port = free_port("127.0.0.1");
        let peer_port = free_port("127.0.0.1");
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let mut etcd = Command::new(bin.join("etcd"));
        etcd.args([
            "--name=test",
            &format!("--data-dir={}", dir.join("etcd").display()),
            &format!("--listen-client-urls={etcd_url}"),
            &format!("--advertise-client-urls={etcd_url}"),
            &format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"),
            &format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}"),
            &format!("--initial-cluster=test=http://127.0.0.1:{peer_port}"),
            // A test cluster's data need not survive a power cut.
            "--unsafe-no-fsync",
            "--log-level=warn",
        ]);
        let etcd = Process::start("etcd", etcd, &dir);

        let port = free_port("127.0.0.1");
        let server = format!("https://127.0.0.1:{port}");
        let apiserver_args: Vec<String> = vec![
            format!("--etcd-servers={etcd_url}"),
            "--bind-address=0.0.0.0".into(),
            format!("--advertise-address={node}"),
            format!("--secure-port={port}"),
            format!("--tls-cert-file={}", cert_file.display()),
            format!("--tls-private-key-file={}", key_file.display()),
            format!("--client-ca-file={}", ca_file.display()),
            format!("--token-auth-file={}", token_file.display()),
            format!("--authentication-config={}", authentication.display()),
            format!("--audit-policy-file={}", audit_policy.display()),
            format!("--audit-log-path={}", dir.join("audit.log").display()),
            format!("--service-account-issuer={ISSUER}"),
            format!("--service-account-key-file={}", sa_public.display()),
            format!("--service-account-signing-key-file={}", sa_key.display()),
            "--authorization-mode=Node,RBAC".into(),
            "--enable-admission-plugins=NamespaceLifecycle,LimitRanger,ServiceAccount,NodeRestriction,PodSecurity,DefaultStorageClass,DefaultTolerationSeconds,MutatingAdmissionWebhook,ValidatingAdmissionPolicy,ValidatingAdmissionWebhook,ResourceQuota".into(),
            format!("--kubelet-client-certificate={}", kubelet_client.display()),
            format!("--kubelet-client-key={}", kubelet_client_key.display()),
            // The node's name resolves nowhere here: the API server reaches kubelets at their addresses.
            "--kubelet-preferred-address-types=InternalIP".into(),
            "--service-cluster-ip-range=10.96.0.0/16".into(),
            // Webhooks are called at their Services' endpoints (the test's processes on the node address),
            // not at a cluster IP, which nothing routes here.
            "--enable-aggregator-routing=true".into(),
            "--profiling=false".into(),
        ];
        let apiserver_command = {
            let bin = bin.clone();
            Box::new(move || {
                let mut command = Command::new(bin.join("kube-apiserver"));
                command.args(&apiserver_args);
                command
            })
        };
        let apiserver = Process::start("kube-apiserver", apiserver_command(), &dir);

        let wait_ready = |apiserver: &Mutex<Process>, etcd: &Mutex<Process>| {
            wait_until(
                "the API server is ready",
                Duration::from_secs(90),
                || {
                    if let Some(status) = apiserver.lock().expect("apiserver").exited() {
                        panic!(
                            "the API server exited ({status}):\n{}",
                            apiserver.lock().expect("apiserver").log_tail(30)
                        );
                    }
                    kubectl_at(&dir, &server, &authority.ca_pem, &["get", "--raw=/readyz"]).status.success()
                },
                || [etcd, apiserver].map(|p| p.lock().map(|p| p.log_tail(30)).unwrap_or_default()).join("\n"),
            )
        };
        let (etcd, apiserver) = (Mutex::new(etcd), Mutex::new(apiserver));
        let etcd_url = etcd_url.clone();
        wait_ready(&apiserver, &etcd);

        let admin = write_kubeconfig(&dir, &server, &authority.ca_pem, "admin", "admin-token", None);
        let mut manager = Command::new(bin.join("kube-controller-manager"));
        manager.args([
            &format!("--kubeconfig={}", admin.display()),
            &format!("--authentication-kubeconfig={}", admin.display()),
            &format!("--authorization-kubeconfig={}", admin.display()),
            "--bind-address=127.0.0.1",
            &format!("--secure-port={}", free_port("127.0.0.1")),
            "--leader-elect=false",
            &format!("--root-ca-file={}", ca_file.display()),
            &format!("--service-account-private-key-file={}", sa_key.display()),
            "--use-service-account-credentials=false",
            "--service-cluster-ip-range=10.96.0.0/16",
            // Garbage collection and namespace deletion at test speed.
            "--concurrent-gc-syncs=10",
        ]);
        let manager = Mutex::new(Process::start("kube-controller-manager", manager, &dir));
        let plane = ControlPlane {
            dir: dir.clone(),
            server,
            ca_pem: authority.ca_pem.clone(),
            authority,
            etcd_url,
            oidc,
            etcd,
            apiserver,
            apiserver_command,
            manager,
        };
        wait_until(
            "the controller manager makes the default namespace's service account",
            Duration::from_secs(60),
            || plane.kubectl(&["get", "serviceaccount", "default", "-n", "default"]).status.success(),
            || plane.logs(),
        );
        plane
    }

    fn wait_ready(&self) {
        wait_until(
            "the API server is ready again",
            Duration::from_secs(90),
            || self.kubectl(&["get", "--raw=/readyz"]).status.success(),
            || self.logs(),
        );
    }

    /// The tails of every component's log, for a failure message.
    pub fn logs(&self) -> String {
        let tail = |p: &Mutex<Process>| p.lock().map(|p| p.log_tail(30)).unwrap_or_default();
        [tail(&self.etcd), tail(&self.apiserver), tail(&self.manager)].join("\n")
    }

    /// Writes a kubeconfig for `token` (default namespace `namespace`) named `<name>.kubeconfig`; its path.
    pub fn kubeconfig(&self, name: &str, token: &str, namespace: Option<&str>) -> PathBuf {
        write_kubeconfig(&self.dir, &self.server, &self.ca_pem, name, token, namespace)
    }

    /// A client acting as the static user whose token is `token`.
    pub async fn client(&self, token: &str) -> kube::Client {
        let path = self.kubeconfig(
            &format!(
                "client-{}",
                token.replace(|c: char| !c.is_ascii_alphanumeric(), "-").chars().take(40).collect::<String>()
            ),
            token,
            None,
        );
        client_from(&path).await
    }

    /// A client acting as `admin` (`system:masters`).
    pub async fn admin(&self) -> kube::Client {
        self.client("admin-token").await
    }

    /// `kubectl` as admin, with `args`.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        kubectl_at(&self.dir, &self.server, &self.ca_pem, args)
    }

    /// etcd's client URL (`http://127.0.0.1:<port>`), whose HTTP gateway answers `/v3/kv/...`.
    pub fn etcd_url(&self) -> String {
        self.etcd_url.clone()
    }

    /// Stops the API server (SIGTERM, then SIGKILL after 30 s).
    pub fn stop_apiserver(&self) {
        self.apiserver.lock().expect("apiserver").stop(Duration::from_secs(30));
    }

    /// Starts the API server again on the same port and etcd, and waits until it is ready.
    pub fn start_apiserver(&self) {
        *self.apiserver.lock().expect("apiserver") =
            Process::start("kube-apiserver", (self.apiserver_command)(), &self.dir);
        self.wait_ready();
    }

    /// Stops every component.
    pub fn stop(&self) {
        for process in [&self.manager, &self.apiserver, &self.etcd] {
            process.lock().expect("process").stop(Duration::from_secs(10));
        }
    }
}

/// The folder of the control planes' folders (`target/tmp/kube`), those of earlier runs removed when
/// this run first asks for it. A failed run's logs stay there until the next.
fn planes_dir() -> PathBuf {
    static CLEARED: std::sync::Once = std::sync::Once::new();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("kube");
    CLEARED.call_once(|| {
        let _ = std::fs::remove_dir_all(&dir);
    });
    dir
}

/// Writes `<dir>/<name>.kubeconfig` for the API server at `server` (CA `ca_pem`) and `token`, with
/// `namespace` as its default; its path.
pub fn write_kubeconfig(
    dir: &Path,
    server: &str,
    ca_pem: &str,
    name: &str,
    token: &str,
    namespace: Option<&str>,
) -> PathBuf {
    use base64::Engine;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let namespace = namespace.map(|ns| format!("\n    namespace: {ns}")).unwrap_or_default();
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: {name}\n  user:\n    token: {token}\ncontexts:\n- name: test\n  context:\n    cluster: test\n    user: {name}{namespace}\ncurrent-context: test\n"
    );
    let path = dir.join(format!("{name}.kubeconfig"));
    // Tests running at once write the same kubeconfig and read it: each writes a file of its own and
    // renames it over the name, so no reader ever sees one half written (a reader of a truncated file
    // found no current context).
    let written = dir.join(format!(".{name}.kubeconfig.{}", uuid::Uuid::new_v4().simple()));
    std::fs::write(&written, text).expect("kubeconfig");
    std::fs::rename(&written, &path).expect("kubeconfig in place");
    path
}

/// `kubectl` as admin against the API server at `server`, with `args`.
fn kubectl_at(dir: &Path, server: &str, ca_pem: &str, args: &[&str]) -> Output {
    let admin = dir.join("admin.kubeconfig");
    if !admin.exists() {
        write_kubeconfig(dir, server, ca_pem, "admin", "admin-token", None);
    }
    Command::new(kube_bin().join("kubectl"))
        .arg(format!("--kubeconfig={}", admin.display()))
        .args(args)
        .output()
        .expect("kubectl")
}

/// A client from the kubeconfig at `path`.
pub async fn client_from(path: &Path) -> kube::Client {
    let config = kube::config::Kubeconfig::read_from(path).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(config, &kube::config::KubeConfigOptions::default())
        .await
        .expect("client config");
    kube::Client::try_from(config).expect("client")
}
