//! The local mode follows its manifests folder as a cluster follows `kubectl apply`: a file created,
//! changed or deleted is read again, checked among the others and applied within a second (Agents,
//! KnowledgeBases and their ConfigMaps here, Models and McpServers by [`super::local_endpoints`]); a file that
//! does not validate is logged, listed in `GET /api/agent` (for administrators) and on the console, and
//! its last good version stays in force. Runs under way keep the Agent they started with (the runner
//! was handed it at start).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::Watcher;
use yuxi_operator::facade::services::catalog::{Catalog, LocalCatalog};
use yuxi_operator::facade::services::knowledge::Knowledge;
use yuxi_operator::facade::services::local_mode::LocalMode;
use yuxi_operator::resources::Agent;
use yuxi_operator::resources::manifest_set::follow::{FileProblem, Followed};
use yuxi_operator::resources::manifest_set::{self, Loaded, Surroundings};

/// How long a burst of changes is let settle before the folder is read (an editor writes, renames and
/// deletes in one save).
const SETTLE: Duration = Duration::from_millis(150);

/// How often the folder is read even without a notice (a notice can be lost: a folder on a network
/// file system, an overflowing inotify queue).
const RESCAN_EVERY: Duration = Duration::from_secs(30);

/// What the manifests' objects are put into.
pub struct Targets {
    /// The agents.
    pub agents: LocalCatalog<Agent>,
    /// The knowledge bases (their catalog and ConfigMaps).
    pub knowledge: Arc<Knowledge>,
    /// Where the rounds' problems are shown.
    pub local: LocalMode,
    /// The Models and McpServers.
    pub endpoints: super::local_endpoints::LocalEndpoints,
}

/// What the manifests are checked against: the agents and knowledge bases created through the API, the
/// skills library and the MCP servers of `YUXI_MCP_SERVERS`; unknown names refused.
pub fn surroundings(agents: &[Agent], knowledge_bases: Vec<String>, local: &LocalMode) -> Surroundings {
    Surroundings {
        skills: local.skills(),
        agents: agents.to_vec(),
        knowledge_bases,
        mcp_servers: local.configured_mcp.clone(),
        ..Surroundings::default()
    }
}

/// Follows `folder` from `followed` (its state at start) while the process runs. Errors: the folder
/// cannot be watched.
pub fn spawn(folder: PathBuf, followed: Followed, targets: Targets) -> anyhow::Result<()> {
    // A file is followed through its folder, where an editor's rename lands.
    let watched = match folder.is_dir() {
        true => folder.clone(),
        false => folder.parent().map(Path::to_path_buf).unwrap_or_else(|| folder.clone()),
    };
    // Notices fold into one: a flood of events costs one round, and no memory.
    let noticed = Arc::new(tokio::sync::Notify::new());
    let notices = noticed.clone();
    // Set when the watched folder itself goes (deleted or moved away): its watch went with it.
    let lost = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (lost_seen, watched_seen) = (lost.clone(), watched.clone());
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if let Ok(event) = &event
            && matches!(
                event.kind,
                notify::EventKind::Remove(_) | notify::EventKind::Modify(notify::event::ModifyKind::Name(_))
            )
            && event.paths.iter().any(|p| p == &watched_seen)
        {
            lost_seen.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        // Reading the files (this follower's own reads among them) is no change; anything else is a
        // reason to read the folder again: a file written, renamed or deleted whatever its name (a
        // ConfigMap-style `..data` link swapped in), or an error (a queue overflow).
        if !matches!(&event, Ok(event) if matches!(event.kind, notify::EventKind::Access(_))) {
            notices.notify_one();
        }
    })?;
    watcher
        .watch(&watched, notify::RecursiveMode::NonRecursive)
        .map_err(|e| anyhow::anyhow!("cannot follow the manifests folder {}: {e}", watched.display()))?;
    let mut identity = identity_of(&watched);
    tokio::spawn(async move {
        let mut followed = followed;
        loop {
            // While the folder's watch is gone no notice can come: it is looked for every second.
            let watching = identity_of(&watched).is_some() && !lost.load(std::sync::atomic::Ordering::SeqCst);
            let wait = if watching { RESCAN_EVERY } else { Duration::from_secs(1) };
            if tokio::time::timeout(wait, noticed.notified()).await.is_ok() {
                // The rest of an editor's save lands meanwhile; a notice after this wakes the next round.
                tokio::time::sleep(SETTLE).await;
            }
            // A folder deleted and made again is another folder (its inode may be the same number):
            // it is watched anew once it is there.
            let now_identity = identity_of(&watched);
            if now_identity.is_none() {
                lost.store(true, std::sync::atomic::Ordering::SeqCst);
            } else if now_identity != identity || lost.load(std::sync::atomic::Ordering::SeqCst) {
                let _ = watcher.unwatch(&watched);
                match watcher.watch(&watched, notify::RecursiveMode::NonRecursive) {
                    Ok(()) => {
                        identity = now_identity;
                        lost.store(false, std::sync::atomic::Ordering::SeqCst);
                    }
                    Err(err) => {
                        tracing::warn!(folder = %watched.display(), error = %err, "cannot follow the manifests folder again; it is read every 30 s")
                    }
                }
            }
            followed = apply_round(&folder, followed, &targets).await;
        }
    });
    Ok(())
}

