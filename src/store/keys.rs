//! The Redis keys and channels of a run, shared by the runner, the facade and the controller
//! (DESIGN.md section 6). Every id is checked by [`crate::run::thread_id::is_valid_id`] before it gets
//! here, so a key can never name another run's data.

/// How long a run's event stream lives after its last write, in seconds (Yuxi keeps run streams 7200 s).
pub const EVENTS_TTL_SECONDS: i64 = 7200;
/// How long a cancel request is kept, in seconds (Yuxi: 1800 s).
pub const CANCEL_TTL_SECONDS: i64 = 1800;
/// How long a run's result is kept, in seconds (seven days).
pub const RESULT_TTL_SECONDS: i64 = 7 * 24 * 3600;
/// The most entries a run's event stream keeps (approximately; older entries are trimmed).
pub const EVENTS_MAX_LEN: usize = 100_000;
/// How long a run's record, a thread's owner and a thread's messages are kept after they were last
/// written, in seconds (30 days): the store forgets what nobody uses.
pub const STATE_TTL_SECONDS: i64 = 30 * 24 * 3600;
/// The most messages a thread's history keeps; older ones are dropped first.
pub const MAX_THREAD_MESSAGES: usize = 2000;

/// The run's event stream. Each entry has two fields: `event` (the event name) and `data` (the JSON
/// envelope `{schema_version, run_id, thread_id, event, payload, created_at}`); the entry id is the
/// `after_seq` cursor.
pub fn run_events(run_id: &str) -> String {
    format!("yuxi:run:{run_id}:events")
}

/// The run's cancel request: a key whose presence means "cancel", and a pub/sub channel of the same name
/// on which the request is announced so the runner stops at once.
pub fn run_cancel(run_id: &str) -> String {
    format!("yuxi:run:{run_id}:cancel")
}

/// The run's steer request: a key whose presence asks the run to end at its next model turn, so that
/// the request steered to the front of its thread's queue starts next (Yuxi's steer).
pub fn run_steer(run_id: &str) -> String {
    format!("yuxi:run:{run_id}:steer")
}

/// The run's notice channel: every write of the run (an event, its end, a status, a cancel) publishes
/// on it, so waiters are woken at once ([`super::notices`]).
pub fn run_notice(run_id: &str) -> String {
    format!("yuxi:run:{run_id}:notice")
}

/// The pattern of every run's notice channel, which each facade subscribes to once.
pub const RUN_NOTICE_PATTERN: &str = "yuxi:run:*:notice";

/// The run id of a notice channel ([`run_notice`]); `None` for another channel.
pub fn run_of_notice(channel: &str) -> Option<&str> {
    channel.strip_prefix("yuxi:run:")?.strip_suffix(":notice")
}

/// The run's result: JSON `{status, output, error, agent_slug, run_id, thread_id, token_usage}`.
pub fn run_result(run_id: &str) -> String {
    format!("yuxi:run:{run_id}:result")
}

/// Set once the run's question is in its thread (`1`; kept as long as the thread's history).
pub fn run_input(run_id: &str) -> String {
    format!("yuxi:run:{run_id}:input")
}

/// The thread's conversation history: a list of JSON chat messages, oldest first.
pub fn thread_messages(thread_id: &str) -> String {
    format!("yuxi:thread:{thread_id}:messages")
}

/// The runner lease of a run: held by the one runner executing it, with a short time to live it keeps
/// refreshing, so a second runner for the same run refuses to start.
pub fn run_lease(run_id: &str) -> String {
    format!("yuxi:run:{run_id}:lease")
}

/// The run's keeper: set by whoever will start or watch the run (the facade that created it, the local
/// mode's launcher while its runner lives, the controller while the AgentRun exists), with a time to live
/// they renew. A run that is not terminal and has neither a lease nor a keeper is abandoned: nothing
/// will ever end it, so the sweeper does ([`super::Store::sweep`]).
pub fn run_keeper(run_id: &str) -> String {
    format!("yuxi:run:{run_id}:keeper")
}

/// How long the keeper a new run gets lasts, in seconds: the time its creator has to hand it to a
/// launcher (the local mode's) or to the controller (which sees its AgentRun), who renew it.
pub const START_GRACE_SECONDS: i64 = 60;

/// The thread's lock: holds the id of the thread's one non-terminal run.
pub fn thread_active_run(thread_id: &str) -> String {
    format!("yuxi:thread:{thread_id}:active_run")
}

/// The run's record (JSON [`crate::run::RunRecord`]).
pub fn run_record(run_id: &str) -> String {
    format!("yuxi:run:{run_id}:record")
}

/// An idempotent start: holds the run id a parent's tool call started.
pub fn start(key: &str) -> String {
    format!("yuxi:start:{key}")
}

/// How long an idempotent start is remembered, in seconds (one day).
pub const START_TTL_SECONDS: i64 = 24 * 3600;

/// The user (uid) whose runs use the thread.
pub fn thread_owner(thread_id: &str) -> String {
    format!("yuxi:thread:{thread_id}:owner")
}

/// The runs a parent run started: a set of run ids.
pub fn run_children(run_id: &str) -> String {
    format!("yuxi:run:{run_id}:children")
}

