//! The sandbox pod builder's tests. (Over 500 lines: one table of cases per step of the builder.)

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, EnvVar, ResourceRequirements, Toleration, Volume};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::core::ObjectMeta;

use super::*;
use crate::resources::manifest::{Manifest, parse_manifests};
use crate::resources::names::{CREDENTIALS_TOKEN_KEY, credentials_secret_name, inputs_name};
use crate::resources::validation::is_dns1123_label;
use crate::resources::{AgentRunSpec, AgentSpec, ParentRef};
use crate::run::inputs::{AGENT_KEY, INPUTS_DIR, MCP_SERVERS_KEY, RUN_KEY, SKILLS_LIBRARY_DIR, SOCKET_DIR};
use crate::run::scope::Scope;

fn run() -> AgentRun {
    let mut run = AgentRun::new(
        "explore",
        AgentRunSpec {
            agent: "research-explorer".to_string(),
            input: "Survey the literature.".to_string(),
            thread_id: Some("thread-1_sub_research-explorer_4f2a9c1e".to_string()),
            parent: Some(ParentRef {
                run_id: "run-1".to_string(),
                thread_id: "thread-1".to_string(),
                agent: "deep-research".to_string(),
                file_thread_id: Some("files-1".to_string()),
                tool_call_id: Some("call-1".to_string()),
                root_run_id: None,
            }),
            uid: Some("alice".to_string()),
            timeout_seconds: Some(1800),
            ..AgentRunSpec::default()
        },
    );
    run.metadata.namespace = Some("team-a".to_string());
    run.metadata.uid = Some("0f7c1d2e-0000-4000-8000-000000000001".to_string());
    run
}

fn agent() -> Agent {
    let mut agent = Agent::new(
        "research-explorer",
        AgentSpec {
            backend: crate::resources::BACKEND_SUBAGENT.to_string(),
            is_subagent: Some(true),
            ..AgentSpec::default()
        },
    );
    agent.metadata.namespace = Some("team-a".to_string());
    agent
}

fn build(run: &AgentRun) -> SandboxObjects {
    sandbox_objects(run, &agent(), &SandboxSettings::default()).expect("a pod")
}

fn spec(objects: &SandboxObjects) -> &PodSpec {
    objects.pod.spec.as_ref().expect("a pod spec")
}

fn container<'a>(objects: &'a SandboxObjects, name: &str) -> &'a Container {
    let spec = spec(objects);
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no container {name}"))
}

fn volume<'a>(objects: &'a SandboxObjects, name: &str) -> Option<&'a Volume> {
    spec(objects).volumes.iter().flatten().find(|v| v.name == name)
}

/// (volume, sub-path, read-only) of the container's mount at `path`.
fn mount_at(container: &Container, path: &str) -> Option<(String, Option<String>, bool)> {
    container
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.mount_path == path)
        .map(|m| (m.name.clone(), m.sub_path.clone(), m.read_only.unwrap_or(false)))
}

fn env_value<'a>(container: &'a Container, name: &str) -> Option<&'a EnvVar> {
    container.env.iter().flatten().find(|e| e.name == name)
}

