//! The facade's services: the state every handler reaches and the logic several features share. A
//! service uses the HTTP kernel ([`crate::facade::http`]) and other services, never a feature or the
//! facade's root.
//!
//! - [`state`]: [`state::FacadeState`], the parts every handler reaches;
//! - [`catalog`]: where agents and knowledge bases live, and their refusals in the API's words;
//! - [`agent_views`]: which agents a caller sees, and what they reference;
//! - [`conversations`]: a user's conversations (chat threads);
//! - [`launch`]: starting runs, locally or as AgentRuns; [`run_starts`]: what every start goes through;
//! - [`run_queue`]: starts that wait for their thread; [`run_tree`]: reading a run tree;
//! - [`subagents`]: the subagent tools' logic, behind `/api/tools` and `/mcp`;
//! - [`knowledge`]: the knowledge bases, their indexes and searches; [`run_knowledge`]: the runs'
//!   retrieval tool;
//! - [`files`], [`slug`], [`request_fields`]: names and fields several requests check alike;
//! - [`quick_model`]: the model `POST /api/chat/call` asks; [`models`]: the models this installation
//!   runs, as the model picker lists them.

pub mod agent_views;
pub mod approvals;
pub mod catalog;
pub mod conversations;
pub mod files;
pub mod knowledge;
pub mod launch;
pub mod local_mode;
pub mod mcp_servers;
pub mod model_access;
pub mod models;
pub mod owned_runs;
pub mod quick_model;
pub mod request_fields;
pub mod run_knowledge;
pub mod run_list;
pub mod run_metrics;
pub mod run_queue;
pub mod run_starts;
pub mod run_tree;
pub mod scope;
pub mod slug;
pub mod state;
pub mod subagents;
pub mod writers;
