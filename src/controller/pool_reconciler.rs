//! The warm pool reconciler and the claim (docs/concepts/warm-pools.md): keeps the idle pods the pure
//! rules of [`super::pool`] ask for, and gives one to a new run whose pod it would be.
//!
//! It watches the AgentRuns, the warm pods and the namespaces' `yuxi-warm-pool` ConfigMaps, and after
//! each change (at most every [`PASS_GAP`], at least every [`PASS_EVERY`]) makes one pass: the pools the
//! unfinished runs want ([`super::pool::template_run`]), against the idle pods there are
//! ([`super::pool::pool_actions`]). A namespace whose wanted pools cannot be read (an API error) keeps
//! its pods until a pass can.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};

use super::decide::{model_name, namespace_settings};
use super::namespace_reads::{named_mcp_servers, namespace_traces};
use super::pod::SandboxSettings;
use super::pod::{SandboxObjects, sandbox_objects_on};
use super::pool::{
    Held, NAMESPACE_WARM_POOL_CONFIG_MAP, PoolAction, Wanted, claim_patch, effective_pool, namespace_default,
    pool_actions, template_run, warm_pod,
};
use crate::resources::agent::WarmPool;
use crate::resources::names::{FIELD_MANAGER, WARM_LABEL, WARM_POOL_LABEL};
use crate::resources::{Agent, AgentRun, Model};
use crate::run::claim::Claim;
use crate::run::inputs::DEFAULT_TIMEOUT_SECONDS;

/// The shortest time between two passes.
pub const PASS_GAP: Duration = Duration::from_millis(500);
/// The longest time between two passes, changes or not (idle pods expire by the clock).
pub const PASS_EVERY: Duration = Duration::from_secs(5);
/// How long a pod the pool created counts as on its way when the pod cache does not show it yet.
const IN_FLIGHT_FOR: Duration = Duration::from_secs(30);
/// How long a claim is remembered for a run whose cached status does not name its pod yet.
pub const CLAIM_MEMORY: Duration = Duration::from_secs(600);

/// What the pools watch: the runs, the warm pods and the namespaces' defaults, one store of each per
/// watched namespace (one for all namespaces when none are given).
pub struct Pools {
    runs: Vec<Store<DynamicObject>>,
    pods: Vec<Store<Pod>>,
    defaults: Vec<Store<ConfigMap>>,
    /// Pods created, by pool, not yet in the pod cache.
    in_flight: Mutex<HashMap<String, Vec<(String, Instant)>>>,
    /// The pod each run claimed, by the run's uid, until the run's cached status names it ([`Pools::claimed_by`]).
    claims: Mutex<HashMap<String, (String, Instant)>>,
    wake: tokio::sync::Notify,
}

impl Pools {
    /// Starts the watches over `namespaces` (all when `None`) until `shutdown`; each change wakes the
    /// pool reconciler.
    pub fn watch(
        client: &kube::Client,
        namespaces: Option<&[String]>,
        shutdown: impl std::future::Future<Output = ()> + Send + Clone + 'static,
    ) -> Arc<Pools> {
        let scopes: Vec<Option<String>> = match namespaces {
            None => vec![None],
            Some(list) => list.iter().cloned().map(Some).collect(),
        };
        let mut pools = Pools {
            runs: Vec::new(),
            pods: Vec::new(),
            defaults: Vec::new(),
            in_flight: Mutex::default(),
            claims: Mutex::default(),
            wake: tokio::sync::Notify::new(),
        };
        let mut streams = Vec::new();
        for scope in &scopes {
            let resource = kube::api::ApiResource::erase::<AgentRun>(&());
            let runs: Api<DynamicObject> = match scope {
                Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
                None => Api::all_with(client.clone(), &resource),
            };
            let writer = reflector::store::Writer::new(resource);
            pools.runs.push(writer.as_reader());
            streams.push(
                reflector::reflector(writer, watcher(runs, watcher::Config::default()).default_backoff())
                    .map(|_| ())
                    .boxed(),
            );
            let (reader, writer) = reflector::store();
            pools.pods.push(reader);
            let pods = watcher(scoped::<Pod>(client, scope), watcher::Config::default().labels(WARM_LABEL));
            streams.push(reflector::reflector(writer, pods.default_backoff()).map(|_| ()).boxed());
            let (reader, writer) = reflector::store();
            pools.defaults.push(reader);
            let fields = format!("metadata.name={NAMESPACE_WARM_POOL_CONFIG_MAP}");
            let maps = watcher(scoped::<ConfigMap>(client, scope), watcher::Config::default().fields(&fields));
            streams.push(reflector::reflector(writer, maps.default_backoff()).map(|_| ()).boxed());
        }
        let pools = Arc::new(pools);
        let waker = pools.clone();
        let events = futures::stream::select_all(streams).take_until(shutdown);
        tokio::spawn(events.for_each(move |()| {
            waker.wake.notify_one();
            async {}
        }));
        pools
    }

