//! The delegation tools over MCP: `/mcp`, a streamable HTTP MCP server (the official Rust SDK, `rmcp`)
//! offering `task`, `subagent_start`, `subagent_status`, `subagent_events`, `subagent_cancel`,
//! `subagent_await`, `subagent_wait_any` and `knowledge_search` with the schemas, allowlists and
//! ownership rules of `/api/tools` (docs/concepts/mcp.md).
//!
//! - Authentication is the facade's: every HTTP request to `/mcp` carries a user token or a run token
//!   (`Authorization: Bearer`), checked before the MCP layer sees it ([`authenticate`]); 401 otherwise.
//! - The agent whose subagents the tools reach: `?agent=<slug>` on the URL, else the run's own (run
//!   token), else the namespace's default agent.
//! - The parent of a user's calls is its MCP session: one session, one parent run and thread (made at
//!   `initialize`, shown in its result), unless a call names a `parent` the user owns. A client of the
//!   stateless protocol (no session) gets one parent per user and agent. A run token's parent is its run.
//!   A session belongs to the caller who opened it (the user, or the run for a run token): every
//!   request naming it is checked, and another caller's is answered as for a session that does not
//!   exist. Sessions are counted per user and per replica, 429 beyond ([`sessions`]).
//! - Each tool call is the `/api/tools` handler of the same name, so the answers, and the refusals (a
//!   stranger's run answers exactly as a missing one), are the same JSON; a refusal is a tool result
//!   with `isError`.
//! - `task`, `subagent_await` and `subagent_wait_any` send progress notifications (the runs' latest
//!   progress) when the call has a progress token, and stop waiting when the call is cancelled; a
//!   cancelled `task` cancels its run.
//! - Clients that declare the tasks extension (`io.modelcontextprotocol/tasks`) get `subagent_start`
//!   answered as an MCP task whose id is the run's: `tasks/get` reads the run (its result once ended),
//!   `tasks/cancel` cancels it ([`tasks`]).

mod calls;
pub mod sessions;
mod tasks;

use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, GetTaskParams, GetTaskResult, Implementation,
    InitializeRequestParams, InitializeResult, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{RoleServer, ServerHandler};

use self::sessions::{Owner, Sessions};
use crate::facade::http::auth::ParentCaller;
use crate::facade::http::error::ApiError;
use crate::facade::services::state::FacadeState;

/// The path the MCP server is served at.
pub const MCP_PATH: &str = "/mcp";

/// Who calls, as [`authenticate`] found it, and the agent the URL names.
#[derive(Clone)]
pub struct McpCaller {
    /// The caller: a user, or a run with its grant.
    pub caller: ParentCaller,
    /// `?agent=<slug>`, when given.
    pub agent: Option<String>,
}

/// The parent run and thread of a session's calls, and who it belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionParent {
    /// The user who opened the session.
    pub uid: String,
    /// The agent whose subagents it reaches.
    pub agent: String,
    /// The parent run id of its children.
    pub run_id: String,
    /// The parent thread.
    pub thread_id: String,
}

/// The `/mcp` route: the MCP server behind the facade's authentication.
pub fn routes(state: FacadeState) -> axum::Router<FacadeState> {
    let made_with = state.clone();
    let config = StreamableHttpServerConfig::default()
        // The facade's own bearer authentication guards it, whatever the Host: it is reached through a
        // Service or an Ingress by name.
        .disable_allowed_hosts()
        .with_max_request_body_bytes(crate::facade::http::limits::MAX_BODY_BYTES);
    let manager = Arc::new(LocalSessionManager::default());
    let sessions = Arc::new(Sessions::new(manager.clone()));
    let service = StreamableHttpService::new(
        move || Ok(McpServer { state: made_with.clone(), session: Arc::new(Mutex::new(None)) }),
        manager,
        config,
    );
    axum::Router::new()
        .route_service(MCP_PATH, service)
        .layer(axum::middleware::from_fn_with_state((state, sessions), authenticate))
}

/// Checks the request's bearer token as every facade route does (401 with the facade's error body),
/// hands the caller to the MCP server in the request's extensions, keeps a session to its owner and
/// counts the sessions opened ([`sessions`]).
async fn authenticate(
    State((state, sessions)): State<(FacadeState, Arc<Sessions>)>,
    request: Request,
    next: Next,
) -> Response {
    use axum::extract::FromRequestParts;
    // The server library's `Mcp-Session-Id`, spelled as an HTTP/2 header name must be.
    const HEADER_SESSION_ID: axum::http::HeaderName = axum::http::HeaderName::from_static("mcp-session-id");
    let (mut parts, body) = request.into_parts();
    let caller = match ParentCaller::from_request_parts(&mut parts, &state).await {
        Ok(caller) => caller,
        Err(err) => return err.into_response(),
    };
    let agent = parts
        .uri
        .query()
        .and_then(|q| serde_urlencoded::from_str::<Vec<(String, String)>>(q).ok())
        .and_then(|pairs| pairs.into_iter().find(|(k, _)| k == "agent").map(|(_, v)| v));
    let owner = Owner::of(&caller);
    let named = parts.headers.get(HEADER_SESSION_ID).map(|v| v.to_str().map(str::to_string));
    let mut place = None;
    match &named {
        // Another caller's session is handed on as one that does not exist, to be answered as one.
        Some(Ok(id)) if !sessions.may_use(id, &owner) => {
            parts.headers.insert(HEADER_SESSION_ID, axum::http::HeaderValue::from_static(sessions::NO_SESSION));
        }
        Some(Ok(_)) => {}
        // The server library reads a session id it cannot read as none, and would open a session
        // uncounted and unowned.
        Some(Err(_)) => {
            return ApiError::BadRequest("the Mcp-Session-Id header is not visible ASCII".into()).into_response();
        }
        // A POST without a session may open one (`initialize`).
        None if parts.method == axum::http::Method::POST => match sessions.take_place(&owner, &state.limits).await {
            Ok(taken) => place = Some(taken),
            Err(err) => return err.into_response(),
        },
        None => {}
    }
    let ending_session = parts.method == axum::http::Method::DELETE;
    parts.extensions.insert(McpCaller { caller, agent });
    let mut response = next.run(Request::from_parts(parts, body)).await;
    if let Some(place) = place {
        let opened = response.headers().get(HEADER_SESSION_ID).and_then(|v| v.to_str().ok());
        place.settle(opened.filter(|_| response.status().is_success()));
    }
    // A session's end is answered 202 by the server library; clients (the Python SDK among them) take
    // 200 or 204 as done, and 204 is what it is: nothing to say.
    if ending_session && response.status() == axum::http::StatusCode::ACCEPTED {
        if let Some(Ok(id)) = &named
            && sessions.may_use(id, &owner)
        {
            sessions.forget(id);
        }
        *response.status_mut() = axum::http::StatusCode::NO_CONTENT;
    }
    response
}

