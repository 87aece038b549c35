pub mod routes;
pub mod tools;
