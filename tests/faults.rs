//! The fault suite: the local mode started for real, then stopped, killed, starved of its store and
//! flooded, as users and machines do. Every scenario asserts that each run reaches a terminal status
//! within a bound, with `/result` and exactly one `end`, that thread locks are released and that no
//! runner process is left. `make test` runs the short form; `make faults` the full one
//! (`YUXI_FAULTS=full`: bursts of 300), printing each scenario's numbers.

#[path = "faults/bursts.rs"]
mod bursts;
#[path = "faults/restarts.rs"]
mod restarts;
#[path = "faults/runners.rs"]
mod runners;
#[path = "faults/store_outages.rs"]
mod store_outages;

/// The fixtures of `tests/support/` this binary uses, and only those (the others would go unused here).
#[path = "support"]
mod support {
    pub mod faults;
    // Shared with the other binaries, which use the parts this one does not.
    #[allow(dead_code)]
    pub mod local_mode;
    pub mod redis;
    #[allow(dead_code)]
    pub mod repository;
    #[allow(dead_code)]
    pub mod runner;
}
