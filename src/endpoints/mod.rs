//! A Model's endpoint as the roles that call it see it: how to reach and authenticate to it
//! ([`connection::Connection`], built from a spec and the values its Secrets hold), the HTTP client that
//! honours its extra headers and CA bundle ([`http::client`]), and the probe that says whether it answers
//! ([`probe::probe`]). The runner's model clients and the controller's prober share these; neither role
//! imports the other.

pub mod connection;
pub mod http;
pub mod mcp_discovery;
pub mod probe;
