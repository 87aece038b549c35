//! Every rule about Agent, AgentRun, KnowledgeBase and Model objects, as pure functions (docs/concepts/agents.md).
//!
//! The webhook, the facade and the local mode all call these functions, so an object is judged the same
//! wherever it enters. Each finding names the field it concerns with a Kubernetes field path
//! (`spec.context.subagents[1]`). Errors reject the object; warnings admit it and tell the user.
//!
//! The rules that concern one object are also CEL rules in the CRDs (see [`super::agent`] and
//! [`super::agent_run`]), so the API server enforces them even without the webhook; the bounds the CRD
//! schema carries (lengths, ranges, patterns) are checked here too, because the facade and the local mode
//! have no API server in front of them.

use std::collections::HashSet;
use std::fmt;

use kube::ResourceExt;
use serde::Serialize;

use super::agent::{AccessLevel, Agent, AgentContext, AgentShare, ShareScope};
use super::{BACKEND_SUBAGENT, BACKENDS};

mod agent_run;
mod knowledge_base;
mod model;
mod references;
mod remote;
pub use agent_run::{validate_agent_run, validate_agent_run_update};
pub use knowledge_base::{MAX_CONFIG_MAP_BYTES, validate_config_map, validate_knowledge_base};
pub use model::validate_model;
pub use references::{Known, MODEL_PROVIDERS, Severity, check_references, unknown_name_hint};
pub use remote::{validate_mcp_references, validate_mcp_server};

/// One finding about one field: `field` is a Kubernetes field path such as `spec.share.readScope`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FieldIssue {
    /// The field path, from the object's root (`metadata.name`, `spec.context.tools[0]`).
    pub field: String,
    /// What is wrong, in a sentence a user can act on.
    pub message: String,
}

impl fmt::Display for FieldIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// What validation found: errors reject the object, warnings admit it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    /// Findings that reject the object.
    pub errors: Vec<FieldIssue>,
    /// Findings that admit the object but tell the user something will not work as written.
    pub warnings: Vec<FieldIssue>,
}

impl Report {
    /// Whether the object is admitted (it may still carry warnings).
    pub fn is_ok(&self) -> bool {
        self.errors.is_empty()
    }

    /// The errors as one line, `field: message; field: message`, the first [`SUMMARY_ERRORS`] of them.
    pub fn error_summary(&self) -> String {
        let mut summary =
            self.errors.iter().take(SUMMARY_ERRORS).map(ToString::to_string).collect::<Vec<_>>().join("; ");
        if self.errors.len() > SUMMARY_ERRORS {
            summary.push_str(&format!("; and {} more errors", self.errors.len() - SUMMARY_ERRORS));
        }
        summary
    }

    /// The warnings, one `field: message` string each.
    pub fn warning_lines(&self) -> Vec<String> {
        self.warnings.iter().map(ToString::to_string).collect()
    }

    /// Adds an error on `field` (its path, such as `spec.uid`).
    pub fn error(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.errors.push(FieldIssue { field: field.into(), message: message.into() });
    }

    fn warn(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.warnings.push(FieldIssue { field: field.into(), message: message.into() });
    }

    /// Adds another report's findings to this one.
    pub fn extend(&mut self, other: Report) {
        self.errors.extend(other.errors);
        self.warnings.extend(other.warnings);
    }
}

/// The most errors [`Report::error_summary`] spells out.
pub const SUMMARY_ERRORS: usize = 20;

/// The longest DNS-1123 label, in characters.
const MAX_LABEL_LEN: usize = 63;

/// Whether `name` is a DNS-1123 label: 1 to 63 characters of `a-z 0-9 -`, starting and ending with a
/// letter or digit (the Kubernetes rule for names that become labels and path segments).
pub fn is_dns1123_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    let edge_ok = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    !bytes.is_empty()
        && bytes.len() <= MAX_LABEL_LEN
        && edge_ok(bytes[0])
        && edge_ok(bytes[bytes.len() - 1])
        && bytes.iter().all(|&b| edge_ok(b) || b == b'-')
}

/// Whether `name` is a DNS-1123 subdomain: 1 to 253 characters of `a-z 0-9 - .`, starting and ending
/// with a letter or digit (the Kubernetes rule for most object names).
pub fn is_dns1123_subdomain(name: &str) -> bool {
    name.len() <= 253 && !name.is_empty() && name.split('.').all(is_dns1123_label)
}

