//! One module per subcommand (or group of subcommands), each with a `run`.

pub mod batch;
pub mod certs;
pub mod data;
pub mod demo;
pub mod describecluster;
pub mod describering;
pub mod export;
pub mod getendpoints;
pub mod gossipinfo;
pub mod hints;
pub mod import;
pub mod info;
pub mod jsonl;
pub mod keyspace;
pub mod netstats;
pub mod plan;
pub mod repair;
pub mod ring;
pub mod scan;
pub mod server;
pub mod snapshots;
pub mod stats;
pub mod status;
pub mod stress;
pub mod token;
pub mod topology;
