//! Each rule both ways: an object it admits and one it rejects, with the field it names.

use super::*;
use crate::resources::AgentRun;

fn agent(yaml: &str) -> Agent {
    serde_norway::from_str(yaml).expect("test manifest is an Agent")
}

fn run(yaml: &str) -> AgentRun {
    serde_norway::from_str(yaml).expect("test manifest is an AgentRun")
}

fn agent_with(name: &str, spec: &str) -> Agent {
    let spec = spec.lines().map(|l| format!("  {l}")).collect::<Vec<_>>().join("\n");
    agent(&format!("apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata:\n  name: {name}\nspec:\n{spec}\n"))
}

fn run_with(spec: &str) -> AgentRun {
    let spec = spec.lines().map(|l| format!("  {l}")).collect::<Vec<_>>().join("\n");
    run(&format!("apiVersion: yuxi.dev/v1alpha1\nkind: AgentRun\nmetadata:\n  name: r\nspec:\n{spec}\n"))
}

/// The fields of the report's errors, in order.
fn error_fields(report: &Report) -> Vec<&str> {
    report.errors.iter().map(|e| e.field.as_str()).collect()
}

#[track_caller]
fn assert_admits(report: &Report) {
    assert!(report.is_ok(), "expected no errors, got {:?}", report.errors);
}

#[track_caller]
fn assert_rejects_only(report: &Report, field: &str) {
    assert_eq!(error_fields(report), vec![field], "errors: {:?}", report.errors);
}

#[test]
fn subagent_backend_and_flag_agree_both_ways() {
    assert_admits(&validate_agent(&agent_with("a", "backend: SubAgentBackend\nisSubagent: true")));
    assert_admits(&validate_agent(&agent_with("a", "backend: ChatbotAgent\nisSubagent: false")));
    assert_admits(&validate_agent(&agent_with("a", "backend: SubAgentBackend")));
    assert_admits(&validate_agent(&agent_with("a", "backend: ChatbotAgent")));

    let posing = validate_agent(&agent_with("a", "backend: ChatbotAgent\nisSubagent: true"));
    assert_rejects_only(&posing, "spec.isSubagent");
    assert!(posing.errors[0].message.contains("cannot pose as a subagent"), "{}", posing.errors[0]);

    let unflagged = validate_agent(&agent_with("a", "backend: SubAgentBackend\nisSubagent: false"));
    assert_rejects_only(&unflagged, "spec.isSubagent");
    assert!(unflagged.errors[0].message.contains("requires isSubagent true"), "{}", unflagged.errors[0]);
}

#[test]
fn omitted_is_subagent_is_derived_from_the_backend() {
    assert_eq!(derived_is_subagent(&agent_with("a", "backend: SubAgentBackend")), Some(true));
    assert_eq!(derived_is_subagent(&agent_with("a", "backend: ChatbotAgent")), Some(false));
    assert_eq!(derived_is_subagent(&agent_with("a", "backend: SubAgentBackend\nisSubagent: true")), None);
    assert_eq!(
        derived_is_subagent(&agent_with("a", "backend: ChatbotAgent\nisSubagent: true")),
        None,
        "a set flag is never overwritten"
    );
    assert_eq!(
        derived_is_subagent(&agent_with("a", "backend: Nope")),
        None,
        "nothing is stamped on an unknown backend"
    );
}

#[test]
fn a_subagent_cannot_be_the_default() {
    assert_admits(&validate_agent(&agent_with("a", "backend: ChatbotAgent\ndefault: true")));
    assert_admits(&validate_agent(&agent_with("a", "backend: SubAgentBackend\ndefault: false")));
    assert_rejects_only(&validate_agent(&agent_with("a", "backend: SubAgentBackend\ndefault: true")), "spec.default");
}

