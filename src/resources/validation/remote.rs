//! The rules of `spec.remote` (a subagent that runs elsewhere), as the CRD's CEL rules state them, with
//! precise field paths: only on a subagent; an A2A agent named by an http(s) card URL; at most
//! [`MAX_REMOTE_HEADERS`] headers, each an HTTP token name with exactly one value source; the time
//! limits in range.

use super::Report;
use crate::resources::remote::{AgentRemote, MAX_REMOTE_HEADERS, MAX_REMOTE_TIMEOUT_SECONDS};

/// Checks `remote` of an Agent whose backend is the subagent one (`subagent`).
pub fn check_remote(report: &mut Report, remote: &AgentRemote, subagent: bool) {
    if !subagent {
        report.error("spec.remote", "a remote agent is a subagent: backend SubAgentBackend");
    }
    let Some(a2a) = &remote.a2a else {
        report.error("spec.remote.a2a", "name the remote agent: a2a");
        return;
    };
    let url = &a2a.card_url;
    if !(url.starts_with("https://") || url.starts_with("http://"))
        || url.len() > 2048
        || url.chars().any(char::is_whitespace)
    {
        report.error(
            "spec.remote.a2a.cardUrl",
            format!("{url:?} must be an http:// or https:// URL of the agent's card (at most 2048 characters)"),
        );
    }
    if a2a.headers.len() > MAX_REMOTE_HEADERS {
        report.error(
            "spec.remote.a2a.headers",
            format!("at most {MAX_REMOTE_HEADERS} headers (has {})", a2a.headers.len()),
        );
    }
    for (i, header) in a2a.headers.iter().enumerate() {
        let field = format!("spec.remote.a2a.headers[{i}]");
        check_header(report, &field, header);
        if header.caller.is_some() {
            report.error(
                format!("{field}.caller"),
                "a remote agent is not sent its run's user's token; use value, secretKeyRef or env",
            );
        }
    }
    if let Some(seconds) = a2a.timeout_seconds
        && !(1..=MAX_REMOTE_TIMEOUT_SECONDS).contains(&seconds)
    {
        report.error(
            "spec.remote.a2a.timeoutSeconds",
            format!("must be within 1..{MAX_REMOTE_TIMEOUT_SECONDS} (is {seconds})"),
        );
    }
    if let Some(seconds) = a2a.card_ttl_seconds
        && seconds > 86_400
    {
        report.error("spec.remote.a2a.cardTtlSeconds", format!("must be within 0..86400 (is {seconds})"));
    }
}

/// The rules of an McpServer, as its CEL rules state them, with precise field paths: an http(s) URL, at
/// most 16 headers each with one source, tool names, the refresh interval in range, the share scopes.
pub fn validate_mcp_server(server: &crate::resources::mcp_server::McpServer) -> Report {
    let mut report = Report::default();
    super::check_namespace(&mut report, &server.metadata);
    let name = kube::ResourceExt::name_any(server);
    if !super::is_dns1123_label(&name) {
        report.error(
            "metadata.name",
            format!("{name:?} is not a valid name: an McpServer's name {}", super::DNS1123_LABEL_HINT),
        );
    }
    let spec = &server.spec;
    match (&spec.deploy, spec.url.is_empty()) {
        (Some(deploy), true) => check_deploy(&mut report, deploy),
        (None, false) => {}
        _ => report.error(
            "spec.url",
            "give exactly one of url (a server that runs elsewhere) and deploy (one the operator runs)",
        ),
    }
    if !spec.url.is_empty()
        && (!(spec.url.starts_with("https://") || spec.url.starts_with("http://"))
            || spec.url.len() > 2048
            || spec.url.chars().any(char::is_whitespace))
    {
        report.error(
            "spec.url",
            format!("{:?} must be an http:// or https:// URL of the server's MCP endpoint", spec.url),
        );
    }
    if spec.headers.len() > MAX_REMOTE_HEADERS {
        report.error("spec.headers", format!("at most {MAX_REMOTE_HEADERS} headers (has {})", spec.headers.len()));
    }
    for (i, header) in spec.headers.iter().enumerate() {
        check_header(&mut report, &format!("spec.headers[{i}]"), header);
    }
    if let Some(tools) = &spec.tools {
        super::check_name_list(&mut report, "spec.tools", tools, 256, 128);
    }
    if let Some(seconds) = spec.refresh_seconds
        && !crate::resources::mcp_server::REFRESH_SECONDS.contains(&seconds)
    {
        report.error("spec.refreshSeconds", format!("must be within 5..86400 (is {seconds})"));
    }
    if let Some(share) = &spec.share {
        super::validate_share(&mut report, share);
    }
    if let Some(seconds) = spec.timeout_seconds
        && !(1..=300).contains(&seconds)
    {
        report.error("spec.timeoutSeconds", format!("must be within 1..300 (is {seconds})"));
    }
    if let Some(seconds) = spec.call_timeout_seconds
        && !(1..=3600).contains(&seconds)
    {
        report.error("spec.callTimeoutSeconds", format!("must be within 1..3600 (is {seconds})"));
    }
    if let Some(namespaces) = spec.allowed_namespaces.as_ref().filter(|n| !n.is_empty()) {
        super::check_name_list(&mut report, "spec.allowedNamespaces", namespaces, 64, 63);
        for (i, namespace) in namespaces.iter().enumerate() {
            if namespace != "*" && !super::is_dns1123_label(namespace) {
                report.error(format!("spec.allowedNamespaces[{i}]"), format!("{namespace:?} is not a namespace or *"));
            }
        }
        for (i, _) in spec.headers.iter().enumerate().filter(|(_, h)| h.secret_key_ref.is_some()) {
            report.error(
                format!("spec.headers[{i}].secretKeyRef"),
                "a server other namespaces use cannot lend them a Secret: send each user's own token (caller) or a value",
            );
        }
    }
    report
}

