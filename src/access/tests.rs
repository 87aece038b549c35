use super::*;

fn agent(name: &str, yaml_spec: &str) -> Agent {
    serde_norway::from_str(&format!(
        "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {{name: {name}}}\nspec: {yaml_spec}\n"
    ))
    .expect("agent")
}

fn user(uid: &str, department: Option<i64>) -> Identity {
    Identity { uid: uid.into(), role: Role::User, department_id: department }
}

#[test]
fn permissions_follow_owner_scopes_and_role() {
    let shared = agent(
        "a",
        "{backend: ChatbotAgent, owner: alice, share: {readScope: {accessLevel: Department, departmentIds: [1, 2]}, manageScope: {accessLevel: User, userUids: [bob]}}}",
    );
    let cases = [
        (user("alice", None), Permission::Manage),
        (user("bob", Some(9)), Permission::Manage),
        (user("carol", Some(2)), Permission::Read),
        (user("dave", Some(3)), Permission::None),
        (user("erin", None), Permission::None),
        (Identity { uid: "root".into(), role: Role::Superadmin, department_id: None }, Permission::Manage),
        (Identity { uid: "ops".into(), role: Role::Admin, department_id: None }, Permission::None),
    ];
    for (who, expected) in cases {
        assert_eq!(permission(&who, &shared), expected, "{}", who.uid);
    }
}

#[test]
fn an_agent_without_scopes_is_private_and_general_purpose_is_public() {
    let private = agent("p", "{backend: ChatbotAgent, owner: alice}");
    assert_eq!(permission(&user("alice", None), &private), Permission::Manage);
    assert_eq!(permission(&user("bob", None), &private), Permission::None);
    let general = agent("general-purpose", "{backend: SubAgentBackend}");
    assert_eq!(permission(&user("bob", None), &general), Permission::Read);
    let global = agent("g", "{backend: ChatbotAgent, share: {readScope: {accessLevel: Global}}}");
    assert_eq!(permission(&user("bob", None), &global), Permission::Read);
}

#[test]
fn only_admins_save_wide_scopes() {
    let wide: ShareScope = serde_norway::from_str("{accessLevel: Global}").expect("scope");
    let department: ShareScope =
        serde_norway::from_str("{accessLevel: Department, departmentIds: [1]}").expect("scope");
    let narrow: ShareScope = serde_norway::from_str("{accessLevel: User, userUids: [a]}").expect("scope");
    let admin = Identity { uid: "ops".into(), role: Role::Admin, department_id: None };
    assert!(!may_save_scope(&user("a", None), &wide));
    assert!(!may_save_scope(&user("a", None), &department));
    assert!(may_save_scope(&user("a", None), &narrow));
    assert!(may_save_scope(&admin, &wide) && may_save_scope(&admin, &department));
}

#[test]
fn the_allowlist_is_the_listed_visible_subagents() {
    let agents = vec![
        agent("general-purpose", "{backend: SubAgentBackend}"),
        agent("explorer", "{backend: SubAgentBackend, share: {readScope: {accessLevel: Global}}}"),
        agent("private", "{backend: SubAgentBackend, owner: alice}"),
        agent("chat", "{backend: ChatbotAgent, share: {readScope: {accessLevel: Global}}}"),
    ];
    let names = |list: Vec<&Agent>| list.into_iter().map(|a| a.name_any()).collect::<Vec<_>>();
    let bob = user("bob", None);
    let alice = user("alice", None);

    let everything = agent("parent", "{backend: ChatbotAgent}");
    assert_eq!(names(allowed_subagents(&everything, &agents, &bob)), ["explorer", "general-purpose"]);
    assert_eq!(names(allowed_subagents(&everything, &agents, &alice)), ["explorer", "general-purpose", "private"]);
    let empty_list = agent("parent", "{backend: ChatbotAgent, context: {subagents: []}}");
    assert_eq!(names(allowed_subagents(&empty_list, &agents, &bob)), ["explorer", "general-purpose"]);

    let listed = agent("parent", "{backend: ChatbotAgent, context: {subagents: [private, explorer, chat, missing]}}");
    assert_eq!(
        names(allowed_subagents(&listed, &agents, &bob)),
        ["explorer"],
        "invisible, non-subagent and missing entries drop out"
    );
    assert_eq!(names(allowed_subagents(&listed, &agents, &alice)), ["private", "explorer"], "listed order is kept");

    let nested = agent("sub", "{backend: SubAgentBackend}");
    assert!(allowed_subagents(&nested, &agents, &alice).is_empty(), "a subagent calls no subagents");
}