    /// The namespace's default pool, `None` without one (or with one that breaks a rule, which is logged).
    fn default_of(&self, namespace: &str) -> Option<WarmPool> {
        let map = self.defaults.iter().flat_map(|s| s.state()).find(|m| m.namespace().as_deref() == Some(namespace))?;
        match namespace_default(map.data.as_ref().unwrap_or(&BTreeMap::new())) {
            Ok(pool) => Some(pool),
            Err(why) => {
                tracing::warn!(namespace, error = %why, "the namespace's warm pool default is ignored");
                None
            }
        }
    }

    /// The pod `run` claimed, when this process claimed one and `run` (as cached) does not name it yet:
    /// the run's cache may lag behind the status written with the claim, and a run that seemed to have
    /// no pod would be given a second one. Forgotten once the run names its pod, or after
    /// [`CLAIM_MEMORY`].
    pub fn claimed_by(&self, run: &AgentRun) -> Option<String> {
        let uid = run.metadata.uid.as_deref()?;
        let mut claims = self.claims.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        claims.retain(|_, (_, at)| at.elapsed() < CLAIM_MEMORY);
        let (pod, _) = claims.get(uid)?;
        if run.status.as_ref().and_then(|s| s.pod_name.as_deref()) == Some(pod.as_str()) {
            claims.remove(uid);
            return None;
        }
        Some(pod.clone())
    }

    fn remember_claim(&self, run: &AgentRun, pod: &str) {
        if let Some(uid) = run.metadata.uid.clone() {
            let mut claims = self.claims.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            claims.insert(uid, (pod.to_string(), Instant::now()));
        }
    }

    /// The idle pods of the caches.
    fn held(&self) -> Vec<Held> {
        self.pods.iter().flat_map(|s| s.state()).filter_map(|pod| Held::of(&pod)).collect()
    }
}

fn scoped<K>(client: &kube::Client, scope: &Option<String>) -> Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match scope {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// What the pool reconciler works with.
pub struct PoolContext {
    /// The cluster.
    pub client: kube::Client,
    /// The installation's sandbox settings, as the run reconciler builds pods with them.
    pub sandbox: SandboxSettings,
}

/// Where a claim is made: the cluster, and the run store that hands the claimed pod its run.
#[derive(Clone, Copy)]
pub struct Place<'a> {
    /// The cluster.
    pub client: &'a kube::Client,
    /// The run store.
    pub store: &'a crate::store::Store,
}

/// Keeps the pools until `shutdown`: a pass after each change, at most every [`PASS_GAP`].
pub async fn run(ctx: PoolContext, pools: Arc<Pools>, shutdown: impl std::future::Future<Output = ()>) {
    let passes = async {
        // A pass over caches not yet filled would find no parent and empty every pool.
        for store in &pools.runs {
            let _ = store.wait_until_ready().await;
        }
        for store in &pools.pods {
            let _ = store.wait_until_ready().await;
        }
        for store in &pools.defaults {
            let _ = store.wait_until_ready().await;
        }
        loop {
            let _ = tokio::time::timeout(PASS_EVERY, pools.wake.notified()).await;
            if let Err(err) = pass(&ctx, &pools).await {
                tracing::warn!(error = %err, "a warm pool pass failed");
            }
            tokio::time::sleep(PASS_GAP).await;
        }
    };
    tokio::select! {
        () = passes => {}
        () = shutdown => {}
    }
}

