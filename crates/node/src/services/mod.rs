//! The gRPC services, one module each: `Client`, `Schema`, `Admin`,
//! `Topology`, `Repair` and `Users` on the client port, `Internode` on the internode
//! port.

pub mod admin;
mod apply_stream;
mod cas;
pub mod client;
pub mod client_host;
pub mod internode;
pub mod node_stats;
mod pipeline;
pub mod repair;
pub(crate) mod replica_reads;
pub mod scan;
pub mod schema;
pub mod top_partitions;
pub mod topology;
pub mod users;