/// An independent reading of the label value rule (Kubernetes `IsValidLabelValue`).
fn is_label_value(value: &str) -> bool {
    let re = regex::Regex::new(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$").expect("regex");
    value.len() <= 63 && re.is_match(value)
}

#[test]
fn ids_that_would_climb_out_are_refused_naming_their_field() {
    for bad in ["../x", "a/b", ".hidden", "..", "", "x/../../etc"] {
        let mut cases: Vec<(&str, AgentRun)> = Vec::new();
        let mut r = run();
        r.spec.uid = Some(bad.to_string());
        cases.push(("spec.uid", r));
        let mut r = run();
        r.spec.thread_id = Some(bad.to_string());
        cases.push(("spec.threadId", r));
        let mut r = run();
        r.spec.parent.as_mut().expect("parent").file_thread_id = Some(bad.to_string());
        cases.push(("spec.parent.fileThreadId", r));
        let mut r = run();
        let parent = r.spec.parent.as_mut().expect("parent");
        parent.file_thread_id = None;
        parent.thread_id = bad.to_string();
        cases.push(("spec.parent.threadId", r));
        if !bad.is_empty() {
            let mut r = run();
            r.spec.thread_id = None;
            r.spec.parent = None;
            r.metadata.name = Some(bad.to_string());
            cases.push(("metadata.name", r));
        }
        for (field, r) in cases {
            let err = sandbox_objects(&r, &agent(), &SandboxSettings::default()).expect_err(field);
            assert_eq!(err.field(), field, "{bad:?}: {err}");
            assert!(matches!(err, PodError::NotAPathSegment { .. }), "{err:?}");
            assert!(err.to_string().starts_with(&format!("{field}: ")), "{err}");
            assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
        }
    }
}

#[test]
fn a_run_without_uid_is_refused_unless_the_settings_give_one() {
    let mut r = run();
    r.spec.uid = None;
    let err = sandbox_objects(&r, &agent(), &SandboxSettings::default()).expect_err("no uid");
    assert_eq!(err, PodError::MissingUid);
    assert!(err.to_string().starts_with("spec.uid: "), "{err}");

    let settings = SandboxSettings { default_uid: Some("shared".to_string()), ..SandboxSettings::default() };
    let objects = sandbox_objects(&r, &agent(), &settings).expect("a pod");
    let workspace = mount_at(container(&objects, RUNNER_CONTAINER), Scope::Workspace.virtual_root());
    assert_eq!(workspace.and_then(|m| m.1).as_deref(), Some("users/shared/workspace"));

    let settings = SandboxSettings { default_uid: Some("../root".to_string()), ..SandboxSettings::default() };
    let err = sandbox_objects(&r, &agent(), &settings).expect_err("bad default");
    assert_eq!(err.field(), "defaultUid", "{err}");
    // A run's own uid wins over the default.
    let objects = sandbox_objects(&run(), &agent(), &settings).expect("a pod");
    let workspace = mount_at(container(&objects, RUNNER_CONTAINER), Scope::Workspace.virtual_root());
    assert_eq!(workspace.and_then(|m| m.1).as_deref(), Some("users/alice/workspace"));
}

#[test]
fn volumes_are_the_four_scopes_of_the_run() {
    let sub_paths = |r: &AgentRun| {
        let objects = build(r);
        let runner = container(&objects, RUNNER_CONTAINER);
        [Scope::Workspace, Scope::Uploads, Scope::Outputs, Scope::Skills]
            .map(|scope| mount_at(runner, scope.virtual_root()).and_then(|m| m.1).expect("a sub-path"))
    };
    assert_eq!(
        sub_paths(&run()),
        [
            "users/alice/workspace",
            "users/alice/threads/files-1/uploads",
            "users/alice/threads/files-1/outputs",
            "users/alice/skills/thread-1_sub_research-explorer_4f2a9c1e",
        ]
    );
    // No fileThreadId: the parent's thread.
    let mut r = run();
    r.spec.parent.as_mut().expect("parent").file_thread_id = None;
    assert_eq!(sub_paths(&r)[1], "users/alice/threads/thread-1/uploads");
    // No parent: the run's own thread, for files and skills alike.
    let mut r = run();
    r.spec.parent = None;
    r.spec.thread_id = Some("t-9".to_string());
    assert_eq!(
        sub_paths(&r)[1..],
        ["users/alice/threads/t-9/uploads", "users/alice/threads/t-9/outputs", "users/alice/skills/t-9"]
    );
    // No thread: the run's name.
    r.spec.thread_id = None;
    assert_eq!(sub_paths(&r)[2..], ["users/alice/threads/explore/outputs", "users/alice/skills/explore"]);
}

#[test]
fn the_shell_and_tools_are_the_sandbox_containers_alone() {
    // The runner, which holds the secrets, runs the control-plane image (no shell); the sandbox, which runs
    // the model's commands with /bin/sh -c, the sandbox image. A settings file that names only `image`
    // keeps the default sandbox image.
    let version = env!("CARGO_PKG_VERSION");
    let objects = build(&run());
    assert_eq!(container(&objects, RUNNER_CONTAINER).image, Some(format!("yuxi-operator:{version}")));
    assert_eq!(container(&objects, SANDBOX_CONTAINER).image, Some(format!("yuxi-operator-sandbox:{version}")));
    let settings = SandboxSettings::from_yaml("image: registry.example/yuxi-operator:1.2.3\n").expect("settings");
    let objects = sandbox_objects(&run(), &agent(), &settings).expect("a pod");
    assert_eq!(container(&objects, RUNNER_CONTAINER).image.as_deref(), Some("registry.example/yuxi-operator:1.2.3"));
    assert_eq!(container(&objects, SANDBOX_CONTAINER).image, Some(format!("yuxi-operator-sandbox:{version}")));
}

#[test]
fn the_runner_alone_has_secrets() {
    let settings = SandboxSettings {
        facade_url: Some("http://yuxi-api:8080".to_string()),
        openai_base_url: Some("https://llm.example/v1".to_string()),
        default_model: Some("openai/gpt-4o-mini".to_string()),
        ..SandboxSettings::default()
    };
    let objects = sandbox_objects(&run(), &agent(), &settings).expect("a pod");
    let sandbox = container(&objects, SANDBOX_CONTAINER);
    assert!(sandbox.env.as_ref().is_none_or(Vec::is_empty), "{:?}", sandbox.env);
    assert!(sandbox.env_from.as_ref().is_none_or(Vec::is_empty), "{:?}", sandbox.env_from);
    // Nor any volume that holds a secret or the inputs.
    for m in sandbox.volume_mounts.iter().flatten() {
        let volume = volume(&objects, &m.name).expect("mounted volume exists");
        assert!(volume.secret.is_none() && volume.projected.is_none() && volume.config_map.is_none(), "{m:?}");
    }
    assert_eq!(mount_at(sandbox, INPUTS_DIR), None);

    let runner = container(&objects, RUNNER_CONTAINER);
    let secret_ref = |name: &str| {
        let var = env_value(runner, name).unwrap_or_else(|| panic!("{name}"));
        let selector = var.value_from.as_ref().and_then(|v| v.secret_key_ref.clone()).expect("a secret key ref");
        assert_eq!(var.value, None);
        (selector.name, selector.key, selector.optional)
    };
    assert_eq!(secret_ref("YUXI_REDIS_URL"), ("yuxi-redis".to_string(), "url".to_string(), None));
    assert_eq!(secret_ref("OPENAI_API_KEY"), ("yuxi-model".to_string(), "api-key".to_string(), Some(true)));
    // A run nobody announced credentials for gets none; one that has them gets exactly that Secret.
    assert!(env_value(runner, "YUXI_RUN_TOKEN").is_none());
    let mut announced = run();
    announced.metadata.annotations = Some(BTreeMap::from([(
        crate::resources::names::CREDENTIALS_ANNOTATION.to_string(),
        credentials_secret_name(&run()),
    )]));
    let objects = sandbox_objects(&announced, &agent(), &settings).expect("a pod");
    let runner = container(&objects, RUNNER_CONTAINER);
    let secret_ref = |name: &str| {
        let var = env_value(runner, name).unwrap_or_else(|| panic!("{name}"));
        let selector = var.value_from.as_ref().and_then(|v| v.secret_key_ref.clone()).expect("a secret key ref");
        (selector.name, selector.key, selector.optional)
    };
    assert_eq!(
        secret_ref("YUXI_RUN_TOKEN"),
        (credentials_secret_name(&run()), CREDENTIALS_TOKEN_KEY.to_string(), None)
    );
    let sandbox = container(&objects, SANDBOX_CONTAINER);
    assert!(sandbox.env.as_ref().is_none_or(Vec::is_empty), "the store's URL and the token stay in the runner");
    for (name, value) in [
        ("YUXI_FACADE_URL", "http://yuxi-api:8080"),
        ("OPENAI_BASE_URL", "https://llm.example/v1"),
        ("YUXI_DEFAULT_MODEL", "openai/gpt-4o-mini"),
        ("YUXI_SKILLS_LIBRARY", SKILLS_LIBRARY_DIR),
    ] {
        assert_eq!(env_value(runner, name).and_then(|e| e.value.as_deref()), Some(value), "{name}");
    }
    // Nothing of the operator's own: no service-account token, no service links.
    let spec = spec(&objects);
    assert_eq!(spec.automount_service_account_token, Some(false));
    assert_eq!(spec.enable_service_links, Some(false));
    assert_eq!(spec.service_account_name, None);
    assert_eq!(spec.share_process_namespace, Some(false));
}

#[test]
fn unset_settings_give_no_variables_and_no_key() {
    let settings = SandboxSettings { openai_api_key_secret: None, ..SandboxSettings::default() };
    let objects = sandbox_objects(&run(), &agent(), &settings).expect("a pod");
    let runner = container(&objects, RUNNER_CONTAINER);
    for name in ["OPENAI_API_KEY", "OPENAI_BASE_URL", "YUXI_DEFAULT_MODEL", "YUXI_FACADE_URL", "YUXI_MCP_SERVERS"] {
        assert!(env_value(runner, name).is_none(), "{name}");
    }
    assert!(objects.inputs.string_data.as_ref().expect("data").get(MCP_SERVERS_KEY).is_none());
}

#[test]
fn the_skills_library_is_mounted_in_the_runner_only_and_read_only() {
    let objects = build(&run());
    let runner = container(&objects, RUNNER_CONTAINER);
    assert_eq!(mount_at(runner, SKILLS_LIBRARY_DIR), Some(("skills-library".to_string(), None, true)));
    let library = volume(&objects, "skills-library").and_then(|v| v.persistent_volume_claim.clone()).expect("claim");
    assert_eq!((library.claim_name.as_str(), library.read_only), ("yuxi-skills-library", Some(true)));
    let sandbox = container(&objects, SANDBOX_CONTAINER);
    assert!(sandbox.volume_mounts.iter().flatten().all(|m| m.name != "skills-library"));
    // The skills scope: the runner projects into it, the sandbox only reads it.
    assert!(!mount_at(runner, Scope::Skills.virtual_root()).expect("skills").2);
    assert!(mount_at(sandbox, Scope::Skills.virtual_root()).expect("skills").2);
    for scope in [Scope::Workspace, Scope::Uploads, Scope::Outputs] {
        assert!(!mount_at(sandbox, scope.virtual_root()).expect("scope").2, "{scope:?}");
    }

    let settings = SandboxSettings { skills_library_claim: None, ..SandboxSettings::default() };
    let objects = sandbox_objects(&run(), &agent(), &settings).expect("a pod");
    assert!(volume(&objects, "skills-library").is_none());
    let runner = container(&objects, RUNNER_CONTAINER);
    assert!(env_value(runner, "YUXI_SKILLS_LIBRARY").is_none());
    assert_eq!(mount_at(runner, SKILLS_LIBRARY_DIR), None);
}

#[test]
fn the_containers_run_the_contract_commands() {
    let objects = build(&run());
    let spec = spec(&objects);
    assert_eq!(spec.containers.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), [RUNNER_CONTAINER]);
    let sandbox = container(&objects, SANDBOX_CONTAINER);
    assert_eq!(sandbox.restart_policy.as_deref(), Some("Always"), "the sandbox is a sidecar");
    let command = |c: &Container| [c.command.clone().unwrap_or_default(), c.args.clone().unwrap_or_default()].concat();
    assert_eq!(
        command(container(&objects, RUNNER_CONTAINER)),
        [
            "yuxi-operator",
            "runner",
            "--run",
            "/etc/yuxi/inputs/run.yaml",
            "--agent",
            "/etc/yuxi/inputs/agent.yaml",
            "--sandbox-socket",
            "/run/yuxi/sandbox.sock"
        ]
    );
    assert_eq!(
        command(sandbox),
        [
            "yuxi-operator",
            "sandbox-exec",
            "--socket",
            "/run/yuxi/sandbox.sock",
            "--workdir",
            "/home/gem/user-data/workspace"
        ]
    );
    // The runner's default volume paths are where the pod mounts the scopes.
    let defaults = crate::run::scope::VolumePaths::in_pod();
    let runner = container(&objects, RUNNER_CONTAINER);
    for scope in [Scope::Workspace, Scope::Uploads, Scope::Outputs, Scope::Skills] {
        assert!(mount_at(runner, &defaults.of(scope).display().to_string()).is_some(), "{scope:?}");
    }
    // Both reach the socket's folder; each has a /tmp of its own.
    for c in [runner, sandbox] {
        assert_eq!(mount_at(c, SOCKET_DIR).map(|m| m.0).as_deref(), Some("sockets"));
    }
    assert_eq!(mount_at(runner, "/tmp").map(|m| m.0).as_deref(), Some("runner-tmp"));
    assert_eq!(mount_at(sandbox, "/tmp").map(|m| m.0).as_deref(), Some("sandbox-tmp"));
    assert_eq!(mount_at(runner, INPUTS_DIR), Some(("inputs".to_string(), None, true)));
}

