//! What the schema's gossip needs from the running node, and nothing more:
//! the [`SchemaHost`] trait. The node's context implements it (in
//! `node/hosts/schema_and_auth.rs`), so no schema module names the context,
//! and a test can drive the gossip with a double of its own.
//!
//! Every function of `sync.rs` takes the host as `&dyn SchemaHost`, so the
//! context passes as it is (`&context`, or an `&Arc` of it, through the
//! forwarding impl below), and so does any host that extends this one
//! (client authentication's, which creates `system_auth`). The background
//! exchange, which outlives its caller, takes an `Arc<dyn SchemaHost>`.

use std::time::Duration;

use ringstore_membership::MembershipHandle;
use ringstore_placement::HostId;
use ringstore_storage::Store;

use crate::peers::Peers;
use crate::schema::store::SchemaStore;

/// The node as the schema's gossip sees it: its identity, its copy of the
/// schema and the storage that holds the keyspaces' data, gossip, and the
/// internode clients it pushes and pulls schemas through.
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
}
