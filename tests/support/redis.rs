//! The test Redis, and fresh ids for the runs and threads of tests that share it.

/// The Redis the tests use: `YUXI_TEST_REDIS_URL`, which `make test` sets after starting a server.
pub fn redis_url() -> String {
    std::env::var("YUXI_TEST_REDIS_URL")
        .expect("YUXI_TEST_REDIS_URL is not set: run the tests with `make test`, which starts a Redis server")
}

/// A fresh id for a run or thread, so tests sharing one Redis never see each other's keys.
pub fn unique(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").subsec_nanos();
    format!("{prefix}-{}-{nanos}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::SeqCst))
}