#[test]
fn pods_are_hardened_by_default() {
    let objects = build(&run());
    let spec = spec(&objects);
    let pod_security = spec.security_context.as_ref().expect("pod security context");
    assert_eq!(pod_security.run_as_non_root, Some(true));
    assert_eq!(
        (pod_security.run_as_user, pod_security.run_as_group, pod_security.fs_group),
        (Some(65532), Some(65532), Some(65532))
    );
    assert_eq!(pod_security.seccomp_profile.as_ref().map(|p| p.type_.as_str()), Some("RuntimeDefault"));
    for name in [RUNNER_CONTAINER, SANDBOX_CONTAINER] {
        let security = container(&objects, name).security_context.clone().expect("container security context");
        assert_eq!(security.allow_privilege_escalation, Some(false), "{name}");
        assert_eq!(security.read_only_root_filesystem, Some(true), "{name}");
        assert_eq!(security.run_as_non_root, Some(true), "{name}");
        assert_eq!(security.capabilities.and_then(|c| c.drop), Some(vec!["ALL".to_string()]), "{name}");
        assert_eq!(security.privileged, None, "{name}");
    }
    assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
    assert_eq!(spec.active_deadline_seconds, Some(1800 + 300));
    assert_eq!(spec.os.as_ref().map(|os| os.name.as_str()), Some("linux"));
    assert_eq!(spec.runtime_class_name, None);

    let mut r = run();
    r.spec.timeout_seconds = None;
    assert_eq!(spec_of(&build(&r)).active_deadline_seconds, Some(DEFAULT_TIMEOUT_SECONDS as i64 + 300));
}

