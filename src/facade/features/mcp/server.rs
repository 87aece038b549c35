//! The MCP server of one session ([`McpServer`]): `initialize` and the stateless discovery (the
//! session's parent and the instructions its model reads), the tool list and calls ([`super::calls`]),
//! and the tasks extension ([`super::tasks`]).

use std::sync::{Arc, Mutex};

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, GetTaskParams, GetTaskResult, Implementation,
    InitializeRequestParams, InitializeResult, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler};

use super::caller::{McpCaller, SessionParent};
use super::{calls, tasks};
use crate::facade::http::error::ApiError;
use crate::facade::services::state::FacadeState;

/// One MCP session's server (one per session; one per request for the stateless protocol).
pub struct McpServer {
    state: FacadeState,
    session: Arc<Mutex<Option<SessionParent>>>,
}

/// The caller of an MCP request, as [`authenticate`](super::authenticate::authenticate) left it.
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
    /// The server of a new session (or of one request, for the stateless protocol).
    pub(super) fn new(state: FacadeState) -> Self {
        McpServer { state, session: Arc::new(Mutex::new(None)) }
    }

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
        // The call's span, under the caller's `_meta.traceparent` when it sends one (the HTTP request's
        // otherwise): a run it starts goes into the caller's trace.
        let span = tracing::trace_span!(
            target: crate::telemetry::TARGET,
            "mcp_call",
            otel.name = %format!("tools/call {}", request.name),
            otel.kind = "server",
            mcp.method.name = "tools/call",
            gen_ai.tool.name = %request.name,
            gen_ai.operation.name = "execute_tool",
        );
        if !span.is_disabled() {
            crate::telemetry::set_remote_parent(&span, context.meta.get_traceparent());
        }
        let call = calls::call(&self.state, &caller, self.session(), request, context);
        tracing::Instrument::instrument(call, span).await
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
