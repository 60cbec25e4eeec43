//! Cleanup: deleting the local data of ranges this node no longer
//! replicates (after other nodes joined and took them over).

use std::sync::Arc;

use ringstore_placement::{ReplicaMap, Token, TokenRange};

use crate::context::NodeContext;
use crate::error::{NodeError, Result};
use crate::schema::KeyspaceDef;
use crate::streaming::chunk::entry_bytes;

/// Keys deleted per storage batch.
const BATCH_KEYS: usize = 1_000;

/// What cleanup did to one keyspace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cleaned {
    /// The keyspace.
    pub keyspace: String,
    /// Cells deleted.
    pub keys_removed: u64,
    /// Their size ([`entry_bytes`]).
    pub bytes_removed: u64,
    /// Cells kept.
    pub keys_kept: u64,
}

/// Cleans `keyspace` (every keyspace when `None`): deletes each local cell
/// whose token this node replicates neither in the ring nor in the pending
/// ring (a range it is gaining is kept).
pub async fn cleanup(context: &Arc<NodeContext>, keyspace: Option<&str>) -> Result<Vec<Cleaned>> {
    let _operation = context.operation.try_lock().map_err(|_| {
        NodeError::FailedPrecondition("another topology operation is running on this node".into())
    })?;
    let keyspaces = match keyspace {
        Some(name) => vec![context.keyspace(name)?],
        None => context.keyspaces(),
    };
    let mut cleaned = Vec::new();
    for keyspace in keyspaces {
        cleaned.push(clean(context, &keyspace).await?);
    }
    Ok(cleaned)
}

async fn clean(context: &NodeContext, keyspace: &KeyspaceDef) -> Result<Cleaned> {
    let view = context.view();
    if view.ring.is_empty() {
        return Err(NodeError::FailedPrecondition(
            "the ring is empty: this node has not joined yet".into(),
        ));
    }
    let maps: Vec<ReplicaMap> = [Some(view.ring.clone()), view.pending_ring.clone()]
        .into_iter()
        .flatten()
        .map(|ring| ReplicaMap::new(ring, &keyspace.strategy))
        .collect();
    let me = context.host_id;
    let keeps = |token: Token| maps.iter().any(|map| map.replicas(token).contains(me));
    let mut outcome = Cleaned {
        keyspace: keyspace.name.clone(),
        ..Cleaned::default()
    };
    let whole_ring = TokenRange::new(Token::MIN, Token::MIN);
    let mut doomed = Vec::new();
    for entry in context.store.scan(keyspace.id, whole_ring)? {
        let (token, key, cell) = entry?;
        if keeps(token) {
            outcome.keys_kept += 1;
            continue;
        }
        outcome.bytes_removed += entry_bytes(&key, &cell);
        doomed.push(key);
        if doomed.len() == BATCH_KEYS {
            outcome.keys_removed += context.store.purge(keyspace.id, &doomed).await? as u64;
            doomed.clear();
        }
    }
    outcome.keys_removed += context.store.purge(keyspace.id, &doomed).await? as u64;
    tracing::info!(
        keyspace = %keyspace.name,
        removed = outcome.keys_removed,
        kept = outcome.keys_kept,
        "cleanup done"
    );
    Ok(outcome)
}