fn spec_of(objects: &SandboxObjects) -> PodSpec {
    spec(objects).clone()
}

#[test]
fn settings_are_applied() {
    let quantities = |cpu: &str, memory: &str| {
        BTreeMap::from([("cpu".to_string(), Quantity(cpu.into())), ("memory".to_string(), Quantity(memory.into()))])
    };
    let runner_resources =
        ResourceRequirements { limits: Some(quantities("3", "3Gi")), ..ResourceRequirements::default() };
    let sandbox_resources = ResourceRequirements {
        requests: Some(quantities("1", "1Gi")),
        limits: Some(quantities("4", "8Gi")),
        ..ResourceRequirements::default()
    };
    let toleration = Toleration {
        key: Some("sandbox".to_string()),
        operator: Some("Exists".to_string()),
        effect: Some("NoSchedule".to_string()),
        ..Toleration::default()
    };
    let settings = SandboxSettings {
        image: "registry.example/yuxi-operator:1.2.3".to_string(),
        sandbox_image: "registry.example/yuxi-toolbox:1.2.3".to_string(),
        image_pull_policy: Some("IfNotPresent".to_string()),
        image_pull_secrets: vec!["registry-credentials".to_string()],
        runtime_class_name: Some("gvisor".to_string()),
        priority_class_name: Some("batch-low".to_string()),
        node_selector: BTreeMap::from([("yuxi.dev/sandbox".to_string(), "true".to_string())]),
        tolerations: vec![toleration.clone()],
        pod_labels: BTreeMap::from([
            ("team".to_string(), "research".to_string()),
            (RUN_LABEL.to_string(), "overridden?".to_string()),
        ]),
        pod_annotations: BTreeMap::from([("example.com/audit".to_string(), "on".to_string())]),
        run_as_user: 1000,
        run_as_group: 2000,
        fs_group: 3000,
        host_users: Some(false),
        runner_resources: runner_resources.clone(),
        sandbox_resources: sandbox_resources.clone(),
        tmp_size_limit: Quantity("5Gi".to_string()),
        deadline_grace_seconds: 60,
        user_data_claim: "user-files".to_string(),
        skills_claim: "skill-scopes".to_string(),
        ..SandboxSettings::default()
    };
    let objects = sandbox_objects(&run(), &agent(), &settings).expect("a pod");
    let spec = spec(&objects);
    assert_eq!(spec.runtime_class_name.as_deref(), Some("gvisor"));
    assert_eq!(spec.priority_class_name.as_deref(), Some("batch-low"));
    assert_eq!(spec.node_selector, Some(settings.node_selector.clone()));
    assert_eq!(spec.tolerations, Some(vec![toleration]));
    assert_eq!(
        spec.image_pull_secrets.iter().flatten().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["registry-credentials"]
    );
    assert_eq!(spec.host_users, Some(false));
    assert_eq!(spec.active_deadline_seconds, Some(1800 + 60));
    let pod_security = spec.security_context.as_ref().expect("pod security context");
    assert_eq!(
        (pod_security.run_as_user, pod_security.run_as_group, pod_security.fs_group),
        (Some(1000), Some(2000), Some(3000))
    );
    let runner = container(&objects, RUNNER_CONTAINER);
    let sandbox = container(&objects, SANDBOX_CONTAINER);
    assert_eq!(runner.resources, Some(runner_resources));
    assert_eq!(sandbox.resources, Some(sandbox_resources));
    assert_eq!(runner.image.as_deref(), Some("registry.example/yuxi-operator:1.2.3"));
    assert_eq!(sandbox.image.as_deref(), Some("registry.example/yuxi-toolbox:1.2.3"));
    for c in [runner, sandbox] {
        assert_eq!(c.image_pull_policy.as_deref(), Some("IfNotPresent"));
    }
    for tmp in ["runner-tmp", "sandbox-tmp"] {
        let size = volume(&objects, tmp).and_then(|v| v.empty_dir.clone()).and_then(|e| e.size_limit);
        assert_eq!(size, Some(Quantity("5Gi".to_string())), "{tmp}");
    }
    // Two claims, two volumes.
    let claim =
        |name: &str| volume(&objects, name).and_then(|v| v.persistent_volume_claim.clone()).map(|c| c.claim_name);
    assert_eq!(claim("user-data").as_deref(), Some("user-files"));
    assert_eq!(claim("skills").as_deref(), Some("skill-scopes"));
    assert_eq!(mount_at(runner, Scope::Skills.virtual_root()).map(|m| m.0).as_deref(), Some("skills"));
    // Extra labels and annotations are added; the builder's own win.
    let labels = objects.pod.metadata.labels.clone().expect("labels");
    assert_eq!(labels.get("team").map(String::as_str), Some("research"));
    assert_eq!(labels.get(RUN_LABEL).map(String::as_str), Some("explore"));
    let annotations = objects.pod.metadata.annotations.clone().expect("annotations");
    assert_eq!(annotations.get("example.com/audit").map(String::as_str), Some("on"));

    // With one claim for both, one volume.
    let objects = build(&run());
    assert_eq!(
        spec_of(&objects).volumes.iter().flatten().filter(|v| v.persistent_volume_claim.is_some()).count(),
        2,
        "the data claim and the skills library"
    );
    assert_eq!(claim_of(&objects, "data").as_deref(), Some("yuxi-data"));
}

