//! The Agent rules of the reconciler, case by case: the status each Agent gets among the Agents of its
//! namespace, how transition times are kept, and whose status a change can alter.

use serde_json::{Value, json};

use super::*;

/// An Agent of namespace `team-a` at generation 1 with `spec`.
fn agent(name: &str, spec: Value) -> Agent {
    serde_json::from_value(json!({
        "apiVersion": "yuxi.dev/v1alpha1", "kind": "Agent",
        "metadata": {"name": name, "namespace": "team-a", "generation": 1},
        "spec": spec,
    }))
    .expect("test object is an Agent")
}

fn subagent(name: &str) -> Agent {
    agent(name, json!({"backend": "SubAgentBackend", "isSubagent": true}))
}

fn main_agent(name: &str, subagents: &[&str]) -> Agent {
    agent(name, json!({"backend": "ChatbotAgent", "isSubagent": false, "context": {"subagents": subagents}}))
}

fn default_agent(name: &str) -> Agent {
    agent(name, json!({"backend": "ChatbotAgent", "default": true}))
}

fn at(second: i64) -> Time {
    Time(jiff::Timestamp::from_second(1_760_000_000 + second).expect("a valid time"))
}

fn condition<'a>(status: &'a AgentStatus, type_: &str) -> &'a Condition {
    status.conditions.iter().find(|c| c.type_ == type_).unwrap_or_else(|| panic!("no {type_} condition in {status:?}"))
}

/// `(status, reason)` of the Accepted and Ready conditions.
fn verdict(status: &AgentStatus) -> [(&str, &str); 2] {
    [ACCEPTED, READY].map(|t| {
        let c = condition(status, t);
        (c.status.as_str(), c.reason.as_str())
    })
}

const ACCEPTED_VALID: [(&str, &str); 2] = [("True", "Valid"), ("True", "Valid")];

