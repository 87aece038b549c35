//! Pure rules about runs: thread ids and, later, the run state machine and the sandbox pod builder.

pub mod thread_id;
