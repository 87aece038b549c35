//! `yuxi-operator api`: the facade in a cluster — the Agents of one namespace, TokenReview
//! authentication, runs as AgentRuns, run state in Redis.

use std::net::SocketAddr;
use std::process::ExitCode;

use yuxi_operator::facade::{self, auth, catalog, launch};
use yuxi_operator::store::Store;

use super::serve::{bind, serve, shutdown_signal};

/// The facade's settings in a cluster.
#[derive(clap::Args)]
pub struct ApiArgs {
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0:8080", env = "YUXI_API_LISTEN")]
    listen: SocketAddr,
    /// The namespace whose Agents are served and where AgentRuns are created.
    #[arg(long, env = "YUXI_NAMESPACE")]
    namespace: String,
    /// Redis, where runs keep their state.
    #[arg(long, env = "REDIS_URL", hide_env_values = true)]
    redis_url: String,
    /// Audiences a token must be issued for (repeatable; none: the API server's own).
    #[arg(long = "token-audience", value_name = "AUDIENCE")]
    token_audiences: Vec<String>,
    /// Members of this Kubernetes group are administrators.
    #[arg(long, default_value = "yuxi:admins")]
    admin_group: String,
    /// Members of this Kubernetes group are super administrators.
    #[arg(long, default_value = "yuxi:superadmins")]
    superadmin_group: String,
    /// A group `<prefix><n>` puts its members in department `n`.
    #[arg(long, default_value = "yuxi:department:")]
    department_group_prefix: String,
}

/// Serves the facade until SIGTERM or Ctrl-C, then lets requests under way finish. Exit status 1 when the
/// cluster or Redis cannot be reached, or the address cannot be bound.
pub fn run(args: ApiArgs) -> ExitCode {
    super::run_async(serve_api(args))
}

async fn serve_api(args: ApiArgs) -> anyhow::Result<()> {
    let client = super::connect(
        "the facade serves the Agents of its namespace and checks tokens through the Kubernetes API; run it in a cluster or with a kubeconfig, or use `yuxi-operator local`",
    )
    .await?;
    let store = Store::connect_redis(&args.redis_url)
        .await
        .map_err(|e| anyhow::anyhow!("cannot reach Redis (REDIS_URL): {e}"))?;
    let mapping = auth::GroupMapping {
        admin_group: args.admin_group,
        superadmin_group: args.superadmin_group,
        department_prefix: args.department_group_prefix,
    };
    let state = facade::FacadeState {
        auth: auth::Authenticator::TokenReview(auth::TokenReviewer::new(client.clone(), args.token_audiences, mapping)),
        agents: facade::AgentCatalog::Cluster(Box::new(catalog::ClusterCatalog::new(client.clone(), &args.namespace))),
        runs: Some(facade::Runs {
            store,
            launcher: launch::Launcher::Cluster(launch::ClusterLauncher::new(client, &args.namespace)),
        }),
        metrics: Default::default(),
    };
    let listener = bind(args.listen)?;
    tracing::info!(listen = %args.listen, namespace = %args.namespace, "serving the facade");
    serve(listener, facade::router(state), shutdown_signal()).await?;
    Ok(())
}
