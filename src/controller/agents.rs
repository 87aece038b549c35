//! The Agent reconciler.
