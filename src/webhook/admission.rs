//! Admission decisions for Agent, AgentRun, KnowledgeBase and Model: AdmissionReview v1 in, AdmissionReview v1
//! out.
//!
//! The decisions are the rules of [`crate::resources::validation`]; this module only unpacks the review,
//! reads the other Agents of the namespace when a rule needs them, and packs the verdict.

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation};
use kube::api::{Api, ListParams};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use serde::de::DeserializeOwned;

use crate::access::{RunCreators, run_owner};
use crate::resources::manifest::decode;
use crate::resources::validation::{self, Report};
use crate::resources::{Agent, AgentRun, GROUP, KnowledgeBase, Model};

/// Why a request body is not an AdmissionReview the webhook can answer; the server answers 400 with it.
#[derive(Debug, thiserror::Error)]
pub enum BadReview {
    /// The body is not JSON of the AdmissionReview shape.
    #[error("the body is not an AdmissionReview v1: {0}")]
    Malformed(#[from] serde_json::Error),
    /// The review has no `request`.
    #[error("the AdmissionReview has no request")]
    NoRequest,
    /// The body is another type, or another version of the review.
    #[error(
        "the body is apiVersion {api_version:?} kind {kind:?}; this webhook answers admission.k8s.io/v1 AdmissionReview"
    )]
    WrongType {
        /// The body's `apiVersion`.
        api_version: String,
        /// The body's `kind`.
        kind: String,
    },
}

/// The kinds this webhook judges.
enum Kind {
    Agent,
    AgentRun,
    KnowledgeBase,
    Model,
}

/// Judges admission requests. `client` reads the other Agents of a namespace for the cross-object rules;
/// without one (`--offline`) only the single-object rules run. An AgentRun runs as the user who creates
/// it, unless that user is one of `run_creators` ([`crate::access::run_owner`]).
#[derive(Clone)]
pub struct Admission {
    client: Option<kube::Client>,
    run_creators: RunCreators,
    configured_mcp: Vec<String>,
}

impl Admission {
    /// A judge that reads Agents through `client`, or only checks single objects when it is `None`; no
    /// user may create runs for another (see [`Admission::with_run_creators`]).
    pub fn new(client: Option<kube::Client>) -> Self {
        Self { client, run_creators: RunCreators::default(), configured_mcp: Vec::new() }
    }

    /// The same judge, knowing the MCP servers the installation configures (`mcpServers` of the chart),
    /// which an Agent may name beside the namespace's McpServers.
    pub fn with_configured_mcp(self, names: Vec<String>) -> Self {
        Self { configured_mcp: names, ..self }
    }

    /// The same judge, letting `creators` create AgentRuns for other users.
    pub fn with_run_creators(self, creators: RunCreators) -> Self {
        Self { run_creators: creators, ..self }
    }

    /// Answers a validating review (`POST /validate`), given the raw request body.
    ///
    /// Errors: [`BadReview`] when the body is not a review with a request. A review of a kind other than
    /// Agent, AgentRun, KnowledgeBase and Model is allowed unchanged.
    pub async fn validate(&self, body: &[u8]) -> Result<AdmissionReview<DynamicObject>, BadReview> {
        let request = parse_review(body)?;
        let response = AdmissionResponse::from(&request);
        let response = match kind_of(&request) {
            _ if matches!(request.operation, Operation::Delete | Operation::Connect) => response,
            Some(Kind::Agent) => self.validate_agent(&request, response).await,
            Some(Kind::AgentRun) => validate_agent_run(&request, response, &self.run_creators),
            Some(Kind::KnowledgeBase) => match decode_object::<KnowledgeBase>(request.object.as_ref()) {
                Ok(kb) => verdict(response, validation::validate_knowledge_base(&kb)),
                Err(reason) => response.deny(reason),
            },
            Some(Kind::Model) => match decode_object::<Model>(request.object.as_ref()) {
                Ok(model) => verdict(response, validation::validate_model(&model)),
                Err(reason) => response.deny(reason),
            },
            None => response,
        };
        Ok(response.into_review())
    }

