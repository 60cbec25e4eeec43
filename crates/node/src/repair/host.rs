//! What repair needs from the running node, and nothing more: the
//! [`RepairHost`] trait. The node's context implements it (in `node/hosts/`),
//! so no repair module names the context, the topology
//! subsystem or the clock, and none of them imports repair back through
//! them. A test can drive repair with a double of its own.
//!
//! Every function of the subsystem takes a host: the ones called from the
//! node's services and tasks take `&impl RepairHost` (the host itself:
//! `context.as_ref()` from an `Arc`) or `Arc<dyn RepairHost>` (the tasks
//! that outlive their caller); the rest take `&dyn RepairHost`. The
//! `Repair` service is generic over the host it serves.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use ringstore_membership::ClusterView;
use ringstore_metrics::NodeMetrics;
use ringstore_placement::{HostId, ReplicaMap};
use ringstore_storage::{KeyspaceId, Store, Timestamp};
use ringstore_streaming::{StreamThrottle, Streams};
use tokio::sync::watch;

use crate::config::RepairConfig;
use crate::error::MovementsUnderway;
use crate::peers::Peers;
use crate::repair::state::RepairState;
use crate::schema::KeyspaceDef;

/// What repair and garbage collection use of the node they run on.
pub trait RepairHost: Send + Sync {
    /// This node's host id: it is the primary replica of the ranges its
    /// scheduler looks after, it reads its own rows first in a repair it
    /// coordinates, and it names itself in `netstats`.
    fn host_id(&self) -> HostId;
    /// Its storage: what replicas scan into trees and rows, what garbage
    /// collection purges, and where a job is checkpointed.
    fn store(&self) -> &Store;
    /// What the node keeps for repair (trees, history, progress, the
    /// coordination lock, counters).
    fn repair(&self) -> &RepairState;
    /// The node's clock: when a repair began (what replicas record), the
    /// "now" of garbage collection and of the scheduler.
    fn now(&self) -> Timestamp;
    /// The current cluster view: which replicas are up, and where.
    fn view(&self) -> Arc<ClusterView>;
    /// The cluster view as it changes: to wait for replicas to come up, and
    /// to abandon a call to one that goes down or restarts.
    fn views(&self) -> watch::Receiver<Arc<ClusterView>>;
    /// The keyspaces that hold data (not dropped): what is scheduled and
    /// collected, and each one's strategy and `gc_grace_seconds`.
    fn keyspaces(&self) -> Vec<KeyspaceDef>;
    /// The name of the keyspace with `id` (its id when the schema does not
    /// know it), for logs, errors and `netstats`.
    fn keyspace_name(&self, id: KeyspaceId) -> String;
    /// The replica map of `keyspace` on the current ring: the ranges to
    /// repair and their replicas.
    fn replica_map(&self, keyspace: &KeyspaceDef) -> Arc<ReplicaMap>;
    /// The range movements under way on the ring, described (none: the
    /// ring is settled). The topology subsystem's judgement: a unit is not
    /// repaired while ranges move.
    fn movements_under_way(&self) -> Option<MovementsUnderway>;
    /// Internode clients, to call the replicas.
    fn peers(&self) -> &Peers;
    /// The node's metrics: repair calls' latency and the stages of tree
    /// building and garbage collection.
    fn metrics(&self) -> &Arc<NodeMetrics>;
    /// The node-wide throttle of the data it streams to others, which the
    /// rows a repair writes to other replicas pass.
    fn stream_throttle(&self) -> &StreamThrottle;
    /// Its streams: a repair job shows in `netstats` as one.
    fn streams(&self) -> &Streams;
    /// The `repair` settings (schedule, garbage collection).
    fn repair_config(&self) -> &RepairConfig;
    /// This node's datacenter: a DC-local repair takes only its replicas.
    fn dc(&self) -> &str;
    /// The client address this node advertises, naming it in `netstats`.
    fn client_address(&self) -> SocketAddr;
    /// When the node started: `repair status` counts a range this node has
    /// no repair of on record as overdue from then.
    fn started(&self) -> Instant;
}
