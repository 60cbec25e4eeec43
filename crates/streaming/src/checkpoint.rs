//! Resume points of an operation's range fetches, kept in the node's system
//! tree so they survive a restart of the receiver.
//!
//! One record per operation (`stream:<operation>`) maps each (keyspace,
//! range) to how far it got: nothing yet, everything up to a token, or done.
//! Writers serialize the whole map under a lock and store it; two stores
//! racing can at worst record an older position, which only re-sends cells
//! (harmless: last write wins).

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use ringstore_placement::{Token, TokenRange};
use ringstore_storage::{KeyspaceId, Store};

use crate::error::{Result, StreamingError};
use crate::operation::StreamOperation;

/// The record's format version.
const FORMAT: u8 = 1;
/// Bytes per encoded entry: keyspace id, range start and end, tag, token.
const ENTRY_BYTES: usize = 16 + 8 + 8 + 1 + 8;

/// How far one range's fetch got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Position {
    /// Every cell up to and including this token is stored.
    After(Token),
    /// The whole range is stored and verified.
    Done,
}

/// The resume points of one operation.
pub struct Checkpoints {
    store: Store,
    name: String,
    positions: Mutex<BTreeMap<(KeyspaceId, TokenRange), Position>>,
}

impl Checkpoints {
    /// The checkpoints of `operation`, as an earlier run left them.
    pub fn load(store: &Store, operation: StreamOperation) -> Result<Checkpoints> {
        let name = format!("stream:{operation}");
        let positions = match store.meta_get(&name)? {
            None => BTreeMap::new(),
            Some(bytes) => decode(&bytes)
                .ok_or_else(|| StreamingError::CorruptCheckpoints { name: name.clone() })?,
        };
        Ok(Checkpoints {
            store: store.clone(),
            name,
            positions: Mutex::new(positions),
        })
    }

    /// Where the fetch of `range` of `keyspace` stands (`None`: not begun).
    pub fn position(&self, keyspace: KeyspaceId, range: TokenRange) -> Option<Position> {
        self.lock().get(&(keyspace, range)).copied()
    }

    /// Records a new position, durably.
    pub async fn record(
        &self,
        keyspace: KeyspaceId,
        range: TokenRange,
        position: Option<Position>,
    ) -> Result<()> {
        let bytes = self.update(keyspace, range, position);
        self.store.meta_put(&self.name, &bytes).await?;
        Ok(())
    }

    /// Records progress within a range, durable with the store's next flush
    /// ([`Store::meta_put_unflushed`]): the cells up to `position` must
    /// have been written before. A flush that keeps the record keeps those
    /// cells too, and a record lost in a crash only means its cells are
    /// fetched again.
    pub async fn advance(
        &self,
        keyspace: KeyspaceId,
        range: TokenRange,
        position: Position,
    ) -> Result<()> {
        let bytes = self.update(keyspace, range, Some(position));
        self.store.meta_put_unflushed(&self.name, &bytes).await?;
        Ok(())
    }

    /// Sets (or, for `None`, forgets) the position of a range; the encoded
    /// record.
    fn update(
        &self,
        keyspace: KeyspaceId,
        range: TokenRange,
        position: Option<Position>,
    ) -> Vec<u8> {
        let mut positions = self.lock();
        match position {
            Some(position) => positions.insert((keyspace, range), position),
            None => positions.remove(&(keyspace, range)),
        };
        encode(&positions)
    }

    /// Forgets every position: the operation is over.
    pub async fn clear(&self) -> Result<()> {
        let bytes = {
            let mut positions = self.lock();
            positions.clear();
            encode(&positions)
        };
        self.store.meta_put(&self.name, &bytes).await?;
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<(KeyspaceId, TokenRange), Position>> {
        self.positions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

fn encode(positions: &BTreeMap<(KeyspaceId, TokenRange), Position>) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(1 + positions.len() * ENTRY_BYTES);
    bytes.push(FORMAT);
    for (&(keyspace, range), position) in positions {
        bytes.extend_from_slice(keyspace.0.as_bytes());
        bytes.extend_from_slice(&range.start.0.to_le_bytes());
        bytes.extend_from_slice(&range.end.0.to_le_bytes());
        let (tag, token) = match position {
            Position::After(token) => (0u8, token.0),
            Position::Done => (1u8, 0),
        };
        bytes.push(tag);
        bytes.extend_from_slice(&token.to_le_bytes());
    }
    bytes
}

fn decode(bytes: &[u8]) -> Option<BTreeMap<(KeyspaceId, TokenRange), Position>> {
    let (&format, body) = bytes.split_first()?;
    if format != FORMAT || body.len() % ENTRY_BYTES != 0 {
        return None;
    }
    let int = |b: &[u8]| i64::from_le_bytes(b.try_into().expect("8 bytes"));
    body.chunks_exact(ENTRY_BYTES)
        .map(|e| {
            let keyspace = KeyspaceId(uuid::Uuid::from_slice(&e[..16]).ok()?);
            let range = TokenRange::new(Token(int(&e[16..24])), Token(int(&e[24..32])));
            let position = match e[32] {
                0 => Position::After(Token(int(&e[33..41]))),
                1 => Position::Done,
                _ => return None,
            };
            Some(((keyspace, range), position))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringstore_placement::HostId;
    use ringstore_storage::{Durability, MemoryEngine};
    use std::sync::Arc;

    const BOOTSTRAP: StreamOperation = StreamOperation::Bootstrap;

    #[tokio::test]
    async fn positions_survive_a_reload_and_clear_forgets_them() {
        let store = Store::open(Arc::new(MemoryEngine::new()), Durability::Batch).unwrap();
        let ks = KeyspaceId::random();
        let a = TokenRange::new(Token(-5), Token(10));
        let b = TokenRange::new(Token(10), Token(-5));
        let checkpoints = Checkpoints::load(&store, BOOTSTRAP).unwrap();
        assert_eq!(checkpoints.position(ks, a), None);
        checkpoints
            .record(ks, a, Some(Position::After(Token(3))))
            .await
            .unwrap();
        checkpoints
            .record(ks, b, Some(Position::Done))
            .await
            .unwrap();

        let reloaded = Checkpoints::load(&store, BOOTSTRAP).unwrap();
        assert_eq!(reloaded.position(ks, a), Some(Position::After(Token(3))));
        assert_eq!(reloaded.position(ks, b), Some(Position::Done));
        assert_eq!(
            Checkpoints::load(
                &store,
                StreamOperation::Replace {
                    replaced: HostId::from_u128(1)
                }
            )
            .unwrap()
            .position(ks, a),
            None,
            "operations are apart"
        );
        reloaded.clear().await.unwrap();
        let cleared = Checkpoints::load(&store, BOOTSTRAP).unwrap();
        assert_eq!(cleared.position(ks, b), None);
    }

    #[test]
    fn corrupt_records_are_refused() {
        assert!(decode(&[]).is_none());
        assert!(decode(&[FORMAT, 1, 2]).is_none());
        assert!(decode(&[9]).is_none());
        let mut bad = vec![FORMAT];
        bad.extend([0u8; ENTRY_BYTES]);
        bad[33] = 7;
        assert!(decode(&bad).is_none(), "unknown tag");
    }
}
