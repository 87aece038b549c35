//! The names this system gives Kubernetes objects and the labels it puts on them, shared by the facade
//! (which creates AgentRuns) and the controller (which creates sandbox pods and selects children by
//! label): one definition each, so the two always agree.

use sha2::{Digest, Sha256};

use super::AgentRun;

/// The field manager of the controller's writes through the Kubernetes API (its server-side applies of
/// status, its pods, Secrets and children's cancels, its Lease).
pub const FIELD_MANAGER: &str = "yuxi-operator";
/// The field manager of the facade's writes (the Agents and KnowledgeBases of `/api`, the AgentRuns and
/// credentials Secrets of runs): its own, so that `managedFields` and audit logs tell the two roles
/// apart, and a GitOps tool's server-side apply names which one owns a field it conflicts on.
pub const FACADE_FIELD_MANAGER: &str = "yuxi-operator-api";
/// The label naming the parent run of a subagent's AgentRun, as [`label_value`] makes it.
pub const PARENT_RUN_LABEL: &str = "yuxi.dev/parent-run";

/// The key of the run's token in its credentials Secret ([`credentials_secret_name`]).
pub const CREDENTIALS_TOKEN_KEY: &str = "token";
/// The `type` of a run's credentials Secret. A Secret's type is immutable, so a service-account token
/// Secret (or any other) of the same name is never taken for one.
pub const CREDENTIALS_SECRET_TYPE: &str = "yuxi.dev/run-credentials";
/// The annotation on an AgentRun whose starter made it a credentials Secret
/// ([`credentials_secret_name`]), naming it: the controller waits for that Secret, checks it, and mounts
/// nothing else.
pub const CREDENTIALS_ANNOTATION: &str = "yuxi.dev/run-credentials";

/// The annotation the facade sets on a waiting AgentRun when a person's decisions resume it (the time,
/// RFC 3339): the controller then starts its runner again.
pub const RESUMED_ANNOTATION: &str = "yuxi.dev/resumed-at";

/// `app.kubernetes.io/name` of every sandbox pod (a NetworkPolicy can select them by it).
pub const APP_NAME: &str = "yuxi-sandbox";
/// `app.kubernetes.io/managed-by` of every sandbox pod.
pub const MANAGED_BY: &str = "yuxi-operator";
/// The label naming the run of a sandbox pod (the run's name, or [`label_value`] of it when it is longer
/// than a label value may be).
pub const RUN_LABEL: &str = "yuxi.dev/run";
/// The label naming the agent of a sandbox pod (the same key the facade puts on the AgentRuns it creates).
pub const AGENT_LABEL: &str = "yuxi.dev/agent";
/// The label naming the thread of a sandbox pod, as [`label_value`] makes it.
pub const THREAD_LABEL: &str = "yuxi.dev/thread";
/// The annotation holding the full thread id of a sandbox pod.
pub const THREAD_ANNOTATION: &str = "yuxi.dev/thread-id";

/// The label saying whether a warm sandbox pod is `idle` (in its pool, holding no run) or `claimed`
/// (given to the one run its [`RUN_LABEL`] names) (docs/concepts/warm-pools.md).
pub const WARM_LABEL: &str = "yuxi.dev/warm";
/// The label naming a warm pod's pool: the fingerprint of the pod it is, so a run claims only a pod
/// identical to the one it would have been given.
pub const WARM_POOL_LABEL: &str = "yuxi.dev/warm-pool";
/// [`WARM_LABEL`] of a pod in its pool.
pub const WARM_IDLE: &str = "idle";
/// [`WARM_LABEL`] of a pod given to a run.
pub const WARM_CLAIMED: &str = "claimed";

/// The annotation holding an Agent's icon (Yuxi `icon`: a URL or a data URL), written by the facade.
pub const ICON_ANNOTATION: &str = "yuxi.dev/icon";
/// The annotation holding an Agent's pictures (Yuxi `pics`) as a JSON list of strings, written by the
/// facade.
pub const PICS_ANNOTATION: &str = "yuxi.dev/pics";
/// The annotation holding when an Agent was created through the facade (RFC 3339), for the local mode,
/// whose agents have no `metadata.creationTimestamp`.
pub const CREATED_AT_ANNOTATION: &str = "yuxi.dev/created-at";
/// The annotation holding when the facade last changed an Agent (RFC 3339).
pub const UPDATED_AT_ANNOTATION: &str = "yuxi.dev/updated-at";
/// The annotation holding who last changed an Agent through the facade (a uid).
pub const UPDATED_BY_ANNOTATION: &str = "yuxi.dev/updated-by";