/// Checks a server the operator runs: an image, a path from `/`, variables each with one source and a
/// variable's name, at most 32 of them.
fn check_deploy(report: &mut Report, deploy: &crate::resources::mcp_server::McpServerDeploy) {
    if deploy.image.trim().is_empty() || deploy.image.len() > 512 || deploy.image.chars().any(char::is_whitespace) {
        report.error("spec.deploy.image", format!("{:?} is not a container image", deploy.image));
    }
    if deploy.path.as_deref().is_some_and(|p| !p.starts_with('/') || p.chars().any(char::is_whitespace)) {
        report.error("spec.deploy.path", "must be a path from / (the MCP endpoint, default /mcp)");
    }
    if deploy.port == Some(0) {
        report.error("spec.deploy.port", "must be within 1..65535");
    }
    if deploy.replicas.is_some_and(|r| !(1..=10).contains(&r)) {
        report.error("spec.deploy.replicas", "must be within 1..10");
    }
    if let Some(resources) = &deploy.resources {
        for (kind, amounts) in [("requests", &resources.requests), ("limits", &resources.limits)] {
            for (name, amount) in amounts.iter().flat_map(|a| a.named()) {
                if !crate::resources::mcp_server::is_quantity(amount) {
                    report.error(
                        format!("spec.deploy.resources.{kind}.{name}"),
                        format!("{amount:?} is not a quantity (500m, 2, 256Mi, 1Gi)"),
                    );
                }
            }
        }
    }
    if deploy.env.len() > 32 {
        report.error("spec.deploy.env", format!("at most 32 variables (has {})", deploy.env.len()));
    }
    for (i, variable) in deploy.env.iter().enumerate() {
        let field = format!("spec.deploy.env[{i}]");
        let name = &variable.name;
        if name.is_empty()
            || name.starts_with(|c: char| c.is_ascii_digit())
            || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            report.error(format!("{field}.name"), format!("{name:?} is not a variable name"));
        }
        if variable.value.is_some() == variable.secret_key_ref.is_some() {
            report.error(format!("{field}.value"), "give exactly one of value, secretKeyRef");
        }
    }
}

