//! The local mode's runs: each a `yuxi-operator runner` subprocess (or, by default, a run executed
//! inside this process by an [`InProcessRunner`]), with the volume layout of DESIGN.md section 5 under
//! the data folder ([`LocalLauncher`]), and the runs this process has taken on ([`LocalRuns`]).

use std::path::PathBuf;
use std::process::Stdio;

use super::error::LaunchError;
use super::run::{agent_run, end_of_run};
use crate::resources::{Agent, AgentRun};
use crate::run::inputs::env as env_names;
use crate::run::scope::{ScopeIds, VolumePaths, file_thread_id};
use crate::run::{RunRecord, RunStatus};
use crate::store::Store;

/// Where a runner subprocess keeps its run's state: the store the launching process uses, reached the
/// way a subprocess can reach it.
#[derive(Clone, Debug)]
pub enum RunnerStore {
    /// The Redis at this URL (`YUXI_REDIS_URL`), used as the launching process uses it
    /// (`YUXI_ALLOW_UNAUTHENTICATED_STORE` when it accepts a Redis without a password).
    Redis {
        /// The URL, with its credentials.
        url: String,
        /// Whether a Redis without a password is accepted.
        auth: crate::store::StoreAuth,
    },
    /// The launching process's in-process store, served on this Unix socket (`YUXI_STORE_SOCKET`; see
    /// [`crate::store::socket`]).
    Socket(PathBuf),
}

/// Runs `runner` subprocesses of this binary.
#[derive(Clone, Debug)]
pub struct LocalLauncher {
    /// The `yuxi-operator` binary.
    pub exe: PathBuf,
    /// Where runs keep their files: `runs/<run_id>`, `users/<uid>/workspace`,
    /// `users/<uid>/threads/<file_thread_id>/{uploads,outputs}`, `users/<uid>/skills/<thread_id>`.
    pub data_dir: PathBuf,
    /// Where the runner keeps the run's state.
    pub store: RunnerStore,
    /// The model of agents that name none.
    pub default_model: String,
    /// Where `scripted/file:` scripts are read from.
    pub scripts_dir: Option<PathBuf>,
    /// The facade's URL as the runners reach it (main agents delegate through it).
    pub facade_url: Option<String>,
    /// The skills library agents' skills are projected from.
    pub skills_library: Option<PathBuf>,
    /// Whether `execute` may run commands unconfined where bubblewrap cannot confine them.
    pub unconfined_sandbox: bool,
    /// The runs this process has taken on, and how many runners it runs at once.
    pub runs: LocalRuns,
    /// Executes runs inside this process (the default of the local mode); `None` runs each in a
    /// `runner` subprocess (`--runner-processes`).
    pub in_process: Option<std::sync::Arc<dyn InProcessRunner>>,
    /// What a `runner` subprocess of a run on a Model resource is given, by the Model's name.
    /// They change as the manifests folder does; a run takes them at its start.
    pub model_inputs: std::sync::Arc<std::sync::RwLock<std::collections::BTreeMap<String, ModelInputs>>>,
}

/// What a `runner` subprocess of a run on a Model gets, as a pod's runner container does: the Model's
/// manifest (a file of the run's folder) and the values it references, as variables of that process only.
#[derive(Clone, Default)]
pub struct ModelInputs {
    /// The Model, as YAML.
    pub manifest: String,
    /// `YUXI_MODEL_*` variables and their values ([`crate::resources::model::secrets`]).
    pub variables: Vec<(String, String)>,
}

impl std::fmt::Debug for ModelInputs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.variables.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("ModelInputs").field("variables", &names).finish_non_exhaustive()
    }
}

/// One run for an [`InProcessRunner`]: the AgentRun and its Agent as objects (nothing is written or
/// parsed back), its volumes, and its credentials for the facade.
pub struct RunJob {
    /// The run.
    pub run: AgentRun,
    /// Its Agent, as the facade resolved it.
    pub agent: Agent,
    /// Its volumes, made already.
    pub volumes: VolumePaths,
    /// Its bearer token for the facade (a parent run delegates with it).
    pub token: Option<String>,
}