/// The longest label value and DNS-1123 label, in characters.
const MAX_LABEL: usize = 63;
/// Hex digits of SHA-256 added to a name or label value that had to be cut or changed.
const HASH_LEN: usize = 8;

/// The first [`HASH_LEN`] hex digits of the SHA-256 of `text`.
fn short_hash(text: &str) -> String {
    Sha256::digest(text.as_bytes()).iter().take(HASH_LEN / 2).map(|b| format!("{b:02x}")).collect()
}

/// `text` cut to at most `max` characters, with `keep` deciding which characters stay (others become
/// `-`), and with characters that may not begin or end it trimmed from both ends.
fn cut(text: &str, max: usize, keep: impl Fn(char) -> bool, edge: impl Fn(char) -> bool) -> String {
    let mapped: String = text.chars().map(|c| if keep(c) { c } else { '-' }).take(max).collect();
    mapped.trim_matches(|c: char| !edge(c)).to_string()
}

/// The run's name with `-<suffix>` (none when `suffix` is empty) as a DNS-1123 label: itself when it is
/// one already; otherwise the name's first characters (lowercase, dots and other characters as `-`), `-`
/// and 8 hex digits of the SHA-256 of the whole name, then the suffix, at most 63 characters in all.
fn dns_label(name: &str, suffix: &str) -> String {
    let suffix = if suffix.is_empty() { String::new() } else { format!("-{suffix}") };
    let whole = format!("{name}{suffix}");
    if crate::resources::validation::is_dns1123_label(&whole) {
        return whole;
    }
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let room = MAX_LABEL - HASH_LEN - 1 - suffix.len();
    let prefix = cut(&name.to_ascii_lowercase(), room, |c| alnum(c) || c == '-', alnum);
    let prefix = if prefix.is_empty() { "run".to_string() } else { prefix };
    format!("{prefix}-{}{suffix}", short_hash(name))
}

/// The name of a run's sandbox pod: a DNS-1123 label (at most 63 characters of `a-z 0-9 -`), stable
/// across reconciles. The run's name when it is such a label already; otherwise (a name with dots, or
/// longer than 63 characters) its first characters with dots as `-`, then `-` and 8 hex digits of the
/// SHA-256 of the whole name, so two runs never share a pod.
pub fn pod_name(run: &AgentRun) -> String {
    dns_label(run.metadata.name.as_deref().unwrap_or_default(), "")
}

/// The name of a run's inputs Secret: `<run name>-inputs`, shortened as [`pod_name`] shortens names
/// when that is not a DNS-1123 label (at most 63 characters).
pub fn inputs_name(run: &AgentRun) -> String {
    dns_label(run.metadata.name.as_deref().unwrap_or_default(), "inputs")
}

/// The name of the Secret holding a run's credentials for the facade, under the key `token`
/// ([`CREDENTIALS_TOKEN_KEY`]): `<run name>-credentials`, shortened as [`pod_name`] shortens names when
/// that is not a DNS-1123 label (at most 63 characters). Whoever starts a run that may delegate (the
/// facade, for a main agent's run) creates it, owned by the AgentRun, of type [`CREDENTIALS_SECRET_TYPE`],
/// and says so with [`CREDENTIALS_ANNOTATION`]; a run without one gets no subagent tools.
pub fn credentials_secret_name(run: &AgentRun) -> String {
    dns_label(run.metadata.name.as_deref().unwrap_or_default(), "credentials")
}

/// `text` as a label value: itself when it is one already (at most 63 characters of `A-Z a-z 0-9 - _ .`,
/// beginning and ending with a letter or digit, or empty); otherwise its first characters (others as
/// `-`), `-` and 8 hex digits of the SHA-256 of the whole text, which is a valid label value and tells
/// long ids apart. Select pods of an id with the same function.
pub fn label_value(text: &str) -> String {
    let alnum = |c: char| c.is_ascii_alphanumeric();
    let inner = |c: char| alnum(c) || matches!(c, '-' | '_' | '.');
    let valid = text.is_empty()
        || (text.len() <= MAX_LABEL && text.starts_with(alnum) && text.ends_with(alnum) && text.chars().all(inner));
    if valid {
        return text.to_string();
    }
    let prefix = cut(text, MAX_LABEL - HASH_LEN - 1, inner, alnum);
    if prefix.is_empty() { short_hash(text) } else { format!("{prefix}-{}", short_hash(text)) }
}