#[test]
fn a_subagent_cannot_configure_subagents_even_an_empty_list() {
    assert_admits(&validate_agent(&agent_with("a", "backend: ChatbotAgent\ncontext:\n  subagents: [b]")));
    assert_admits(&validate_agent(&agent_with("a", "backend: SubAgentBackend\ncontext:\n  tools: [ls]")));
    for list in ["[b]", "[]"] {
        let report =
            validate_agent(&agent_with("a", &format!("backend: SubAgentBackend\ncontext:\n  subagents: {list}")));
        assert_rejects_only(&report, "spec.context.subagents");
    }
}

#[test]
fn unknown_backend_is_rejected_with_the_known_ones_listed() {
    let report = validate_agent(&agent_with("a", "backend: LangGraphAgent"));
    assert_rejects_only(&report, "spec.backend");
    let message = &report.errors[0].message;
    assert!(
        message.contains("ChatbotAgent") && message.contains("SubAgentBackend") && message.contains("LangGraphAgent"),
        "{message}"
    );
}

#[test]
fn the_slug_is_a_dns1123_label() {
    assert_admits(&validate_agent(&agent_with("deep-research-2", "backend: ChatbotAgent")));
    for bad in ["research.explorer", "Research", "-a", "a-", &"a".repeat(64)] {
        assert_rejects_only(&validate_agent(&agent_with(bad, "backend: ChatbotAgent")), "metadata.name");
    }
}

#[test]
fn scopes_need_their_members() {
    let ok = "backend: ChatbotAgent\nshare:\n  readScope: {accessLevel: Department, departmentIds: [1]}";
    assert_admits(&validate_agent(&agent_with("a", ok)));
    let ok = "backend: ChatbotAgent\nshare:\n  readScope: {accessLevel: User, userUids: [u1]}";
    assert_admits(&validate_agent(&agent_with("a", ok)));
    let ok = "backend: ChatbotAgent\nshare:\n  readScope: {accessLevel: Global}";
    assert_admits(&validate_agent(&agent_with("a", ok)));

    let bad = "backend: ChatbotAgent\nshare:\n  readScope: {accessLevel: Department}";
    assert_rejects_only(&validate_agent(&agent_with("a", bad)), "spec.share.readScope.departmentIds");
    let bad = "backend: ChatbotAgent\nshare:\n  readScope: {accessLevel: User, userUids: []}";
    assert_rejects_only(&validate_agent(&agent_with("a", bad)), "spec.share.readScope.userUids");
}

#[test]
fn manage_scope_lies_within_read_scope() {
    let within = [
        "readScope: {accessLevel: Global}\n  manageScope: {accessLevel: Global}",
        "readScope: {accessLevel: Global}\n  manageScope: {accessLevel: User, userUids: [u]}",
        "readScope: {accessLevel: Department, departmentIds: [1, 2]}\n  manageScope: {accessLevel: Department, departmentIds: [2]}",
        "readScope: {accessLevel: User, userUids: [u, v]}\n  manageScope: {accessLevel: User, userUids: [v]}",
        "readScope: {accessLevel: User, userUids: [u]}",
    ];
    for share in within {
        assert_admits(&validate_agent(&agent_with("a", &format!("backend: ChatbotAgent\nshare:\n  {share}"))));
    }
    let outside = [
        "manageScope: {accessLevel: Global}",
        "readScope: {accessLevel: User, userUids: [u]}\n  manageScope: {accessLevel: Global}",
        "readScope: {accessLevel: Department, departmentIds: [1]}\n  manageScope: {accessLevel: Department, departmentIds: [1, 3]}",
        "readScope: {accessLevel: Department, departmentIds: [1]}\n  manageScope: {accessLevel: User, userUids: [u]}",
        "readScope: {accessLevel: User, userUids: [u]}\n  manageScope: {accessLevel: User, userUids: [v]}",
    ];
    for share in outside {
        let report = validate_agent(&agent_with("a", &format!("backend: ChatbotAgent\nshare:\n  {share}")));
        assert_rejects_only(&report, "spec.share.manageScope");
    }
}