/// Checks `metadata.namespace` (a DNS-1123 label when set).
fn check_namespace(report: &mut Report, meta: &kube::core::ObjectMeta) {
    if let Some(namespace) = &meta.namespace
        && !is_dns1123_label(namespace)
    {
        report.error("metadata.namespace", format!("{namespace:?} is not a namespace name: it {DNS1123_LABEL_HINT}"));
    }
}

const DNS1123_LABEL_HINT: &str = "must be a DNS-1123 label: at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit";

fn check_len(report: &mut Report, field: &str, value: &str, min: usize, max: usize) {
    let len = value.chars().count();
    if len < min {
        report.error(
            field,
            if min == 1 { "must not be empty".to_string() } else { format!("must be at least {min} characters") },
        );
    } else if len > max {
        report.error(field, format!("must be at most {max} characters (has {len})"));
    }
}

fn check_opt_len(report: &mut Report, field: &str, value: Option<&str>, max: usize) {
    if let Some(value) = value {
        check_len(report, field, value, 0, max);
    }
}

/// Checks a list of names: at most `max_items` entries, each 1 to `max_len` characters, no duplicates
/// (the CRD declares these lists as sets).
fn check_name_list(report: &mut Report, field: &str, list: &[String], max_items: usize, max_len: usize) {
    if list.len() > max_items {
        // One finding, not one per entry: a huge list must not make a huge answer.
        report.error(field, format!("must have at most {max_items} entries (has {})", list.len()));
        return;
    }
    let mut seen = HashSet::new();
    for (i, item) in list.iter().enumerate() {
        let item_field = format!("{field}[{i}]");
        check_len(report, &item_field, item, 1, max_len);
        if !seen.insert(item.as_str()) {
            report.error(item_field, format!("duplicate entry {item:?}"));
        }
    }
}

/// The single-object rules of an Agent (docs/concepts/agents.md; Yuxi's agent validation):
/// - `metadata.name` (the slug) is a DNS-1123 label;
/// - `spec.backend` is a known backend (the message lists them);
/// - `spec.isSubagent`, when set, is true exactly when the backend is `SubAgentBackend` (both ways);
/// - a subagent is not the default agent and does not set `context.subagents` (no nesting);
/// - share scopes: `Department` needs a department id, `User` a uid, `manageScope` lies within
///   `readScope` (see [`scope_within`]);
/// - the schema's bounds: lengths, list sizes, duplicate-free lists, step and retry ranges;
/// - `context.tools` names built-in tools and a `<provider>/<model>` model a known provider
///   ([`references`]; the names of other objects are [`check_references`]).
pub fn validate_agent(agent: &Agent) -> Report {
    let mut report = Report::default();
    check_namespace(&mut report, &agent.metadata);
    let name = agent.name_any();
    if !is_dns1123_label(&name) {
        report.error("metadata.name", format!("{name:?} is not a valid slug: an Agent's name {DNS1123_LABEL_HINT}"));
    }
    let spec = &agent.spec;
    check_opt_len(&mut report, "spec.displayName", spec.display_name.as_deref(), 200);
    check_opt_len(&mut report, "spec.description", spec.description.as_deref(), 4096);
    check_opt_len(&mut report, "spec.owner", spec.owner.as_deref(), 128);

    if !BACKENDS.contains(&spec.backend.as_str()) {
        report.error(
            "spec.backend",
            format!("unknown backend {:?}; known backends: {}", spec.backend, BACKENDS.join(", ")),
        );
    }
    let subagent_backend = spec.has_subagent_backend();
    match spec.is_subagent {
        Some(true) if !subagent_backend => report.error(
            "spec.isSubagent",
            format!(
                "isSubagent is true but backend is {:?}: a subagent must use backend {BACKEND_SUBAGENT}, and an ordinary agent cannot pose as a subagent",
                spec.backend
            ),
        ),
        Some(false) if subagent_backend => report.error(
            "spec.isSubagent",
            format!("backend {BACKEND_SUBAGENT} requires isSubagent true (or omit isSubagent to derive it)"),
        ),
        _ => {}
    }
    if subagent_backend && spec.is_default() {
        report.error("spec.default", "a subagent cannot be the default agent");
    }
    if let Some(context) = &spec.context {
        if subagent_backend && context.subagents.is_some() {
            report.error(
                "spec.context.subagents",
                "a subagent cannot configure subagents (no nesting); remove the field",
            );
        }
        validate_context(&mut report, context);
    }
    references::check_fixed_names(&mut report, agent);
    if let Some(share) = &spec.share {
        validate_share(&mut report, share);
    }
    check_budget(&mut report, "spec.budget.maxTokens", agent.spec.budget.as_ref());
    if let Some(remote) = &spec.remote {
        remote::check_remote(&mut report, remote, subagent_backend);
    }
    if let Some(pool) = spec.sandbox.as_ref().and_then(|s| s.warm_pool.as_ref()) {
        check_warm_pool(&mut report, "spec.sandbox.warmPool", pool);
    }
    report
}

