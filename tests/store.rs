//! The two stores of a run's state, Redis and the local mode's socket: each one's contract, the runner over it.

#[path = "store/approvals.rs"]
mod approvals;
#[path = "store/conversations.rs"]
mod conversations;
#[path = "store/notices.rs"]
mod notices;
#[path = "store/retention.rs"]
mod retention;
#[path = "store/run_ends.rs"]
mod run_ends;
#[path = "store/run_list.rs"]
mod run_list;
#[path = "store/runner_redis.rs"]
mod runner_redis;
#[path = "store/store_socket.rs"]
mod store_socket;

/// The fixtures of `tests/support/` this binary uses, and only those (the others would go unused here).
#[path = "support"]
mod support {
    pub mod redis;
    pub mod runner;
}