#[test]
fn lists_are_sets_of_non_empty_names() {
    assert_rejects_only(
        &validate_agent(&agent_with("a", "backend: ChatbotAgent\ncontext:\n  tools: [ls, ls]")),
        "spec.context.tools[1]",
    );
    assert_rejects_only(
        &validate_agent(&agent_with("a", "backend: ChatbotAgent\ncontext:\n  skills: ['']")),
        "spec.context.skills[0]",
    );
    assert_rejects_only(
        &validate_agent(&agent_with("a", "backend: ChatbotAgent\ncontext:\n  subagents: [Explorer]")),
        "spec.context.subagents[0]",
    );
}

#[test]
fn step_and_retry_bounds() {
    assert_admits(&validate_agent(&agent_with(
        "a",
        "backend: ChatbotAgent\ncontext:\n  maxExecutionSteps: 300\n  modelRetryTimes: 0",
    )));
    assert_rejects_only(
        &validate_agent(&agent_with("a", "backend: ChatbotAgent\ncontext:\n  maxExecutionSteps: 0")),
        "spec.context.maxExecutionSteps",
    );
    assert_rejects_only(
        &validate_agent(&agent_with("a", "backend: ChatbotAgent\ncontext:\n  modelRetryTimes: 11")),
        "spec.context.modelRetryTimes",
    );
}

#[test]
fn at_most_one_default_per_namespace() {
    let current = agent_with("deep-research", "backend: ChatbotAgent\ndefault: true");
    let second = agent_with("quick-chat", "backend: ChatbotAgent\ndefault: true");
    let report = validate_agent_among(&second, std::slice::from_ref(&current));
    assert_rejects_only(&report, "spec.default");
    assert!(
        report.errors[0].message.contains("deep-research"),
        "the message names the current default: {}",
        report.errors[0]
    );

    // The default itself, updated, is not its own rival; a non-default agent has no conflict.
    assert_admits(&validate_agent_among(&current, std::slice::from_ref(&current)));
    assert_admits(&validate_agent_among(&agent_with("quick-chat", "backend: ChatbotAgent"), &[current]));
}

#[test]
fn subagent_references_that_do_not_resolve_are_warnings() {
    let explorer = agent_with("explorer", "backend: SubAgentBackend\nisSubagent: true");
    let chat = agent_with("chat", "backend: ChatbotAgent");
    let parent = agent_with(
        "parent",
        "backend: ChatbotAgent\ncontext:\n  subagents: [explorer, general-purpose, missing, chat]",
    );
    let report = validate_agent_among(&parent, &[explorer, chat]);
    assert_admits(&report);
    let warned: Vec<&str> = report.warnings.iter().map(|w| w.field.as_str()).collect();
    assert_eq!(warned, vec!["spec.context.subagents[2]", "spec.context.subagents[3]"]);
    assert!(report.warnings[0].message.contains("no Agent \"missing\""), "{}", report.warnings[0]);
    assert!(report.warnings[1].message.contains("not a subagent"), "{}", report.warnings[1]);
}

const CHILD_RUN: &str = "agent: research-explorer
input: Survey the field.
threadId: thread-1_sub_research-explorer_4f2a9c1e
parent: {runId: run-1, threadId: thread-1, agent: deep-research}";

#[test]
fn a_run_names_an_agent_by_a_dns1123_name() {
    assert_admits(&validate_agent_run(&run_with("agent: research-explorer\ninput: x")));
    assert_rejects_only(&validate_agent_run(&run_with("agent: Research_Explorer\ninput: x")), "spec.agent");
    assert_rejects_only(&validate_agent_run(&run_with("agent: ''\ninput: x")), "spec.agent");
}

#[test]
fn a_run_needs_input() {
    assert_rejects_only(&validate_agent_run(&run_with("agent: a\ninput: ''")), "spec.input");
}

#[test]
fn timeout_seconds_within_one_second_and_one_day() {
    for ok in [1, 3600, 86_400] {
        assert_admits(&validate_agent_run(&run_with(&format!("agent: a\ninput: x\ntimeoutSeconds: {ok}"))));
    }
    for bad in [0, -5, 86_401] {
        assert_rejects_only(
            &validate_agent_run(&run_with(&format!("agent: a\ninput: x\ntimeoutSeconds: {bad}"))),
            "spec.timeoutSeconds",
        );
    }
}

