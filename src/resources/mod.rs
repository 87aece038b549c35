//! The custom resources (`agents.yuxi.dev`, `agentruns.yuxi.dev`, `knowledgebases.yuxi.dev`, `models.yuxi.dev`), the
//! rules about them, and the manifests and CRDs they are read from and written to.

pub mod agent;
pub mod agent_run;
pub mod crd;
pub mod knowledge_base;
pub mod manifest;
pub mod manifest_set;
pub mod mcp_server;
pub mod model;
pub mod names;
pub mod remote;
pub mod thread_id;
pub mod tools;
pub mod validation;
pub mod yaml;
pub mod yuxi;

pub use agent::{
    AccessLevel, Agent, AgentContext, AgentShare, AgentSpec, AgentStatus, ShareScope, ToolApprovalMode,
    builtin_general_purpose,
};
pub use agent_run::{
    AgentRun, AgentRunPhase, AgentRunSpec, AgentRunStatus, CostAmount, MAX_BUDGET_TOKENS, ParentRef, PendingApproval,
    PendingCall, RunBudget, TokenUsage,
};
pub use knowledge_base::{KnowledgeBase, KnowledgeBaseSpec, KnowledgeBaseStatus, KnowledgeSource};
pub use model::{Model, ModelPreset, ModelProvider, ModelSpec, ModelStatus};

/// The API group of the resources.
pub const GROUP: &str = "yuxi.dev";
/// The API version of the resources.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` as written in manifests.
pub const API_VERSION: &str = "yuxi.dev/v1alpha1";

/// The backend of main (ordinary) agents (Yuxi `ChatbotAgent`).
pub const BACKEND_CHATBOT: &str = "ChatbotAgent";
/// The backend of subagents (Yuxi `SubAgentBackend`); `isSubagent` is true exactly for it.
pub const BACKEND_SUBAGENT: &str = "SubAgentBackend";
/// Every backend an Agent may name.
pub const BACKENDS: [&str; 2] = [BACKEND_CHATBOT, BACKEND_SUBAGENT];

/// The slug of the built-in subagent whose empty context resolves entirely from the system defaults; it
/// is always resolvable, whether or not a manifest declares it.
pub const GENERAL_PURPOSE: &str = "general-purpose";
