//! A node for a [`ControlPlane`]: kube-scheduler, containerd (Debian's, with runc and the CNI plugins),
//! a kubelet, kube-proxy and CoreDNS, all on the node address of `scripts/kube-netns`, so that pods run
//! for real. Images come from OCI archives imported into containerd (nothing can be pulled here): the
//! pause image `scripts/pause-image` writes, and the project's image from `make image`.
//!
//! The machine's paths a kubelet and containerd write to whatever their configuration says
//! (`/var/log/pods`, `/var/log/containers`, `/run/netns`, `/var/lib/kubelet`) are covered by folders of
//! the node's own, mounted over them in the mount namespace `scripts/kube-netns` gives: nothing is left on
//! the machine.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::control_plane::{ControlPlane, kube_bin, node_ip};
use super::processes::{Process, free_port, wait_until};

/// The node's name.
pub const NODE: &str = "yuxi-node";
/// The pods' network (the CNI bridge's subnet).
pub const POD_CIDR: &str = "10.244.0.0/24";
/// The pause image's name.
pub const PAUSE_IMAGE: &str = "localhost/yuxi-pause:1";
/// The cgroup, in every hierarchy, that holds the node's pods.
const CGROUP_ROOT: &str = "yuxi-node";

/// The mounted cgroup hierarchies: each cgroup v1 controller's, or the one cgroup v2 tree.
fn cgroup_hierarchies() -> Vec<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    mounts
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (fields.len() > 2 && (fields[2] == "cgroup" || fields[2] == "cgroup2")).then(|| PathBuf::from(fields[1]))
        })
        .collect()
}

