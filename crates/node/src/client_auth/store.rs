//! Users in the replicated `system_auth` keyspace, read and written at
//! QUORUM through the coordinator like any client data; and the node as
//! the login gate's host. Every function takes the node as its
//! [`AuthHost`] (see `host.rs`).

use std::collections::BTreeSet;

use futures::future::BoxFuture;
use ringstore_client_auth::{
    AUTH_KEYSPACE, StoredHash, USER_INDEX_KEY, UserName, UserRecord, decode_index, encode_index,
};
use ringstore_metrics::NodeMetrics;
use ringstore_placement::ReplicationStrategy;
use ringstore_replication::ConsistencyLevel;
use ringstore_storage::{Cell, Timestamp};

use super::gate::GateHost;
use super::host::AuthHost;
use crate::error::{KeyspaceRequestError, Result};
use crate::schema::sync::{merge_and_publish, push_to_live_nodes};
use crate::schema::{DEFAULT_GC_GRACE_SECONDS, KeyspaceDef, SchemaEntry, SchemaHost};

/// Reads and writes of users are at this level.
pub const LEVEL: ConsistencyLevel = ConsistencyLevel::Quorum;

/// `system_auth`, created (SimpleStrategy, `auth.replication_factor`) if
/// this node's schema does not have it. Nodes creating it at once derive
/// the same keyspace id from the name, so they agree on one keyspace.
pub async fn ensure_keyspace(host: &impl AuthHost) -> Result<KeyspaceDef> {
    let schema = host.schema_host().schema().current();
    if let Some(existing) = schema.keyspace(AUTH_KEYSPACE) {
        return Ok(existing.clone());
    }
    let strategy = ReplicationStrategy::simple(host.auth_replication_factor())
        .map_err(KeyspaceRequestError::AuthReplication)?;
    let keyspace = KeyspaceDef {
        id: schema.id_for_new_keyspace(AUTH_KEYSPACE),
        name: AUTH_KEYSPACE.to_string(),
        strategy,
        gc_grace_seconds: DEFAULT_GC_GRACE_SECONDS,
        speculative_retry: ringstore_replication::SpeculativeRetry::default(),
        pending_strategy: None,
    };
    let entry = SchemaEntry {
        keyspace: keyspace.clone(),
        timestamp: host.next_timestamp(),
        dropped: false,
    };
    merge_and_publish(host.schema_host(), vec![entry]).await?;
    if let Err(error) = push_to_live_nodes(host.schema_host()).await {
        // It spreads by schema pulls anyway.
        tracing::debug!(%error, "system_auth not yet on every node");
    }
    tracing::info!(strategy = %keyspace.strategy, "created the {AUTH_KEYSPACE} keyspace");
    Ok(keyspace)
}

/// The keyspace, if this node's schema has it (none: there are no users).
fn keyspace(host: &impl AuthHost) -> Option<KeyspaceDef> {
    host.schema_host()
        .schema()
        .current()
        .keyspace(AUTH_KEYSPACE)
        .cloned()
}

async fn read_value(host: &impl AuthHost, key: &[u8]) -> Result<Option<Vec<u8>>> {
    let Some(keyspace) = keyspace(host) else {
        return Ok(None);
    };
    let cell = host.read(&keyspace, key.to_vec(), LEVEL).await?;
    Ok(cell.and_then(|cell| cell.visible_value(host.now()).map(<[u8]>::to_vec)))
}

async fn write_cell(host: &impl AuthHost, key: &[u8], cell: Cell) -> Result<()> {
    let keyspace = ensure_keyspace(host).await?;
    host.write(&keyspace, key.to_vec(), cell, LEVEL).await
}

/// `name`'s record, if the user exists.
pub async fn read_user(host: &impl AuthHost, name: &UserName) -> Result<Option<UserRecord>> {
    match read_value(host, &name.record_key()).await? {
        None => Ok(None),
        Some(bytes) => Ok(Some(UserRecord::decode(&bytes)?)),
    }
}

/// Writes `record` at `timestamp` (none: the node's clock).
pub async fn write_user(
    host: &impl AuthHost,
    record: &UserRecord,
    timestamp: Option<Timestamp>,
) -> Result<()> {
    let timestamp = timestamp.unwrap_or_else(|| host.next_timestamp());
    let cell = Cell::live(timestamp, record.encode());
    write_cell(host, &record.name.record_key(), cell).await
}

/// Deletes `name`'s record.
pub async fn delete_user(host: &impl AuthHost, name: &UserName) -> Result<()> {
    let cell = Cell::deletion(host.next_timestamp(), host.now());
    write_cell(host, &name.record_key(), cell).await
}

/// The user index: `None` if it was never written (a cluster without users).
pub async fn read_index(host: &impl AuthHost) -> Result<Option<BTreeSet<UserName>>> {
    match read_value(host, USER_INDEX_KEY).await? {
        None => Ok(None),
        Some(bytes) => Ok(Some(decode_index(&bytes)?)),
    }
}

/// Writes the user index at `timestamp` (none: the node's clock).
pub async fn write_index(
    host: &impl AuthHost,
    users: &BTreeSet<UserName>,
    timestamp: Option<Timestamp>,
) -> Result<()> {
    let timestamp = timestamp.unwrap_or_else(|| host.next_timestamp());
    write_cell(
        host,
        USER_INDEX_KEY,
        Cell::live(timestamp, encode_index(users)),
    )
    .await
}

/// A node's gate reads its users through the coordinator, at QUORUM: the
/// gate's host is the node's [`AuthHost`] (the node passes its context, in
/// the `Arc` the coordinator takes).
pub struct NodeUsers<H>(pub H);

impl<H: AuthHost + 'static> GateHost for NodeUsers<H> {
    fn read_user<'a>(&'a self, name: &'a UserName) -> BoxFuture<'a, Result<Option<UserRecord>>> {
        Box::pin(read_user(&self.0, name))
    }

    fn users_exist(&self) -> BoxFuture<'_, Result<bool>> {
        Box::pin(async move { Ok(read_index(&self.0).await?.is_some()) })
    }

    fn verify(&self, password: &str, hash: Option<&StoredHash>) -> bool {
        ringstore_client_auth::verify(password, hash)
    }

    fn metrics(&self) -> &NodeMetrics {
        self.0.metrics()
    }

    fn now_ms(&self) -> u64 {
        // The node's wall clock (the platform's: simulated in simulations).
        u64::try_from(self.0.now().0 / 1000).unwrap_or(0)
    }
}