fn claim_of(objects: &SandboxObjects, name: &str) -> Option<String> {
    volume(objects, name).and_then(|v| v.persistent_volume_claim.clone()).map(|c| c.claim_name)
}

#[test]
fn unusable_settings_are_refused_naming_the_setting() {
    let cases: Vec<(&str, SandboxSettings)> = vec![
        ("runAsUser", SandboxSettings { run_as_user: 0, ..SandboxSettings::default() }),
        ("runAsGroup", SandboxSettings { run_as_group: 0, ..SandboxSettings::default() }),
        ("fsGroup", SandboxSettings { fs_group: -1, ..SandboxSettings::default() }),
        ("image", SandboxSettings { image: " ".to_string(), ..SandboxSettings::default() }),
        ("sandboxImage", SandboxSettings { sandbox_image: String::new(), ..SandboxSettings::default() }),
        ("imagePullPolicy", SandboxSettings { image_pull_policy: Some("Sometimes".into()), ..Default::default() }),
        ("deadlineGraceSeconds", SandboxSettings { deadline_grace_seconds: -1, ..SandboxSettings::default() }),
        ("userDataClaim", SandboxSettings { user_data_claim: "Not_A_Name".into(), ..SandboxSettings::default() }),
        ("skillsLibraryClaim", SandboxSettings { skills_library_claim: Some(String::new()), ..Default::default() }),
        (
            "redisUrlSecret.key",
            SandboxSettings {
                redis_url_secret: SecretKey { name: "redis".into(), key: String::new() },
                ..SandboxSettings::default()
            },
        ),
        (
            "mcpServers",
            SandboxSettings {
                mcp_servers: BTreeMap::from([("docs".to_string(), serde_json::json!({"uri": "http://docs"}))]),
                ..SandboxSettings::default()
            },
        ),
    ];
    for (field, settings) in cases {
        let err = sandbox_objects(&run(), &agent(), &settings).expect_err(field);
        assert_eq!(err.field(), field, "{err}");
        assert!(err.to_string().starts_with(&format!("sandbox settings {field}: ")), "{err}");
    }
}

#[test]
fn mcp_servers_go_into_the_inputs_and_the_runner_reads_them_there() {
    let settings = SandboxSettings {
        mcp_servers: BTreeMap::from([(
            "docs".to_string(),
            serde_json::json!({"url": "http://docs-mcp:8000/mcp", "tools": ["search"]}),
        )]),
        ..SandboxSettings::default()
    };
    let objects = sandbox_objects(&run(), &agent(), &settings).expect("a pod");
    let text = objects.inputs.string_data.as_ref().and_then(|d| d.get(MCP_SERVERS_KEY)).expect("mcp-servers.yaml");
    let servers: crate::run::inputs::McpServers = serde_norway::from_str(text).expect("the runner's format");
    assert_eq!(servers["docs"].url, "http://docs-mcp:8000/mcp");
    assert_eq!(servers["docs"].tools.as_deref(), Some(&["search".to_string()][..]));
    let runner = container(&objects, RUNNER_CONTAINER);
    assert_eq!(
        env_value(runner, "YUXI_MCP_SERVERS").and_then(|e| e.value.as_deref()),
        Some("/etc/yuxi/inputs/mcp-servers.yaml")
    );
}

