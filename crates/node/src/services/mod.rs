//! The gRPC services, one module each: `Client`, `Schema` and `Admin` on the
//! client port, `Internode` on the internode port.

pub mod admin;
pub mod client;
pub mod internode;
pub mod schema;
