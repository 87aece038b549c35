//! The two containers: `runner` (the graph, and the only holder of secrets: the model key and the run's
//! credentials, from Secret key references) and `sandbox` (the `execute` tool's commands, with no
//! environment at all; a native sidecar). Each one's image, command, arguments, environment and
//! resources; the mounts come from [`super::volumes`], the hardening from [`super::security`].

use k8s_openapi::api::core::v1::{ConfigMapKeySelector, Container, EnvVar, EnvVarSource, SecretKeySelector};

use super::security::container_security;
use super::settings::SandboxSettings;
use super::volumes::Volumes;
use crate::resources::model::secrets::{Source, references};
use crate::resources::names::{CREDENTIALS_ANNOTATION, CREDENTIALS_TOKEN_KEY};
use crate::resources::{AgentRun, Model};
use crate::run::inputs::{
    AGENT_KEY, INPUTS_DIR, MCP_SERVERS_KEY, MODEL_KEY, RUN_KEY, SANDBOX_SOCKET, SKILLS_LIBRARY_DIR, env as env_names,
};
use crate::run::scope::{Scope, ScopeIds};

/// The name of the container that runs the graph (`yuxi-operator runner`).
pub const RUNNER_CONTAINER: &str = "runner";
/// The name of the sidecar container that runs `execute` commands (`yuxi-operator sandbox-exec`).
pub const SANDBOX_CONTAINER: &str = "sandbox";

fn env(name: &str, value: &str) -> EnvVar {
    EnvVar { name: name.to_string(), value: Some(value.to_string()), value_from: None }
}

fn secret_env(name: &str, secret: &str, key: &str, optional: bool) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value: None,
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.to_string(),
                key: key.to_string(),
                optional: optional.then_some(true),
            }),
            ..EnvVarSource::default()
        }),
    }
}