/// One MCP session's server (one per session; one per request for the stateless protocol).
pub struct McpServer {
    state: FacadeState,
    session: Arc<Mutex<Option<SessionParent>>>,
}

/// The caller of an MCP request, as [`authenticate`] left it.
fn caller_of(context: &RequestContext<RoleServer>) -> Result<McpCaller, McpError> {
    context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<McpCaller>())
        .cloned()
        .ok_or_else(|| McpError::internal_error("the request was not authenticated", None))
}

/// An API error as an MCP protocol error (for requests that are not tool calls).
fn protocol_error(err: ApiError) -> McpError {
    match err {
        ApiError::NotFound(message) | ApiError::Invalid { message, .. } => McpError::invalid_params(message, None),
        other => McpError::internal_error(other.to_string(), None),
    }
}

/// What a client's model is told: the parent of its runs, the subagents and knowledge bases it reaches.
async fn instructions(state: &FacadeState, caller: &McpCaller, parent: &SessionParent) -> Result<String, McpError> {
    let prompt = calls::prompt(state, caller, &parent.agent).await.map_err(protocol_error)?;
    Ok(format!(
        "The runs you start are children of parent run {} on thread {} (agent {}); pass `parent` to a tool to name another parent of yours.\n\n{prompt}",
        parent.run_id, parent.thread_id, parent.agent
    ))
}

impl McpServer {
    /// The session's parent, once `initialize` made it.
    fn session(&self) -> Option<SessionParent> {
        self.session.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let mut info = InitializeResult::new(ServerCapabilities::builder().enable_tools().enable_tasks().build());
        info.server_info = Implementation::new("yuxi-operator", env!("CARGO_PKG_VERSION"));
        info
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        context.peer.set_peer_info(request.clone());
        let mut info = self.negotiate_initialize(&request)?;
        let caller = caller_of(&context)?;
        let agent = calls::agent_of(&self.state, &caller).await.map_err(protocol_error)?;
        // A run's parent is the run itself; a user's session gets a parent run and thread of its own.
        let parent = match &caller.caller.run {
            Some(_) => calls::own_parent(&caller, &agent),
            None => {
                let id = format!("mcp-{}", uuid::Uuid::new_v4().simple());
                SessionParent { uid: caller.caller.who.uid.clone(), agent, run_id: id.clone(), thread_id: id }
            }
        };
        info.instructions = Some(instructions(&self.state, &caller, &parent).await?);
        let mut meta = serde_json::Map::new();
        meta.insert(
            "yuxi.dev/parent".into(),
            serde_json::json!({"run_id": parent.run_id, "thread_id": parent.thread_id, "agent": parent.agent}),
        );
        info.meta = Some(rmcp::model::MetaObject(meta));
        *self.session.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(parent);
        Ok(info)
    }

    /// The stateless protocol's discovery: the same instructions as `initialize`, with the caller's
    /// own parent (one per user and agent), so the answer is the caller's alone (`cacheScope: private`).
    async fn discover(&self, context: RequestContext<RoleServer>) -> Result<rmcp::model::DiscoverResult, McpError> {
        let caller = caller_of(&context)?;
        let mut info = self.get_info();
        let agent = calls::agent_of(&self.state, &caller).await.map_err(protocol_error)?;
        let parent = calls::own_parent(&caller, &agent);
        info.instructions = Some(instructions(&self.state, &caller, &parent).await?);
        let mut found =
            rmcp::model::DiscoverResult::from_server_info(self.supported_protocol_versions().into_owned(), info);
        found.cache_scope = rmcp::model::CacheScope::Private;
        Ok(found)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let caller = caller_of(&context)?;
        let agent = match self.session() {
            Some(session) => session.agent,
            None => calls::agent_of(&self.state, &caller).await.map_err(protocol_error)?,
        };
        let tools = calls::tools(&self.state, &caller, &agent).await.map_err(protocol_error)?;
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let caller = caller_of(&context)?;
        calls::call(&self.state, &caller, self.session(), request, context).await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        let caller = caller_of(&context)?;
        tasks::get(&self.state, &caller.caller, &request.task_id).await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let caller = caller_of(&context)?;
        tasks::cancel(&self.state, &caller.caller, &request.task_id).await
    }
}