/// A warm pool keeps 0 to [`MAX_WARM_POOL_SIZE`](crate::resources::agent::MAX_WARM_POOL_SIZE) pods per
/// scope, each idle for 30 to 3600 s (the CRD's bounds; `field` is the pool's path).
pub fn check_warm_pool(report: &mut Report, field: &str, pool: &crate::resources::agent::WarmPool) {
    use crate::resources::agent::{MAX_WARM_POOL_SIZE, WARM_POOL_IDLE_SECONDS};
    if !(0..=MAX_WARM_POOL_SIZE).contains(&pool.size) {
        report.error(format!("{field}.size"), format!("must be within 0..{MAX_WARM_POOL_SIZE} (is {})", pool.size));
    }
    if let Some(seconds) = pool.max_idle_seconds
        && !WARM_POOL_IDLE_SECONDS.contains(&seconds)
    {
        report.error(
            format!("{field}.maxIdleSeconds"),
            format!(
                "must be within {}..{} seconds (is {seconds})",
                WARM_POOL_IDLE_SECONDS.start(),
                WARM_POOL_IDLE_SECONDS.end()
            ),
        );
    }
}

fn validate_context(report: &mut Report, context: &AgentContext) {
    check_opt_len(report, "spec.context.systemPrompt", context.system_prompt.as_deref(), 65536);
    check_opt_len(report, "spec.context.model", context.model.as_deref(), 256);
    let lists = [
        ("spec.context.tools", &context.tools),
        ("spec.context.knowledges", &context.knowledges),
        ("spec.context.mcps", &context.mcps),
        ("spec.context.skills", &context.skills),
        ("spec.context.preloadSkills", &context.preload_skills),
    ];
    for (field, list) in lists {
        if let Some(list) = list {
            check_name_list(report, field, list, 256, 128);
        }
    }
    if let Some(required) = &context.approval_required {
        check_name_list(report, "spec.context.approvalRequired", required, 256, 130);
    }
    for (i, entry) in context.mcp_tools.iter().flatten().enumerate() {
        let field = format!("spec.context.mcpTools[{i}]");
        check_name_list(report, &format!("{field}.tools"), &entry.tools, 256, 128);
        if context.mcp_tools.iter().flatten().take(i).any(|earlier| earlier.server == entry.server) {
            report.error(format!("{field}.server"), format!("{:?} is listed twice", entry.server));
        } else if context.mcps.as_ref().is_some_and(|named| !named.contains(&entry.server)) {
            report.error(format!("{field}.server"), format!("{:?} is not one of context.mcps", entry.server));
        }
    }
    if let Some(seconds) = context.approval_timeout_seconds
        && !(60..=604_800).contains(&seconds)
    {
        report.error("spec.context.approvalTimeoutSeconds", format!("must be within 60..604800 (is {seconds})"));
    }
    if let Some(subagents) = &context.subagents {
        check_name_list(report, "spec.context.subagents", subagents, 256, MAX_LABEL_LEN);
        for (i, slug) in subagents.iter().enumerate() {
            if !slug.is_empty() && !is_dns1123_label(slug) {
                report.error(
                    format!("spec.context.subagents[{i}]"),
                    format!("{slug:?} is not a valid slug: it {DNS1123_LABEL_HINT}"),
                );
            }
        }
    }
    if let Some(steps) = context.max_execution_steps
        && !(1..=10_000).contains(&steps)
    {
        report.error("spec.context.maxExecutionSteps", format!("must be within 1..10000 (is {steps})"));
    }
    if let Some(retries) = context.model_retry_times
        && retries > 10
    {
        report.error("spec.context.modelRetryTimes", format!("must be within 0..10 (is {retries})"));
    }
    let counts = [
        ("spec.context.summaryThreshold", context.summary_threshold, 1, 10_000),
        ("spec.context.summaryKeepMessages", context.summary_keep_messages, 0, 1000),
        ("spec.context.summaryToolResultTokenLimit", context.summary_tool_result_token_limit, 1, 1_000_000),
    ];
    for (field, value, min, max) in counts {
        if let Some(value) = value
            && !(min..=max).contains(&value)
        {
            report.error(field, format!("must be within {min}..{max} (is {value})"));
        }
    }
    if let Some(ratio) = context.summary_l2_trigger_ratio
        && !(0.1..=1.0).contains(&ratio)
    {
        report.error("spec.context.summaryL2TriggerRatio", format!("must be within 0.1..1.0 (is {ratio})"));
    }
    check_opt_len(report, "spec.context.summaryPrompt", context.summary_prompt.as_deref(), 65536);
    if let Some(prompt) = &context.summary_prompt
        && !prompt.is_empty()
        && !prompt.contains("{messages}")
    {
        report.error("spec.context.summaryPrompt", "must contain {messages}, where the messages to summarise go");
    }
}

