//! `yuxi-operator sandbox-pod`: the pod every example run would get passes the restricted Pod Security
//! Standard (checked by `support::pss`, itself tested here against bad pods), parses as a Pod and a
//! Secret whose inputs read back as the run and its agent, and, when `YUXI_KUBE_VALIDATE` names the
//! kubernetes-validate executable (`make test` sets it up with `scripts/k8s-venv`), passes the Kubernetes
//! 1.33 schemas in strict mode. Bad inputs give errors naming the file and the field.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use k8s_openapi::api::core::v1::{Pod, Secret};
use serde_json::{Value, json};
use tempfile::TempDir;
use yuxi_operator::resources::manifest::{Manifest, parse_manifests};
use yuxi_operator::resources::{Agent, AgentRun};

use crate::support::examples::example_manifests;
use crate::support::pss::{Violation, check_restricted};
use crate::support::repository::root;

// ---------------------------------------------------------------------------------------------------
// The checker itself.

/// A pod that meets the restricted profile with as little as it takes.
fn restricted_pod() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "ok"},
        "spec": {
            "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": "main",
                "image": "busybox",
                "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}
            }],
            "volumes": [{"name": "scratch", "emptyDir": {}}]
        }
    })
}

/// A change to a pod.
type Change = Box<dyn FnOnce(&mut Value)>;

fn violations_of(change: impl FnOnce(&mut Value)) -> Vec<Violation> {
    let mut pod = restricted_pod();
    change(&mut pod);
    check_restricted(&pod)
}

#[test]
fn the_checker_passes_a_restricted_pod_and_what_the_profile_allows() {
    assert_eq!(check_restricted(&restricted_pod()), Vec::new());
    let allowed: Vec<(&str, Change)> = vec![
        (
            "NET_BIND_SERVICE",
            Box::new(|p| {
                p["spec"]["containers"][0]["securityContext"]["capabilities"]["add"] = json!(["NET_BIND_SERVICE"])
            }),
        ),
        (
            "a safe sysctl",
            Box::new(|p| {
                p["spec"]["securityContext"]["sysctls"] =
                    json!([{"name": "net.ipv4.tcp_rmem", "value": "4096 87380 6291456"}])
            }),
        ),
        (
            "seccomp per container",
            Box::new(|p| {
                p["spec"]["securityContext"] = json!({"runAsNonRoot": true});
                p["spec"]["containers"][0]["securityContext"]["seccompProfile"] =
                    json!({"type": "Localhost", "localhostProfile": "p.json"});
            }),
        ),
        (
            "runAsNonRoot per container",
            Box::new(|p| {
                p["spec"]["securityContext"]["runAsNonRoot"] = Value::Null;
                p["spec"]["containers"][0]["securityContext"]["runAsNonRoot"] = json!(true);
            }),
        ),
        (
            "allowed volumes",
            Box::new(|p| {
                p["spec"]["volumes"] = json!([
                    {"name": "a", "configMap": {"name": "c"}},
                    {"name": "b", "secret": {"secretName": "s"}},
                    {"name": "c", "persistentVolumeClaim": {"claimName": "d"}},
                    {"name": "d", "projected": {"sources": []}},
                    {"name": "e", "downwardAPI": {}},
                    {"name": "f", "csi": {"driver": "x"}},
                    {"name": "g", "ephemeral": {}}
                ])
            }),
        ),
        (
            "an allowed SELinux type",
            Box::new(|p| {
                p["spec"]["securityContext"]["seLinuxOptions"] =
                    json!({"type": "container_init_t", "level": "s0:c1,c2"})
            }),
        ),
        (
            "AppArmor RuntimeDefault",
            Box::new(|p| {
                p["spec"]["securityContext"]["appArmorProfile"] = json!({"type": "RuntimeDefault"});
                p["metadata"]["annotations"] =
                    json!({"container.apparmor.security.beta.kubernetes.io/main": "localhost/custom"});
            }),
        ),
        ("a non-root uid", Box::new(|p| p["spec"]["containers"][0]["securityContext"]["runAsUser"] = json!(1000))),
        (
            "host port 0",
            Box::new(|p| p["spec"]["containers"][0]["ports"] = json!([{"containerPort": 80, "hostPort": 0}])),
        ),
    ];
    for (what, change) in allowed {
        assert_eq!(violations_of(change), Vec::new(), "{what}");
    }
}

