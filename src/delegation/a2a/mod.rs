//! The Agent2Agent protocol (A2A 1.0, JSON-RPC binding), typed once for the facade that serves every
//! agent over it and the runner that delegates to remote A2A agents: the wire shapes ([`wire`], the
//! protocol's JSON names: camelCase fields, `TASK_STATE_*` and `ROLE_*` enums), the JSON-RPC envelope
//! and error codes ([`rpc`]), and how a run's status and events read as a task's state and updates
//! ([`map`]). Pure: no I/O. docs/concepts/a2a.md has the conformance table.

pub mod map;
pub mod rpc;
pub mod wire;

/// The protocol version served and spoken (the `A2A-Version` header and the card's interfaces).
pub const PROTOCOL_VERSION: &str = "1.0";
/// The request header naming the protocol version a client speaks.
pub const VERSION_HEADER: &str = "A2A-Version";
/// Where an agent's card is served, below the agent's A2A URL.
pub const CARD_PATH: &str = "/.well-known/agent-card.json";
/// The protocol binding the facade serves (the card's `protocolBinding`).
pub const JSONRPC_BINDING: &str = "JSONRPC";
/// The most parts one message may carry.
pub const MAX_PARTS: usize = 32;
/// The most tasks one `ListTasks` page answers, and the page size when none is asked.
pub const MAX_PAGE_SIZE: usize = 100;
/// The page size of `ListTasks` when the request names none (the SDK's default).
pub const DEFAULT_PAGE_SIZE: usize = 50;
/// The most history messages a task carries.
pub const MAX_HISTORY: usize = 100;