fn validate_share(report: &mut Report, share: &AgentShare) {
    for (field, scope) in [("spec.share.readScope", &share.read_scope), ("spec.share.manageScope", &share.manage_scope)]
    {
        if let Some(scope) = scope {
            validate_scope(report, field, scope);
        }
    }
    if let Some(manage) = &share.manage_scope {
        match &share.read_scope {
            None => report.error(
                "spec.share.manageScope",
                "must lie within spec.share.readScope, which is not set: whoever may manage the agent must also be able to read it",
            ),
            Some(read) if !scope_within(manage, read) => report.error(
                "spec.share.manageScope",
                format!("must lie within spec.share.readScope: {} does not include {}", describe_scope(read), describe_scope(manage)),
            ),
            Some(_) => {}
        }
    }
}

fn validate_scope(report: &mut Report, field: &str, scope: &ShareScope) {
    match scope.access_level {
        AccessLevel::Department if scope.department_ids.is_empty() => {
            report.error(format!("{field}.departmentIds"), "a Department scope needs at least one department id");
        }
        AccessLevel::User if scope.user_uids.is_empty() => {
            report.error(format!("{field}.userUids"), "a User scope needs at least one user uid");
        }
        _ => {}
    }
    if scope.department_ids.len() > 256 {
        report.error(
            format!("{field}.departmentIds"),
            format!("must have at most 256 entries (has {})", scope.department_ids.len()),
        );
        return;
    }
    let mut seen = HashSet::new();
    for (i, id) in scope.department_ids.iter().enumerate() {
        if !seen.insert(id) {
            report.error(format!("{field}.departmentIds[{i}]"), format!("duplicate entry {id}"));
        }
    }
    check_name_list(report, &format!("{field}.userUids"), &scope.user_uids, 256, 128);
}

/// Whether everybody in `inner` is also in `outer`, judged from the scopes alone:
/// - a `Global` outer scope includes every scope;
/// - a `Department` scope includes a `Department` scope whose ids are a subset of its own;
/// - a `User` scope includes a `User` scope whose uids are a subset of its own.
///
/// A `User` scope inside a `Department` scope is not judged to lie within it, because department
/// membership is not known from the object; widen the read scope to `Global` or list the users.
pub fn scope_within(inner: &ShareScope, outer: &ShareScope) -> bool {
    match (outer.access_level, inner.access_level) {
        (AccessLevel::Global, _) => true,
        (AccessLevel::Department, AccessLevel::Department) => {
            inner.department_ids.iter().all(|id| outer.department_ids.contains(id))
        }
        (AccessLevel::User, AccessLevel::User) => inner.user_uids.iter().all(|uid| outer.user_uids.contains(uid)),
        _ => false,
    }
}

