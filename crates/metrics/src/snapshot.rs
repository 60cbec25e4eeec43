//! What the node samples from its other parts at scrape time.

use crate::labels::Stage;

/// The numbers of a node that other parts of it keep (gossip, hints,
/// streams, ring, schema, storage), as of one scrape. Filled by the node and
/// copied into the sampled families by [`crate::NodeMetrics::render`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeSnapshot {
    /// Seconds since the node started.
    pub uptime_seconds: u64,
    /// Live bytes of the keyspaces' keys and cells (the node's `Load`).
    pub load_bytes: u64,
    /// Bytes the storage engine's files occupy on disk.
    pub disk_bytes: u64,
    /// Runs of streamed cells not yet folded into the storage engine, and
    /// their cells.
    pub runs_pending: (u64, u64),
    /// Run files that did not check when the node started or when folded.
    pub runs_damaged: u64,
    /// Times a stored cell did not read back since the node started (on a
    /// read, a write's merge, a scan or the fold).
    pub corrupt_reads: u64,
    /// Gossip datagrams sent and received.
    pub gossip_packets: Traffic,
    /// Gossip bytes sent and received.
    pub gossip_bytes: Traffic,
    /// Gossip datagrams dropped, by reason (a fixed set of reasons).
    pub gossip_dropped: Vec<(&'static str, u64)>,
    /// Members this node sees up (itself included).
    pub members_up: u64,
    /// Members this node sees down (not those that left or were removed).
    pub members_down: u64,
    /// The epoch of the ring this node uses (grows with every ring change).
    pub ring_epoch: u64,
    /// The checksum of that ring (equal on nodes that agree on the ring).
    pub ring_checksum: u64,
    /// The schema version this node holds.
    pub schema_version: String,
    /// Hints pending per target host id: (target, hints, bytes).
    pub hints_pending: Vec<(String, u64, u64)>,
    /// Hints stored since start.
    pub hints_stored: u64,
    /// Hints delivered and acknowledged since start.
    pub hints_replayed: u64,
    /// Hints dropped or not stored, by reason (a fixed set of reasons).
    pub hints_dropped: Vec<(&'static str, u64)>,
    /// Hints that could not be stored.
    pub hint_store_failures: u64,
    /// Bytes of range streams received and sent.
    pub stream_bytes: Traffic,
    /// Range stream sessions in progress.
    pub streams_running: u64,
    /// The stream throttle in MiB/s (0: unthrottled).
    pub stream_throughput_mib_per_sec: u64,
    /// The sampled stages' numbers ([`Stage::is_recorded`] is false for them).
    pub stages: Vec<StageSample>,
    /// The keyspaces this node stores, with their sizes.
    pub keyspaces: Vec<KeyspaceSample>,
    /// Repair and garbage collection.
    pub repair: RepairSample,
    /// This node's clock against its peers'.
    pub clock: ClockSample,
}

/// This node's clock against the live members' clocks, as gossip's clock
/// probes estimate it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClockSample {
    /// This node's clock minus the median of the live members' clocks
    /// (its own included), in seconds.
    pub offset_seconds: f64,
    /// Each live peer's clock minus this node's, in seconds: (host id, offset).
    pub peer_offsets: Vec<(String, f64)>,
    /// Whether this node's clock is off from the majority by more than
    /// `max_clock_offset` (it then refuses to coordinate writes).
    pub skewed: bool,
    /// Writes refused since start because of it.
    pub refused_writes: u64,
}

/// What this node's repairs and garbage collection did since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RepairSample {
    /// Ranges this node repaired as a coordinator.
    pub ranges_repaired: u64,
    /// Ranges whose repair failed.
    pub ranges_failed: u64,
    /// Keys found differing between replicas.
    pub mismatched_keys: u64,
    /// Rows written to replicas that lacked them.
    pub rows_sent: u64,
    /// Bytes exchanged with other nodes by repairs.
    pub bytes: u64,
    /// Whether a repair runs here now (0 or 1).
    pub running: u64,
    /// Seconds since the least recently repaired range this node is the
    /// primary replica of was repaired (since the node started, if never).
    pub oldest_unrepaired_seconds: u64,
    /// Tombstones and expired cells purged by garbage collection.
    pub purged: u64,
}

/// A count by direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Sent.
    pub sent: u64,
    /// Received.
    pub received: u64,
}

/// One sampled stage's numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StageSample {
    /// The stage.
    pub stage: Stage,
    /// Work in progress.
    pub active: u64,
    /// Work waiting for its turn.
    pub pending: u64,
    /// Work done since start.
    pub completed: u64,
}

/// One keyspace's data on this node, from a scan of its cells.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyspaceSample {
    /// Its name.
    pub name: String,
    /// Keys stored (tombstones and expired cells included).
    pub keys: u64,
    /// Bytes of keys and encoded cells.
    pub bytes: u64,
    /// Keys whose cell is a tombstone.
    pub tombstones: u64,
}