/// The device and inode of `path`, `None` when it cannot be read.
fn identity_of(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|meta| (meta.dev(), meta.ino()))
}

/// How long a round may read the folder before the log says it is stuck.
const STUCK_AFTER: Duration = Duration::from_secs(30);

/// Reads the folder (off the request threads: a slow or blocking file never stalls the API), puts in
/// force what validates, and reports the rest. A folder that is gone changes nothing: what was in force
/// stays until it is back.
async fn apply_round(folder: &Path, followed: Followed, targets: &Targets) -> Followed {
    if !folder.exists() {
        let problem = FileProblem {
            file: folder.display().to_string(),
            errors: vec![format!(
                "the manifests folder {} is gone; what was in force stays until it is back",
                folder.display()
            )],
            last_good_in_force: true,
        };
        report(targets, vec![problem]);
        return followed;
    }
    let saved_kbs = match &targets.knowledge.catalog {
        Catalog::Local(local) => local.api_items().iter().map(kube::ResourceExt::name_any).collect(),
        Catalog::Cluster(_) => Vec::new(),
    };
    let around = surroundings(&targets.agents.api_items(), saved_kbs, &targets.local);
    let path = folder.to_path_buf();
    let mut reading = tokio::task::spawn_blocking(move || {
        let mut followed = followed;
        let round =
            manifest_set::manifest_files(std::slice::from_ref(&path)).map(|files| followed.update(&files, &around));
        (followed, round)
    });
    let (followed, round) = loop {
        match tokio::time::timeout(STUCK_AFTER, &mut reading).await {
            Ok(Ok(done)) => break done,
            Ok(Err(panicked)) => {
                tracing::error!(folder = %folder.display(), error = %panicked, "reading the manifests folder failed; it is read again from scratch");
                return Followed::default();
            }
            Err(_stuck) => tracing::error!(
                folder = %folder.display(),
                "reading the manifests folder has taken over 30 s: a file that blocks its readers? The manifests stay as they are until it ends"
            ),
        }
    };
    let round = match round {
        Ok(round) => round,
        Err(err) => {
            let problem = FileProblem {
                file: folder.display().to_string(),
                errors: vec![format!("cannot read the manifests folder: {err}; what was in force stays")],
                last_good_in_force: true,
            };
            report(targets, vec![problem]);
            return followed;
        }
    };
    let mut problems = round.problems;
    let loaded = round.loaded;
    if let Err(err) = targets.endpoints.apply(&loaded.models, &loaded.mcp_servers, &loaded.config_maps) {
        problems.push(FileProblem { file: folder.display().to_string(), errors: vec![err], last_good_in_force: true });
    }
    apply(loaded, targets).await;
    report(targets, problems);
    followed
}

/// Shows `problems` (the API, the console) and logs each once, when it appears, not at every later round.
fn report(targets: &Targets, problems: Vec<FileProblem>) {
    let before = targets.local.manifests().problems;
    for problem in problems.iter().filter(|p| !before.contains(p)) {
        tracing::warn!(
            file = %problem.file,
            last_good_in_force = problem.last_good_in_force,
            "a manifest was not applied: {}",
            problem.errors.join("; ")
        );
    }
    targets.local.set_manifest_problems(problems, now());
}

/// Puts the round's Agents, KnowledgeBases and ConfigMaps in force.
async fn apply(loaded: Loaded, targets: &Targets) {
    let Loaded { agents, knowledge_bases, config_maps, .. } = loaded;
    let changed = targets.agents.set_manifests(agents);
    if !changed.is_empty() {
        tracing::info!(agents = ?changed, "applied the manifests folder's agents");
    }
    targets.knowledge.set_config_maps(config_maps);
    if let Catalog::Local(local) = &targets.knowledge.catalog {
        let changed = local.set_manifests(knowledge_bases);
        if !changed.is_empty() {
            tracing::info!(knowledge_bases = ?changed, "applied the manifests folder's knowledge bases");
        }
    }
    // Indexes new and changed knowledge bases (and ConfigMaps' documents) now, and forgets gone ones.
    let knowledge = targets.knowledge.clone();
    tokio::spawn(async move { knowledge.sync_all().await });
}

/// Now, RFC 3339.
fn now() -> String {
    jiff::Timestamp::now().to_string()
}
