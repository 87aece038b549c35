//! The McpServers the operator runs (`spec.deploy`): a Deployment and a Service named after the
//! McpServer, owned by it (deleted with it), under the restricted Pod Security Standard as the sandbox
//! pods are (non-root uid 65532, seccomp `RuntimeDefault`, no privilege escalation, every capability
//! dropped, a read-only root with a writable `/tmp`), with no service account token and no service
//! links. The Service is `http://<name>.<namespace>.svc:<port>`, where discovery and runs reach it.
//!
//! A Deployment or Service of that name that the McpServer does not own is left alone, and the server
//! is refused (`Accepted False`, `NameTaken`); when `deploy` goes, the ones it owns are deleted.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EmptyDirVolumeSource, EnvVar, EnvVarSource, PodSpec, PodTemplateSpec, Probe,
    ResourceRequirements, SecretKeySelector, Service, ServicePort, ServiceSpec, TCPSocketAction, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::{Resource, ResourceExt};

use super::pod::security::{container_security, pod_security};
use super::pod::settings::SandboxSettings;
use crate::resources::mcp_server::{DEFAULT_DEPLOY_PORT, McpServer, McpServerDeploy};
use crate::resources::names::{FIELD_MANAGER, MANAGED_BY};

/// The label naming the McpServer of a Deployment, its pods and its Service.
pub const MCP_SERVER_LABEL: &str = "yuxi.dev/mcp-server";
/// `app.kubernetes.io/name` of every server the operator runs.
pub const APP_NAME: &str = "yuxi-mcp-server";
/// The container's name, and its port's.
const CONTAINER: &str = "mcp-server";
const PORT_NAME: &str = "mcp";

/// The labels of `server`'s objects; the last one selects its pods.
fn labels(server: &McpServer) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_string(), APP_NAME.to_string()),
        ("app.kubernetes.io/managed-by".to_string(), MANAGED_BY.to_string()),
        (MCP_SERVER_LABEL.to_string(), server.name_any()),
    ])
}

fn metadata(server: &McpServer) -> ObjectMeta {
    ObjectMeta {
        name: Some(server.name_any()),
        namespace: server.namespace(),
        labels: Some(labels(server)),
        owner_references: server.controller_owner_ref(&()).map(|owner| vec![owner]),
        ..ObjectMeta::default()
    }
}

/// The Deployment that runs `deploy` for `server`.
pub fn deployment_of(server: &McpServer, deploy: &McpServerDeploy) -> Deployment {
    let port = i32::from(deploy.port.unwrap_or(DEFAULT_DEPLOY_PORT));
    let env = deploy
        .env
        .iter()
        .map(|variable| EnvVar {
            name: variable.name.clone(),
            value: variable.value.clone(),
            value_from: variable.secret_key_ref.as_ref().map(|key| EnvVarSource {
                secret_key_ref: Some(SecretKeySelector {
                    name: key.name.clone(),
                    key: key.key.clone(),
                    optional: Some(false),
                }),
                ..EnvVarSource::default()
            }),
        })
        .collect::<Vec<_>>();
    let selector = BTreeMap::from([(MCP_SERVER_LABEL.to_string(), server.name_any())]);
    let container = Container {
        name: CONTAINER.into(),
        image: Some(deploy.image.clone()),
        command: deploy.command.clone(),
        args: deploy.args.clone(),
        env: (!env.is_empty()).then_some(env),
        ports: Some(vec![ContainerPort {
            name: Some(PORT_NAME.into()),
            container_port: port,
            protocol: Some("TCP".into()),
            ..ContainerPort::default()
        }]),
        readiness_probe: Some(Probe {
            tcp_socket: Some(TCPSocketAction { port: IntOrString::String(PORT_NAME.into()), host: None }),
            period_seconds: Some(5),
            ..Probe::default()
        }),
        resources: deploy.resources.as_ref().map(|r| {
            let amounts = |given: &Option<crate::resources::mcp_server::ResourceAmounts>| {
                given
                    .as_ref()
                    .map(|a| a.named().into_iter().map(|(k, v)| (k.to_string(), Quantity(v.to_string()))).collect())
            };
            ResourceRequirements {
                requests: amounts(&r.requests),
                limits: amounts(&r.limits),
                ..ResourceRequirements::default()
            }
        }),
        security_context: Some(container_security()),
        volume_mounts: Some(vec![VolumeMount {
            name: "tmp".into(),
            mount_path: "/tmp".into(),
            ..VolumeMount::default()
        }]),
        ..Container::default()
    };
    let pod = PodSpec {
        containers: vec![container],
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        security_context: Some(pod_security(&SandboxSettings::default())),
        volumes: Some(vec![Volume {
            name: "tmp".into(),
            empty_dir: Some(EmptyDirVolumeSource { medium: None, size_limit: Some(Quantity("256Mi".into())) }),
            ..Volume::default()
        }]),
        ..PodSpec::default()
    };
    Deployment {
        metadata: metadata(server),
        spec: Some(DeploymentSpec {
            replicas: Some(deploy.replicas.unwrap_or(1).clamp(1, 10)),
            selector: LabelSelector { match_labels: Some(selector), match_expressions: None },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(labels(server)), ..ObjectMeta::default() }),
                spec: Some(pod),
            },
            ..DeploymentSpec::default()
        }),
        status: None,
    }
}

