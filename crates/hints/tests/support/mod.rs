//! Helpers shared by the integration tests: hint builders, a memory tree, and
//! the simulated clock's conversion to write timestamps.

#![allow(dead_code)] // Each test file uses a different subset.

use std::sync::Arc;
use std::time::Duration;

use ringstore_hints::Hint;
use ringstore_placement::HostId;
use ringstore_storage::{Cell, Engine, HINTS_TREE, KeyspaceId, MemoryEngine, Timestamp, Tree};

/// The simulated epoch: simulated time zero, as a write timestamp.
pub const EPOCH: Timestamp = Timestamp(1_700_000_000_000_000);

/// Simulated time as a write timestamp.
pub fn ts(now: Duration) -> Timestamp {
    Timestamp(EPOCH.0 + now.as_micros() as i64)
}

pub fn host(n: u128) -> HostId {
    HostId::from_u128(n)
}

pub fn keyspace() -> KeyspaceId {
    KeyspaceId(uuid::Uuid::from_u128(0xC0FFEE))
}

/// A hint for `target` created at `created_at` with a `value_len`-byte value.
pub fn hint(target: HostId, created_at: Timestamp, n: u64, value_len: usize) -> Hint {
    Hint {
        target,
        keyspace: keyspace(),
        key: format!("key-{n}").into_bytes(),
        cell: Cell::live(created_at, vec![(n % 251) as u8; value_len]),
        created_at,
    }
}

/// A fresh in-memory `hints` tree.
pub fn memory_tree() -> Arc<dyn Tree> {
    MemoryEngine::new().open_tree(HINTS_TREE).unwrap()
}
