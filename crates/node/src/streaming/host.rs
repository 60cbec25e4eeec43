//! What range streaming needs from the running node, and nothing more.
//!
//! The node's context implements [`StreamHost`] (in `node/hosts/`), so the
//! streaming shells never name the context: they can be read, and driven
//! by a test double, on their own. Topology's host extends this one, as a
//! topology change streams.

use std::sync::Arc;

use ringstore_membership::ClusterView;
use ringstore_metrics::NodeMetrics;
use ringstore_placement::HostId;
use ringstore_storage::{KeyspaceId, Store};
use ringstore_streaming::{StreamThrottle, Streams};

use crate::peers::Peers;

/// The node as range streaming sees it: its identity, its storage, the
/// cluster view (where peers are, which are up), internode clients, and
/// the stream registry and throttle it reports and paces through.
pub trait StreamHost: Send + Sync {
    /// This node's host id: sent as the requester of a stream.
    fn host_id(&self) -> HostId;
    /// Its storage: what a source scans, and what a receiver applies
    /// chunks and records checkpoints to.
    fn store(&self) -> &Store;
    /// The current cluster view: peers' addresses, and which sources are up.
    fn view(&self) -> Arc<ClusterView>;
    /// The name of the keyspace with `id` (its id when the schema does not
    /// know it), for the `netstats` line of a session.
    fn keyspace_name(&self, id: KeyspaceId) -> String;
    /// Internode clients: `StreamRange` and `RangeStats` calls.
    fn peers(&self) -> &Peers;
    /// Where internode latency is recorded.
    fn metrics(&self) -> &NodeMetrics;
    /// The node's stream sessions, which `netstats` lists.
    fn streams(&self) -> &Streams;
    /// The node-wide throttle of the data it streams to others.
    fn stream_throttle(&self) -> &StreamThrottle;
}
