//! The tools a run may call: the built-in file tools and `execute`, MCP servers' tools, and (for main
//! agents) the subagent tools.
//!
//! Which tools a run has is decided once, from the agent's context ([`Grants`]); a tool outside the grant
//! is refused when the model calls it, whatever the model was shown (Yuxi bug #1000 hid tools but still ran
//! them).

pub mod execute;
pub mod files;
pub mod knowledge;
pub mod subagents;

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::Value;

use crate::resources::{AgentSpec, ToolApprovalMode};

/// What the model is told about a tool: its name, what it does, and its arguments as a JSON Schema.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolSpec {
    /// The tool name the model calls.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// The JSON Schema of the arguments object.
    pub parameters: Value,
}

/// A tool call that did not produce a result; the message is fed back to the model as the tool's answer,
/// so it can correct itself.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ToolError(pub String);

impl ToolError {
    /// An error with `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

/// A callable tool.
pub trait Tool: Send + Sync {
    /// The tool's description for the model.
    fn spec(&self) -> ToolSpec;
    /// Runs the tool on its parsed arguments, returning its text output.
    fn call(&self, arguments: Value) -> BoxFuture<'_, Result<String, ToolError>>;
    /// Runs the tool for one call of a run: tools that need the call's id or write events of their own
    /// (the subagent tools) override it; the others just [`Tool::call`].
    fn call_in(&self, context: ToolContext, arguments: Value) -> BoxFuture<'_, Result<String, ToolError>> {
        let _ = context;
        self.call(arguments)
    }
}

/// The run and the model's tool call a tool runs for.
#[derive(Clone)]
pub struct ToolContext {
    /// The model's id for the call (stable across a retry of the same call).
    pub tool_call_id: String,
    /// The run.
    pub run_id: String,
    /// The run's thread.
    pub thread_id: String,
    /// The run's store, for the tool's own `custom` events.
    pub store: crate::store::RunnerStoreClient,
    /// The child run (run id, thread id) a subagent tool started or acted on, set by the tool.
    pub child: Arc<std::sync::Mutex<Option<(String, String)>>>,
}

impl ToolContext {
    /// The context of the call `tool_call_id` of a run.
    pub fn new(tool_call_id: &str, run_id: &str, thread_id: &str, store: crate::store::RunnerStoreClient) -> Self {
        Self {
            tool_call_id: tool_call_id.to_string(),
            run_id: run_id.to_string(),
            thread_id: thread_id.to_string(),
            store,
            child: Arc::default(),
        }
    }

    /// Records the child run the call is about.
    pub fn link_child(&self, run_id: &str, thread_id: &str) {
        *self.child.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some((run_id.to_string(), thread_id.to_string()));
    }

    /// The child run the call is about, when the tool linked one.
    pub fn linked_child(&self) -> Option<(String, String)> {
        self.child.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Writes a `custom` event with `payload` into the run's stream; a failure is logged, not fatal to the
    /// tool.
    pub async fn note(&self, payload: Value) {
        if let Err(err) =
            self.store.append_event(&self.run_id, &self.thread_id, crate::run::EventKind::Custom, payload).await
        {
            tracing::warn!(error = %err, "cannot write a tool's event");
        }
    }
}

/// The built-in tool names (the deepagents names Yuxi uses), declared in the core.
pub use crate::resources::tools::names;

/// Which built-in tools and MCP servers a run may use, from the agent's context:
/// - `context.tools` absent: every built-in tool; present: only those it lists;
/// - a subagent in `Default` approval mode loses `write_file`, `edit_file` and `execute`;
/// - `context.mcps` absent: every configured MCP server; present: only those it lists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grants {
    /// The granted built-in tools.
    pub builtin: Vec<&'static str>,
    /// The MCP servers whose tools may be used; `None` means every configured server.
    pub mcps: Option<Vec<String>>,
    /// Per server, the only tools of it that may be used (`context.mcpTools`); a server not listed
    /// offers all.
    pub mcp_tools: std::collections::BTreeMap<String, Vec<String>>,
}

impl Grants {
    /// The grants of an agent.
    pub fn for_agent(spec: &AgentSpec) -> Self {
        let context = spec.context();
        let approval = context.tool_approval_mode.unwrap_or_default();
        let builtin = names::BUILTIN
            .into_iter()
            .filter(|name| context.tools.as_ref().is_none_or(|listed| listed.iter().any(|t| t == name)))
            .filter(|name| {
                !(spec.is_subagent() && approval == ToolApprovalMode::Default && names::NEED_APPROVAL.contains(name))
            })
            .collect();
        let mcp_tools = context.mcp_tools.iter().flatten().map(|e| (e.server.clone(), e.tools.clone())).collect();
        Grants { builtin, mcps: context.mcps.clone(), mcp_tools }
    }

