//! What a node must remember across restarts about the topology changes it
//! makes: an unfinished bootstrap (or replacement), the nodes it has
//! replaced or removed (gossiped in its metadata for good), and whether it
//! was decommissioned.

use ringstore_membership::Takeovers;
use ringstore_placement::HostId;
use ringstore_storage::Store;

use crate::error::{NodeError, Result};

/// The key of the unfinished bootstrap's operation name.
const BOOTSTRAP_KEY: &str = "bootstrap";
/// The key of the decommissioned mark.
const DECOMMISSIONED_KEY: &str = "decommissioned";
/// The key of the saved takeovers.
const TAKEOVERS_KEY: &str = "takeovers";
/// The first byte of the saved takeovers: their format.
const TAKEOVERS_FORMAT: u8 = 1;

/// The operation of an unfinished bootstrap (`bootstrap` or `replace:<host id>`),
/// if this node was streaming its ranges when it stopped.
pub fn unfinished_bootstrap(store: &Store) -> Result<Option<String>> {
    Ok(store
        .meta_get(BOOTSTRAP_KEY)?
        .filter(|bytes| !bytes.is_empty())
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned()))
}

/// Records that a bootstrap is under way (`Some`) or over (`None`).
pub async fn set_unfinished_bootstrap(store: &Store, operation: Option<&str>) -> Result<()> {
    let value = operation.unwrap_or_default().as_bytes();
    store.meta_put(BOOTSTRAP_KEY, value).await?;
    Ok(())
}

/// Whether this node was decommissioned (it must not rejoin with its old
/// tokens and stale data).
pub fn was_decommissioned(store: &Store) -> Result<bool> {
    Ok(store.meta_get(DECOMMISSIONED_KEY)?.is_some())
}

/// Marks this node decommissioned, durably.
pub async fn mark_decommissioned(store: &Store) -> Result<()> {
    store.meta_put(DECOMMISSIONED_KEY, &[1]).await?;
    Ok(())
}

/// The takeovers this node gossiped before it stopped (the removal in
/// progress, if any, is not kept: `removenode` is run again).
pub fn saved_takeovers(store: &Store) -> Result<Takeovers> {
    let Some(bytes) = store.meta_get(TAKEOVERS_KEY)? else {
        return Ok(Takeovers::default());
    };
    let corrupt = || NodeError::Internal("the saved takeovers are corrupt".into());
    let (&format, body) = bytes.split_first().ok_or_else(corrupt)?;
    if format != TAKEOVERS_FORMAT || body.len() % 16 != 0 || body.len() < 16 {
        return Err(corrupt());
    }
    let mut ids = body
        .chunks_exact(16)
        .map(|c| HostId(uuid::Uuid::from_slice(c).expect("16 bytes")));
    let replaces = ids.next().filter(|id| !id.0.is_nil());
    Ok(Takeovers {
        replaces,
        removing: None,
        removed: ids.collect(),
    })
}

/// Saves the takeovers durably.
pub async fn save_takeovers(store: &Store, takeovers: &Takeovers) -> Result<()> {
    let mut bytes = vec![TAKEOVERS_FORMAT];
    bytes.extend_from_slice(
        takeovers
            .replaces
            .map(|h| h.0)
            .unwrap_or_default()
            .as_bytes(),
    );
    for host in &takeovers.removed {
        bytes.extend_from_slice(host.0.as_bytes());
    }
    store.meta_put(TAKEOVERS_KEY, &bytes).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringstore_storage::{Durability, MemoryEngine};
    use std::sync::Arc;

    #[tokio::test]
    async fn takeovers_and_bootstrap_state_round_trip() {
        let store = Store::open(Arc::new(MemoryEngine::new()), Durability::Batch).unwrap();
        assert_eq!(saved_takeovers(&store).unwrap(), Takeovers::default());
        let takeovers = Takeovers {
            replaces: Some(HostId::from_u128(7)),
            removing: None,
            removed: vec![HostId::from_u128(8), HostId::from_u128(9)],
        };
        save_takeovers(&store, &takeovers).await.unwrap();
        assert_eq!(saved_takeovers(&store).unwrap(), takeovers);

        assert_eq!(unfinished_bootstrap(&store).unwrap(), None);
        set_unfinished_bootstrap(&store, Some("bootstrap"))
            .await
            .unwrap();
        assert_eq!(
            unfinished_bootstrap(&store).unwrap().as_deref(),
            Some("bootstrap")
        );
        set_unfinished_bootstrap(&store, None).await.unwrap();
        assert_eq!(unfinished_bootstrap(&store).unwrap(), None);

        assert!(!was_decommissioned(&store).unwrap());
        mark_decommissioned(&store).await.unwrap();
        assert!(was_decommissioned(&store).unwrap());
    }
}