#[test]
fn the_checker_finds_each_violation_and_names_it() {
    fn c0(p: &mut Value) -> &mut Value {
        &mut p["spec"]["containers"][0]["securityContext"]
    }
    let cases: Vec<(&str, &str, Change)> = vec![
        (
            "HostProcess",
            "spec.containers[0].securityContext.windowsOptions.hostProcess",
            Box::new(|p| c0(p)["windowsOptions"] = json!({"hostProcess": true})),
        ),
        ("Host Namespaces", "spec.hostNetwork", Box::new(|p| p["spec"]["hostNetwork"] = json!(true))),
        ("Host Namespaces", "spec.hostPID", Box::new(|p| p["spec"]["hostPID"] = json!(true))),
        ("Host Namespaces", "spec.hostIPC", Box::new(|p| p["spec"]["hostIPC"] = json!(true))),
        (
            "Privileged Containers",
            "spec.containers[0].securityContext.privileged",
            Box::new(|p| c0(p)["privileged"] = json!(true)),
        ),
        (
            "Capabilities",
            "spec.containers[0].securityContext.capabilities.add",
            Box::new(|p| c0(p)["capabilities"]["add"] = json!(["CHOWN"])),
        ),
        (
            "Capabilities (baseline)",
            "spec.containers[0].securityContext.capabilities.add",
            Box::new(|p| c0(p)["capabilities"]["add"] = json!(["SYS_ADMIN"])),
        ),
        (
            "Capabilities",
            "spec.containers[0].securityContext.capabilities.drop",
            Box::new(|p| c0(p)["capabilities"]["drop"] = json!(["NET_RAW"])),
        ),
        (
            "HostPath Volumes",
            "spec.volumes[0].hostPath",
            Box::new(|p| p["spec"]["volumes"] = json!([{"name": "h", "hostPath": {"path": "/"}}])),
        ),
        (
            "Volume Types",
            "spec.volumes[0].hostPath",
            Box::new(|p| p["spec"]["volumes"] = json!([{"name": "h", "hostPath": {"path": "/"}}])),
        ),
        (
            "Volume Types",
            "spec.volumes[1].nfs",
            Box::new(|p| {
                p["spec"]["volumes"] =
                    json!([{"name": "a", "emptyDir": {}}, {"name": "n", "nfs": {"server": "s", "path": "/"}}])
            }),
        ),
        (
            "Host Ports",
            "spec.containers[0].ports[0].hostPort",
            Box::new(|p| p["spec"]["containers"][0]["ports"] = json!([{"containerPort": 80, "hostPort": 8080}])),
        ),
        (
            "AppArmor",
            "spec.securityContext.appArmorProfile.type",
            Box::new(|p| p["spec"]["securityContext"]["appArmorProfile"] = json!({"type": "Unconfined"})),
        ),
        (
            "AppArmor",
            "metadata.annotations[\"container.apparmor.security.beta.kubernetes.io/main\"]",
            Box::new(|p| {
                p["metadata"]["annotations"] =
                    json!({"container.apparmor.security.beta.kubernetes.io/main": "unconfined"})
            }),
        ),
        (
            "SELinux",
            "spec.securityContext.seLinuxOptions.type",
            Box::new(|p| p["spec"]["securityContext"]["seLinuxOptions"] = json!({"type": "spc_t"})),
        ),
        (
            "SELinux",
            "spec.containers[0].securityContext.seLinuxOptions.user",
            Box::new(|p| c0(p)["seLinuxOptions"] = json!({"user": "system_u"})),
        ),
        (
            "SELinux",
            "spec.containers[0].securityContext.seLinuxOptions.role",
            Box::new(|p| c0(p)["seLinuxOptions"] = json!({"role": "sysadm_r"})),
        ),
        (
            "/proc Mount Type",
            "spec.containers[0].securityContext.procMount",
            Box::new(|p| c0(p)["procMount"] = json!("Unmasked")),
        ),
        (
            "Seccomp",
            "spec.securityContext.seccompProfile.type",
            Box::new(|p| p["spec"]["securityContext"]["seccompProfile"] = json!({"type": "Unconfined"})),
        ),
        (
            "Seccomp",
            "spec.containers[0].securityContext.seccompProfile.type",
            Box::new(|p| p["spec"]["securityContext"]["seccompProfile"] = Value::Null),
        ),
        (
            "Sysctls",
            "spec.securityContext.sysctls[0].name",
            Box::new(|p| p["spec"]["securityContext"]["sysctls"] = json!([{"name": "kernel.msgmax", "value": "1"}])),
        ),
        (
            "Privilege Escalation",
            "spec.containers[0].securityContext.allowPrivilegeEscalation",
            Box::new(|p| c0(p)["allowPrivilegeEscalation"] = Value::Null),
        ),
        (
            "Privilege Escalation",
            "spec.containers[0].securityContext.allowPrivilegeEscalation",
            Box::new(|p| c0(p)["allowPrivilegeEscalation"] = json!(true)),
        ),
        (
            "Running as Non-root",
            "spec.containers[0].securityContext.runAsNonRoot",
            Box::new(|p| c0(p)["runAsNonRoot"] = json!(false)),
        ),
        (
            "Running as Non-root",
            "spec.containers[0].securityContext.runAsNonRoot",
            Box::new(|p| p["spec"]["securityContext"]["runAsNonRoot"] = Value::Null),
        ),
        (
            "Running as Non-root",
            "spec.securityContext.runAsNonRoot",
            Box::new(|p| p["spec"]["securityContext"]["runAsNonRoot"] = json!(false)),
        ),
        (
            "Running as Non-root user",
            "spec.securityContext.runAsUser",
            Box::new(|p| p["spec"]["securityContext"]["runAsUser"] = json!(0)),
        ),
        (
            "Running as Non-root user",
            "spec.containers[0].securityContext.runAsUser",
            Box::new(|p| c0(p)["runAsUser"] = json!(0)),
        ),
        (
            "Host Probes / Lifecycle Hooks",
            "spec.containers[0].livenessProbe.httpGet.host",
            Box::new(|p| {
                p["spec"]["containers"][0]["livenessProbe"] = json!({"httpGet": {"port": 80, "host": "10.0.0.1"}})
            }),
        ),
        (
            "Host Probes / Lifecycle Hooks",
            "spec.containers[0].lifecycle.preStop.tcpSocket.host",
            Box::new(|p| {
                p["spec"]["containers"][0]["lifecycle"] =
                    json!({"preStop": {"tcpSocket": {"port": 80, "host": "node"}}})
            }),
        ),
        // Init and ephemeral containers are containers too.
        (
            "Privileged Containers",
            "spec.initContainers[0].securityContext.privileged",
            Box::new(|p| {
                let mut init = p["spec"]["containers"][0].clone();
                init["securityContext"]["privileged"] = json!(true);
                p["spec"]["initContainers"] = json!([init]);
            }),
        ),
        (
            "Capabilities",
            "spec.ephemeralContainers[0].securityContext.capabilities.drop",
            Box::new(|p| {
                p["spec"]["ephemeralContainers"] = json!([{"name": "debug", "image": "busybox",
                "securityContext": {"allowPrivilegeEscalation": false}}])
            }),
        ),
    ];
    for (control, field, change) in cases {
        let found = violations_of(change);
        assert!(
            found.iter().any(|v| v.control == control && v.field == field),
            "expected {control} at {field}, found: {}",
            found.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
        );
        for v in &found {
            assert!(v.to_string().starts_with(&format!("{}: {}: ", v.control, v.field)), "{v}");
        }
    }
}

