//! The names an Agent declares, checked against what exists where it is judged: its built-in tools and
//! model providers everywhere (they are fixed), and its knowledge bases, skills, Models, MCP servers and
//! subagents against the objects the judging place knows ([`Known`]).
//!
//! Where the set is complete (`yuxi-operator validate` over a folder, the local mode, the facade's writes)
//! an unknown name is an error ([`Severity::Refuse`]); where objects may arrive in any order (the
//! admission webhook under GitOps, the controller's status) it is a warning ([`Severity::Warn`]). Every
//! finding names the field and the unknown value, and suggests a close match or lists the known names.

use kube::ResourceExt;

use super::Report;
use crate::resources::{Agent, GENERAL_PURPOSE};

/// The model providers a `<provider>/<model>` id may name: the installation's own OpenAI-compatible
/// endpoint and the offline scripted models (the runner's model resolution; docs/concepts/models.md).
pub const MODEL_PROVIDERS: [&str; 2] = ["openai", "scripted"];

/// The longest name list checked name by name: a longer one is refused by its size alone (one
/// finding, not one per entry), as the CRD bounds it.
const MAX_CHECKED_NAMES: usize = 256;

/// The longest name an Agent may give (the CRD's bound on every entry of its lists).
const MAX_NAME_CHARS: usize = 128;

/// Whether the names of `list` are worth checking one by one: it is within its bound.
fn checkable(list: &[String]) -> bool {
    list.len() <= MAX_CHECKED_NAMES
}

/// Whether `name` is worth looking up: not empty and within its length, which other rules refuse
/// otherwise without repeating the name.
fn lookable(name: &str) -> bool {
    !name.is_empty() && name.chars().count() <= MAX_NAME_CHARS
}

/// The most known names a message lists; more are counted.
pub const MAX_LISTED_NAMES: usize = 20;

/// How an unknown name counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// An error: the object is refused.
    Refuse,
    /// A warning: the object is admitted (the name may be created later).
    Warn,
}

/// The objects an Agent's names may refer to, as the judging place knows them. `None` for a kind the
/// place cannot tell: its names are not checked.
#[derive(Clone, Debug, Default)]
pub struct Known {
    /// The knowledge bases' slugs (`context.knowledges`).
    pub knowledge_bases: Option<Vec<String>>,
    /// The skills library's skills (`context.skills`, `context.preloadSkills`).
    pub skills: Option<Vec<String>>,
    /// The Model resources' names (`context.model` without a `/`).
    pub models: Option<Vec<String>>,
    /// The MCP servers, as an agent of this namespace names them (`context.mcps`).
    pub mcp_servers: Option<Vec<String>>,
    /// The subagents' slugs (`context.subagents`); `general-purpose` is always known.
    pub subagents: Option<Vec<String>>,
}

impl Known {
    /// The subagents among `agents`, by slug.
    pub fn subagents_of(agents: &[Agent]) -> Vec<String> {
        agents.iter().filter(|a| a.spec.is_subagent()).map(|a| a.name_any()).collect()
    }
}

/// `value` is not among `known`: a sentence that suggests the closest known name when one is close
/// (at most a third of its characters different), and lists the known names (at most
/// [`MAX_LISTED_NAMES`], the rest counted), or says there are none.
pub fn unknown_name_hint<S: AsRef<str>>(value: &str, known: &[S]) -> String {
    let length = value.chars().count();
    // Only names of about the same length can be close: the others cost nothing to skip, and a name
    // longer than any name may be is compared with nothing.
    let closest = known
        .iter()
        .map(AsRef::as_ref)
        .filter(|k| length <= MAX_NAME_CHARS && k.chars().count().abs_diff(length) <= length / 3 + 1)
        .map(|k| (strsim::damerau_levenshtein(value, k), k))
        .filter(|(distance, k)| *distance <= (k.chars().count().max(length) / 3).max(1))
        .min_by_key(|(distance, k)| (*distance, *k));
    let mut names: Vec<&str> = known.iter().map(AsRef::as_ref).collect();
    names.sort_unstable();
    names.dedup();
    let listed = match names.len() {
        0 => "there are none".to_string(),
        n if n > MAX_LISTED_NAMES => {
            format!("known: {} and {} more", names[..MAX_LISTED_NAMES].join(", "), n - MAX_LISTED_NAMES)
        }
        _ => format!("known: {}", names.join(", ")),
    };
    match closest {
        Some((_, close)) => format!("did you mean {close:?}? {listed}"),
        None => listed,
    }
}