/// One case: its name, the agent judged, the Agents of its namespace, the expected `(status, reason)` of
/// Accepted and Ready, and the parts the Accepted message must contain.
type Case = (&'static str, Agent, Vec<Agent>, [(&'static str, &'static str); 2], &'static [&'static str]);

#[test]
fn each_agent_gets_the_verdict_its_spec_and_namespace_call_for() {
    let explorer = subagent("research-explorer");
    let cases: Vec<Case> = vec![
        ("a valid subagent", explorer.clone(), vec![explorer.clone()], ACCEPTED_VALID, &[]),
        (
            "a main agent whose subagents resolve",
            main_agent("deep-research", &["research-explorer"]),
            vec![explorer.clone()],
            ACCEPTED_VALID,
            &[],
        ),
        ("a main agent with no allowlist", main_agent("chat", &[]), vec![], ACCEPTED_VALID, &[]),
        (
            "general-purpose resolves without being listed",
            main_agent("deep-research", &["general-purpose", "research-explorer"]),
            vec![explorer.clone()],
            ACCEPTED_VALID,
            &[],
        ),
        (
            "one unresolved subagent",
            main_agent("deep-research", &["research-explorer", "fact-verifier"]),
            vec![explorer.clone()],
            [("False", "SubagentNotFound"), ("False", "SubagentNotFound")],
            &["spec.context.subagents[1]", "\"fact-verifier\""],
        ),
        (
            "a named main agent is not a subagent",
            main_agent("deep-research", &["chat"]),
            vec![main_agent("chat", &[])],
            [("False", "SubagentNotFound"), ("False", "SubagentNotFound")],
            &["spec.context.subagents[0]", "\"chat\"", "not a subagent"],
        ),
        (
            "a subagent claiming to be the default",
            agent("helper", json!({"backend": "SubAgentBackend", "isSubagent": true, "default": true})),
            vec![],
            [("False", "InvalidSpec"), ("False", "InvalidSpec")],
            &["spec.default", "cannot be the default"],
        ),
        (
            "an unknown backend",
            agent("odd", json!({"backend": "Mystery"})),
            vec![],
            [("False", "InvalidSpec"), ("False", "InvalidSpec")],
            &["spec.backend", "ChatbotAgent"],
        ),
        (
            "an invalid spec wins over an unresolved subagent",
            agent("chat", json!({"backend": "ChatbotAgent", "isSubagent": true, "context": {"subagents": ["ghost"]}})),
            vec![],
            [("False", "InvalidSpec"), ("False", "InvalidSpec")],
            &["spec.isSubagent", "spec.context.subagents[0]"],
        ),
        (
            "a second default agent",
            default_agent("chat"),
            vec![default_agent("chat"), default_agent("assistant")],
            [("False", "DuplicateDefault"), ("False", "DuplicateDefault")],
            &["spec.default", "\"assistant\""],
        ),
        (
            "a default of another namespace does not count",
            default_agent("chat"),
            vec![{
                let mut other = default_agent("assistant");
                other.metadata.namespace = Some("team-b".into());
                other
            }],
            ACCEPTED_VALID,
            &[],
        ),
    ];
    for (case, agent, namespace_agents, expected, message_parts) in cases {
        let status = agent_status(&agent, &namespace_agents, at(0));
        assert_eq!(verdict(&status), expected, "{case}: {status:?}");
        let accepted = condition(&status, ACCEPTED);
        let ready = condition(&status, READY);
        for part in message_parts {
            assert!(accepted.message.contains(part), "{case}: {part:?} not in {:?}", accepted.message);
        }
        if accepted.status == "False" {
            assert_eq!(ready.message, accepted.message, "{case}: Ready mirrors Accepted");
        }
        assert_eq!((accepted.last_transition_time.clone(), ready.last_transition_time.clone()), (at(0), at(0)));
    }
}

#[test]
fn two_defaults_are_both_not_accepted_and_each_names_the_other() {
    let (chat, assistant) = (default_agent("chat"), default_agent("assistant"));
    let namespace = [chat.clone(), assistant.clone()];
    for (agent, other) in [(&chat, "assistant"), (&assistant, "chat")] {
        let status = agent_status(agent, &namespace, at(0));
        assert_eq!(verdict(&status)[0], ("False", "DuplicateDefault"));
        let message = &condition(&status, ACCEPTED).message;
        assert!(message.starts_with("spec.default: ") && message.contains(&format!("{other:?}")), "{message}");
    }
    // One default alone is fine.
    assert_eq!(verdict(&agent_status(&chat, std::slice::from_ref(&chat), at(0))), ACCEPTED_VALID);
}

#[test]
fn transition_times_are_kept_while_a_condition_holds_and_move_when_it_flips() {
    let explorer = subagent("research-explorer");
    let mut research = main_agent("deep-research", &["research-explorer"]);

    let first = agent_status(&research, std::slice::from_ref(&explorer), at(0));
    research.status = Some(first.clone());
    let again = agent_status(&research, &[explorer.clone(), research.clone()], at(60));
    assert_eq!(again, first, "re-judging an unchanged agent changes nothing");

    // The subagent goes: both conditions flip, at the new time.
    let lost = agent_status(&research, &[], at(120));
    assert_eq!(verdict(&lost)[0], ("False", "SubagentNotFound"));
    assert!(lost.conditions.iter().all(|c| c.last_transition_time == at(120)), "{lost:?}");

    // Still missing, for another reason too: the status stays False, so the time stays.
    research.status = Some(lost.clone());
    research.spec.context.as_mut().expect("context").subagents = Some(vec!["ghost".into()]);
    let still = agent_status(&research, &[], at(180));
    assert!(still.conditions.iter().all(|c| c.last_transition_time == at(120)), "{still:?}");
    assert!(condition(&still, ACCEPTED).message.contains("\"ghost\""), "the message follows the spec");
}

#[test]
fn observed_generation_follows_metadata_generation() {
    let mut explorer = subagent("research-explorer");
    explorer.metadata.generation = Some(7);
    let status = agent_status(&explorer, &[], at(0));
    assert_eq!(status.observed_generation, Some(7));
    assert!(status.conditions.iter().all(|c| c.observed_generation == Some(7)), "{status:?}");

    explorer.status = Some(status.clone());
    explorer.metadata.generation = Some(8);
    let next = agent_status(&explorer, &[], at(60));
    assert_eq!(next.observed_generation, Some(8));
    assert!(next.conditions.iter().all(|c| c.observed_generation == Some(8) && c.last_transition_time == at(0)));

    explorer.metadata.generation = None;
    assert_eq!(agent_status(&explorer, &[], at(0)).observed_generation, None);
}

#[test]
fn dependents_are_the_main_agents_naming_the_change_and_the_defaults() {
    let explorer = subagent("research-explorer");
    let research = main_agent("deep-research", &["research-explorer", "fact-verifier"]);
    let verifier_only = main_agent("checker", &["fact-verifier"]);
    let open = main_agent("chat", &[]);
    let default = default_agent("assistant");
    // A subagent that (invalidly) names another is invalid whatever happens to it.
    let nested =
        agent("nested", json!({"backend": "SubAgentBackend", "context": {"subagents": ["research-explorer"]}}));
    let mut elsewhere = main_agent("deep-research-b", &["research-explorer"]);
    elsewhere.metadata.namespace = Some("team-b".into());
    let namespace = [explorer.clone(), research, verifier_only, open, default, nested, elsewhere, explorer.clone()];

    let names = |refs: Vec<ObjectRef<Agent>>| {
        refs.into_iter().map(|r| format!("{}/{}", r.namespace.unwrap_or_default(), r.name)).collect::<Vec<_>>()
    };
    assert_eq!(names(dependents(&explorer, &namespace)), ["team-a/deep-research", "team-a/assistant"]);
    // A subagent that is not in the list any more (deleted) still has its dependents.
    assert_eq!(names(dependents(&subagent("fact-verifier"), &[])), Vec::<String>::new());
    assert_eq!(
        names(dependents(&subagent("fact-verifier"), &namespace)),
        ["team-a/deep-research", "team-a/checker", "team-a/assistant"]
    );
    // A default agent is not its own dependent; the other defaults are.
    assert_eq!(names(dependents(&default_agent("assistant"), &namespace)), Vec::<String>::new());
    assert_eq!(names(dependents(&default_agent("chat"), &namespace)), ["team-a/assistant"]);
}

#[test]
fn long_messages_are_cut_to_what_the_api_server_accepts() {
    let long = "é".repeat(MAX_CONDITION_MESSAGE);
    let cut = bounded(long);
    assert!(cut.len() <= MAX_CONDITION_MESSAGE && cut.ends_with("..."), "{}", cut.len());
    assert_eq!(bounded("short".into()), "short");
}

#[test]
fn a_status_already_held_is_not_written_again_even_beside_other_writers_conditions() {
    let explorer = subagent("research-explorer");
    let status = agent_status(&explorer, &[], at(0));
    assert!(!already_holds(None, &status));
    assert!(already_holds(Some(&status), &status));
    let mut with_other = status.clone();
    with_other.conditions.push(Condition {
        type_: "Audited".into(),
        status: "True".into(),
        reason: "Reviewed".into(),
        message: String::new(),
        observed_generation: Some(1),
        last_transition_time: at(5),
    });
    assert!(already_holds(Some(&with_other), &status));
    let mut older = status.clone();
    older.observed_generation = Some(0);
    assert!(!already_holds(Some(&older), &status));
}

#[test]
fn retries_back_off_from_five_seconds_to_five_minutes() {
    let delays: Vec<u64> = [1, 2, 3, 4, 5, 6, 7, 100, u32::MAX].map(|n| retry_delay(n).as_secs()).to_vec();
    assert_eq!(delays, [5, 10, 20, 40, 80, 160, 300, 300, 300]);
}

#[test]
fn an_object_that_does_not_fit_the_schema_names_the_field() {
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "yuxi.dev/v1alpha1", "kind": "Agent",
        "metadata": {"name": "broken", "namespace": "team-a"},
        "spec": {"backend": "ChatbotAgent", "context": {"tools": "web_search"}},
    }))
    .expect("any object is a DynamicObject");
    let problem = decode_agent(&object).expect_err("tools must be a list");
    assert!(problem.starts_with("spec.context.tools: "), "{problem}");
}