#[test]
fn windows_pods_skip_the_linux_only_controls() {
    let found = violations_of(|p| {
        p["spec"]["os"] = json!({"name": "windows"});
        p["spec"]["securityContext"] = json!({"runAsNonRoot": true});
        p["spec"]["containers"][0]["securityContext"] = json!({});
    });
    assert_eq!(found, Vec::new());
}

// ---------------------------------------------------------------------------------------------------
// The command.

fn sandbox_pod(args: &[&Path]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_yuxi-operator"));
    command.arg("sandbox-pod");
    for pair in args.chunks(2) {
        command.arg(pair[0]).arg(pair[1]);
    }
    command.output().expect("yuxi-operator runs")
}

fn run_sandbox_pod(run: &Path, agent: &Path, settings: Option<&Path>) -> Output {
    let mut args: Vec<&Path> = vec![Path::new("--run"), run, Path::new("--agent"), agent];
    if let Some(settings) = settings {
        args.extend([Path::new("--settings"), settings]);
    }
    sandbox_pod(&args)
}

/// The command's two documents, as JSON.
fn documents(output: &Output) -> (Value, Value) {
    let stdout = String::from_utf8(output.stdout.clone()).expect("UTF-8");
    assert!(output.status.success(), "sandbox-pod failed: {}", String::from_utf8_lossy(&output.stderr));
    let documents: Vec<Value> = stdout
        .split("\n---\n")
        .map(|doc| serde_norway::from_str(doc).unwrap_or_else(|e| panic!("not YAML ({e}): {doc}")))
        .collect();
    match <[Value; 2]>::try_from(documents) {
        Ok([pod, inputs]) => (pod, inputs),
        Err(documents) => panic!("expected a Pod and a Secret, got {} documents:\n{stdout}", documents.len()),
    }
}