#[test]
fn an_mcp_servers_secret_header_reaches_the_runner_container_alone_never_the_inputs_or_the_sandbox() {
    let settings = SandboxSettings {
        mcp_servers: BTreeMap::from([(
            "docs".to_string(),
            serde_json::json!({"url": "http://docs-mcp:8000/mcp", "headers": {
                "Authorization": {"secretKeyRef": {"name": "docs-token", "key": "token"}, "prefix": "Bearer "}}}),
        )]),
        ..SandboxSettings::default()
    };
    let objects = sandbox_objects(&run(), &agent(), &settings).expect("a pod");
    let text = objects.inputs.string_data.as_ref().and_then(|d| d.get(MCP_SERVERS_KEY)).expect("mcp-servers.yaml");
    let servers: crate::run::inputs::McpServers = serde_norway::from_str(text).expect("the runner's format");
    let auth = &servers["docs"].headers["Authorization"];
    assert_eq!((auth.env.as_deref(), auth.secret_key_ref.is_none()), (Some("YUXI_MCP_HEADER_0"), true));
    let from = |c: &k8s_openapi::api::core::v1::Container| {
        env_value(c, "YUXI_MCP_HEADER_0")
            .and_then(|e| e.value_from.as_ref()?.secret_key_ref.as_ref())
            .map(|s| (s.name.clone(), s.key.clone()))
    };
    assert_eq!(from(container(&objects, RUNNER_CONTAINER)), Some(("docs-token".to_string(), "token".to_string())));
    assert_eq!(from(container(&objects, SANDBOX_CONTAINER)), None);
    // A header with two sources is refused with the settings.
    let bad = SandboxSettings {
        mcp_servers: BTreeMap::from([(
            "docs".to_string(),
            serde_json::json!({"url": "http://docs", "headers": {"X-Key": {"value": "a", "env": "B"}}}),
        )]),
        ..SandboxSettings::default()
    };
    let err = sandbox_objects(&run(), &agent(), &bad).expect_err("refused");
    assert_eq!(err.field(), "mcpServers.docs.headers", "{err}");
}

#[test]
fn a_remote_subagents_secret_header_reaches_the_runner_container_alone() {
    let mut remote = agent();
    remote.spec.remote = Some(serde_json::from_value(serde_json::json!({"a2a": {
        "cardUrl": "https://agents.example.com/.well-known/agent-card.json",
        "headers": [{"name": "X-Trace", "value": "on"}, {"name": "Authorization", "secretKeyRef": {"name": "remote-token", "key": "token"}, "prefix": "Bearer "}],
    }})).expect("a remote"));
    let objects = sandbox_objects(&run(), &remote, &SandboxSettings::default()).expect("a pod");
    let from = |c: &k8s_openapi::api::core::v1::Container| {
        env_value(c, "YUXI_REMOTE_HEADER_1")
            .and_then(|e| e.value_from.as_ref()?.secret_key_ref.as_ref())
            .map(|s| (s.name.clone(), s.key.clone()))
    };
    assert_eq!(from(container(&objects, RUNNER_CONTAINER)), Some(("remote-token".to_string(), "token".to_string())));
    assert_eq!(from(container(&objects, SANDBOX_CONTAINER)), None);
    assert!(
        env_value(container(&objects, RUNNER_CONTAINER), "YUXI_REMOTE_HEADER_0").is_none(),
        "a plain value stays in the Agent"
    );
}

#[test]
fn the_agent_must_be_the_one_the_run_names() {
    let mut other = agent();
    other.metadata.name = Some("fact-verifier".to_string());
    let err = sandbox_objects(&run(), &other, &SandboxSettings::default()).expect_err("mismatch");
    assert_eq!(err.field(), "spec.agent");
    assert!(err.to_string().contains("fact-verifier"), "{err}");

    let mut nameless = run();
    nameless.metadata.name = None;
    let err = sandbox_objects(&nameless, &agent(), &SandboxSettings::default()).expect_err("no name");
    assert_eq!(err, PodError::MissingName);
}

#[test]
fn labels_and_annotations_link_pod_run_agent_and_thread() {
    let objects = build(&run());
    let labels = objects.pod.metadata.labels.clone().expect("labels");
    let expected = [
        ("app.kubernetes.io/name", "yuxi-sandbox"),
        ("app.kubernetes.io/managed-by", "yuxi-operator"),
        (RUN_LABEL, "explore"),
        (AGENT_LABEL, "research-explorer"),
        (THREAD_LABEL, "thread-1_sub_research-explorer_4f2a9c1e"),
    ];
    for (key, value) in expected {
        assert_eq!(labels.get(key).map(String::as_str), Some(value), "{key}");
    }
    assert_eq!(objects.inputs.metadata.labels.as_ref(), Some(&labels));
    let annotations = objects.pod.metadata.annotations.clone().expect("annotations");
    assert_eq!(annotations.get(THREAD_ANNOTATION).map(String::as_str), Some("thread-1_sub_research-explorer_4f2a9c1e"));
    assert_eq!(objects.pod.metadata.namespace.as_deref(), Some("team-a"));
    assert_eq!(objects.inputs.metadata.namespace.as_deref(), Some("team-a"));
}

#[test]
fn label_values_stay_valid_for_long_and_odd_ids() {
    let parent = "p".repeat(176);
    let long_child = crate::run::thread_id::child_thread_id(&parent, &"s".repeat(63), 0xdeadbeef);
    assert_eq!(long_child.len(), 253);
    let ids = [
        long_child.clone(),
        "a".repeat(64),
        "thread_".to_string(),
        "thread-".to_string(),
        "thread.".to_string(),
        format!("{}_", "x".repeat(62)),
        "T_1.2-3".to_string(),
        "a".repeat(63),
        "a".to_string(),
        "-leading".to_string(),
        "with space/and slash".to_string(),
        "_".repeat(80),
    ];
    let mut seen = std::collections::BTreeSet::new();
    for id in &ids {
        let value = label_value(id);
        assert!(is_label_value(&value), "{id:?} gave {value:?}");
        assert_eq!(label_value(id), value, "stable");
        assert!(seen.insert(value.clone()), "{id:?} gave a value another id gave: {value:?}");
        if is_label_value(id) {
            assert_eq!(&value, id, "a valid value is kept as it is");
        }
    }
    // Two long ids that share their first 54 characters still differ.
    let a = format!("{}{}", "t".repeat(60), "a");
    let b = format!("{}{}", "t".repeat(60), "b");
    assert_ne!(label_value(&a), label_value(&b));

    // Through the builder: a long thread id is labelled by its value, annotated in full.
    let mut r = run();
    r.spec.parent.as_mut().expect("parent").thread_id = parent;
    r.spec.agent = "s".repeat(63);
    r.spec.thread_id = Some(long_child.clone());
    r.metadata.name = Some(format!("{}.{}", "r".repeat(120), "x".repeat(120)));
    let mut a = agent();
    a.metadata.name = Some("s".repeat(63));
    let objects = sandbox_objects(&r, &a, &SandboxSettings::default()).expect("a pod");
    for (key, value) in objects.pod.metadata.labels.as_ref().expect("labels") {
        assert!(is_label_value(value), "{key}: {value:?}");
    }
    assert_eq!(objects.pod.metadata.annotations.as_ref().and_then(|a| a.get(THREAD_ANNOTATION)), Some(&long_child));
}