fn config_map_env(name: &str, config_map: &str, key: &str) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value: None,
        value_from: Some(EnvVarSource {
            config_map_key_ref: Some(ConfigMapKeySelector {
                name: config_map.to_string(),
                key: key.to_string(),
                optional: None,
            }),
            ..EnvVarSource::default()
        }),
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// The runner container of `run`: the graph, and the only holder of secrets (the model key and the run's
/// credentials).
pub(super) fn runner_container(
    run: &AgentRun,
    agent: &crate::resources::Agent,
    model: Option<&Model>,
    settings: &SandboxSettings,
    volumes: &Volumes,
    scopes: &ScopeIds,
) -> Container {
    let redis = &settings.redis_url_secret;
    let mut vars = vec![secret_env(env_names::REDIS_URL, &redis.name, &redis.key, false)];
    if settings.allow_unauthenticated_store {
        vars.push(env(env_names::ALLOW_UNAUTHENTICATED_STORE, "true"));
    }
    match model {
        // A run on a Model gets that Model's values and no other key: the installation's own key would
        // give a run of team A what team B's Models are paid with.
        Some(model) => {
            vars.push(env(env_names::MODEL_FILE, &format!("{INPUTS_DIR}/{MODEL_KEY}")));
            for reference in references(&model.spec) {
                vars.push(match reference.source {
                    Source::Secret => {
                        secret_env(&reference.env_name(), &reference.name, &reference.key, reference.optional)
                    }
                    Source::ConfigMap => config_map_env(&reference.env_name(), &reference.name, &reference.key),
                });
            }
        }
        None => {
            if let Some(secret) = &settings.openai_api_key_secret {
                vars.push(secret_env(env_names::OPENAI_API_KEY, &secret.name, &secret.key, true));
            }
        }
    }
    for (name, value) in [
        (env_names::OPENAI_BASE_URL, &settings.openai_base_url),
        (env_names::DEFAULT_MODEL, &settings.default_model),
        (env_names::FACADE_URL, &settings.facade_url),
    ] {
        if let Some(value) = value {
            vars.push(env(name, value));
        }
    }
    // The collector its spans go to, when there is one; its headers (a backend's key) from a Secret.
    if let Some(traces) = settings.traces.as_ref().filter(|t| !t.endpoint.is_empty()) {
        vars.push(env("OTEL_EXPORTER_OTLP_ENDPOINT", &traces.endpoint));
        vars.push(env("OTEL_SERVICE_NAME", "yuxi-operator-runner"));
        if let Some(ratio) = traces.sampler_ratio {
            vars.push(env("OTEL_TRACES_SAMPLER_ARG", &ratio.to_string()));
        }
        if let Some(protocol) = &traces.protocol {
            vars.push(env("OTEL_EXPORTER_OTLP_PROTOCOL", protocol));
        }
        if traces.capture_content {
            vars.push(env(crate::telemetry::CAPTURE_CONTENT_ENV, "true"));
        }
        if let Some(secret) = &traces.headers_secret {
            vars.push(secret_env("OTEL_EXPORTER_OTLP_HEADERS", &secret.name, &secret.key, false));
        }
    }
    // Only a run whose starter announced its credentials gets them; the controller checks the Secret
    // before it creates the pod ([`super::credentials`]).
    if let Some(secret) = run.metadata.annotations.as_ref().and_then(|a| a.get(CREDENTIALS_ANNOTATION)) {
        vars.push(secret_env(env_names::RUN_TOKEN, secret, CREDENTIALS_TOKEN_KEY, false));
    }
    if settings.skills_library_claim.is_some() {
        vars.push(env(env_names::SKILLS_LIBRARY, SKILLS_LIBRARY_DIR));
    }
    if !settings.mcp_servers.is_empty() {
        vars.push(env(env_names::MCP_SERVERS, &format!("{INPUTS_DIR}/{MCP_SERVERS_KEY}")));
        // The MCP servers' credentials: this container's variables, never the sandbox's.
        for variable in settings.mcp_for_pod().1 {
            vars.push(secret_env(&variable.env, &variable.secret.name, &variable.secret.key, false));
        }
    }
    // A remote subagent's headers from Secrets: this container's variables, never the sandbox's.
    let remote = agent.spec.remote.as_ref().and_then(|r| r.a2a.as_ref());
    for (index, header) in remote.map(|a2a| a2a.headers.as_slice()).unwrap_or_default().iter().enumerate() {
        if let Some(secret) = &header.secret_key_ref {
            vars.push(secret_env(&crate::resources::remote::header_env_name(index), &secret.name, &secret.key, false));
        }
    }
    Container {
        name: RUNNER_CONTAINER.to_string(),
        image: Some(settings.image.clone()),
        image_pull_policy: settings.image_pull_policy.clone(),
        command: Some(strings(&["yuxi-operator"])),
        args: Some(strings(&[
            "runner",
            "--run",
            &format!("{INPUTS_DIR}/{RUN_KEY}"),
            "--agent",
            &format!("{INPUTS_DIR}/{AGENT_KEY}"),
            "--sandbox-socket",
            SANDBOX_SOCKET,
        ])),
        env: Some(vars),
        resources: Some(settings.runner_resources.clone()),
        security_context: Some(container_security()),
        volume_mounts: Some(volumes.runner_mounts(scopes, settings)),
        termination_message_policy: Some("FallbackToLogsOnError".to_string()),
        ..Container::default()
    }
}

/// The sandbox container: the model's commands, with no secret and no environment; a native sidecar, so it
/// starts first and is stopped when the runner ends.
pub(super) fn sandbox_container(settings: &SandboxSettings, volumes: &Volumes, scopes: &ScopeIds) -> Container {
    Container {
        name: SANDBOX_CONTAINER.to_string(),
        image: Some(settings.sandbox_image.clone()),
        image_pull_policy: settings.image_pull_policy.clone(),
        command: Some(strings(&["yuxi-operator"])),
        args: Some(strings(&[
            "sandbox-exec",
            "--socket",
            SANDBOX_SOCKET,
            "--workdir",
            Scope::Workspace.virtual_root(),
        ])),
        restart_policy: Some("Always".to_string()),
        resources: Some(settings.sandbox_resources.clone()),
        security_context: Some(container_security()),
        volume_mounts: Some(volumes.sandbox_mounts(scopes)),
        ..Container::default()
    }
}
