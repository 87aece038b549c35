//! The facade's services: the state every handler reaches and the logic several features share. A
//! service uses the HTTP kernel ([`crate::facade::http`]) and other services, never a feature or the
//! facade's root.

pub mod catalog;