fn describe_scope(scope: &ShareScope) -> String {
    match scope.access_level {
        AccessLevel::Global => "Global".to_string(),
        AccessLevel::Department => format!("Department {:?}", scope.department_ids),
        AccessLevel::User => format!("User {:?}", scope.user_uids),
    }
}

/// The rules that need the other Agents of the namespace (`others`; the agent itself may be among them
/// and is skipped by name), as the webhook and the controller judge them:
/// - at most one default agent per namespace ([`validate_default_among`]);
/// - every `context.subagents` entry should name a subagent in the namespace: a warning otherwise
///   (manifests may be applied in any order), and the entry is never resolved at run time.
pub fn validate_agent_among(agent: &Agent, others: &[Agent]) -> Report {
    let mut report = validate_default_among(agent, others);
    let name = agent.name_any();
    let others: Vec<&Agent> = others.iter().filter(|other| other.name_any() != name).collect();
    let subagents = agent.spec.context.as_ref().and_then(|c| c.subagents.as_ref());
    for (i, slug) in subagents.into_iter().flatten().enumerate() {
        let field = format!("spec.context.subagents[{i}]");
        match others.iter().find(|other| other.name_any() == *slug) {
            None if slug == super::GENERAL_PURPOSE => {}
            None => {
                report.warn(field, format!("no Agent {slug:?} in this namespace yet; it is ignored until one exists"))
            }
            Some(other) if !other.spec.is_subagent() => {
                report.warn(field, format!("Agent {slug:?} is not a subagent; it is ignored until it becomes one"));
            }
            Some(_) => {}
        }
    }
    report
}

/// At most one default agent per namespace: an error on `spec.default` naming the current default
/// among `others` (the agent itself is skipped by name).
pub fn validate_default_among(agent: &Agent, others: &[Agent]) -> Report {
    let mut report = Report::default();
    let name = agent.name_any();
    // A subagent claiming to be the default is rejected by its own rule; only main agents compete.
    let claims_default = |a: &Agent| a.spec.is_default() && !a.spec.has_subagent_backend();
    if claims_default(agent)
        && let Some(current) = others.iter().find(|other| claims_default(other) && other.name_any() != name)
    {
        report.error(
            "spec.default",
            format!(
                "agent {:?} is already the default agent of this namespace; at most one agent per namespace may be the default",
                current.name_any()
            ),
        );
    }
    report
}

/// A budget's `maxTokens` is 1 to [`MAX_BUDGET_TOKENS`](crate::resources::MAX_BUDGET_TOKENS); its
/// `maxCost` a currency code and a decimal amount of at most 6 integer and 12 fractional digits, more
/// than 0 (the CRD's pattern; `field` is the `maxTokens` path, whose parent is the budget's).
pub(super) fn check_budget(report: &mut Report, field: &str, budget: Option<&crate::resources::RunBudget>) {
    if let Some(max) = budget.and_then(|b| b.max_tokens)
        && !(1..=crate::resources::MAX_BUDGET_TOKENS).contains(&max)
    {
        report.error(field, format!("must be within 1..{} (is {max})", crate::resources::MAX_BUDGET_TOKENS));
    }
    if let Some(cost) = budget.and_then(|b| b.max_cost.as_ref()) {
        let parent = field.trim_end_matches(".maxTokens");
        if !(cost.currency.len() == 3 && cost.currency.bytes().all(|b| b.is_ascii_uppercase())) {
            report.error(format!("{parent}.maxCost.currency"), "must be an ISO 4217 code of three capital letters");
        }
        if crate::resources::model::parse_amount_picos(&cost.amount).is_none_or(|picos| picos <= 0) {
            report.error(
                format!("{parent}.maxCost.amount"),
                format!(
                    "{:?} is not a decimal more than 0 with at most 6 integer and 12 fractional digits",
                    cost.amount
                ),
            );
        }
    }
}

/// The value the mutating webhook gives `spec.isSubagent` when it is omitted: derived from the backend
/// (true exactly for `SubAgentBackend`). `None` when the field is already set or the backend is unknown
/// (validation then rejects the object, so nothing is stamped on it).
pub fn derived_is_subagent(agent: &Agent) -> Option<bool> {
    let spec = &agent.spec;
    (spec.is_subagent.is_none() && BACKENDS.contains(&spec.backend.as_str())).then(|| spec.has_subagent_backend())
}

#[cfg(test)]
mod tests;
