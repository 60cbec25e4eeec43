//! What a run recorded: operations, their outcomes, the faults, and the
//! final state of every key.

use std::fmt;
use std::time::Duration;

/// A server, by its index in the test's cluster (`node0`, `node1`, …).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub usize);

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node{}", self.0)
    }
}

/// A client of the load, by its index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClientId(pub usize);

impl fmt::Display for ClientId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "client{}", self.0)
    }
}

/// A write timestamp, in microseconds since the Unix epoch, as the
/// coordinator stamped it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub i64);

/// What a read found: a value and its write's timestamp. Values are unique
/// per key, so the value names the write; where the version stands in
/// last-write-wins order depends on that write too (a TTL write wins over
/// a plain one at one timestamp), so versions are ordered by the checker,
/// which knows the writes, not by themselves.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Version {
    /// When the write was stamped.
    pub timestamp: Timestamp,
    /// The value written (unique per key in a run).
    pub value: Vec<u8>,
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?}@{}",
            String::from_utf8_lossy(&self.value),
            self.timestamp.0
        )
    }
}

/// A consistency level, as far as the checks need it: how many replicas
/// of `rf` it waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Level {
    /// One replica.
    One,
    /// Two replicas.
    Two,
    /// A majority: `rf / 2 + 1`.
    Quorum,
    /// Every replica.
    All,
}

impl Level {
    /// The replicas this level waits for at replication factor `rf`.
    pub fn replicas(self, rf: u32) -> u32 {
        match self {
            Level::One => 1,
            Level::Two => 2,
            Level::Quorum => rf / 2 + 1,
            Level::All => rf,
        }
    }
}

/// Why an operation failed, as far as the fault suite tells failures apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// `UNAVAILABLE`: the coordinator saw too few replicas up, or (for a
    /// write) too many failed after it was sent.
    Unavailable,
    /// `DEADLINE_EXCEEDED`: the coordinator's own timeout.
    Timeout,
    /// The client gave up waiting (a paused or partitioned coordinator).
    ClientTimeout,
    /// The coordinator could not be reached, or the connection broke.
    Unreachable,
    /// Anything else (an error the suite does not expect).
    Other,
}

/// A failed operation's kind and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The kind of failure.
    pub kind: FailureKind,
    /// The status message, for the report.
    pub message: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.kind, self.message)
    }
}

/// What became of a write (of one key: a batch's parts each have their own).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Acknowledged at its level, stamped `timestamp`.
    Acked(Timestamp),
    /// Failed: indeterminate (it may have reached some replicas).
    Failed(Failure),
}

/// What a read returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadOutcome {
    /// A value.
    Found(Version),
    /// No value: nothing was ever written, or the winning write is a
    /// delete or a value whose TTL had run out.
    NotFound,
    /// An error: the read tells nothing.
    Failed(Failure),
}

/// What a write asks of one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mutation {
    /// A value (unique per key in the run), kept forever or, with a TTL,
    /// until the TTL has run from when its coordinator accepted it (whole
    /// seconds, as the store takes them).
    Put {
        /// The value.
        value: Vec<u8>,
        /// How long it lives; `None`: forever.
        ttl: Option<Duration>,
    },
    /// A delete: a tombstone, which wins over a value at its timestamp.
    Delete,
}

/// One key's write: a put or delete on its own, or a batch's part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    /// The key (text, for readable reports).
    pub key: String,
    /// What it writes.
    pub mutation: Mutation,
    /// How it ended.
    pub outcome: WriteOutcome,
}

impl Write {
    /// The timestamp it was acknowledged with, if it was.
    pub fn acked(&self) -> Option<Timestamp> {
        match self.outcome {
            WriteOutcome::Acked(timestamp) => Some(timestamp),
            WriteOutcome::Failed(_) => None,
        }
    }

    /// The value it puts (`None`: a delete).
    pub fn value(&self) -> Option<&[u8]> {
        match &self.mutation {
            Mutation::Put { value, .. } => Some(value),
            Mutation::Delete => None,
        }
    }

    /// Its TTL, if it puts a value with one.
    pub fn ttl(&self) -> Option<Duration> {
        match &self.mutation {
            Mutation::Put { ttl, .. } => *ttl,
            Mutation::Delete => None,
        }
    }

    /// Whether it is a delete.
    pub fn is_delete(&self) -> bool {
        self.mutation == Mutation::Delete
    }
}

/// What an operation was and how it ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpKind {
    /// A put (with or without a TTL) or a delete of one key.
    Write(Write),
    /// A batch: several writes in one request, each applied on its own and
    /// answered with its own outcome (ringstore's batches are unlogged, not
    /// atomic); a batch that failed as a whole has every part failed. Each
    /// part is judged as a write of its own at the batch's level and times.
    Batch(Vec<Write>),
    /// A get.
    Read {
        /// The key.
        key: String,
        /// How it ended.
        outcome: ReadOutcome,
    },
}

/// One client operation: a read or a write of one key, or a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Op {
    /// Who made it.
    pub client: ClientId,
    /// The node it was sent to.
    pub coordinator: NodeId,
    /// Its consistency level (a batch's parts all have it).
    pub level: Level,
    /// When the client sent it (since the start of the run, monotonic).
    pub invoked: Duration,
    /// When the client had its answer or gave up (at or after `invoked`).
    pub completed: Duration,
    /// What it was and how it ended.
    pub kind: OpKind,
}

