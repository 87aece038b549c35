//! The run vocabulary every role shares, typed once: the status, the record, the result, events and
//! messages, the volume scopes and their sub-paths, the runner's inputs, run credentials and thread ids.
//! Pure: no I/O beyond creating a run's folders ([`scope::VolumePaths::create_all`]).

pub mod approval;
pub mod budget;
pub mod claim;
pub mod conversation;
pub mod event;
pub mod grant;
pub mod hitl;
pub mod inputs;
pub mod mcp_headers;
pub mod message;
pub mod metrics;
pub mod queue;
pub mod record;
pub mod redact;
pub mod result;
pub mod scope;
pub mod status;
pub mod timeline;
pub mod trace;
pub use crate::resources::thread_id;

pub use event::{EndPayload, Envelope, ErrorPayload, EventKind, StoredEvent};
pub use grant::RunGrant;
pub use record::{Created, RunLimit, RunLimits, RunRecord, RunRequest};
pub use result::RunResult;
pub use status::RunStatus;