/// Every AgentRun of `examples/`, each with the file of the Agent it names: (run file, run, agent file).
fn example_runs() -> Vec<(PathBuf, AgentRun, PathBuf)> {
    let manifests = example_manifests();
    let runs: Vec<_> = manifests
        .iter()
        .filter_map(|(path, m)| match m {
            Manifest::AgentRun(run) => {
                let agent_file = manifests
                    .iter()
                    .find_map(|(path, m)| match m {
                        Manifest::Agent(agent) if agent.metadata.name.as_deref() == Some(&run.spec.agent) => {
                            Some(path.clone())
                        }
                        _ => None,
                    })
                    .unwrap_or_else(|| panic!("{}: no example Agent {}", path.display(), run.spec.agent));
                Some((path.clone(), (**run).clone(), agent_file))
            }
            Manifest::Agent(_)
            | Manifest::KnowledgeBase(_)
            | Manifest::Model(_)
            | Manifest::ConfigMap(_)
            | Manifest::McpServer(_) => None,
        })
        .collect();
    assert!(!runs.is_empty(), "examples/ holds at least one AgentRun");
    runs
}

fn only_run(text: &str) -> AgentRun {
    match parse_manifests(text).expect("run.yaml parses").as_slice() {
        [Manifest::AgentRun(run)] => (**run).clone(),
        other => panic!("run.yaml holds {other:?}"),
    }
}

fn only_agent(text: &str) -> Agent {
    match parse_manifests(text).expect("agent.yaml parses").as_slice() {
        [Manifest::Agent(agent)] => (**agent).clone(),
        other => panic!("agent.yaml holds {other:?}"),
    }
}

fn only_agent_file(path: &Path) -> Agent {
    only_agent(&std::fs::read_to_string(path).expect("agent file"))
}