#[test]
fn object_names_are_valid_and_stable() {
    let name_of = |name: &str| {
        let mut r = run();
        r.metadata.name = Some(name.to_string());
        r
    };
    assert_eq!(pod_name(&name_of("explore")), "explore");
    assert_eq!(inputs_name(&name_of("explore")), "explore-inputs");
    assert_eq!(credentials_secret_name(&name_of("explore")), "explore-credentials");
    let names = [
        "a".repeat(63),
        "a".repeat(64),
        "a".repeat(253),
        "run.with.dots".to_string(),
        "run-with-dots".to_string(),
        format!("{}.{}", "a".repeat(53), "b".repeat(100)),
        format!("{}-{}", "a".repeat(53), "b".repeat(100)),
        "1.2.3".to_string(),
    ];
    let mut seen = std::collections::BTreeSet::new();
    for name in &names {
        let r = name_of(name);
        let pod = pod_name(&r);
        assert!(is_dns1123_label(&pod), "{name}: {pod}");
        assert_eq!(pod_name(&r), pod, "stable");
        assert!(seen.insert(pod.clone()), "{name} shares its pod name {pod}");
        for other in [inputs_name(&r), credentials_secret_name(&r)] {
            assert!(is_dns1123_label(&other), "{name}: {other}");
            assert!(seen.insert(other.clone()), "{name} shares the name {other}");
        }
        assert_eq!(build(&r).pod.metadata.name.as_deref(), Some(pod.as_str()));
    }
}

