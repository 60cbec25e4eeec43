//! What a node must remember across restarts about its place in the ring:
//! its tokens, an unfinished bootstrap (or replacement), the nodes it has
//! replaced or removed (gossiped in its metadata for good), and whether it
//! was decommissioned. Each is one record in the store's meta tree, and
//! each record that can be malformed starts with a format byte; a record
//! that does not decode is an error, never a default.

use ringstore_membership::Takeovers;
use ringstore_placement::{HostId, Token};
use ringstore_storage::Store;
use ringstore_streaming::StreamOperation;

use crate::error::{NodeError, Result, TopologyError};

/// The key of the tokens in the storage's system tree.
const TOKENS_META_KEY: &str = "tokens";
/// The first byte of the saved tokens: their format version.
const TOKENS_FORMAT: u8 = 1;

/// The tokens saved by an earlier start, if any.
pub fn saved_tokens(store: &Store) -> Result<Option<Vec<Token>>> {
    let Some(bytes) = store.meta_get(TOKENS_META_KEY)? else {
        return Ok(None);
    };
    let corrupt = || NodeError::corrupt("the saved tokens");
    let (format, body) = bytes.split_first().ok_or_else(corrupt)?;
    if *format != TOKENS_FORMAT || body.len() % 8 != 0 {
        return Err(corrupt());
    }
    Ok(Some(
        body.chunks_exact(8)
            .map(|c| Token(i64::from_le_bytes(c.try_into().expect("8 bytes"))))
            .collect(),
    ))
}

/// Saves the tokens durably.
pub async fn save_tokens(store: &Store, tokens: &[Token]) -> Result<()> {
    let mut bytes = vec![TOKENS_FORMAT];
    for token in tokens {
        bytes.extend_from_slice(&token.0.to_le_bytes());
    }
    store.meta_put(TOKENS_META_KEY, &bytes).await?;
    Ok(())
}

/// The tokens to start with: the saved ones, else `initial_token` (saved now),
/// else none yet. Refuses configured tokens that contradict saved ones.
pub async fn startup_tokens(
    store: &Store,
    configured: Option<&[Token]>,
) -> Result<Option<Vec<Token>>> {
    let saved = saved_tokens(store)?;
    match (saved, configured) {
        (Some(saved), Some(configured)) => {
            let mut wanted = configured.to_vec();
            wanted.sort_unstable();
            if wanted != saved {
                return Err(TopologyError::InitialTokensChanged {
                    configured: wanted.len(),
                    saved: saved.len(),
                }
                .into());
            }
            Ok(Some(saved))
        }
        (Some(saved), None) => Ok(Some(saved)),
        (None, Some(configured)) => {
            let mut tokens = configured.to_vec();
            tokens.sort_unstable();
            save_tokens(store, &tokens).await?;
            Ok(Some(tokens))
        }
        (None, None) => Ok(None),
    }
}

/// The key of the unfinished bootstrap's operation name.
const BOOTSTRAP_KEY: &str = "bootstrap";
/// The key of the decommissioned mark.
const DECOMMISSIONED_KEY: &str = "decommissioned";
/// The key of the saved takeovers.
const TAKEOVERS_KEY: &str = "takeovers";
/// The first byte of the saved takeovers: their format.
const TAKEOVERS_FORMAT: u8 = 1;

/// The operation of an unfinished bootstrap (a bootstrap or a replacement),
/// if this node was streaming its ranges when it stopped. Stored as the
/// operation's name (`bootstrap`, `replace:<host id>`); empty when none.
pub fn unfinished_bootstrap(store: &Store) -> Result<Option<StreamOperation>> {
    let Some(bytes) = store.meta_get(BOOTSTRAP_KEY)?.filter(|b| !b.is_empty()) else {
        return Ok(None);
    };
    let operation = std::str::from_utf8(&bytes)
        .ok()
        .and_then(|name| name.parse().ok())
        .ok_or_else(|| NodeError::corrupt("the unfinished bootstrap"))?;
    Ok(Some(operation))
}

/// Records that a bootstrap is under way (`Some`) or over (`None`).
pub async fn set_unfinished_bootstrap(
    store: &Store,
    operation: Option<StreamOperation>,
) -> Result<()> {
    let name = operation.map(|o| o.to_string()).unwrap_or_default();
    store.meta_put(BOOTSTRAP_KEY, name.as_bytes()).await?;
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
    let corrupt = || NodeError::corrupt("the saved takeovers");
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
        let replace = StreamOperation::Replace {
            replaced: HostId::from_u128(7),
        };
        set_unfinished_bootstrap(&store, Some(replace))
            .await
            .unwrap();
        assert_eq!(unfinished_bootstrap(&store).unwrap(), Some(replace));
        set_unfinished_bootstrap(&store, None).await.unwrap();
        assert_eq!(unfinished_bootstrap(&store).unwrap(), None);

        assert!(!was_decommissioned(&store).unwrap());
        mark_decommissioned(&store).await.unwrap();
        assert!(was_decommissioned(&store).unwrap());

        store.meta_put(BOOTSTRAP_KEY, b"replace:x").await.unwrap();
        let error = unfinished_bootstrap(&store).unwrap_err();
        assert!(
            error.to_string().contains("unfinished bootstrap"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn configured_tokens_must_match_the_saved_ones() {
        let store = Store::open(Arc::new(MemoryEngine::new()), Durability::Batch).unwrap();
        assert_eq!(
            startup_tokens(&store, None).await.unwrap(),
            None,
            "a fresh node has none"
        );
        let first = startup_tokens(&store, Some(&[Token(5), Token(-3)]))
            .await
            .unwrap();
        assert_eq!(
            first,
            Some(vec![Token(-3), Token(5)]),
            "initial_token is saved, sorted"
        );
        let again = startup_tokens(&store, Some(&[Token(-3), Token(5)]))
            .await
            .unwrap();
        assert_eq!(again, first, "the same tokens in another order are fine");
        assert_eq!(
            startup_tokens(&store, None).await.unwrap(),
            first,
            "a restart without initial_token keeps them"
        );
        let error = startup_tokens(&store, Some(&[Token(1), Token(2)]))
            .await
            .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("differ from the 2 this node saved"),
            "{error}"
        );
    }
}
