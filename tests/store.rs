//! The stores a run's state lives in, Redis and the local mode's socket: each one's contract, and the
//! runner binary run over it.

#[path = "store/runner_redis.rs"]
mod runner_redis;
#[path = "store/store_socket.rs"]
mod store_socket;

/// The fixtures of `tests/support/` this binary uses.
#[path = "support"]
mod support {
    pub mod redis;
    pub mod runner;
}
