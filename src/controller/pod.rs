//! The sandbox pod builder.