/// The MCP servers `agent` names (`spec.context.mcps[i]`) against those that exist: a server of the
/// installation's configuration (`configured`), or an McpServer (`servers`: those of the agent's
/// namespace, and of the namespaces it names as `<namespace>/<name>`) that the author may use
/// (`may_use`) and, in another namespace, that lets the agent's (`allowedNamespaces`). Each other name is refused, naming the field and listing the servers
/// the author may name. A tool named in `context.mcpTools` or `context.approvalRequired`
/// (`<server>/<tool>`) of a server whose whole tool list the last discovery found must be one of
/// them. (Pure: the webhook reads the McpServers and judges the author.)
pub fn validate_mcp_references(
    agent: &crate::resources::Agent,
    servers: &[crate::resources::mcp_server::McpServer],
    configured: &[String],
    may_use: impl Fn(&crate::resources::mcp_server::McpServer) -> bool,
) -> Report {
    let mut report = Report::default();
    let namespace = agent.metadata.namespace.as_deref().unwrap_or_default();
    // How the agent names each server it may use: by name in its own namespace, `<namespace>/<name>`
    // in another that lets it.
    let reference = |server: &crate::resources::mcp_server::McpServer| -> Option<String> {
        let (home, name) =
            (server.metadata.namespace.as_deref().unwrap_or_default(), kube::ResourceExt::name_any(server));
        if !may_use(server) {
            None
        } else if home == namespace {
            Some(name)
        } else {
            server.spec.allows_namespace(namespace).then(|| format!("{home}/{name}"))
        }
    };
    let usable: Vec<String> = configured.iter().cloned().chain(servers.iter().filter_map(reference)).collect();
    let named = agent.spec.context.as_ref().and_then(|c| c.mcps.as_ref());
    for (i, name) in named.into_iter().flatten().enumerate() {
        if usable.contains(name) {
            continue;
        }
        let field = format!("spec.context.mcps[{i}]");
        // A server the author may not use answers as one that does not exist.
        let known = if usable.is_empty() { "none".to_string() } else { usable.join(", ") };
        report.error(field, format!("no MCP server {name:?} you may use in this namespace; you may name: {known}"));
    }
    // Tools named of a server whose tools are known: each must be one of them.
    let context = agent.spec.context();
    let known_tools = |server: &str| {
        let found = servers.iter().find(|s| reference(s).as_deref() == Some(server))?;
        let status = found
            .status
            .as_ref()
            .filter(|s| s.last_error.is_none() && !s.tools.is_empty() && s.tool_count == Some(s.tools.len() as i32))?;
        Some(status.tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>())
    };
    for (i, entry) in context.mcp_tools.iter().flatten().enumerate() {
        let Some(offered) = known_tools(&entry.server) else { continue };
        for (j, tool) in entry.tools.iter().enumerate().filter(|(_, t)| !offered.contains(t)) {
            report.error(
                format!("spec.context.mcpTools[{i}].tools[{j}]"),
                format!("the MCP server {:?} offers no tool {tool:?}; it offers: {}", entry.server, offered.join(", ")),
            );
        }
    }
    for (i, rule) in context.approval_required.iter().flatten().enumerate() {
        let Some((server, tool)) = rule.rsplit_once('/').filter(|(_, tool)| *tool != "*") else { continue };
        if let Some(offered) = known_tools(server).filter(|offered| !offered.iter().any(|t| t == tool)) {
            report.error(
                format!("spec.context.approvalRequired[{i}]"),
                format!("the MCP server {server:?} offers no tool {tool:?}; it offers: {}", offered.join(", ")),
            );
        }
    }
    report
}