#[test]
fn a_child_thread_id_has_the_seed_form() {
    assert_admits(&validate_agent_run(&run_with(CHILD_RUN)));
    let foreign_parent = CHILD_RUN.replace("threadId: thread-1_sub", "threadId: thread-2_sub");
    assert_rejects_only(&validate_agent_run(&run_with(&foreign_parent)), "spec.threadId");
    let other_agent = CHILD_RUN.replace("agent: research-explorer", "agent: fact-verifier");
    assert_rejects_only(&validate_agent_run(&run_with(&other_agent)), "spec.threadId");
    let short_suffix = CHILD_RUN.replace("4f2a9c1e", "4f2a9c1");
    assert_rejects_only(&validate_agent_run(&run_with(&short_suffix)), "spec.threadId");
    // Without a parent, a thread id is free-form but path-safe.
    assert_admits(&validate_agent_run(&run_with("agent: a\ninput: x\nthreadId: my-thread")));
    assert_rejects_only(&validate_agent_run(&run_with("agent: a\ninput: x\nthreadId: ../etc")), "spec.threadId");
}

#[test]
fn parent_ids_are_path_safe() {
    let bad = CHILD_RUN.replace("runId: run-1", "runId: '../run-1'");
    assert_rejects_only(&validate_agent_run(&run_with(&bad)), "spec.parent.runId");
    let bad = format!("{CHILD_RUN}\nttlSecondsAfterFinished: -1");
    assert_rejects_only(&validate_agent_run(&run_with(&bad)), "spec.ttlSecondsAfterFinished");
}

#[test]
fn the_spec_is_immutable_except_cancel() {
    let old = run_with(CHILD_RUN);
    assert_admits(&validate_agent_run_update(&old, &old));
    assert_admits(&validate_agent_run_update(&old, &run_with(&format!("{CHILD_RUN}\ncancel: true"))));

    let changes = [
        ("spec.input", CHILD_RUN.replace("Survey the field.", "Survey another field.")),
        ("spec.timeoutSeconds", format!("{CHILD_RUN}\ntimeoutSeconds: 60")),
        ("spec.model", format!("{CHILD_RUN}\nmodel: openai/gpt-4o")),
        ("spec.parent", CHILD_RUN.replace("runId: run-1", "runId: run-2")),
    ];
    for (field, new) in changes {
        assert_rejects_only(&validate_agent_run_update(&old, &run_with(&new)), field);
    }
}

#[test]
fn a_requested_cancel_cannot_be_withdrawn() {
    let cancelled = run_with(&format!("{CHILD_RUN}\ncancel: true"));
    assert_rejects_only(
        &validate_agent_run_update(&cancelled, &run_with(&format!("{CHILD_RUN}\ncancel: false"))),
        "spec.cancel",
    );
    assert_rejects_only(&validate_agent_run_update(&cancelled, &run_with(CHILD_RUN)), "spec.cancel");
    assert_admits(&validate_agent_run_update(&cancelled, &cancelled));
}

#[test]
fn dns1123_labels() {
    for ok in ["a", "a-b", "0", "deep-research", &"a".repeat(63)] {
        assert!(is_dns1123_label(ok), "{ok}");
    }
    for bad in ["", "A", "a_b", "a.b", "-a", "a-", &"a".repeat(64)] {
        assert!(!is_dns1123_label(bad), "{bad}");
    }
}