/// Settings that turn on everything optional.
const FULL_SETTINGS: &str = r#"
image: registry.example/yuxi-operator:0.1.0
sandboxImage: registry.example/yuxi-toolbox:0.1.0
imagePullPolicy: IfNotPresent
imagePullSecrets: [registry-credentials]
runtimeClassName: gvisor
priorityClassName: batch-low
nodeSelector: {yuxi.dev/sandbox: "true"}
tolerations: [{key: sandbox, operator: Exists, effect: NoSchedule}]
podLabels: {team: research}
podAnnotations:
  example.com/audit: "on"
  example.com/answer: "yes"
  example.com/time: "1:20"
  example.com/hex: "0x1F"
  example.com/tilde: "~"
  example.com/note: "first line\nsecond line\n"
runAsUser: 1000
runAsGroup: 1000
fsGroup: 1000
hostUsers: false
runnerResources: {requests: {cpu: 200m, memory: 512Mi}, limits: {cpu: "2", memory: 2Gi}}
sandboxResources: {requests: {cpu: "1", memory: 1Gi}, limits: {cpu: "4", memory: 8Gi, ephemeral-storage: 10Gi}}
tmpSizeLimit: 2Gi
deadlineGraceSeconds: 120
userDataClaim: user-files
skillsClaim: skill-scopes
skillsLibraryClaim: skills-library
defaultUid: shared
redisUrlSecret: {name: redis, key: url}
openaiApiKeySecret: {name: model, key: key}
openaiBaseUrl: https://llm.example/v1
defaultModel: openai/gpt-4o-mini
facadeUrl: http://yuxi-api.yuxi.svc:8080
mcpServers:
  docs: {url: "http://docs-mcp:8000/mcp", tools: [search]}
"#;

#[test]
fn every_example_run_gets_a_restricted_pod_and_its_inputs() {
    let dir = TempDir::new().expect("temp dir");
    let settings = dir.path().join("settings.yaml");
    std::fs::write(&settings, FULL_SETTINGS).expect("settings");
    for (run_file, run, agent_file) in example_runs() {
        for settings in [None, Some(settings.as_path())] {
            let output = run_sandbox_pod(&run_file, &agent_file, settings);
            let (pod_json, inputs_json) = documents(&output);
            let what = format!("{} with {settings:?}", run_file.display());
            let violations = check_restricted(&pod_json);
            assert!(
                violations.is_empty(),
                "{what}: {}",
                violations.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")
            );
            let pod: Pod = serde_json::from_value(pod_json.clone()).expect("a Pod");
            let inputs: Secret = serde_json::from_value(inputs_json.clone()).expect("a Secret");
            assert_eq!((pod_json["apiVersion"].as_str(), pod_json["kind"].as_str()), (Some("v1"), Some("Pod")));
            assert_eq!(
                (inputs_json["apiVersion"].as_str(), inputs_json["kind"].as_str()),
                (Some("v1"), Some("Secret"))
            );
            assert_eq!(pod.metadata.name, run.metadata.name, "{what}: the example's name is a label already");
            assert_eq!(
                inputs.metadata.name,
                Some(format!("{}-inputs", run.metadata.name.as_deref().unwrap_or_default()))
            );
            // What the command prints is what the builder returns.
            let expected = yuxi_operator::controller::pod::sandbox_objects(
                &run,
                &only_agent_file(&agent_file),
                &settings.map_or_else(Default::default, |path| {
                    yuxi_operator::controller::pod::SandboxSettings::from_yaml(
                        &std::fs::read_to_string(path).expect("settings"),
                    )
                    .expect("settings parse")
                }),
            )
            .expect("objects");
            assert_eq!((&pod, &inputs), (&expected.pod, &expected.inputs), "{what}");
            // The inputs read back as the run and the agent.
            let data = inputs.string_data.as_ref().expect("string data");
            let run_back = only_run(&data["run.yaml"]);
            assert_eq!((&run_back.metadata.name, &run_back.spec), (&run.metadata.name, &run.spec), "{what}");
            let agent = only_agent_file(&agent_file);
            let agent_back = only_agent(&data["agent.yaml"]);
            assert_eq!((&agent_back.metadata.name, &agent_back.spec), (&agent.metadata.name, &agent.spec), "{what}");
            // The pod's inputs volume is this Secret, mounted where the runner reads it.
            let spec = pod.spec.as_ref().expect("spec");
            let volume = spec.volumes.iter().flatten().find(|v| v.name == "inputs").expect("inputs volume");
            assert_eq!(volume.secret.as_ref().and_then(|c| c.secret_name.as_ref()), inputs.metadata.name.as_ref());
        }
    }
}

