//! What the schema's gossip needs from the running node, and nothing more:
//! the [`SchemaHost`] trait. The node's context implements it (in
//! `node/hosts/schema_and_auth.rs`), so no schema module names the context,
//! and a test can drive the gossip with a double of its own.
//!
//! Every function of `sync.rs` takes the host as `&dyn SchemaHost`: the
//! node passes itself (`context.as_ref()` from an `Arc`), and so does the
//! `Schema` service, and client authentication hands out the schema's
//! host it holds (`AuthHost::schema_host`). The background exchange, which
//! outlives its caller, takes an `Arc<dyn SchemaHost>`. The one function
//! on a client request's path, `keyspace_catching_up`, makes a `dyn` call
//! or two per request in the steady state (a lookup of the schema), small
//! against the request.

use std::time::Duration;

use ringstore_membership::MembershipHandle;
use ringstore_placement::HostId;
use ringstore_storage::{Store, Timestamp};

use crate::error::Result;
use crate::peers::Peers;
use crate::schema::store::SchemaStore;

/// The node as the schema's gossip sees it: its identity, its copy of the
/// schema and the storage that holds the keyspaces' data, gossip, the
/// internode clients it pushes and pulls schemas through, and the clock
/// that stamps a keyspace created or dropped on this node.
pub trait SchemaHost: Send + Sync {
    /// This node's host id: it neither pushes to nor pulls from itself,
    /// and its own entry in the view says whether it is still joining.
    fn host_id(&self) -> HostId;
    /// The node's copy of the schema: what is merged, looked up, and sent
    /// to peers.
    fn schema(&self) -> &SchemaStore;
    /// Its storage: the data of a keyspace a merge dropped is deleted from
    /// it.
    fn store(&self) -> &Store;
    /// Its membership task: the view (which peers are up, the schema
    /// version each gossips, whether this node is joining), and this node's
    /// gossiped metadata, where a merge publishes the new schema version.
    fn membership(&self) -> &MembershipHandle;
    /// Internode clients: the `PullSchema` and `PushSchema` calls.
    fn peers(&self) -> &Peers;
    /// The schema timeout (`timeouts.schema_ms`): how long a push to, or a
    /// pull from, one peer may take.
    fn schema_timeout(&self) -> Duration;
    /// A new write timestamp from the node's clock for a keyspace created
    /// or dropped here, or `UNAVAILABLE` while this node's clock is off
    /// from the cluster's (its change could lose to, or beat, a later one).
    fn change_timestamp(&self) -> Result<Timestamp>;
}