/// One pass: the pools wanted, the pods held, the actions applied.
pub async fn pass(ctx: &PoolContext, pools: &Pools) -> Result<(), kube::Error> {
    let mut parents: BTreeMap<String, Vec<AgentRun>> = BTreeMap::new();
    for object in pools.runs.iter().flat_map(|s| s.state()) {
        let Ok(run) = serde_json::to_value(&*object).and_then(serde_json::from_value::<AgentRun>) else { continue };
        let ended = run.status.as_ref().and_then(|s| s.phase).is_some_and(|p| p.is_terminal());
        if ended || run.metadata.deletion_timestamp.is_some() || run.spec.parent.is_some() {
            continue;
        }
        parents.entry(run.namespace().unwrap_or_default()).or_default().push(run);
    }
    let mut wanted: BTreeMap<String, Wanted> = BTreeMap::new();
    let mut unread = Vec::new();
    for (namespace, runs) in &parents {
        if let Err(err) = wanted_in(ctx, pools, namespace, runs, &mut wanted).await {
            tracing::warn!(namespace, error = %err, "cannot read the namespace's warm pools; its pods are kept");
            unread.push(namespace.clone());
        }
    }
    let held: Vec<Held> = pools.held().into_iter().filter(|pod| !unread.contains(&pod.namespace)).collect();
    let seen: Vec<String> = held.iter().map(|pod| pod.name.clone()).collect();
    let mut wanted: Vec<Wanted> = wanted.into_values().collect();
    {
        let mut in_flight = pools.in_flight.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        in_flight.retain(|_, pods| {
            pods.retain(|(name, at)| !seen.contains(name) && at.elapsed() < IN_FLIGHT_FOR);
            !pods.is_empty()
        });
        for pool in &mut wanted {
            pool.in_flight = in_flight.get(&pool.fingerprint).map_or(0, Vec::len);
        }
    }
    for action in pool_actions(&wanted, &held, jiff::Timestamp::now()) {
        match action {
            PoolAction::Create(pod) => {
                let namespace = pod.namespace().unwrap_or_default();
                let pool = pod.labels().get(WARM_POOL_LABEL).cloned().unwrap_or_default();
                let post = PostParams { dry_run: false, field_manager: Some(FIELD_MANAGER.into()) };
                let created = Api::<Pod>::namespaced(ctx.client.clone(), &namespace).create(&post, &pod).await?;
                let mut in_flight = pools.in_flight.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                in_flight.entry(pool).or_default().push((created.name_any(), Instant::now()));
            }
            PoolAction::Delete { namespace, name, resource_version } => {
                let params = DeleteParams {
                    preconditions: Some(Preconditions { resource_version: Some(resource_version), uid: None }),
                    ..DeleteParams::default()
                };
                // Claimed or changed since (409), or gone (404): not this pass's to delete.
                match Api::<Pod>::namespaced(ctx.client.clone(), &namespace).delete(&name, &params).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(status)) if status.code == 409 || status.code == 404 => {}
                    Err(err) => return Err(err),
                }
            }
        }
    }
    Ok(())
}

/// The pools `runs` of `namespace` want, added to `wanted` by fingerprint.
async fn wanted_in(
    ctx: &PoolContext,
    pools: &Pools,
    namespace: &str,
    runs: &[AgentRun],
    wanted: &mut BTreeMap<String, Wanted>,
) -> Result<(), kube::Error> {
    let default = pools.default_of(namespace);
    let agents = Api::<Agent>::namespaced(ctx.client.clone(), namespace).list(&ListParams::default()).await?.items;
    let pooled: Vec<(&Agent, WarmPool)> =
        agents.iter().filter(|a| a.spec.is_subagent()).filter_map(|a| Some((a, effective_pool(a, default)?))).collect();
    if pooled.is_empty() {
        return Ok(());
    }
    let traces = namespace_traces(&ctx.client, namespace).await?;
    let mut models: HashMap<String, Option<Model>> = HashMap::new();
    for parent in runs {
        let Some(parent_agent) = agents.iter().find(|a| a.name_any() == parent.spec.agent) else { continue };
        if parent_agent.spec.is_subagent() {
            continue;
        }
        let allowed = parent_agent.spec.context().subagents.clone().unwrap_or_default();
        for (child, pool) in pooled.iter().filter(|(a, _)| allowed.is_empty() || allowed.contains(&a.name_any())) {
            let Some(template) = template_run(parent, &child.name_any(), ctx.sandbox.default_uid.as_deref()) else {
                continue;
            };
            let mcp = named_mcp_servers(&ctx.client, &ctx.sandbox, namespace, child).await?;
            let settings = namespace_settings(traces.as_ref(), &mcp, &ctx.sandbox);
            let model = match model_name(&template, child, &settings) {
                Some(name) => match models.get(name) {
                    Some(model) => model.clone(),
                    None => {
                        let model = Api::<Model>::namespaced(ctx.client.clone(), namespace).get_opt(name).await?;
                        models.insert(name.to_string(), model.clone());
                        model
                    }
                },
                None => None,
            };
            let Ok(objects) = sandbox_objects_on(&template, child, model.as_ref(), &settings) else { continue };
            let pod = warm_pod(&objects.pod, child, pool, DEFAULT_TIMEOUT_SECONDS as i64);
            let fingerprint = pod.labels().get(WARM_POOL_LABEL).cloned().unwrap_or_default();
            let size = usize::try_from(pool.size).unwrap_or(0);
            wanted.entry(fingerprint.clone()).or_insert(Wanted {
                fingerprint,
                size,
                idle_seconds: pool.idle_seconds(),
                in_flight: 0,
                pod: Box::new(pod),
            });
        }
    }
    Ok(())
}

