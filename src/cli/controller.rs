//! `yuxi-operator controller`: the reconcilers (AgentRuns into sandbox pods and back into phases, Agents'
//! conditions), leader-elected, with `/metrics`, `/healthz` and `/readyz` on their own port.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use futures::FutureExt;
use tokio::sync::watch;
use yuxi_operator::controller::{
    agent_reconciler, decide, metrics::ControllerMetrics, model_prober, pod::SandboxSettings, run_reconciler,
};
use yuxi_operator::facade::http::metrics::CONTENT_TYPE_TEXT;
use yuxi_operator::store::Store;

use super::leader::{self, Leadership};
use super::serve::{bind, serve, shutdown_signal};

/// The controller's settings.
#[derive(clap::Args)]
pub struct ControllerArgs {
    /// A namespace to serve (repeatable); all namespaces when none is given.
    #[arg(long = "namespace", value_name = "NS")]
    namespaces: Vec<String>,
    /// Redis, where runners keep events, results and cancel requests.
    #[arg(long, env = "REDIS_URL", hide_env_values = true)]
    redis_url: String,
    /// Use a Redis that answers clients without a password (with a warning): anything that reaches it
    /// could read every conversation and forge run state. Refused by default.
    #[arg(long, env = yuxi_operator::run::inputs::env::ALLOW_UNAUTHENTICATED_STORE)]
    allow_unauthenticated_store: bool,
    /// The sandbox pods' settings: a YAML file (see the `controller::pod` module); defaults when absent.
    #[arg(long, env = "YUXI_SANDBOX_SETTINGS", value_name = "FILE")]
    sandbox_settings: Option<PathBuf>,
    /// Address of `/metrics`, `/healthz` and `/readyz`.
    #[arg(long, default_value = "0.0.0.0:8081", env = "YUXI_CONTROLLER_LISTEN")]
    listen: SocketAddr,
    /// The Lease replicas elect their leader with.
    #[arg(long, default_value = "yuxi-operator-controller")]
    lease_name: String,
    /// The namespace of the Lease (the controller's own).
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    lease_namespace: String,
    /// This replica's identity in the Lease (the pod's name); random when absent.
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    /// At most this many reconciles at once, per kind.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=256))]
    concurrency: u16,
    /// How long a cancelled run may take to stop before its pod is deleted, in seconds.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    cancel_grace_seconds: u64,
    /// Tokens one user's runs may use in a UTC day in one namespace; a run past it is not started
    /// (phase `Failed`, reason `QuotaExceeded`). Unset: no quota.
    #[arg(long, env = "YUXI_MAX_TOKENS_PER_USER_PER_DAY", value_parser = clap::value_parser!(i64).range(1..))]
    max_tokens_per_user_per_day: Option<i64>,
    /// Tokens all runs of one namespace may use in a UTC day; a run past it is not started. Unset: no
    /// quota.
    #[arg(long, env = "YUXI_MAX_TOKENS_PER_NAMESPACE_PER_DAY", value_parser = clap::value_parser!(i64).range(1..))]
    max_tokens_per_namespace_per_day: Option<i64>,
}

/// Serves the health endpoints at once, reconciles while this replica leads, and stops on SIGTERM or
/// Ctrl-C (exit status 0) or when the Lease is lost (exit status 1, so that the pod restarts and waits
/// again). Exit status 1 also when the cluster or Redis cannot be reached, the sandbox settings are not
/// valid, or the address cannot be bound.
pub fn run(args: ControllerArgs) -> ExitCode {
    super::run_async(reconcile(args))
}