#[test]
fn the_json_output_is_a_list_of_the_same_two_objects() {
    let dir = TempDir::new().expect("temp dir");
    let settings = dir.path().join("settings.yaml");
    std::fs::write(&settings, FULL_SETTINGS).expect("settings");
    for (run_file, _, agent_file) in example_runs() {
        for settings in [None, Some(settings.as_path())] {
            let (pod, inputs) = documents(&run_sandbox_pod(&run_file, &agent_file, settings));
            let mut args: Vec<&Path> = vec![Path::new("--run"), &run_file, Path::new("--agent"), &agent_file];
            if let Some(settings) = settings {
                args.extend([Path::new("--settings"), settings]);
            }
            args.extend([Path::new("--output"), Path::new("json")]);
            let output = sandbox_pod(&args);
            assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
            let list: Value = serde_json::from_slice(&output.stdout).expect("one JSON document");
            assert_eq!((list["apiVersion"].as_str(), list["kind"].as_str()), (Some("v1"), Some("List")));
            assert_eq!(list["items"], json!([pod, inputs]), "{} with {settings:?}", run_file.display());
        }
    }
}

/// kubernetes-validate, when `YUXI_KUBE_VALIDATE` names it.
fn kube_validate() -> Option<PathBuf> {
    match std::env::var_os("YUXI_KUBE_VALIDATE").filter(|v| !v.is_empty()) {
        Some(exe) => Some(PathBuf::from(exe)),
        None => {
            eprintln!("YUXI_KUBE_VALIDATE is not set: skipping the schema check (make test sets it up)");
            None
        }
    }
}

fn validate_file(exe: &Path, file: &Path) -> Output {
    Command::new(exe)
        .args(["--strict", "--kubernetes-version", "1.33.0"])
        .arg(file)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", exe.display()))
}

