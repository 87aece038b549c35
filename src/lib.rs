//! yuxi-operator: a Kubernetes operator that runs LLM agents and subagents declared as custom resources.
//!
//! # Layers
//!
//! Arrows point down only; `docs/architecture.md` has a paragraph per module.
//!
//! ```text
//! the CLI (src/main.rs, src/cli/: one file per subcommand)
//!   -> the roles: controller, facade, runner, webhook   (never each other)
//!   -> store, knowledge, endpoints                       (the run store: Redis, in-process, socket; knowledge indexes;
//!                                                         how to reach and probe a Model's endpoint; telemetry:
//!                                                         the spans of run trees)
//!   -> the pure core: delegation -> run -> access -> resources
//! ```
//!
//! What two roles share (names, labels, the run status, records, results, events, messages, volume
//! scopes, the runner's inputs, the delegation wire types) is typed once in the core. The core uses no
//! tokio, axum, redis, reqwest or `kube::Client`. `tls` is a leaf utility. A test (`layer_rule`) reads the
//! sources and fails on any path that points sideways or up.

pub mod access;
pub mod controller;
pub mod delegation;
pub mod endpoints;
pub mod facade;
pub mod knowledge;
pub mod resources;
pub mod run;
pub mod runner;
pub mod store;
pub mod telemetry;
pub mod tls;
pub mod webhook;

#[cfg(test)]
mod layer_rule;