impl Op {
    /// Its writes: one, a batch's parts, or none (a read).
    pub fn writes(&self) -> &[Write] {
        match &self.kind {
            OpKind::Write(write) => std::slice::from_ref(write),
            OpKind::Batch(parts) => parts,
            OpKind::Read { .. } => &[],
        }
    }

    /// Whether it writes (a put, a delete or a batch).
    pub fn is_write(&self) -> bool {
        !matches!(self.kind, OpKind::Read { .. })
    }

    /// The keys it touches, in request order.
    pub fn keys(&self) -> Vec<&str> {
        match &self.kind {
            OpKind::Read { key, .. } => vec![key.as_str()],
            _ => self.writes().iter().map(|w| w.key.as_str()).collect(),
        }
    }

    /// What this read answered (`Some(None)`: not found), if it is a read
    /// that succeeded.
    pub fn read_result(&self) -> Option<Option<&Version>> {
        match &self.kind {
            OpKind::Read {
                outcome: ReadOutcome::Found(version),
                ..
            } => Some(Some(version)),
            OpKind::Read {
                outcome: ReadOutcome::NotFound,
                ..
            } => Some(None),
            _ => None,
        }
    }

    /// Why it failed: a failed read, or the first failed part of a write.
    pub fn failure(&self) -> Option<&Failure> {
        match &self.kind {
            OpKind::Read {
                outcome: ReadOutcome::Failed(failure),
                ..
            } => Some(failure),
            OpKind::Read { .. } => None,
            _ => self.writes().iter().find_map(|w| match &w.outcome {
                WriteOutcome::Failed(failure) => Some(failure),
                WriteOutcome::Acked(_) => None,
            }),
        }
    }

    /// Whether it succeeded whole: a read that answered, a write whose
    /// every part was acknowledged.
    pub fn succeeded(&self) -> bool {
        self.failure().is_none()
    }
}

/// A fault, for the report: what it was, on which nodes, and when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultWindow {
    /// What was done, e.g. `SIGSTOP` or `partition from the others`.
    pub label: String,
    /// The node it was done to.
    pub node: NodeId,
    /// When it began (since the start of the run).
    pub from: Duration,
    /// When it was healed; `None`: never (the run ended with it).
    pub until: Option<Duration>,
}

impl FaultWindow {
    /// Whether the fault was active at any time in `[from, to]`.
    pub fn overlaps(&self, from: Duration, to: Duration) -> bool {
        self.from <= to && self.until.is_none_or(|until| until >= from)
    }
}

impl fmt::Display for FaultWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let until = self
            .until
            .map_or_else(|| "end".to_string(), |u| format!("{:.3}s", u.as_secs_f64()));
        write!(
            f,
            "{} {} [{:.3}s–{until}]",
            self.label,
            self.node,
            self.from.as_secs_f64()
        )
    }
}

/// A replica's own cell, read from the replica (no coordination): a value
/// or a tombstone, with its expiry, exactly as stored.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HeldCell {
    /// The write's timestamp.
    pub timestamp: Timestamp,
    /// The value; `None`: a tombstone.
    pub value: Option<Vec<u8>>,
    /// A value's expiry, or a tombstone's deletion time, in µs since the
    /// epoch by its coordinator's clock; `None`: a value that never expires
    /// (or a tombstone without a deletion time).
    pub expires_at: Option<Timestamp>,
}

impl HeldCell {
    /// Last-write-wins between two cells, exactly as the store decides it
    /// (`Cell::compare` in `ringstore-storage`): the later timestamp, then
    /// a tombstone over a value, then an expiring value over one that never
    /// expires, then the later expiry (deletion time), then the greater
    /// value. A total order; `Equal` only for equal cells.
    pub fn compare(&self, other: &HeldCell) -> std::cmp::Ordering {
        self.timestamp
            .cmp(&other.timestamp)
            .then_with(|| self.value.is_none().cmp(&other.value.is_none()))
            .then_with(|| self.expires_at.cmp(&other.expires_at))
            .then_with(|| self.value.cmp(&other.value))
    }
}

impl fmt::Display for HeldCell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            Some(value) => write!(
                f,
                "{:?}@{}",
                String::from_utf8_lossy(value),
                self.timestamp.0
            )?,
            None => write!(f, "tombstone@{}", self.timestamp.0)?,
        }
        match self.expires_at {
            Some(at) if self.value.is_some() => write!(f, " (expires at {})", at.0),
            _ => Ok(()),
        }
    }
}

/// One key after healing: what a read at `ALL` answered, and what each
/// replica holds (read from the replica itself, no coordination).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FinalKey {
    /// The key.
    pub key: String,
    /// When the final reads of the key began (since the start of the run,
    /// on the operations' clock): what the TTLs are judged at.
    pub read_at: Duration,
    /// The final read at `ALL`.
    pub read_all: ReadOutcome,
    /// Every replica's own cell (`None`: it has none, e.g. after garbage
    /// collection purged a tombstone or an expired value).
    pub replicas: Vec<(NodeId, Option<HeldCell>)>,
}