#[test]
fn the_output_passes_the_kubernetes_1_33_schemas_in_strict_mode() {
    let Some(exe) = kube_validate() else { return };
    let dir = TempDir::new().expect("temp dir");
    let settings = dir.path().join("settings.yaml");
    std::fs::write(&settings, FULL_SETTINGS).expect("settings");
    // The validator is strict: a field the schema does not declare fails, so a pass means something.
    let bogus = dir.path().join("bogus.yaml");
    std::fs::write(
        &bogus,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  containers: [{name: a, image: b, bogus: 1}]\n",
    )
    .expect("bogus pod");
    assert!(!validate_file(&exe, &bogus).status.success(), "kubernetes-validate accepted an unknown field");

    for (run_file, _, agent_file) in example_runs() {
        for (i, settings) in [None, Some(settings.as_path())].into_iter().enumerate() {
            let output = run_sandbox_pod(&run_file, &agent_file, settings);
            let _ = documents(&output);
            let file = dir.path().join(format!("objects-{i}.yaml"));
            std::fs::write(&file, &output.stdout).expect("objects");
            let checked = validate_file(&exe, &file);
            let report =
                format!("{}{}", String::from_utf8_lossy(&checked.stdout), String::from_utf8_lossy(&checked.stderr));
            assert!(checked.status.success(), "{} with {settings:?}:\n{report}", run_file.display());
            // Both documents were checked.
            assert!(report.contains("pod/") && report.contains("secret/"), "{report}");
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// Errors name the file and the field.

fn stderr_of(output: &Output) -> String {
    assert!(!output.status.success(), "expected a failure, got:\n{}", String::from_utf8_lossy(&output.stdout));
    assert!(output.stdout.is_empty(), "nothing is printed on failure");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn bad_inputs_give_errors_naming_the_file_and_the_field() {
    let dir = TempDir::new().expect("temp dir");
    let root = root();
    let example_run = root.join("examples/agentrun.yaml");
    let example_agent = root.join("examples/research-explorer.yaml");
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("write");
        path
    };
    let run_text = std::fs::read_to_string(&example_run).expect("example run");

    // (run file, agent file, settings file, what stderr must hold)
    let missing = dir.path().join("missing.yaml");
    let wrong_type = write("wrong-type.yaml", &run_text.replace("timeoutSeconds: 1800", "timeoutSeconds: soon"));
    let out_of_range = write("out-of-range.yaml", &run_text.replace("timeoutSeconds: 1800", "timeoutSeconds: 0"));
    let climbing = write("climbing.yaml", &run_text.replace("uid: platform-team", "uid: ../platform-team"));
    let no_uid = write("no-uid.yaml", &run_text.replace("  uid: platform-team\n", ""));
    let two = write("two.yaml", &format!("{run_text}\n---\n{run_text}"));
    let other_agent = root.join("examples/fact-verifier.yaml");
    let unknown_setting = write("unknown.yaml", "runtimeClassname: gvisor\n");
    let root_user = write("root.yaml", "runAsUser: 0\n");
    let wrong_setting = write("wrong.yaml", "runnerResources: {limits: [1]}\n");
    let cases: Vec<(&Path, &Path, Option<&Path>, Vec<String>)> = vec![
        (&missing, &example_agent, None, vec![missing.display().to_string(), "cannot read".into()]),
        (&wrong_type, &example_agent, None, vec![wrong_type.display().to_string(), "spec.timeoutSeconds".into()]),
        (&out_of_range, &example_agent, None, vec![out_of_range.display().to_string(), "spec.timeoutSeconds".into()]),
        (
            &climbing,
            &example_agent,
            None,
            vec![climbing.display().to_string(), "spec.uid".into(), "\"../platform-team\"".into()],
        ),
        (&no_uid, &example_agent, None, vec![no_uid.display().to_string(), "spec.uid".into(), "defaultUid".into()]),
        (&two, &example_agent, None, vec![two.display().to_string(), "exactly one AgentRun".into()]),
        (&example_run, &example_run, None, vec![example_run.display().to_string(), "exactly one Agent".into()]),
        (&example_run, &other_agent, None, vec![other_agent.display().to_string(), "spec.agent".into()]),
        (
            &example_run,
            &example_agent,
            Some(&unknown_setting),
            vec![unknown_setting.display().to_string(), "runtimeClassname".into()],
        ),
        (&example_run, &example_agent, Some(&root_user), vec![root_user.display().to_string(), "runAsUser".into()]),
        (
            &example_run,
            &example_agent,
            Some(&wrong_setting),
            vec![wrong_setting.display().to_string(), "runnerResources.limits".into()],
        ),
        (&example_run, &example_agent, Some(&missing), vec![missing.display().to_string(), "cannot read".into()]),
    ];
    for (run, agent, settings, expected) in cases {
        let stderr = stderr_of(&run_sandbox_pod(run, agent, settings));
        assert!(stderr.starts_with("error: "), "{stderr}");
        for part in expected {
            assert!(
                stderr.contains(&part),
                "{} / {} / {settings:?}: {part:?} not in {stderr}",
                run.display(),
                agent.display()
            );
        }
    }

    // A run without uid gets one from the settings.
    let shared = write("shared.yaml", "defaultUid: shared\n");
    let (pod, _) = documents(&run_sandbox_pod(&no_uid, &example_agent, Some(&shared)));
    let workspace = pod["spec"]["containers"][0]["volumeMounts"]
        .as_array()
        .expect("mounts")
        .iter()
        .find(|m| m["mountPath"] == "/home/gem/user-data/workspace")
        .expect("workspace")
        .clone();
    assert_eq!(workspace["subPath"], "users/shared/workspace");
}