/// Checks one header sent to a remote agent or an MCP server, at `field`: an HTTP token name, exactly
/// one value source, a variable name for `env`, no control characters.
pub fn check_header(report: &mut Report, field: &str, header: &crate::resources::remote::RemoteHeader) {
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+.^_`|~-".contains(c);
    if header.name.is_empty() || header.name.len() > 128 || !header.name.chars().all(token) {
        report.error(format!("{field}.name"), format!("{:?} is not an HTTP header name", header.name));
    }
    let sources =
        [header.value.is_some(), header.secret_key_ref.is_some(), header.env.is_some(), header.caller.is_some()];
    if sources.iter().filter(|s| **s).count() != 1 {
        report.error(format!("{field}.value"), "give exactly one of value, secretKeyRef, env, caller");
    }
    if let Some(env) = &header.env
        && (env.is_empty()
            || env.starts_with(|c: char| c.is_ascii_digit())
            || !env.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
    {
        report.error(format!("{field}.env"), format!("{env:?} is not an environment variable name"));
    }
    let texts = [(".value", header.value.as_deref()), (".prefix", header.prefix.as_deref())];
    for (part, text) in texts {
        if text.is_some_and(|t| t.chars().any(char::is_control)) {
            report.error(format!("{field}{part}"), "holds control characters");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::remote::{RemoteA2a, RemoteHeader};

    fn fields(remote: &AgentRemote, subagent: bool) -> Vec<String> {
        let mut report = Report::default();
        check_remote(&mut report, remote, subagent);
        report.errors.iter().map(|e| e.field.clone()).collect()
    }

    fn a2a(card_url: &str, headers: Vec<RemoteHeader>) -> AgentRemote {
        AgentRemote { a2a: Some(RemoteA2a { card_url: card_url.into(), headers, ..Default::default() }) }
    }

    #[test]
    fn a_remote_is_a_subagents_with_an_http_card_and_one_source_per_header() {
        let header = |value: Option<&str>, env: Option<&str>| RemoteHeader {
            name: "Authorization".into(),
            value: value.map(str::to_string),
            env: env.map(str::to_string),
            ..Default::default()
        };
        let good = a2a("https://a.example/.well-known/agent-card.json", vec![header(None, Some("TOKEN"))]);
        assert!(fields(&good, true).is_empty());
        assert_eq!(fields(&good, false), ["spec.remote"]);
        assert_eq!(fields(&AgentRemote::default(), true), ["spec.remote.a2a"]);
        assert_eq!(fields(&a2a("ftp://a", vec![]), true), ["spec.remote.a2a.cardUrl"]);
        assert_eq!(
            fields(&a2a("https://a", vec![header(Some("x"), Some("T"))]), true),
            ["spec.remote.a2a.headers[0].value"]
        );
        assert_eq!(fields(&a2a("https://a", vec![header(None, None)]), true), ["spec.remote.a2a.headers[0].value"]);
        assert_eq!(
            fields(&a2a("https://a", vec![header(None, Some("1BAD"))]), true),
            ["spec.remote.a2a.headers[0].env"]
        );
        let mut bad_name = header(Some("x"), None);
        bad_name.name = "Bad Name".into();
        assert_eq!(fields(&a2a("https://a", vec![bad_name]), true), ["spec.remote.a2a.headers[0].name"]);
        let mut slow = a2a("https://a", vec![]);
        slow.a2a.as_mut().expect("a2a").timeout_seconds = Some(0);
        assert_eq!(fields(&slow, true), ["spec.remote.a2a.timeoutSeconds"]);
    }

    #[test]
    fn tools_named_of_a_fully_listed_server_must_be_among_its_tools() {
        let server = |name: &str, tools: &[&str], error: Option<&str>| {
            let mut server = crate::resources::mcp_server::McpServer::new(name, Default::default());
            server.status = Some(crate::resources::mcp_server::McpServerStatus {
                tools: tools
                    .iter()
                    .map(|t| crate::resources::mcp_server::DiscoveredTool { name: t.to_string(), ..Default::default() })
                    .collect(),
                tool_count: Some(tools.len() as i32),
                last_error: error.map(str::to_string),
                ..Default::default()
            });
            server
        };
        let servers = [
            server("docs", &["search", "purge"], None),
            server("down", &["old"], Some("refused")),
            server("new", &[], None),
        ];
        let agent = |context: &str| -> crate::resources::Agent {
            serde_norway::from_str(&format!(
                "metadata: {{name: a}}\nspec: {{backend: ChatbotAgent, context: {context}}}"
            ))
            .expect("an agent")
        };
        let fields = |context: &str| -> Vec<String> {
            let report = validate_mcp_references(&agent(context), &servers, &[], |_| true);
            report.errors.iter().map(|e| e.field.clone()).collect()
        };
        assert!(
            fields(
                "{mcps: [docs], mcpTools: [{server: docs, tools: [search]}], approvalRequired: [docs/purge, docs/*]}"
            )
            .is_empty()
        );
        assert_eq!(
            fields("{mcpTools: [{server: docs, tools: [search, nope]}]}"),
            ["spec.context.mcpTools[0].tools[1]"]
        );
        assert_eq!(fields("{approvalRequired: [write_file, docs/nope]}"), ["spec.context.approvalRequired[1]"]);
        // A server that is down, or listed nothing yet, is not judged: its tools are not known.
        assert!(
            fields("{mcpTools: [{server: down, tools: [x]}, {server: new, tools: [y]}], approvalRequired: [down/x]}")
                .is_empty()
        );
        // Nor is one the author may not use: its name is refused already, its tools say nothing.
        let report = validate_mcp_references(&agent("{approvalRequired: [docs/nope]}"), &servers, &[], |_| false);
        assert!(report.is_ok());
    }

    #[test]
    fn a_server_of_another_namespace_is_named_namespace_slash_name_where_it_allows_the_agents() {
        let server = |name: &str, allowed: Option<Vec<&str>>| {
            let spec = crate::resources::mcp_server::McpServerSpec {
                url: "http://x/mcp".into(),
                allowed_namespaces: allowed.map(|a| a.into_iter().map(str::to_string).collect()),
                ..Default::default()
            };
            let mut server = crate::resources::mcp_server::McpServer::new(name, spec);
            server.metadata.namespace = Some("tools".into());
            server.status = Some(crate::resources::mcp_server::McpServerStatus {
                tools: vec![crate::resources::mcp_server::DiscoveredTool {
                    name: "purge".into(),
                    ..Default::default()
                }],
                tool_count: Some(1),
                ..Default::default()
            });
            server
        };
        let servers =
            [server("shared", Some(vec!["team-a"])), server("everyone", Some(vec!["*"])), server("private", None)];
        let agent = |context: &str| -> crate::resources::Agent {
            serde_norway::from_str(&format!(
                "metadata: {{name: a, namespace: team-a}}\nspec: {{backend: ChatbotAgent, context: {context}}}"
            ))
            .expect("an agent")
        };
        let fields = |context: &str| -> Vec<String> {
            let report = validate_mcp_references(&agent(context), &servers, &[], |_| true);
            report.errors.iter().map(|e| e.field.clone()).collect()
        };
        assert!(fields("{mcps: [tools/shared, tools/everyone], approvalRequired: [tools/shared/purge]}").is_empty());
        assert_eq!(
            fields("{mcps: [tools/shared, tools/private, shared]}"),
            ["spec.context.mcps[1]", "spec.context.mcps[2]"]
        );
        assert_eq!(
            fields("{mcps: [tools/shared], approvalRequired: [tools/shared/nope]}"),
            ["spec.context.approvalRequired[0]"]
        );
        assert_eq!(
            fields("{mcpTools: [{server: tools/shared, tools: [nope]}]}"),
            ["spec.context.mcpTools[0].tools[0]"]
        );
    }

    #[test]
    fn a_server_other_namespaces_use_lends_them_no_secret() {
        let server: crate::resources::mcp_server::McpServer = serde_norway::from_str(
            "metadata: {name: shared, namespace: tools}\nspec:\n  url: http://x/mcp\n  allowedNamespaces: [team-a, 'Bad_NS']\n  headers:\n  - {name: Authorization, secretKeyRef: {name: s, key: k}}\n  - {name: X-User, caller: {audience: tools}}\n",
        )
        .expect("an McpServer");
        let report = validate_mcp_server(&server);
        let fields: Vec<&str> = report.errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["spec.allowedNamespaces[1]", "spec.headers[0].secretKeyRef"]);
    }

    #[test]
    fn a_deployed_server_has_an_image_a_path_quantities_and_no_url() {
        let fields = |spec: &str| -> Vec<String> {
            let server: crate::resources::mcp_server::McpServer =
                serde_norway::from_str(&format!("metadata: {{name: docs, namespace: team-a}}\nspec: {spec}"))
                    .expect("an McpServer");
            validate_mcp_server(&server).errors.iter().map(|e| e.field.clone()).collect()
        };
        assert!(fields("{deploy: {image: 'r.example/docs:1', path: /mcp, resources: {limits: {cpu: 500m, memory: 256Mi}, requests: {cpu: '0.25'}}}}").is_empty());
        assert_eq!(fields("{url: 'http://x/mcp', deploy: {image: 'r.example/docs:1'}}"), ["spec.url"]);
        assert_eq!(fields("{}"), ["spec.url"]);
        assert_eq!(
            fields(
                "{deploy: {image: ' ', path: mcp, resources: {limits: {memory: lots}}, env: [{name: 1X, value: v}, {name: Y}]}}"
            ),
            [
                "spec.deploy.image",
                "spec.deploy.path",
                "spec.deploy.resources.limits.memory",
                "spec.deploy.env[0].name",
                "spec.deploy.env[1].value"
            ]
        );
    }
}
