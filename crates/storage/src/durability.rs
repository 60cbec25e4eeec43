//! `Durability`: when a write is acknowledged relative to the flush that
//! makes it durable. The two modes are Cassandra's `commitlog_sync: batch`
//! and `commitlog_sync: periodic`.

use std::time::Duration;

/// When [`Store`](crate::Store) writes return relative to their flush.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// A write returns only after a flush that started after it has completed,
    /// so an acknowledged write survives a crash. Concurrent writers share
    /// flushes (group commit): under load, a write waits for at most the end
    /// of the flush in progress plus one more.
    Batch,
    /// A write returns as soon as it is applied; a background task flushes
    /// every `interval`. **Loss window:** a process crash (sled does not
    /// survive `kill -9` for unflushed writes) or a machine crash loses up to
    /// `interval` — plus one flush's duration — of acknowledged writes.
    /// Replication usually makes that acceptable: another replica has them.
    Periodic {
        /// The time between the starts of background flushes; must be non-zero.
        interval: Duration,
    },
}

impl Durability {
    /// Cassandra's default: periodic, every 10 seconds.
    pub const CASSANDRA_DEFAULT: Durability = Durability::Periodic {
        interval: Duration::from_secs(10),
    };
}