/// The unfinished runs of a user: a set of run ids, pruned of ended runs whenever a run is created.
pub fn user_active_runs(uid: &str) -> String {
    format!("yuxi:user:{uid}:active_runs")
}

/// The unfinished runs of everyone: a set of run ids, pruned as [`user_active_runs`] is.
pub const ACTIVE_RUNS: &str = "yuxi:active_runs";

/// The runs of a user, newest last: a sorted set of run ids scored by their creation time in
/// milliseconds since the epoch, at most [`MAX_USER_RUNS_LISTED`] (the oldest go first), living
/// [`STATE_TTL_SECONDS`] after its last run. A run whose record has expired is skipped when listed.
pub fn user_runs(uid: &str) -> String {
    format!("yuxi:user:{uid}:runs")
}

/// Everyone's runs, as [`user_runs`], at most [`MAX_RUNS_LISTED`]: what a superadmin lists.
pub const ALL_RUNS: &str = "yuxi:runs";

/// The most runs of one user the list of runs keeps.
pub const MAX_USER_RUNS_LISTED: usize = 2000;

/// The most runs of everyone the list of runs keeps.
pub const MAX_RUNS_LISTED: usize = 20_000;

/// The thread's conversation (JSON [`crate::run::conversation::Conversation`]): its title, agent and
/// pin, as Yuxi's chat-thread routes show it.
pub fn thread_conversation(thread_id: &str) -> String {
    format!("yuxi:thread:{thread_id}:conversation")
}

/// A user's conversations: a sorted set of thread ids, scored by when each was last updated (Unix
/// microseconds), trimmed to the [`crate::run::conversation::MAX_CONVERSATIONS_PER_USER`] latest.
pub fn user_conversations(uid: &str) -> String {
    format!("yuxi:user:{uid}:conversations")
}

/// The thread's queue of waiting requests: a list of request ids, the next first.
pub fn thread_queue(thread_id: &str) -> String {
    format!("yuxi:thread:{thread_id}:queue")
}

/// A queued request of a user (JSON [`crate::run::queue::QueuedRequest`]): request ids are the
/// client's, so each user has their own.
pub fn request(uid: &str, request_id: &str) -> String {
    format!("yuxi:user:{uid}:request:{request_id}")
}

/// The claim of a user's queued request by the facade starting it (a key with a short time to live).
pub fn request_claim(uid: &str, request_id: &str) -> String {
    format!("yuxi:user:{uid}:request:{request_id}:claim")
}

/// The threads whose queue has requests: a set of thread ids, which every facade looks through to
/// start what waits (after a restart too).
pub const QUEUED_THREADS: &str = "yuxi:queued_threads";

/// A run tree's token usage ([`crate::run::budget`]): a hash of `prompt`, `completion`, `total` and
/// `max`, `cost:<CURRENCY>` (pico-units) and `max_cost` (`<CURRENCY> <pico-units>`), by the tree's root
/// run.
pub fn tree_usage(root: &str) -> String {
    format!("yuxi:tree:{root}:usage")
}

/// Every model's totals since the store began, for the `yuxi_model_tokens_total` and
/// `yuxi_model_cost_total` metrics: a hash whose fields are `<namespace>\t<model>\t<kind>` (kind
/// `prompt`, `completion`, `cached`, `cost:<CURRENCY>` in pico-units, or a histogram's field under
/// `latency` or `ttft`, [`crate::run::metrics`]), counters.
pub const MODEL_TOTALS: &str = "yuxi:model_totals";

/// Every agent's run totals since the store began, for the run metrics: a hash whose fields are
/// `<namespace>\t<agent>\t<kind>` (kind `status:<status>`, or a histogram's field under `duration`,
/// `queue` or `first_event`, [`crate::run::metrics`]), counters.
pub const RUN_TOTALS: &str = "yuxi:run_totals";

/// The most distinct fields [`RUN_TOTALS`] keeps; past it, new ones are not counted.
pub const MAX_RUN_TOTALS: usize = 20_000;

/// The most distinct fields [`MODEL_TOTALS`] keeps (namespaces × models × kinds); past it, new ones
/// are not counted (the store's memory stays bounded however many model names runs make up).
pub const MAX_MODEL_TOTALS: usize = 20_000;

/// The tokens all of a namespace used on a day (`YYYY-MM-DD`, UTC): a counter (the in-process store
/// counts under the same name).
pub fn namespace_day_usage(day: &str, namespace: &str) -> String {
    format!("yuxi:usage:{day}:ns:{namespace}")
}

/// The tokens a user of a namespace used on a day (`YYYY-MM-DD`, UTC): a counter (the in-process store
/// counts under the same name).
pub fn user_day_usage(day: &str, namespace: &str, uid: &str) -> String {
    format!("yuxi:usage:{day}:user:{namespace}:{uid}")
}

/// How long a warm pod's claim waits for its runner to take it, in seconds: a runner that is not there
/// by then is gone, and the claim must not linger with the run's token in it.
pub const CLAIM_TTL_SECONDS: i64 = 120;

/// A warm sandbox pod's claim ([`crate::run::claim`]): a list holding at most one claim, popped by the
/// pod's runner. `pod_uid` is the pod's `metadata.uid`, which only that pod's runner reads from its
/// downward API.
pub fn pod_claim(pod_uid: &str) -> String {
    format!("yuxi:pod:{pod_uid}:claim")
}
