//! The node's context as the narrow hosts of its subsystems.
//!
//! Each subsystem says what it needs from the running node as a trait of
//! its own (`RepairHost`, `TopologyHost`, `StreamHost`, `MetricsHost`,
//! `SnapshotHost`, `SchemaHost`, `AuthHost`, `CoordinatorHost`,
//! `DrainHost`, `DiskFailureHost`, `TopPartitionsHost`, `PaxosReplicaHost`,
//! `ClientHost`, `ConsoleHost`) and never names
//! `NodeContext`; the context implements them here, where the node is
//! wired at start. The impls live in `node/`, not in `context.rs`, because
//! some hosts answer by calling another subsystem (the repair host asks
//! topology whether ranges move; the topology host runs schema gossip and
//! repair's sync of gained ranges; the auth host reads and writes users
//! through the coordinator), and `context` must not import the subsystems
//! that once imported it. Nothing imports `node`, so wiring here closes no
//! circle of imports (`tests/module_graph.rs`).
//!
//! [`HandoffHost`](crate::handoff::HandoffHost) and
//! [`RemovalHost`](crate::removal::RemovalHost), which need nothing but
//! the context's own fields, are implemented at the end of `context.rs`.

mod console;
mod coordinator;
mod paxos;
mod repair_and_metrics;
mod schema_and_auth;
mod serving;
mod streaming_and_topology;
