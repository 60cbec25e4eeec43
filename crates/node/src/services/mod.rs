//! The gRPC services, one module each: `Client`, `Schema`, `Admin` and
//! `Topology` on the client port, `Internode` on the internode port.

pub mod admin;
pub mod client;
pub mod internode;
pub mod node_stats;
pub mod schema;
pub mod topology;