#[test]
fn both_objects_are_owned_by_the_run_when_it_has_a_uid() {
    let objects = build(&run());
    let expected = vec![OwnerReference {
        api_version: "yuxi.dev/v1alpha1".to_string(),
        kind: "AgentRun".to_string(),
        name: "explore".to_string(),
        uid: "0f7c1d2e-0000-4000-8000-000000000001".to_string(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }];
    assert_eq!(objects.pod.metadata.owner_references.as_ref(), Some(&expected));
    assert_eq!(objects.inputs.metadata.owner_references.as_ref(), Some(&expected));

    let mut r = run();
    r.metadata.uid = None;
    let objects = build(&r);
    assert_eq!(objects.pod.metadata.owner_references, None);
    assert_eq!(objects.inputs.metadata.owner_references, None);
}

#[test]
fn the_inputs_read_back_as_the_run_and_the_agent() {
    let mut r = run();
    r.metadata.resource_version = Some("42".to_string());
    r.metadata.managed_fields = Some(vec![Default::default()]);
    r.metadata.annotations =
        Some(BTreeMap::from([("kubectl.kubernetes.io/last-applied-configuration".to_string(), "{}".to_string())]));
    r.status = Some(crate::resources::AgentRunStatus { attempts: Some(1), ..Default::default() });
    let objects = build(&r);
    assert_eq!(objects.inputs.immutable, Some(true));
    assert_eq!(objects.inputs.metadata.name.as_deref(), Some("explore-inputs"));
    let data = objects.inputs.string_data.as_ref().expect("data");
    let run_back = match parse_manifests(&data[RUN_KEY]).expect("run.yaml").as_slice() {
        [Manifest::AgentRun(run)] => (**run).clone(),
        other => panic!("run.yaml holds {other:?}"),
    };
    assert_eq!(run_back.spec, r.spec);
    assert_eq!(run_back.metadata.name, r.metadata.name);
    assert_eq!(run_back.metadata.namespace, r.metadata.namespace);
    assert_eq!(run_back.metadata.uid, r.metadata.uid);
    assert_eq!((run_back.metadata.managed_fields, run_back.metadata.resource_version), (None, None));
    assert_eq!(run_back.metadata.annotations, None);
    assert_eq!(run_back.status, None);
    let agent_back = match parse_manifests(&data[AGENT_KEY]).expect("agent.yaml").as_slice() {
        [Manifest::Agent(agent)] => (**agent).clone(),
        other => panic!("agent.yaml holds {other:?}"),
    };
    assert_eq!(agent_back.spec, agent().spec);
    assert_eq!(agent_back.metadata.name.as_deref(), Some("research-explorer"));
    // A Secret, not a ConfigMap the `view` role could read; the volume points at it, readable by its
    // owner only.
    assert_eq!(objects.inputs.type_.as_deref(), Some("Opaque"));
    let source = volume(&objects, "inputs").and_then(|v| v.secret.clone()).expect("secret volume");
    assert_eq!((source.secret_name.as_deref(), source.default_mode), (Some("explore-inputs"), Some(0o400)));
}

#[test]
fn the_same_inputs_give_the_same_objects() {
    assert_eq!(build(&run()), build(&run()));
    let objects = build(&run());
    let yaml = to_yaml(&objects).expect("yaml");
    let mut documents = yaml.split("\n---\n");
    let pod: Pod = serde_norway::from_str(documents.next().expect("pod")).expect("a Pod");
    let inputs: Secret = serde_norway::from_str(documents.next().expect("inputs")).expect("a Secret");
    assert_eq!((pod, inputs), (objects.pod, objects.inputs));
}

#[test]
fn settings_read_from_yaml_name_the_field_at_fault() {
    assert_eq!(SandboxSettings::from_yaml("").expect("empty"), SandboxSettings::default());
    assert_eq!(SandboxSettings::from_yaml("# nothing\n").expect("comments"), SandboxSettings::default());
    let defaults = serde_norway::to_string(&SandboxSettings::default()).expect("yaml");
    assert_eq!(SandboxSettings::from_yaml(&defaults).expect("round trip"), SandboxSettings::default());

    let text = "runtimeClassName: gvisor
skillsLibraryClaim: null
runnerResources:
  limits: {cpu: '2'}
tolerations:
- {key: sandbox, operator: Exists}
";
    let settings = SandboxSettings::from_yaml(text).expect("settings");
    assert_eq!(settings.runtime_class_name.as_deref(), Some("gvisor"));
    assert_eq!(settings.skills_library_claim, None);
    assert_eq!(settings.run_as_user, 65532, "unset fields keep their defaults");
    assert_eq!(settings.tolerations.len(), 1);

    for (text, field) in [
        ("runtimeClassname: gvisor\n", "runtimeClassname"),
        ("runAsUser: many\n", "runAsUser"),
        ("redisUrlSecret: {name: r}\n", "redisUrlSecret"),
        ("redisUrlSecret: {name: r, key: k, extra: 1}\n", "redisUrlSecret.extra"),
        ("nodeSelector: [a]\n", "nodeSelector"),
    ] {
        let err = SandboxSettings::from_yaml(text).expect_err(text);
        assert_eq!(err.field, field, "{text:?}: {err}");
        assert!(err.to_string().starts_with(&format!("{field}: ")), "{text:?}: {err}");
    }
    let err = SandboxSettings::from_yaml("runtimeClassname: gvisor\n").expect_err("unknown");
    assert!(err.message.contains("runtimeClassname"), "{err}");
    let err = SandboxSettings::from_yaml("a: [").expect_err("not yaml");
    assert_eq!(err.field, "settings");
    assert!(err.message.starts_with("not valid YAML"), "{err}");
}

#[test]
fn a_run_with_generate_name_only_has_no_pod_yet() {
    let r = AgentRun {
        metadata: ObjectMeta { generate_name: Some("explore-".to_string()), ..ObjectMeta::default() },
        ..run()
    };
    assert_eq!(sandbox_objects(&r, &agent(), &SandboxSettings::default()), Err(PodError::MissingName));
}

#[test]
fn the_yaml_reads_back_the_same_and_quotes_what_yaml_1_1_would_misread() {
    let tricky = [
        "on",
        "On",
        "OFF",
        "y",
        "N",
        "yes",
        "No",
        "true",
        "False",
        "null",
        "~",
        "",
        " lead",
        "trail ",
        "1:20",
        "0x1F",
        "0o17",
        "017",
        "1_000",
        "1e3",
        ".5",
        ".inf",
        "-.inf",
        ".nan",
        "123",
        "-1",
        "+1",
        "a: b",
        "a #b",
        "#x",
        "- x",
        "? x",
        "!tag",
        "&a",
        "*a",
        "@x",
        "`x",
        "%x",
        "|x",
        ">x",
        "'x'",
        "\"x\"",
        "[x]",
        "{x}",
        "x:",
        "é",
        "tab\there",
        "cr\rhere",
        "bell\u{7}",
        "bom\u{feff}",
        "line\u{2028}sep",
        "c1\u{85}",
        "100m",
        "yuxi.dev/v1alpha1",
        "/home/gem",
        "http://x:8080/mcp",
        "FallbackToLogsOnError",
        "a,b",
        "<<",
        "=",
        "multi\nline",
        "ends\n",
        "ends twice\n\n",
        "\nleading blank",
        " indented\nfirst",
        "last\n  indented",
        "tabs\n\tin\n",
        "empty\n\nmiddle\n",
        "x\n\n\n",
    ];
    let value = serde_json::json!({
        "strings": tricky.to_vec(),
        "keys": tricky.iter().map(|s| (s.to_string(), serde_json::json!(s))).collect::<serde_json::Map<_, _>>(),
        "nested": [[{"a": [1, 2.5, true, null, {}, []]}], {"k": {"l": ["m", "on\nand on"]}}],
        "empty": {},
        "none": [],
    });
    let text = yaml::document(&value);
    let back: serde_json::Value = serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{e}:\n{text}"));
    assert_eq!(back, value, "{text}");
    for word in ["on", "On", "OFF", "y", "N", "yes", "No", "1:20", "1_000"] {
        assert!(text.contains(&format!("- \"{word}\"\n")), "{word} is quoted:\n{text}");
    }
    assert!(text.contains("- /home/gem\n") && text.contains("- FallbackToLogsOnError\n"), "{text}");
    assert!(text.contains("- |-\n  multi\n  line\n"), "{text}");
    for plain in ["a", "app.kubernetes.io/name", "yuxi-operator:0.1.0", "RuntimeDefault", "a b"] {
        assert!(yaml::is_plain(plain), "{plain}");
    }
}
