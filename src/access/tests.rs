use super::*;

fn agent(name: &str, yaml_spec: &str) -> Agent {
    serde_norway::from_str(&format!(
        "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {{name: {name}}}\nspec: {yaml_spec}\n"
    ))
    .expect("agent")
}

fn user(uid: &str, department: Option<i64>) -> Identity {
    Identity::new(uid, Role::User, department)
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
        (Identity::new("root", Role::Superadmin, None), Permission::Manage),
        (Identity::new("ops", Role::Admin, None), Permission::None),
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
    let admin = Identity::new("ops", Role::Admin, None);
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
        agent("carols", "{backend: SubAgentBackend, owner: carol, share: {readScope: {accessLevel: Global}}}"),
    ];
    let names = |list: Vec<&Agent>| list.into_iter().map(|a| a.name_any()).collect::<Vec<_>>();
    let bob = user("bob", None);
    let alice = user("alice", None);

    let everything = agent("parent", "{backend: ChatbotAgent}");
    assert_eq!(names(allowed_subagents(&everything, &agents, &bob)), ["explorer", "general-purpose"]);
    assert_eq!(names(allowed_subagents(&everything, &agents, &alice)), ["explorer", "general-purpose", "private"]);
    let empty_list = agent("parent", "{backend: ChatbotAgent, context: {subagents: []}}");
    assert_eq!(names(allowed_subagents(&empty_list, &agents, &bob)), ["explorer", "general-purpose"]);
    // Carol shared hers with everyone: Bob's implicit list leaves it out, Carol's own has it, and a list
    // that names it calls it.
    let carol = user("carol", None);
    assert_eq!(names(allowed_subagents(&everything, &agents, &carol)), ["carols", "explorer", "general-purpose"]);
    let naming = agent("parent", "{backend: ChatbotAgent, context: {subagents: [carols]}}");
    assert_eq!(names(allowed_subagents(&naming, &agents, &bob)), ["carols"]);

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

#[test]
fn an_agent_run_runs_as_its_creator_unless_the_creator_is_trusted() {
    let trusted = RunCreators {
        usernames: vec!["system:serviceaccount:yuxi-system:yuxi-operator-api".into()],
        groups: vec!["yuxi:run-creators".into()],
    };
    let none: &[String] = &[];
    let facade = "system:serviceaccount:yuxi-system:yuxi-operator-api";
    // The facade creates runs for its users.
    assert_eq!(run_owner(Some("alice"), facade, none, &trusted, false), Ok(None));
    assert_eq!(run_owner(None, facade, none, &trusted, true), Ok(None));
    // So does a member of the group.
    let ops = ["system:authenticated".to_string(), "yuxi:run-creators".to_string()];
    assert_eq!(run_owner(Some("alice"), "ops", &ops, &trusted, false), Ok(None));
    // Bob's own run: stamped when absent, admitted when his, refused when it names Alice.
    assert_eq!(run_owner(None, "bob", none, &trusted, true), Ok(Some("bob".into())));
    assert_eq!(run_owner(Some("bob"), "bob", none, &trusted, false), Ok(None));
    let refused = run_owner(Some("alice"), "bob", none, &trusted, false).expect_err("alice is not bob");
    assert!(refused.contains("\"alice\" is not your user id") && refused.contains("runs as \"bob\""), "{refused}");
    // Without the mutating webhook, an absent uid would fall back to the default user: refused.
    assert!(run_owner(None, "bob", none, &trusted, false).expect_err("absent").starts_with("is required"));
    // A service account's uid is its safe form, by the facade's own rule.
    let sa = "system:serviceaccount:team-a:agent";
    assert_eq!(run_owner(None, sa, none, &trusted, true), Ok(Some(uid_of(sa))));
    assert!(run_owner(Some("system:serviceaccount:team-a:agent"), sa, none, &trusted, false).is_err());
    // Nobody is trusted by default.
    assert!(run_owner(Some("alice"), facade, none, &RunCreators::default(), false).is_err());
}

fn kb(name: &str, yaml_spec: &str) -> KnowledgeBase {
    serde_norway::from_str(&format!(
        "apiVersion: yuxi.dev/v1alpha1\nkind: KnowledgeBase\nmetadata: {{name: {name}}}\nspec: {yaml_spec}\n"
    ))
    .expect("knowledge base")
}

fn knowledge_set() -> Vec<KnowledgeBase> {
    vec![
        kb("public", "{source: {documents: {}}, share: {readScope: {accessLevel: Global}}}"),
        kb("mine", "{source: {documents: {}}, owner: alice}"),
        kb("secret", "{source: {documents: {}}, owner: mallory}"),
        kb(
            "team",
            "{source: {documents: {}}, owner: mallory, share: {readScope: {accessLevel: Department, departmentIds: [7]}}}",
        ),
    ]
}

fn slugs(kbs: Vec<&KnowledgeBase>) -> Vec<String> {
    kbs.into_iter().map(|kb| kb.name_any()).collect()
}

#[test]
fn an_agent_without_a_knowledge_list_gets_every_knowledge_base_its_user_may_read() {
    let kbs = knowledge_set();
    let open = agent("a", "{backend: ChatbotAgent}");
    assert_eq!(slugs(allowed_knowledge_bases(&open, &kbs, &user("alice", None))), ["mine", "public"]);
    assert_eq!(slugs(allowed_knowledge_bases(&open, &kbs, &user("bob", Some(7)))), ["public", "team"]);
}

#[test]
fn a_knowledge_list_names_the_only_ones_and_never_one_the_user_may_not_read() {
    let kbs = knowledge_set();
    let listed = agent("a", "{backend: ChatbotAgent, context: {knowledges: [secret, team, missing, public]}}");
    // `secret` is listed, but alice may not read it; `missing` does not exist.
    assert_eq!(slugs(allowed_knowledge_bases(&listed, &kbs, &user("alice", None))), ["public"]);
    assert_eq!(slugs(allowed_knowledge_bases(&listed, &kbs, &user("bob", Some(7)))), ["team", "public"]);
    let none = agent("a", "{backend: ChatbotAgent, context: {knowledges: []}}");
    assert!(allowed_knowledge_bases(&none, &kbs, &user("alice", None)).is_empty());
}

#[test]
fn knowledge_bases_follow_the_agents_share_rules() {
    let kbs = knowledge_set();
    let root = Identity::new("root", Role::Superadmin, None);
    assert_eq!(knowledge_permission(&root, &kbs[2]), Permission::Manage);
    assert_eq!(knowledge_permission(&user("alice", None), &kbs[1]), Permission::Manage);
    assert_eq!(knowledge_permission(&user("alice", None), &kbs[2]), Permission::None);
    assert_eq!(knowledge_permission(&user("alice", None), &kbs[0]), Permission::Read);
    assert_eq!(knowledge_permission(&user("bob", Some(7)), &kbs[3]), Permission::Read);
}
