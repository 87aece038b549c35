//! The facade's features: one folder per feature, each owning its routes and exporting them through its
//! `routes()`, which the router (`router.rs`) calls in a fixed order. A feature uses the HTTP kernel
//! ([`crate::facade::http`]) and the services ([`crate::facade::services`]), never another feature; what
//! two features share is a service.

pub mod a2a;
pub mod account;
pub mod agents;
pub mod attachments;
pub mod chat;
pub mod console;
pub mod directory;
pub mod files;
pub mod knowledge;
pub mod mcp;
pub mod models;
pub mod placeholders;
pub mod runs;
pub mod system;
pub mod system_lists;
pub mod tools;
