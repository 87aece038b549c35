//! A namespace's own trace collector against the real API server, with the controller the chart
//! deploys: the `yuxi-traces` ConfigMap of a run's namespace names the collector, protocol and headers
//! Secret its runner container exports to, in place of the installation's.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::Api;
use kube::api::{DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

use crate::controller::{controller, eventually};
use crate::install::{SERVED, installed};

const TEAM_B: &str = SERVED[1];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespaces_yuxi_traces_config_map_names_its_runners_collector() {
    controller();
    let plane = installed().plane;
    let admin = plane.admin().await;
    let config_maps: Api<ConfigMap> = Api::namespaced(admin.clone(), TEAM_B);
    let config_map: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "yuxi-traces"},
        "data": {"endpoint": "http://tempo.team-b.svc:4317", "protocol": "grpc", "headersSecret": "team-b-otel"},
    }))
    .expect("a ConfigMap");
    config_maps.create(&PostParams::default(), &config_map).await.expect("created");

    crate::resources::grant_edit(plane, TEAM_B, "carol");
    let carol = plane.client("carol-token").await;
    let runs = Api::<DynamicObject>::namespaced_with(
        carol,
        TEAM_B,
        &ApiResource::from_gvk(&GroupVersionKind::gvk("yuxi.dev", "v1alpha1", "AgentRun")),
    );
    let name = crate::unique("team-b-traced");
    let run = json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "AgentRun", "metadata": {"name": name},
        "spec": {"agent": "general-purpose", "input": "Look around.", "uid": "alice", "timeoutSeconds": 600}});
    runs.create(&PostParams::default(), &serde_json::from_value(run).expect("run")).await.expect("AgentRun created");

    let pods: Api<Pod> = Api::namespaced(admin.clone(), TEAM_B);
    let pod =
        eventually("the run's pod", Duration::from_secs(60), || async { pods.get_opt(&name).await.ok().flatten() })
            .await;
    let spec = pod.spec.expect("spec");
    let runner = spec.containers.iter().find(|c| c.name == "runner").expect("runner");
    let env = runner.env.clone().unwrap_or_default();
    let value = |key: &str| env.iter().find(|v| v.name == key).and_then(|v| v.value.clone());
    assert_eq!(value("OTEL_EXPORTER_OTLP_ENDPOINT").as_deref(), Some("http://tempo.team-b.svc:4317"));
    assert_eq!(value("OTEL_EXPORTER_OTLP_PROTOCOL").as_deref(), Some("grpc"));
    let headers = env
        .iter()
        .find(|v| v.name == "OTEL_EXPORTER_OTLP_HEADERS")
        .and_then(|v| v.value_from.as_ref()?.secret_key_ref.clone())
        .expect("the headers from the team's Secret");
    assert_eq!((headers.name.as_str(), headers.key.as_str()), ("team-b-otel", "headers"));
    config_maps.delete("yuxi-traces", &Default::default()).await.expect("deleted");
}