/// Runs a run inside this process, to its end, with the same store, volumes and sandbox a `runner`
/// subprocess has: provided by the command line layer, which holds the runner (roles do not import each
/// other). The future resolves when the run has ended (or the runner gave up on it).
pub trait InProcessRunner: Send + Sync + std::fmt::Debug {
    /// Executes `job` against `store`.
    fn execute(&self, job: RunJob, store: Store) -> futures::future::BoxFuture<'static, ()>;
}

/// The runs a local mode has taken on: each is kept (its keeper renewed, see [`Store::keep_run`]) from
/// its start until its runner has exited, so it is never swept while this process minds it, and swept
/// within one lease of this process dying. Runners run at most `max_concurrent` at once for main agents
/// and as many again for subagents (a parent waiting for its child never holds the slot the child needs);
/// runs beyond that wait `pending`, in order, bounded by the limits of unfinished runs.
#[derive(Clone, Debug)]
pub struct LocalRuns {
    /// Who keeps the runs: this process, by pid and start time.
    holder: String,
    /// How long a keeper and a runner's lease last without renewal.
    pub lease_ttl: std::time::Duration,
    main_slots: std::sync::Arc<tokio::sync::Semaphore>,
    subagent_slots: std::sync::Arc<tokio::sync::Semaphore>,
    /// The runs taken on and not yet over, each with its thread.
    taken: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, String>>>,
}

impl LocalRuns {
    /// Runs for a process that runs `max_concurrent` runners of each kind at once (at least 1), with
    /// leases and keepers of `lease_ttl`.
    pub fn new(max_concurrent: usize, lease_ttl: std::time::Duration) -> Self {
        let slots = || std::sync::Arc::new(tokio::sync::Semaphore::new(max_concurrent.max(1)));
        Self {
            holder: format!("local:{}:{}", std::process::id(), jiff::Timestamp::now().as_nanosecond()),
            lease_ttl,
            main_slots: slots(),
            subagent_slots: slots(),
            taken: Default::default(),
        }
    }

    /// The runs taken on and not yet over, in no particular order.
    pub fn taken(&self) -> Vec<String> {
        self.taken.lock().expect("runs lock").keys().cloned().collect()
    }

    /// Runs `f` with the threads of the runs taken on and not yet over, while no run is taken on: a
    /// run taken on after `f` returns makes its folders after it.
    pub fn with_threads_taken<T>(&self, f: impl FnOnce(&ThreadsTaken<'_>) -> T) -> T {
        let taken = self.taken.lock().expect("runs lock");
        f(&ThreadsTaken(&taken))
    }

    /// Ends every run this process has taken on and not finished, `interrupted` with `why` (the local
    /// mode is stopping: its runners go with it). Returns how many it ended.
    pub async fn interrupt_all(&self, store: &Store, why: &str) -> usize {
        let mut ended = 0;
        for run_id in self.taken() {
            match store.end_run(&run_id, RunStatus::Interrupted, Some(why)).await {
                Ok(true) => ended += 1,
                Ok(false) => {}
                Err(err) => tracing::error!(run_id = %run_id, error = %err, "cannot end the run; the sweeper will"),
            }
        }
        ended
    }
}

/// The threads of the runs a local mode has taken on, seen under its lock ([`LocalRuns::with_threads_taken`]).
pub struct ThreadsTaken<'a>(&'a std::collections::HashMap<String, String>);

impl ThreadsTaken<'_> {
    /// Whether a run taken on and not yet over is on `thread_id`.
    pub fn contains(&self, thread_id: &str) -> bool {
        self.0.values().any(|thread| thread == thread_id)
    }
}

impl LocalLauncher {
    /// The volumes of a run. Every segment is an id checked by
    /// [`crate::run::thread_id::is_valid_id`] (no `/`, no leading `.`), so none can climb out.
    ///
    /// Errors: [`LaunchError::Volumes`], an id that is not a safe path segment (the record's ids are
    /// checked when it is made, so this only happens to a record that was written by something else).
    pub fn volumes(&self, record: &RunRecord) -> Result<VolumePaths, LaunchError> {
        let ids = ScopeIds::new(&record.uid, "thread_id", &record.thread_id, record.parent.as_ref())?;
        debug_assert_eq!(ids.file_thread_id, file_thread_id(&record.thread_id, record.parent.as_ref()));
        Ok(ids.volumes_under(&self.data_dir))
    }