#[test]
fn run_names_namespaces_and_optional_strings_have_the_crd_bounds() {
    let named = |name: &str| {
        run(&format!(
            "apiVersion: yuxi.dev/v1alpha1\nkind: AgentRun\nmetadata: {{name: '{name}'}}\nspec: {{agent: a, input: x}}\n"
        ))
    };
    assert_admits(&validate_agent_run(&named("run-1.retry")));
    assert_rejects_only(&validate_agent_run(&named("Run 1")), "metadata.name");
    let unnamed = run("apiVersion: yuxi.dev/v1alpha1\nkind: AgentRun\nmetadata: {}\nspec: {agent: a, input: x}\n");
    assert_rejects_only(&validate_agent_run(&unnamed), "metadata.name");
    let generated = run(
        "apiVersion: yuxi.dev/v1alpha1\nkind: AgentRun\nmetadata: {generateName: run-}\nspec: {agent: a, input: x}\n",
    );
    assert_admits(&validate_agent_run(&generated));

    let mut in_namespace = agent_with("a", "backend: ChatbotAgent");
    in_namespace.metadata.namespace = Some("Team A".into());
    assert_rejects_only(&validate_agent(&in_namespace), "metadata.namespace");

    assert_rejects_only(&validate_agent_run(&run_with("agent: a\ninput: x\nuid: ''")), "spec.uid");
    // The uid is a path segment of the run's volumes: refused at admission, not only by the pod builder.
    for uid in ["../../root", "a/b", ".hidden"] {
        assert_rejects_only(&validate_agent_run(&run_with(&format!("agent: a\ninput: x\nuid: '{uid}'"))), "spec.uid");
    }
    assert_rejects_only(&validate_agent_run(&run_with("agent: a\ninput: x\nmodel: ''")), "spec.model");
    let long_parent = "t".repeat(177);
    let child = format!("agent: a\ninput: x\nparent: {{runId: r, threadId: {long_parent}, agent: p}}");
    assert_rejects_only(&validate_agent_run(&run_with(&child)), "spec.parent.threadId");
    let empty_call = "agent: a\ninput: x\nparent: {runId: r, threadId: t, agent: p, toolCallId: ''}";
    assert_rejects_only(&validate_agent_run(&run_with(empty_call)), "spec.parent.toolCallId");
}

#[test]
fn a_summary_spells_out_at_most_twenty_errors() {
    let report = Report {
        errors: (0..25).map(|i| FieldIssue { field: format!("f{i}"), message: "bad".into() }).collect(),
        warnings: vec![],
    };
    let summary = report.error_summary();
    assert!(summary.starts_with("f0: bad; f1: bad"));
    assert!(summary.ends_with("f19: bad; and 5 more errors"), "{summary}");
}

fn knowledge_base_with(source: &str) -> crate::resources::KnowledgeBase {
    serde_norway::from_str(&format!(
        "apiVersion: yuxi.dev/v1alpha1\nkind: KnowledgeBase\nmetadata: {{name: kb}}\nspec: {{source: {source}}}\n"
    ))
    .expect("test manifest is a KnowledgeBase")
}

#[test]
fn a_knowledge_base_names_a_config_map_by_a_valid_name_and_not_beside_a_folder() {
    assert_admits(&validate_knowledge_base(&knowledge_base_with("{documents: {configMap: {name: team-faq}}}")));
    assert_rejects_only(
        &validate_knowledge_base(&knowledge_base_with("{documents: {configMap: {name: Team_FAQ}}}")),
        "spec.source.documents.configMap.name",
    );
    assert_rejects_only(
        &validate_knowledge_base(&knowledge_base_with("{documents: {folder: faq, configMap: {name: faq}}}")),
        "spec.source.documents",
    );
}

#[test]
fn a_config_map_of_documents_follows_the_api_servers_rules() {
    let config_map = |yaml: &str| -> k8s_openapi::api::core::v1::ConfigMap {
        serde_norway::from_str(&format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: faq}}\n{yaml}"))
            .expect("test manifest is a ConfigMap")
    };
    assert_admits(&validate_config_map(&config_map("data: {faq.md: text}\nbinaryData: {guide.pdf: JVBERg==}")));
    assert_rejects_only(&validate_config_map(&config_map("data: {../faq.md: text}")), "data.../faq.md");
    assert_rejects_only(
        &validate_config_map(&config_map("data: {faq.md: text}\nbinaryData: {faq.md: JVBERg==}")),
        "binaryData.faq.md",
    );
    let big = "x".repeat(MAX_CONFIG_MAP_BYTES);
    assert_rejects_only(&validate_config_map(&config_map(&format!("data: {{faq.md: {big}}}"))), "data");
}
