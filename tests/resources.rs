//! The resource definitions and manifests, and the reference pages, checked offline: nothing is served,
//! no cluster is stood in for.

#[path = "resources/crds.rs"]
mod crds;
#[path = "resources/examples.rs"]
mod examples;
#[path = "resources/reference_docs.rs"]
mod reference_docs;
#[path = "resources/validate_cli.rs"]
mod validate_cli;

/// The fixtures of `tests/support/` this binary uses, and only those (the others would go unused here).
#[path = "support"]
mod support {
    pub mod examples;
    pub mod repository;
}