    /// Starts the run in the background: keeps it, waits for a runner slot (the run stays `pending`),
    /// writes its manifests, runs the runner. The runner records its own end; when it could not start or
    /// died (killed, out of memory) without one, the run is ended here, with a result and exactly one
    /// `end` event written in the same step, so its stream ends and `/result` answers. Then, as for every
    /// run that ends, its unfinished children are cancelled.
    pub fn launch(&self, store: Store, record: RunRecord, agent: Agent, input: String, credentials: Option<String>) {
        let launcher = self.clone();
        let runs = self.runs.clone();
        runs.taken.lock().expect("runs lock").insert(record.run_id.clone(), record.thread_id.clone());
        tokio::spawn(async move {
            let run_id = record.run_id.clone();
            let keeper = {
                let (store, run_id, holder, ttl) = (store.clone(), run_id.clone(), runs.holder.clone(), runs.lease_ttl);
                tokio::spawn(async move {
                    loop {
                        if let Err(err) = store.keep_run(&run_id, &holder, ttl).await {
                            tracing::warn!(run_id = %run_id, error = %err, "cannot renew the run's keeper");
                        }
                        tokio::time::sleep(ttl / 3).await;
                    }
                })
            };
            let slots = if record.parent.is_some() { &runs.subagent_slots } else { &runs.main_slots };
            let executed = match slots.acquire().await {
                Ok(_slot) => launcher.execute(&store, &record, &agent, input, credentials.as_deref()).await,
                Err(_closed) => Ok(()),
            };
            keeper.abort();
            // A run that paused for a person's approval is not over: nothing is ended, nobody runs it
            // until a resume launches it again.
            let paused = matches!(store.run_record(&run_id).await, Ok(Some(r)) if r.status == RunStatus::Waiting);
            // A runner subprocess's manifests were its inputs only.
            let dir = launcher.data_dir.join("runs").join(&run_id);
            if let Err(err) = std::fs::remove_dir_all(&dir)
                && err.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(path = %dir.display(), error = %err, "cannot remove the run's folder");
            }
            if paused && executed.is_ok() {
                runs.taken.lock().expect("runs lock").remove(&run_id);
                return;
            }
            let ended = match executed {
                Err(error) => {
                    tracing::error!(run_id = %run_id, error = %error, "the run could not be executed");
                    store.end_run(&run_id, RunStatus::Failed, Some(&error.to_string())).await
                }
                Ok(()) => {
                    store
                        .end_run(&run_id, RunStatus::Interrupted, Some("the runner ended without recording an end"))
                        .await
                }
            };
            match ended {
                Ok(true) => tracing::warn!(run_id = %run_id, "the runner left its run unended; it was ended for it"),
                Ok(false) => {}
                Err(err) => {
                    tracing::error!(run_id = %run_id, error = %err, "cannot record the run's end; the sweeper will")
                }
            }
            end_of_run(&store, &run_id).await;
            runs.taken.lock().expect("runs lock").remove(&run_id);
        });
    }

    /// Marks the run running, writes its manifests and volumes, and runs the runner to its end. `Ok` too
    /// when the run was cancelled before it started (it is then not started).
    ///
    /// Errors: the store fails ([`LaunchError::Store`]), or the run's folders or manifests cannot be made
    /// or the runner cannot be started (the other variants, each naming the run).
    async fn execute(
        &self,
        store: &Store,
        record: &RunRecord,
        agent: &Agent,
        input: String,
        credentials: Option<&str>,
    ) -> Result<(), LaunchError> {
        let run_id = || record.run_id.clone();
        // A run cancelled before it started is not started at all.
        if !store.set_run_status(&record.run_id, RunStatus::Running, None).await? {
            return Ok(());
        }
        let volumes = self.volumes(record)?;
        volumes.create_all().map_err(|source| LaunchError::MakeVolumes { run_id: run_id(), source })?;
        if let Some(runner) = &self.in_process {
            let job = RunJob {
                run: agent_run(record, input),
                agent: agent.clone(),
                volumes,
                token: credentials.map(String::from),
            };
            // Its own task: a run that panics ends as one whose runner died, and takes nothing else down.
            if let Err(err) = tokio::spawn(runner.execute(job, store.clone())).await {
                tracing::error!(run_id = %record.run_id, error = %err, "the run's in-process runner failed");
            }
            return Ok(());
        }
        let dir = self.data_dir.join("runs").join(&record.run_id);
        std::fs::create_dir_all(&dir).map_err(|source| LaunchError::MakeDir { path: dir.clone(), source })?;
        let run = agent_run(record, input);
        let write = |name: &'static str, text: Result<String, serde_norway::Error>| {
            let text = text.map_err(|source| LaunchError::Manifest { run_id: run_id(), name, source })?;
            std::fs::write(dir.join(name), text).map_err(|source| LaunchError::Write { run_id: run_id(), name, source })
        };
        write("run.yaml", serde_norway::to_string(&run))?;
        write("agent.yaml", serde_norway::to_string(agent))?;
        let mut command = tokio::process::Command::new(&self.exe);
        command
            .arg("runner")
            .arg("--run")
            .arg(dir.join("run.yaml"))
            .arg("--agent")
            .arg(dir.join("agent.yaml"))
            .arg("--workspace")
            .arg(&volumes.workspace)
            .arg("--uploads")
            .arg(&volumes.uploads)
            .arg("--outputs")
            .arg(&volumes.outputs)
            .arg("--skills")
            .arg(&volumes.skills)
            .env(env_names::DEFAULT_MODEL, &self.default_model)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .env(env_names::RUN_LEASE_SECONDS, self.runs.lease_ttl.as_secs().max(1).to_string())
            .kill_on_drop(true);
        // The runner dies with this process however it ends (SIGKILL included), so no runner outlives the
        // local mode that minds its run.
        // SAFETY: only async-signal-safe calls (prctl, getppid, kill) between fork and exec.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        // Exactly one store reaches the runner, whatever this process's own environment holds.
        match &self.store {
            RunnerStore::Redis { url, auth } => command
                .env(env_names::REDIS_URL, url)
                .env(
                    env_names::ALLOW_UNAUTHENTICATED_STORE,
                    (*auth == crate::store::StoreAuth::AllowAnonymous).to_string(),
                )
                .env_remove(env_names::STORE_SOCKET),
            RunnerStore::Socket(path) => command.env(env_names::STORE_SOCKET, path).env_remove(env_names::REDIS_URL),
        };
        if let Some(scripts) = &self.scripts_dir {
            command.env(env_names::SCRIPTS_DIR, scripts);
        }
        match (&self.facade_url, credentials) {
            (Some(url), Some(token)) => command.env(env_names::FACADE_URL, url).env(env_names::RUN_TOKEN, token),
            _ => command.env_remove(env_names::FACADE_URL).env_remove(env_names::RUN_TOKEN),
        };
        // Commands of this run must not see other runs' files: the data folder is hidden in the sandbox,
        // the run's own volumes stay.
        command.env(env_names::SANDBOX_HIDE, &self.data_dir);
        command.env(env_names::UNCONFINED_SANDBOX, self.unconfined_sandbox.to_string());
        match &self.skills_library {
            Some(library) => command.env(env_names::SKILLS_LIBRARY, library),
            None => command.env_remove(env_names::SKILLS_LIBRARY),
        };
        let context = agent.spec.context();
        let model = crate::resources::model::effective(
            record.request.model_spec.as_deref(),
            context.model.as_deref(),
            Some(&self.default_model),
        )
        .and_then(crate::resources::model::resource_name);
        let inputs = model.and_then(|name| {
            self.model_inputs.read().unwrap_or_else(std::sync::PoisonError::into_inner).get(name).cloned()
        });
        if let Some(inputs) = inputs {
            write("model.yaml", Ok(inputs.manifest.clone()))?;
            command.env(env_names::MODEL_FILE, dir.join("model.yaml"));
            for (name, value) in &inputs.variables {
                command.env(name, value);
            }
        }
        let status = command.status().await.map_err(|source| LaunchError::StartRunner { run_id: run_id(), source })?;
        tracing::info!(run_id = %record.run_id, status = %status, "runner ended");
        Ok(())
    }
}