/// The names that need no other object: every `context.tools` entry is a built-in tool, and a
/// `context.model` of the form `<provider>/<model>` names a known provider ([`MODEL_PROVIDERS`]).
/// Errors wherever an Agent is judged.
pub fn check_fixed_names(report: &mut Report, agent: &Agent) {
    let context = agent.spec.context();
    let tools = crate::resources::tools::names::BUILTIN;
    let named = context.tools.iter().filter(|list| checkable(list)).flatten();
    for (i, tool) in named.enumerate() {
        // An empty name is refused by its length already.
        if lookable(tool) && !tools.contains(&tool.as_str()) {
            report.error(
                format!("spec.context.tools[{i}]"),
                format!("no built-in tool {tool:?}; {}", unknown_name_hint(tool, &tools)),
            );
        }
    }
    if let Some((provider, _)) = context.model.as_deref().filter(|m| m.len() <= 256).and_then(|m| m.split_once('/'))
        && !MODEL_PROVIDERS.contains(&provider)
    {
        report.error(
            "spec.context.model",
            format!(
                "no model provider {provider:?} (a model is `<provider>/<model>` or the name of a Model); {}",
                unknown_name_hint(provider, &MODEL_PROVIDERS)
            ),
        );
    }
}

/// The names that refer to other objects, each against `known` (kinds it does not know are skipped),
/// as `severity` says: knowledge bases, skills and preloaded skills, the Model a `context.model` without
/// a `/` names, MCP servers, and subagents (`general-purpose` always resolves).
pub fn check_references(agent: &Agent, known: &Known, severity: Severity) -> Report {
    let mut report = Report::default();
    let mut unknown = |field: String, message: String| match severity {
        Severity::Refuse => report.error(field, message),
        Severity::Warn => report.warn(field, message),
    };
    let context = agent.spec.context();
    let lists = [
        ("spec.context.knowledges", &context.knowledges, &known.knowledge_bases, "knowledge base"),
        ("spec.context.skills", &context.skills, &known.skills, "skill"),
        ("spec.context.preloadSkills", &context.preload_skills, &known.skills, "skill"),
        ("spec.context.mcps", &context.mcps, &known.mcp_servers, "MCP server"),
    ];
    for (field, named, known, noun) in lists {
        let Some(known) = known else { continue };
        for (i, name) in named.iter().filter(|list| checkable(list)).flatten().enumerate() {
            if lookable(name) && !known.contains(name) {
                unknown(format!("{field}[{i}]"), format!("no {noun} {name:?}; {}", unknown_name_hint(name, known)));
            }
        }
    }
    if let (Some(model), Some(models)) = (context.model.as_deref().filter(|m| lookable(m)), &known.models)
        && !model.contains('/')
        && !models.iter().any(|m| m == model)
    {
        unknown(
            "spec.context.model".into(),
            format!(
                "no Model {model:?} (a model is the name of a Model or `<provider>/<model>`); {}",
                unknown_name_hint(model, models)
            ),
        );
    }
    if let Some(subagents) = &known.subagents {
        let mut resolvable = subagents.clone();
        resolvable.push(GENERAL_PURPOSE.to_string());
        for (i, slug) in context.subagents.iter().filter(|list| checkable(list)).flatten().enumerate() {
            if lookable(slug) && !resolvable.contains(slug) {
                unknown(
                    format!("spec.context.subagents[{i}]"),
                    format!("no subagent {slug:?}; {}", unknown_name_hint(slug, &resolvable)),
                );
            }
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(context: &str) -> Agent {
        serde_norway::from_str(&format!(
            "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {{name: a}}\nspec:\n  backend: ChatbotAgent\n  context: {context}\n"
        ))
        .expect("an Agent")
    }

    fn known() -> Known {
        Known {
            knowledge_bases: Some(vec!["product-docs".into()]),
            skills: Some(vec!["citations".into(), "report-writing".into()]),
            models: Some(vec!["deepseek-chat".into()]),
            mcp_servers: Some(vec!["docs".into()]),
            subagents: Some(vec!["research-explorer".into()]),
        }
    }

    #[test]
    fn a_misspelt_tool_is_refused_with_the_close_match_and_the_known_tools() {
        let mut report = Report::default();
        check_fixed_names(&mut report, &agent("{tools: [ls, read_fiel]}"));
        assert_eq!(report.errors.len(), 1, "{:?}", report.errors);
        assert_eq!(report.errors[0].field, "spec.context.tools[1]");
        let message = &report.errors[0].message;
        assert!(message.contains("no built-in tool \"read_fiel\""), "{message}");
        assert!(message.contains("did you mean \"read_file\"?"), "{message}");
        assert!(message.contains("known: edit_file, execute, glob, grep, ls, read_file, write_file"), "{message}");
    }

    #[test]
    fn an_unknown_model_provider_is_refused_and_a_model_name_is_left_to_the_references() {
        let mut report = Report::default();
        check_fixed_names(&mut report, &agent("{model: opneai/gpt-4o}"));
        assert_eq!(report.errors[0].field, "spec.context.model");
        assert!(report.errors[0].message.contains("did you mean \"openai\"?"), "{}", report.errors[0]);
        for fine in ["{model: openai/gpt-4o}", "{model: scripted/echo}", "{model: deepseek-chat}"] {
            let mut report = Report::default();
            check_fixed_names(&mut report, &agent(fine));
            assert!(report.is_ok(), "{fine}: {:?}", report.errors);
        }
    }

    #[test]
    fn every_kind_of_unknown_reference_is_named_by_its_field_when_refused() {
        let named = agent(
            "{knowledges: [product-doc], skills: [citations, nope], preloadSkills: [citation], model: deepseek, mcps: [docs, wiki], subagents: [research-explorer, general-purpose, reserch-explorer]}",
        );
        let report = check_references(&named, &known(), Severity::Refuse);
        let fields: Vec<&str> = report.errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.context.knowledges[0]",
                "spec.context.skills[1]",
                "spec.context.preloadSkills[0]",
                "spec.context.mcps[1]",
                "spec.context.model",
                "spec.context.subagents[2]"
            ]
        );
        assert!(report.warnings.is_empty());
        assert!(report.errors[0].message.contains("did you mean \"product-docs\"?"), "{}", report.errors[0]);
        assert!(report.errors[1].message.contains("known: citations, report-writing"), "{}", report.errors[1]);
        assert!(!report.errors[1].message.contains("did you mean"), "nothing is close to nope: {}", report.errors[1]);
        assert!(report.errors[5].message.contains("did you mean \"research-explorer\"?"), "{}", report.errors[5]);
    }

    #[test]
    fn a_place_that_cannot_tell_checks_nothing_and_a_warning_place_only_warns() {
        let named = agent("{knowledges: [x], skills: [y], model: z, mcps: [w], subagents: [v]}");
        assert_eq!(check_references(&named, &Known::default(), Severity::Refuse), Report::default());
        let warned = check_references(&named, &known(), Severity::Warn);
        assert!(warned.errors.is_empty());
        assert_eq!(warned.warnings.len(), 5, "{:?}", warned.warnings);
    }

    #[test]
    fn a_long_list_of_known_names_is_cut_and_counted() {
        let many: Vec<String> = (0..30).map(|i| format!("kb-{i:02}")).collect();
        let hint = unknown_name_hint("zzz", &many);
        assert!(hint.ends_with("kb-19 and 10 more"), "{hint}");
        assert_eq!(unknown_name_hint("x", &Vec::<String>::new()), "there are none");
    }

    #[test]
    fn a_name_longer_than_any_name_is_left_to_its_length_rule_and_never_echoed() {
        let long = "y".repeat(1_000_000);
        let named = agent(&format!("{{tools: [{long}], subagents: [{long}], knowledges: [{long}]}}"));
        let mut report = Report::default();
        check_fixed_names(&mut report, &named);
        report.extend(check_references(&named, &known(), Severity::Refuse));
        assert!(report.errors.is_empty(), "{} findings", report.errors.len());
        assert!(!unknown_name_hint(&long, &["y".repeat(100)]).contains("did you mean"));
    }
}