/// Gives `run` an idle pod of its pool, if one is ready: the pod claimed with a precondition
/// ([`claim_patch`]), then its runner handed `objects`' inputs and `token` through the store. Returns the
/// claimed pod's name; `None` when there is no pool, no ready pod, every candidate was taken first, or
/// the hand-over failed (the claimed pod is then deleted, and the run gets a cold pod).
pub async fn claim(
    ctx: Place<'_>,
    pools: &Pools,
    run: &AgentRun,
    agent: &Agent,
    objects: &SandboxObjects,
    token: Option<String>,
) -> Result<Option<String>, kube::Error> {
    let namespace = run.namespace().unwrap_or_default();
    let Some(pool) = effective_pool(agent, pools.default_of(&namespace)) else { return Ok(None) };
    let timeout = run.spec.timeout_seconds.map_or(DEFAULT_TIMEOUT_SECONDS as i64, |t| t.max(1));
    let warm = warm_pod(&objects.pod, agent, &pool, timeout);
    let fingerprint = warm.labels().get(WARM_POOL_LABEL).cloned().unwrap_or_default();
    let now = jiff::Timestamp::now();
    let mut candidates: Vec<Held> = pools
        .held()
        .into_iter()
        .filter(|held| held.namespace == namespace && held.fingerprint == fingerprint)
        .filter(|held| held.claimable(pool.idle_seconds(), now))
        .collect();
    candidates.sort_by_key(|held| (held.created, held.name.clone()));
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
    let params = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..PatchParams::default() };
    let began = std::time::SystemTime::now();
    for candidate in candidates {
        let patch = claim_patch(&objects.pod, &candidate.resource_version);
        let claimed = match pods.patch(&candidate.name, &params, &Patch::Merge(&patch)).await {
            Ok(pod) => pod,
            // Gone since the cache saw it: the next one.
            Err(kube::Error::Api(status)) if status.code == 404 => continue,
            // Changed since the cache saw it: claimed by another run (the next one), or only behind the
            // cache (its status reported since), then claimed at its current version.
            Err(kube::Error::Api(status)) if status.code == 409 => {
                let Some(fresh) = pods.get_opt(&candidate.name).await? else { continue };
                if !Held::of(&fresh).is_some_and(|held| held.claimable(pool.idle_seconds(), now)) {
                    continue;
                }
                let patch = claim_patch(&objects.pod, &fresh.resource_version().unwrap_or_default());
                match pods.patch(&candidate.name, &params, &Patch::Merge(&patch)).await {
                    Ok(pod) => pod,
                    Err(kube::Error::Api(status)) if status.code == 409 || status.code == 404 => continue,
                    Err(err) => return Err(err),
                }
            }
            Err(err) => return Err(err),
        };
        pools.wake.notify_one();
        let handed = Claim {
            run: run.name_any(),
            files: objects.inputs.string_data.clone().unwrap_or_default(),
            token: token.clone(),
        };
        let offered = match serde_json::to_string(&handed) {
            Ok(text) => {
                ctx.store.offer_claim(&claimed.uid().unwrap_or_default(), &text).await.map_err(|e| e.to_string())
            }
            Err(err) => Err(err.to_string()),
        };
        if let Err(why) = offered {
            tracing::warn!(run = %run.name_any(), pod = %candidate.name, error = %why, "cannot hand the claimed pod its run; deleting it");
            match pods.delete(&candidate.name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(err) => return Err(err),
            }
            return Ok(None);
        }
        pools.remember_claim(run, &candidate.name);
        // In the run's trace, where a new pod's "schedule pod" and "start pod" would be.
        let traceparent = run.annotations().get(crate::run::trace::TRACEPARENT_ANNOTATION).map(String::as_str);
        let attributes = vec![
            opentelemetry::KeyValue::new("k8s.pod.name", candidate.name.clone()),
            opentelemetry::KeyValue::new("k8s.namespace.name", namespace.clone()),
            opentelemetry::KeyValue::new("yuxi.run.id", run.name_any()),
        ];
        crate::telemetry::past_span("claim warm pod", traceparent, began, std::time::SystemTime::now(), attributes);
        return Ok(Some(candidate.name));
    }
    Ok(None)
}

/// The token of a run's credentials Secret, when it has one.
pub fn token_of(secret: Option<&Secret>) -> Option<String> {
    let data = secret?.data.as_ref()?.get(crate::resources::names::CREDENTIALS_TOKEN_KEY)?;
    String::from_utf8(data.0.clone()).ok()
}