async fn reconcile(args: ControllerArgs) -> anyhow::Result<()> {
    let client = super::connect(
        "the controller watches AgentRuns and Agents and creates pods through the Kubernetes API; run it in a cluster or with a kubeconfig",
    )
    .await?;
    let store = Store::connect_redis(
        &args.redis_url,
        yuxi_operator::store::StoreAuth::from_flag(args.allow_unauthenticated_store),
    )
    .await
    .map_err(|e| anyhow::anyhow!("cannot reach Redis (REDIS_URL): {e}"))?;
    let sandbox: SandboxSettings = match &args.sandbox_settings {
        None => SandboxSettings::default(),
        Some(path) => {
            let text =
                std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
            serde_path_to_error::deserialize(serde_norway::Deserializer::from_str(&text))
                .map_err(|e| anyhow::anyhow!("{}: {}: {}", path.display(), e.path(), e.inner()))?
        }
    };
    let metrics = ControllerMetrics::default();
    let (leading_tx, leading) = watch::channel(false);
    // Served until the controller returns, then dropped with whatever it is answering: probes and
    // scrapes are retried, and a stopping controller has nothing left to report.
    let health = {
        let listener = bind(args.listen)?;
        // Probes and scrapes only: a few connections at once.
        tokio::spawn(serve(listener, health_router(metrics.clone(), leading), std::future::pending(), 64))
    };
    // The metrics over OTLP too, when export is on.
    let _otlp_metrics = super::telemetry::export_configured().then(|| {
        let metrics = metrics.clone();
        tokio::spawn(yuxi_operator::telemetry::metrics::export("yuxi-operator-controller".into(), move || {
            let text = metrics.render();
            async move { text }
        }))
    });

    let identity = leader::identity(args.identity.clone());
    let mut leadership = Leadership::join(client.clone(), &args.lease_namespace, &args.lease_name, &identity).await?;
    tracing::info!(identity = %identity, lease = %args.lease_name, "waiting to lead");
    tokio::select! {
        led = leadership.wait_to_lead() => led?,
        () = shutdown_signal() => { health.abort(); return Ok(()); }
    }
    let _ = leading_tx.send(true);
    tracing::info!(identity = %identity, "leading: reconciling");

    // Stop on a signal, or as soon as the lease is lost (another replica may lead by now: acting on would
    // mean two leaders; the pod restarts and waits again).
    let lost = leadership.lost();
    let (stop_tx, stop_rx) = watch::channel(false);
    let shutdown = async move {
        let mut stop_rx = stop_rx;
        let _ = stop_rx.wait_for(|stop| *stop).await;
    }
    .boxed()
    .shared();
    let namespaces = (!args.namespaces.is_empty()).then(|| args.namespaces.clone());
    let reporter =
        kube::runtime::events::Reporter { controller: "yuxi-operator".into(), instance: Some(identity.clone()) };
    // Runs nobody keeps any more (their AgentRun deleted, or never created because the facade died
    // first) are ended; after a restart the reconciles renew the keeps of live runs first.
    let sweeper = super::spawn_sweeper(store.clone(), run_reconciler::KEEPER_TTL, run_reconciler::KEEPER_TTL / 3);
    let ctx = Arc::new(run_reconciler::RunContext {
        client: client.clone(),
        store,
        settings: decide::Settings {
            cancel_grace: Duration::from_secs(args.cancel_grace_seconds),
            sandbox,
            quotas: yuxi_operator::run::budget::DailyQuotas {
                per_user: args.max_tokens_per_user_per_day,
                per_namespace: args.max_tokens_per_namespace_per_day,
            },
            ..decide::Settings::default()
        },
        recorder: kube::runtime::events::Recorder::new(client.clone(), reporter),
        metrics: metrics.clone(),
        backoff: run_reconciler::Backoff::default(),
        pools: Some(yuxi_operator::controller::pool_reconciler::Pools::watch(
            &client,
            namespaces.as_deref(),
            shutdown.clone(),
        )),
    });
    let pools = match &ctx.pools {
        Some(pools) => {
            let pool_ctx = yuxi_operator::controller::pool_reconciler::PoolContext {
                client: client.clone(),
                sandbox: ctx.settings.sandbox.clone(),
            };
            yuxi_operator::controller::pool_reconciler::run(pool_ctx, pools.clone(), shutdown.clone()).boxed()
        }
        None => futures::future::ready(()).boxed(),
    };
    let agents = agent_reconciler::run(client.clone(), namespaces.clone(), metrics.clone(), shutdown.clone());
    let models = model_prober::run(client.clone(), namespaces.clone(), metrics.clone(), shutdown.clone());
    let mcp_servers = yuxi_operator::controller::mcp_discovery::run(
        client.clone(),
        namespaces.clone(),
        metrics.clone(),
        shutdown.clone(),
    );
    let reconcilers = async move {
        let (agents, (), (), (), ()) = tokio::join!(
            agents,
            models,
            mcp_servers,
            pools,
            run_reconciler::run(ctx, namespaces, args.concurrency, shutdown)
        );
        if let Err(err) = agents {
            tracing::error!(error = %err, "the Agent reconciler stopped");
        }
    };
    tokio::pin!(reconcilers);
    let outcome = tokio::select! {
        () = &mut reconcilers => Ok(()),
        () = shutdown_signal() => { let _ = stop_tx.send(true); reconcilers.await; Ok(()) }
        () = lost => { let _ = stop_tx.send(true); reconcilers.await; Err(anyhow::anyhow!("lost the leader Lease; stopping so that only one replica acts")) }
    };
    sweeper.abort();
    leadership.release().await;
    health.abort();
    outcome
}

/// `/healthz` (always `ok`), `/readyz` (`leader` or `standby`: every replica is ready, the standby ones
/// wait for the Lease) and `/metrics` (Prometheus text).
fn health_router(metrics: ControllerMetrics, leading: watch::Receiver<bool>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(move || async move { if *leading.borrow() { "leader" } else { "standby" } }))
        .route(
            "/metrics",
            get(move || {
                let text = metrics.render();
                async move { ([(axum::http::header::CONTENT_TYPE, CONTENT_TYPE_TEXT)], text) }
            }),
        )
}
