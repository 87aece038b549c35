//! yuxi-operator: a Kubernetes operator that runs LLM agents and subagents declared as custom resources.
//!
//! The rules live in pure modules ([`resources::validation`], [`run`]); the Kubernetes, HTTP and process
//! I/O are thin shells around them ([`webhook`]). See the README for the architecture.

pub mod access;
pub mod controller;
pub mod delegation;
pub mod facade;
pub mod resources;
pub mod run;
pub mod runner;
pub mod store;
pub mod tls;
pub mod webhook;