    /// Whether the built-in tool `name` is granted.
    pub fn allows_builtin(&self, name: &str) -> bool {
        self.builtin.contains(&name)
    }

    /// Whether the MCP server `server` is granted.
    pub fn allows_mcp(&self, server: &str) -> bool {
        self.mcps.as_ref().is_none_or(|listed| listed.iter().any(|m| m == server))
    }

    /// Whether the tool `tool` of the granted MCP server `server` may be used (`context.mcpTools`).
    pub fn allows_mcp_tool(&self, server: &str, tool: &str) -> bool {
        self.mcp_tools.get(server).is_none_or(|only| only.iter().any(|t| t == tool))
    }
}

/// The tools of one run, by name. Only granted tools are ever put in; [`ToolBox::call`] refuses any
/// other name.
#[derive(Clone, Default)]
pub struct ToolBox {
    tools: BTreeMap<String, Arc<dyn Tool>>,
}

impl ToolBox {
    /// An empty tool box.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool under its spec's name, replacing any tool of that name.
    pub fn insert(&mut self, tool: Arc<dyn Tool>) {
        self.tools.insert(tool.spec().name, tool);
    }

    /// The specs of every tool, sorted by name, to offer to the model.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.values().map(|t| t.spec()).collect()
    }

    /// The names of every tool, sorted.
    pub fn names(&self) -> Vec<String> {
        self.tools.keys().cloned().collect()
    }

    /// Calls the tool `name` with the model's `arguments` text.
    ///
    /// Errors (all fed back to the model): a tool this run was not granted, arguments that are not a JSON
    /// object, the tool's own error, or a tool that panicked.
    pub async fn call(&self, name: &str, arguments: &str) -> Result<String, ToolError> {
        self.dispatch(name, arguments, None).await
    }

    /// [`ToolBox::call`] for one call of a run (see [`Tool::call_in`]).
    pub async fn call_in(&self, name: &str, arguments: &str, context: ToolContext) -> Result<String, ToolError> {
        self.dispatch(name, arguments, Some(context)).await
    }

    async fn dispatch(&self, name: &str, arguments: &str, context: Option<ToolContext>) -> Result<String, ToolError> {
        let Some(tool) = self.tools.get(name).cloned() else {
            return Err(ToolError::new(format!(
                "tool {name:?} is not available to this agent; available tools: {}",
                self.names().join(", ")
            )));
        };
        let arguments: Value = if arguments.trim().is_empty() {
            Value::Object(Default::default())
        } else {
            serde_json::from_str(arguments)
                .map_err(|e| ToolError::new(format!("the arguments of {name} are not valid JSON ({e}): {arguments}")))?
        };
        if !arguments.is_object() {
            return Err(ToolError::new(format!("the arguments of {name} must be a JSON object, not {arguments}")));
        }
        // Each call runs as its own task, so a tool that panics fails only its call; in the caller's
        // span, so what it asks of the facade goes under its tool call's span.
        let task = tokio::spawn(tracing::Instrument::in_current_span(async move {
            match context {
                Some(context) => tool.call_in(context, arguments).await,
                None => tool.call(arguments).await,
            }
        }));
        match task.await {
            Ok(result) => result,
            Err(err) if err.is_panic() => Err(ToolError::new(format!("the tool {name} failed unexpectedly"))),
            Err(err) => Err(ToolError::new(format!("the tool {name} was stopped: {err}"))),
        }
    }
}

/// Reads an optional string argument.
pub(crate) fn opt_str<'a>(arguments: &'a Value, key: &str) -> Result<Option<&'a str>, ToolError> {
    match arguments.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(ToolError::new(format!("argument {key} must be a string, not {other}"))),
    }
}

/// Reads a required string argument.
pub(crate) fn req_str<'a>(arguments: &'a Value, key: &str) -> Result<&'a str, ToolError> {
    opt_str(arguments, key)?.ok_or_else(|| ToolError::new(format!("argument {key} is required")))
}

/// Reads an optional non-negative integer argument.
pub(crate) fn opt_u64(arguments: &Value, key: &str) -> Result<Option<u64>, ToolError> {
    match arguments.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_u64()
            .map(Some)
            .ok_or_else(|| ToolError::new(format!("argument {key} must be a non-negative integer, not {value}"))),
    }
}

/// Reads an optional boolean argument.
pub(crate) fn opt_bool(arguments: &Value, key: &str) -> Result<Option<bool>, ToolError> {
    match arguments.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(ToolError::new(format!("argument {key} must be true or false, not {other}"))),
    }
}
