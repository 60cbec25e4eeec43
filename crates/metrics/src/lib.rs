//! The node's metrics: every family a ringstore node exports, kept in a
//! per-node Prometheus [`Registry`](prometheus::Registry), and the summaries
//! the nodetool-like commands print from them.
//!
//! # Design
//! - **One registry per node**, not the process-global one, so an in-process
//!   test cluster keeps its nodes' numbers apart.
//! - **Two kinds of family.** *Recorded* families are updated on the request
//!   path: client requests by operation and consistency level (count, errors
//!   by gRPC code, latency histogram), coordinator latency, requests by
//!   whether the coordinator was a replica of the key, unavailables and
//!   timeouts, read repairs, speculative read retries, client auth refusals by reason, internode
//!   latency per peer, storage sync
//!   latency, replica-local reads and writes per keyspace, and work per
//!   [`Stage`] (in flight and completed). *Sampled* families (hints, streams,
//!   gossip, ring, schema, keyspace sizes, repair) mirror numbers other parts of the
//!   node keep; the node fills a [`NodeSnapshot`] with them at scrape time
//!   and [`NodeMetrics::render`] copies it in before encoding, under one lock,
//!   so two scrapes never interleave.
//! - **Low overhead on the hot path.** A recorded sample is a few atomic
//!   additions. Handles for label sets used on every request
//!   ([`RequestHandles`], [`KeyspaceHandles`]) are looked up once and cached
//!   by the caller; label lookups per sample are left to rare paths (errors,
//!   internode calls, through a small cache).
//! - **Percentiles from buckets** ([`LatencySummary`]): `proxyhistograms` and
//!   `tablestats` read the same histograms Prometheus scrapes, and report a
//!   percentile as the upper bound of the bucket holding it, as Cassandra's
//!   `EstimatedHistogram` does. Buckets grow by 1.5× from 50 µs to about
//!   6.4 s, so a reported percentile is at most 50% above the true one.
//!
//! # Invariants
//! - Family names and label names are fixed here; `deploy/grafana-dashboard.json`
//!   and the operations guide use exactly these names.
//! - Counters never go down while the process lives; they restart at zero
//!   with it.
//!
//! # Caveats
//! - Per-peer internode latency has one label set per peer address ever
//!   contacted; peers that left are not forgotten until a restart.
//! - Percentiles are bucket bounds, not exact values; latencies above the
//!   last bucket (about 6.4 s) are reported as that bound.

#![deny(missing_docs)]

mod error;
mod families;
mod labels;
mod node_metrics;
mod percentiles;
mod sampled;
mod snapshot;
mod stage;

pub use error::{MetricsError, Result};
pub use labels::{AuthRefusal, CoordinatorOp, Expired, InternodeRpc, LocalOp, Operation, Stage};
pub use node_metrics::{
    KeyspaceHandles, NodeMetrics, OpenPipeline, RequestHandles, latency_buckets,
};
pub use percentiles::{LatencySummary, PERCENTILES};
pub use snapshot::{ClockSample, KeyspaceSample, NodeSnapshot, RepairSample, StageSample, Traffic};
pub use stage::StageGuard;