    /// Answers a mutating review (`POST /mutate`): on an Agent whose `spec.isSubagent` is omitted, adds it,
    /// derived from the backend; on a new AgentRun whose `spec.uid` is omitted and whose creator may not
    /// create runs for others, adds the creator's uid. Nothing else is ever stamped, so a GitOps tool sees
    /// no drift in the fields it manages.
    pub async fn mutate(&self, body: &[u8]) -> Result<AdmissionReview<DynamicObject>, BadReview> {
        let request = parse_review(body)?;
        let response = AdmissionResponse::from(&request);
        let stamped = match (kind_of(&request), &request.operation) {
            (Some(Kind::Agent), Operation::Create | Operation::Update) => {
                decode_object::<Agent>(request.object.as_ref())
                    .ok()
                    .and_then(|agent| validation::derived_is_subagent(&agent))
                    .map(|is_subagent| (["spec", "isSubagent"], serde_json::Value::Bool(is_subagent)))
            }
            (Some(Kind::AgentRun), Operation::Create) => decode_object::<AgentRun>(request.object.as_ref())
                .ok()
                .and_then(|run| {
                    let (username, groups) = creator(&request);
                    run_owner(run.spec.uid.as_deref(), username, groups, &self.run_creators, true).ok().flatten()
                })
                .map(|uid| (["spec", "uid"], serde_json::Value::String(uid))),
            _ => None,
        };
        let Some((path, value)) = stamped else { return Ok(response.into_review()) };
        let patch = Patch(vec![PatchOperation::Add(AddOperation { path: PointerBuf::from_tokens(path), value })]);
        let response = match response.clone().with_patch(patch) {
            Ok(patched) => patched,
            Err(err) => response.deny(format!("cannot encode the patch: {err}")),
        };
        Ok(response.into_review())
    }

    async fn validate_agent(
        &self,
        request: &AdmissionRequest<DynamicObject>,
        response: AdmissionResponse,
    ) -> AdmissionResponse {
        let agent = match decode_object::<Agent>(request.object.as_ref()) {
            Ok(agent) => agent,
            Err(reason) => return response.deny(reason),
        };
        let mut report = validation::validate_agent(&agent);
        if let Some(client) = &self.client {
            let namespace = request.namespace.clone().unwrap_or_default();
            let api: Api<Agent> = Api::namespaced(client.clone(), &namespace);
            match api.list(&ListParams::default()).await {
                Ok(list) => report.extend(validation::validate_agent_among(&agent, &list.items)),
                Err(err) => {
                    return response.deny(format!(
                        "cannot list the Agents of namespace {namespace:?} to check the default agent and the subagent references: {err}"
                    ));
                }
            }
            report.extend(self.unresolved_names(client, &namespace, &agent).await);
            // The MCP servers it names: configured, or McpServers of the namespace its author may use.
            let context = agent.spec.context();
            let names_mcp = context.mcps.as_ref().is_some_and(|m| !m.is_empty())
                || context.mcp_tools.as_ref().is_some_and(|m| !m.is_empty())
                || context.approval_required.iter().flatten().any(|rule| rule.contains('/'));
            if names_mcp {
                // The agent's namespace, and each other namespace it names a server of.
                let mut namespaces = vec![namespace.clone()];
                for reference in context.mcps.iter().flatten() {
                    if let (Some(other), _) = crate::resources::mcp_server::parse_reference(reference)
                        && !namespaces.iter().any(|n| n == other)
                        && namespaces.len() < 8
                    {
                        namespaces.push(other.to_string());
                    }
                }
                let mut listed = Vec::new();
                for listed_namespace in &namespaces {
                    let servers: Api<crate::resources::mcp_server::McpServer> =
                        Api::namespaced(client.clone(), listed_namespace);
                    match servers.list(&ListParams::default()).await {
                        Ok(list) => listed.extend(list.items),
                        // A namespace that cannot be read holds no server the agent may name.
                        Err(kube::Error::Api(status)) if listed_namespace != &namespace && status.code == 403 => {}
                        Err(err) => {
                            return response.deny(format!(
                                "cannot list the McpServers of namespace {listed_namespace:?} to check spec.context.mcps: {err}"
                            ));
                        }
                    }
                }
                let (username, groups) = creator(request);
                // The facade (a run creator) checks its users' rights itself; anyone else is judged as
                // the person they are.
                let trusted = self.run_creators.includes(username, groups);
                let author =
                    crate::access::Identity::new(crate::access::uid_of(username), crate::access::Role::User, None);
                let may_use = |server: &crate::resources::mcp_server::McpServer| {
                    trusted || crate::access::mcp_server_permission(&author, server) >= crate::access::Permission::Read
                };
                report.extend(validation::validate_mcp_references(&agent, &listed, &self.configured_mcp, may_use));
            }
        }
        verdict(response, report)
    }
}