/// Kills every process left in `cgroup` and below, and removes the cgroups, deepest first.
fn remove_cgroup(cgroup: &Path) {
    let Ok(entries) = std::fs::read_dir(cgroup) else { return };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            remove_cgroup(&entry.path());
        }
    }
    for _ in 0..50 {
        let procs = std::fs::read_to_string(cgroup.join("cgroup.procs")).unwrap_or_default();
        if procs.trim().is_empty() {
            break;
        }
        for pid in procs.lines().filter_map(|p| p.trim().parse::<i32>().ok()) {
            // SAFETY: kill(2) on a process of the node's own cgroup.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = std::fs::remove_dir(cgroup);
}

/// A running node: its components' processes, by name.
pub struct Node {
    processes: Vec<(String, Process)>,
}

fn run(what: &str, command: &mut Command) -> String {
    let output = command.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{what} failed: {text}");
    text
}

/// Mounts a fresh folder of `dir` over `target` (in this mount namespace only).
fn cover(dir: &Path, target: &str) {
    let source = dir.join("covered").join(target.trim_start_matches('/').replace('/', "-"));
    std::fs::create_dir_all(&source).expect("folder");
    std::fs::create_dir_all(target).expect("mount point");
    run(&format!("mount over {target}"), Command::new("mount").args(["--bind", &source.display().to_string(), target]));
}

impl Node {
    /// Starts the node's components for `plane` and waits until the node is Ready, with `images` (OCI
    /// archives) imported into containerd.
    pub fn start(plane: &ControlPlane, images: &[PathBuf]) -> Node {
        let bin = kube_bin();
        let node_ip = node_ip();
        let dir = plane.dir.join("node");
        std::fs::create_dir_all(&dir).expect("node folder");
        // This mount namespace's own copies of the paths the node writes to, and none of the machine's.
        run("private mounts", Command::new("mount").args(["--make-rprivate", "/"]));
        for target in ["/var/log/pods", "/var/log/containers", "/run/netns", "/var/lib/kubelet"] {
            cover(&dir, target);
        }
        let write = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).expect("write");
            path
        };
        let mut processes = Vec::new();

        // The pods' network: a bridge with masquerading, routed by this namespace.
        for (key, value) in [("net/ipv4/ip_forward", "1"), ("net/bridge/bridge-nf-call-iptables", "1")] {
            let path = format!("/proc/sys/{key}");
            if std::fs::write(&path, value).is_err() {
                eprintln!("node: cannot set {key} (it may not exist in this kernel)");
            }
        }
        let cni = dir.join("cni");
        std::fs::create_dir_all(&cni).expect("cni");
        std::fs::write(
            cni.join("10-yuxi.conflist"),
            serde_json::json!({
                "cniVersion": "1.0.0", "name": "yuxi-pods",
                "plugins": [
                    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
                     "ipam": {"type": "host-local", "dataDir": dir.join("cni-ipam").display().to_string(),
                              "ranges": [[{"subnet": POD_CIDR}]], "routes": [{"dst": "0.0.0.0/0"}]}},
                    {"type": "portmap", "capabilities": {"portMappings": true}},
                ],
            })
            .to_string(),
        )
        .expect("cni config");

        // containerd.
        let socket = dir.join("containerd.sock");
        let config = write(
            "containerd.toml",
            &format!(
                r#"version = 2
root = "{root}"
state = "{state}"
[grpc]
  address = "{socket}"
[ttrpc]
  address = "{socket}.ttrpc"
[debug]
  level = "info"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  enable_selinux = false
  # This machine lets no process lower its OOM score, root included (the kubelet asks -998 for every
  # pod's sandbox, and runc fails to start a container it cannot give one): containers get at least
  # containerd's own.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{cni}"
"#,
                root = dir.join("containerd/root").display(),
                state = dir.join("containerd/state").display(),
                socket = socket.display(),
                cni = cni.display(),
            ),
        );
        let mut containerd = Command::new("containerd");
        containerd.arg("--config").arg(&config);
        processes.push(("containerd".into(), Process::start("containerd", containerd, &dir)));
        wait_until(
            "containerd answers",
            Duration::from_secs(30),
            || ctr(&socket, &["version"]).status.success(),
            || processes[0].1.log_tail(20),
        );
        for image in images {
            let output =
                ctr(&socket, &["-n", "k8s.io", "images", "import", "--all-platforms", &image.display().to_string()]);
            assert!(output.status.success(), "import {}: {}", image.display(), String::from_utf8_lossy(&output.stderr));
        }

        // kube-scheduler.
        let admin = plane.kubeconfig("admin", "admin-token", None);
        let mut scheduler = Command::new(bin.join("kube-scheduler"));
        scheduler.args([
            &format!("--kubeconfig={}", admin.display()),
            &format!("--authentication-kubeconfig={}", admin.display()),
            &format!("--authorization-kubeconfig={}", admin.display()),
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            &format!("--secure-port={}", free_port("127.0.0.1")),
        ]);
        processes.push(("kube-scheduler".into(), Process::start("kube-scheduler", scheduler, &dir)));

        // The kubelet.
        let (serving, serving_key) = plane.authority.serving(&[NODE], &[node_ip.parse().expect("node address")]);
        let serving = write("kubelet.crt", &serving);
        let serving_key = write("kubelet.key", &serving_key);
        let ca = write("ca.crt", &plane.ca_pem);
        let resolv = write("resolv.conf", "");
        let kubelet_config = write(
            "kubelet.yaml",
            &format!(
                r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {{enabled: false}}
  webhook: {{enabled: false}}
  x509: {{clientCAFile: "{ca}"}}
authorization: {{mode: AlwaysAllow}}
cgroupDriver: cgroupfs
failCgroupV1: false
containerRuntimeEndpoint: "unix://{socket}"
clusterDNS: ["{node_ip}"]
clusterDomain: cluster.local
resolvConf: "{resolv}"
failSwapOn: false
tlsCertFile: "{serving}"
tlsPrivateKeyFile: "{serving_key}"
address: "{node_ip}"
port: {port}
readOnlyPort: 0
healthzPort: 0
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {{"memory.available": "100Mi", "nodefs.available": "1%", "nodefs.inodesFree": "1%", "imagefs.available": "1%"}}
podLogsDir: "{pod_logs}"
cgroupRoot: /{CGROUP_ROOT}
"#,
                ca = ca.display(),
                socket = socket.display(),
                resolv = resolv.display(),
                serving = serving.display(),
                serving_key = serving_key.display(),
                port = free_port(&node_ip),
                pod_logs = "/var/log/pods",
            ),
        );
        // The kubelet's cgroups go under /yuxi-node of every hierarchy, removed with the node.
        for hierarchy in cgroup_hierarchies() {
            std::fs::create_dir_all(hierarchy.join(CGROUP_ROOT)).expect("the node's cgroup");
        }
        let kubelet_kubeconfig = plane.kubeconfig("kubelet", "kubelet-token", None);
        let mut kubelet = Command::new(bin.join("kubelet"));
        kubelet.args([
            &format!("--config={}", kubelet_config.display()),
            &format!("--kubeconfig={}", kubelet_kubeconfig.display()),
            &format!("--hostname-override={NODE}"),
            &format!("--node-ip={node_ip}"),
            &format!("--root-dir={}", "/var/lib/kubelet"),
            "--v=2",
        ]);
        processes.push(("kubelet".into(), Process::start("kubelet", kubelet, &dir)));

        // kube-proxy: Services' addresses routed to their endpoints (iptables).
        let proxy_config = write(
            "kube-proxy.yaml",
            &format!(
                r#"apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {{kubeconfig: "{admin}"}}
hostnameOverride: {NODE}
mode: iptables
clusterCIDR: {POD_CIDR}
bindAddress: {node_ip}
healthzBindAddress: 127.0.0.1:{healthz}
metricsBindAddress: 127.0.0.1:{metrics}
conntrack: {{maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}}
"#,
                admin = admin.display(),
                healthz = free_port("127.0.0.1"),
                metrics = free_port("127.0.0.1"),
            ),
        );
        let mut proxy = Command::new(bin.join("kube-proxy"));
        proxy.arg(format!("--config={}", proxy_config.display()));
        processes.push(("kube-proxy".into(), Process::start("kube-proxy", proxy, &dir)));

        // CoreDNS: the cluster's names, on the node address (the kubelet's clusterDNS).
        let corefile = write(
            "Corefile",
            &format!(
                ".:53 {{\n    bind {node_ip}\n    errors\n    kubernetes cluster.local in-addr.arpa ip6.arpa {{\n        kubeconfig {admin}\n        pods insecure\n        fallthrough in-addr.arpa ip6.arpa\n    }}\n    cache 5\n}}\n",
                admin = admin.display()
            ),
        );
        let mut coredns = Command::new(bin.join("coredns"));
        coredns.arg("-conf").arg(&corefile);
        processes.push(("coredns".into(), Process::start("coredns", coredns, &dir)));

        let node = Node { processes };
        wait_until(
            "the node is Ready",
            Duration::from_secs(120),
            || {
                let out = plane.kubectl(&[
                    "get",
                    "node",
                    NODE,
                    "-o",
                    "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
                ]);
                String::from_utf8_lossy(&out.stdout).trim() == "True"
            },
            || node.logs(),
        );
        node
    }

    /// The tails of every component's log.
    pub fn logs(&self) -> String {
        self.processes.iter().map(|(_, p)| p.log_tail(25)).collect::<Vec<_>>().join("\n")
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        // The kubelet and containerd first, then whatever their containers left.
        self.processes.clear();
        for hierarchy in cgroup_hierarchies() {
            remove_cgroup(&hierarchy.join(CGROUP_ROOT));
        }
    }
}

/// `ctr` against the containerd at `socket`.
pub fn ctr(socket: &Path, args: &[&str]) -> std::process::Output {
    Command::new("ctr").arg("--address").arg(socket).args(args).output().expect("ctr")
}