/// The Service in front of `server`'s pods, on `deploy`'s port.
pub fn service_of(server: &McpServer, deploy: &McpServerDeploy) -> Service {
    let port = i32::from(deploy.port.unwrap_or(DEFAULT_DEPLOY_PORT));
    Service {
        metadata: metadata(server),
        spec: Some(ServiceSpec {
            selector: Some(BTreeMap::from([(MCP_SERVER_LABEL.to_string(), server.name_any())])),
            ports: Some(vec![ServicePort {
                name: Some(PORT_NAME.into()),
                port,
                target_port: Some(IntOrString::String(PORT_NAME.into())),
                protocol: Some("TCP".into()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// Whether `meta` is of an object `server` owns.
fn owned(meta: &ObjectMeta, server: &McpServer) -> bool {
    let uid = server.metadata.uid.as_deref();
    meta.owner_references.iter().flatten().any(|owner| Some(owner.uid.as_str()) == uid)
}

/// Makes `server`'s Deployment and Service what its `deploy` says, or deletes those it owns when it runs
/// none. `Ok(Err(why))` when an object of that name is someone else's (left alone). Errors: the
/// Kubernetes API.
pub async fn reconcile(client: &kube::Client, server: &McpServer) -> Result<Result<(), String>, kube::Error> {
    let namespace = server.namespace().unwrap_or_default();
    let name = server.name_any();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &namespace);
    let services: Api<Service> = Api::namespaced(client.clone(), &namespace);
    let found_deployment = deployments.get_opt(&name).await?;
    let found_service = services.get_opt(&name).await?;
    let Some(deploy) = &server.spec.deploy else {
        if found_deployment.as_ref().is_some_and(|d| owned(&d.metadata, server)) {
            deployments.delete(&name, &DeleteParams::background()).await?;
        }
        if found_service.as_ref().is_some_and(|s| owned(&s.metadata, server)) {
            services.delete(&name, &DeleteParams::background()).await?;
        }
        return Ok(Ok(()));
    };
    if found_deployment.as_ref().is_some_and(|d| !owned(&d.metadata, server))
        || found_service.as_ref().is_some_and(|s| !owned(&s.metadata, server))
    {
        return Ok(Err(format!(
            "spec.deploy: a Deployment or Service named {name:?} exists in the namespace and is not this McpServer's"
        )));
    }
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let mut deployment = serde_json::to_value(deployment_of(server, deploy)).unwrap_or_default();
    deployment["apiVersion"] = "apps/v1".into();
    deployment["kind"] = "Deployment".into();
    deployments.patch(&name, &params, &Patch::Apply(&deployment)).await?;
    let mut service = serde_json::to_value(service_of(server, deploy)).unwrap_or_default();
    service["apiVersion"] = "v1".into();
    service["kind"] = "Service".into();
    services.patch(&name, &params, &Patch::Apply(&service)).await?;
    Ok(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server() -> McpServer {
        let mut server: McpServer = serde_norway::from_str(
            "metadata: {name: docs, namespace: team-a, uid: u-1}\nspec:\n  deploy:\n    image: registry.example/docs-mcp:1\n    args: [--port, '9000']\n    port: 9000\n    env:\n    - {name: MODE, value: read}\n    - {name: TOKEN, secretKeyRef: {name: docs, key: token}}\n    resources: {limits: {cpu: 500m, memory: 256Mi}}\n",
        )
        .expect("an McpServer");
        server.metadata.uid = Some("u-1".into());
        server
    }

    #[test]
    fn a_deployed_server_runs_restricted_and_is_reached_through_its_service() {
        let server = server();
        let deploy = server.spec.deploy.clone().expect("deploy");
        let deployment = deployment_of(&server, &deploy);
        let owner = &deployment.metadata.owner_references.as_ref().expect("owned")[0];
        assert_eq!((owner.kind.as_str(), owner.uid.as_str(), owner.controller), ("McpServer", "u-1", Some(true)));
        let pod = deployment.spec.as_ref().and_then(|s| s.template.spec.clone()).expect("a pod");
        assert_eq!((pod.automount_service_account_token, pod.enable_service_links), (Some(false), Some(false)));
        let security = pod.security_context.expect("pod security");
        assert_eq!(
            (security.run_as_non_root, security.seccomp_profile.map(|p| p.type_)),
            (Some(true), Some("RuntimeDefault".into()))
        );
        let container = &pod.containers[0];
        let hardened = container.security_context.clone().expect("container security");
        assert_eq!(
            (
                hardened.allow_privilege_escalation,
                hardened.read_only_root_filesystem,
                hardened.capabilities.and_then(|c| c.drop)
            ),
            (Some(false), Some(true), Some(vec!["ALL".to_string()]))
        );
        assert_eq!(container.ports.as_ref().expect("ports")[0].container_port, 9000);
        let limits = container.resources.as_ref().and_then(|r| r.limits.clone()).expect("limits");
        assert_eq!((limits["cpu"].0.as_str(), limits["memory"].0.as_str()), ("500m", "256Mi"));
        let env = container.env.clone().expect("env");
        assert_eq!(env[0].value.as_deref(), Some("read"));
        let secret = env[1].value_from.as_ref().and_then(|v| v.secret_key_ref.clone()).expect("from a Secret");
        assert_eq!((secret.name.as_str(), secret.key.as_str()), ("docs", "token"));
        let service = service_of(&server, &deploy);
        let spec = service.spec.expect("a spec");
        assert_eq!(spec.selector, deployment.spec.expect("spec").selector.match_labels, "the Service selects the pods");
        assert_eq!(spec.ports.expect("ports")[0].port, 9000);
        assert_eq!(server.spec.endpoint("docs", "team-a"), "http://docs.team-a.svc:9000/mcp");
    }

    #[test]
    fn only_objects_the_server_owns_are_its() {
        let server = server();
        let deploy = server.spec.deploy.clone().expect("deploy");
        assert!(owned(&deployment_of(&server, &deploy).metadata, &server));
        assert!(!owned(&ObjectMeta { name: Some("docs".into()), ..ObjectMeta::default() }, &server));
    }
}