impl Admission {
    /// Warnings for the knowledge bases and the Model `agent` names that its namespace does not hold
    /// now: warnings, not a denial, since GitOps tools apply objects in any order (Flux checks a whole
    /// set by dry run before any of it exists). A list that cannot be read warns of nothing.
    async fn unresolved_names(&self, client: &kube::Client, namespace: &str, agent: &Agent) -> validation::Report {
        let context = agent.spec.context();
        let mut known = validation::Known::default();
        if context.knowledges.as_ref().is_some_and(|k| !k.is_empty()) {
            let api: Api<crate::resources::KnowledgeBase> = Api::namespaced(client.clone(), namespace);
            known.knowledge_bases = names(api.list(&ListParams::default()).await);
        }
        if context.model.as_deref().is_some_and(|m| !m.is_empty() && !m.contains('/')) {
            let api: Api<crate::resources::Model> = Api::namespaced(client.clone(), namespace);
            known.models = names(api.list(&ListParams::default()).await);
        }
        validation::check_references(agent, &known, validation::Severity::Warn)
    }
}

/// The names of a listing, `None` when it failed.
fn names<K: kube::Resource + Clone>(listed: Result<kube::core::ObjectList<K>, kube::Error>) -> Option<Vec<String>> {
    listed.ok().map(|list| list.items.iter().map(kube::ResourceExt::name_any).collect())
}

/// The Kubernetes user who sent the request: the username and groups of its `userInfo`.
fn creator(request: &AdmissionRequest<DynamicObject>) -> (&str, &[String]) {
    (request.user_info.username.as_deref().unwrap_or_default(), request.user_info.groups.as_deref().unwrap_or_default())
}

fn validate_agent_run(
    request: &AdmissionRequest<DynamicObject>,
    response: AdmissionResponse,
    creators: &RunCreators,
) -> AdmissionResponse {
    let run = match decode_object::<AgentRun>(request.object.as_ref()) {
        Ok(run) => run,
        Err(reason) => return response.deny(reason),
    };
    let mut report = validation::validate_agent_run(&run);
    if request.operation == Operation::Create {
        let (username, groups) = creator(request);
        if let Err(message) = run_owner(run.spec.uid.as_deref(), username, groups, creators, false) {
            report.error("spec.uid", message);
        }
    }
    if request.operation == Operation::Update {
        match decode_object::<AgentRun>(request.old_object.as_ref()) {
            Ok(old) => report.extend(validation::validate_agent_run_update(&old, &run)),
            Err(reason) => return response.deny(format!("oldObject: {reason}")),
        }
    }
    verdict(response, report)
}

/// Turns a report into the response: denied with every error in the message, warnings attached.
fn verdict(response: AdmissionResponse, report: Report) -> AdmissionResponse {
    let mut response = if report.is_ok() { response } else { response.deny(report.error_summary()) };
    if !report.warnings.is_empty() {
        response.warnings = Some(report.warning_lines());
    }
    response
}

fn parse_review(body: &[u8]) -> Result<AdmissionRequest<DynamicObject>, BadReview> {
    let review: AdmissionReview<DynamicObject> = serde_json::from_slice(body)?;
    let (api_version, kind) = (review.types.api_version.as_str(), review.types.kind.as_str());
    if (api_version, kind) != ("admission.k8s.io/v1", "AdmissionReview") {
        return Err(BadReview::WrongType { api_version: api_version.to_string(), kind: kind.to_string() });
    }
    review.try_into().map_err(|_| BadReview::NoRequest)
}

fn kind_of(request: &AdmissionRequest<DynamicObject>) -> Option<Kind> {
    if request.kind.group != GROUP {
        return None;
    }
    match request.kind.kind.as_str() {
        "Agent" => Some(Kind::Agent),
        "AgentRun" => Some(Kind::AgentRun),
        "KnowledgeBase" => Some(Kind::KnowledgeBase),
        "Model" => Some(Kind::Model),
        _ => None,
    }
}

/// Decodes the review's object as `T`, which must be of the kind the review is for; the error names the
/// field that does not fit.
fn decode_object<T: DeserializeOwned + kube::Resource<DynamicType = ()>>(
    object: Option<&DynamicObject>,
) -> Result<T, String> {
    let object = object.ok_or_else(|| "object: the review carries no object".to_string())?;
    let (api_version, kind) =
        object.types.as_ref().map(|t| (t.api_version.as_str(), t.kind.as_str())).unwrap_or_default();
    if (api_version, kind) != (T::api_version(&()).as_ref(), T::kind(&()).as_ref()) {
        return Err(format!(
            "object: apiVersion {api_version:?} kind {kind:?} is not the {} {} the review is for",
            T::api_version(&()),
            T::kind(&())
        ));
    }
    let value = serde_json::to_value(object).map_err(|err| format!("cannot read the object: {err}"))?;
    decode(value, 1).map_err(|err| match err {
        crate::resources::manifest::ManifestError::Field { field, message, .. } => format!("{field}: {message}"),
        other => other.to_string(),
    })
}