/// `object` as the watch delivers it.
fn watched(object: &Agent) -> DynamicObject {
    serde_json::from_value(serde_json::to_value(object).expect("JSON")).expect("a DynamicObject")
}

#[test]
fn the_watch_queues_the_changed_agent_its_dependents_and_everything_after_a_relist() {
    let explorer = watched(&subagent("research-explorer"));
    let research = watched(&main_agent("deep-research", &["research-explorer"]));
    let chat = watched(&main_agent("chat", &[]));
    let broken: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "yuxi.dev/v1alpha1", "kind": "Agent",
        "metadata": {"name": "broken", "namespace": "team-a"},
        "spec": {"backend": 7},
    }))
    .expect("any object is a DynamicObject");
    let mut writer = Writer::new(agent_resource());
    let store = writer.as_reader();
    let mut queued = |event: watcher::Event<DynamicObject>| {
        writer.apply_watcher_event(&event);
        let mut names: Vec<String> = triggers(&event, &store).into_iter().map(|r| r.name).collect();
        names.sort();
        names
    };

    // While a list is under way the store still shows the old state: nothing yet, then everything.
    assert!(queued(watcher::Event::Init).is_empty());
    for object in [&explorer, &research, &chat, &broken] {
        assert!(queued(watcher::Event::InitApply(object.clone())).is_empty());
    }
    assert_eq!(queued(watcher::Event::InitDone), ["broken", "chat", "deep-research", "research-explorer"]);

    // A subagent changes: itself and the main agent naming it; an undecodable object changes: itself.
    assert_eq!(queued(watcher::Event::Apply(explorer.clone())), ["deep-research", "research-explorer"]);
    assert_eq!(queued(watcher::Event::Apply(broken)), ["broken"]);
    // It goes: the main agent naming it, judged against a store that no longer has it.
    assert_eq!(queued(watcher::Event::Delete(explorer)), ["deep-research"]);
    let remaining = agents_of(&store, "team-a");
    let research = remaining.iter().find(|a| a.name_any() == "deep-research").expect("still there");
    assert_eq!(verdict(&agent_status(research, &remaining, at(0)))[0], ("False", "SubagentNotFound"));
}
