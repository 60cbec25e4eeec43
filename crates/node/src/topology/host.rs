//! What topology changes need from the running node, and nothing more.
//!
//! [`TopologyHost`] extends the streaming host ([`StreamHost`]: a change
//! streams ranges) with the settings a join reads, gossip, the lock that
//! keeps topology operations one at a time, the schema, and the three
//! things a change asks of other subsystems: repairing the ranges a node
//! gained (repair), handing hints off (hinted handoff) and stopping the
//! node. The node implements it (`node/hosts/`), so no topology module
//! names the node's context, repair or hinted handoff, and a test double
//! can drive one.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use ringstore_membership::MembershipHandle;
use ringstore_placement::{HostId, Location, Ring};

use crate::error::Result;
use crate::schema::KeyspaceDef;
use crate::streaming::StreamHost;

/// How this node allocates its tokens when it joins (from its
/// configuration).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenAllocation {
    /// This node's data center and rack.
    pub location: Location,
    /// How many tokens it takes (`num_tokens`, at least 1).
    pub num_tokens: usize,
    /// The replication factor the allocator balances ownership for in
    /// this node's data center (`allocate_tokens_for_local_replication_factor`).
    pub local_replication_factor: u32,
}

/// The node as a topology change sees it (see the module docs).
pub trait TopologyHost: StreamHost {
    /// `ring_delay`: how long a change waits after announcing itself in
    /// gossip, so that every node has seen it before data moves.
    fn ring_delay(&self) -> Duration;
    /// The seeds a joining node reaches the cluster through.
    fn seeds(&self) -> &[SocketAddr];
    /// This node's advertised gossip address (a node that is its only seed
    /// does not wait to reach anyone).
    fn gossip_address(&self) -> SocketAddr;
    /// How this node allocates its tokens when it joins; its replication
    /// factor is also the one `plan` allocates a new node's tokens for.
    fn token_allocation(&self) -> TokenAllocation;
    /// Its membership task: announcing a change (state, tokens, takeovers)
    /// and watching the view while waiting.
    fn membership(&self) -> &MembershipHandle;
    /// Held by the topology operation this node runs, so that it runs one
    /// at a time (`try_lock`: a second one is refused).
    fn operation(&self) -> &tokio::sync::Mutex<()>;
    /// The keyspaces that hold data (not dropped): what a change moves.
    fn keyspaces(&self) -> Vec<KeyspaceDef>;
    /// The keyspace named `name`, or `NOT_FOUND`.
    fn keyspace(&self, name: &str) -> Result<KeyspaceDef>;
    /// The version of this node's schema, compared with the versions peers
    /// gossip before a joining node streams.
    fn schema_version(&self) -> uuid::Uuid;
    /// Pulls and merges the schema of every live peer (a joining node
    /// streams the keyspaces it knows); how many peers answered.
    fn pull_schema(&self) -> BoxFuture<'_, usize>;
    /// Stamps `keyspace` with a new write timestamp (refused while this
    /// node's clock is off from the cluster's), merges it into the schema
    /// and gossips the new version: how an alter announces and commits.
    fn publish_keyspace(&self, keyspace: KeyspaceDef) -> BoxFuture<'_, Result<()>>;
    /// Pushes this node's schema to every node until all hold it, at most
    /// `attempts` times; an error names those that did not confirm.
    fn push_schema(&self, attempts: u32) -> BoxFuture<'_, Result<()>>;
    /// Repairs, among their replicas on `after`, the ranges some node gains
    /// between `before` and `after` (only those `gainer` gains, if given):
    /// a replacement or removal streams from one replica each, which may
    /// have missed writes the dead node had.
    fn sync_gained_ranges<'a>(
        &'a self,
        before: &'a Arc<Ring>,
        after: &'a Arc<Ring>,
        gainer: Option<HostId>,
    ) -> BoxFuture<'a, Result<()>>;
    /// Hands every hint this node holds to the node at `recipient`
    /// (internode address): a decommissioned node's hints must not be lost.
    /// How many it handed over.
    fn hand_off_hints(&self, recipient: SocketAddr) -> BoxFuture<'_, Result<u64>>;
    /// Asks the node to stop (after it has left the ring).
    fn request_stop(&self);
}
