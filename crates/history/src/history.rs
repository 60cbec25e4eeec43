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

/// A cell as last-write-wins orders it: the later timestamp wins, then the
/// greater value (ringstore's tie-break between two values at one
/// timestamp). The derived order is exactly that (fields in that order).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
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

/// What became of a write.
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
    /// No value.
    NotFound,
    /// An error: the read tells nothing.
    Failed(Failure),
}

/// What an operation was and how it ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpKind {
    /// A put of `value`.
    Write {
        /// The value (unique per key in the run).
        value: Vec<u8>,
        /// How it ended.
        outcome: WriteOutcome,
    },
    /// A get.
    Read {
        /// How it ended.
        outcome: ReadOutcome,
    },
}

/// One client operation on one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Op {
    /// Who made it.
    pub client: ClientId,
    /// The node it was sent to.
    pub coordinator: NodeId,
    /// The key (text, for readable reports).
    pub key: String,
    /// Its consistency level.
    pub level: Level,
    /// When the client sent it (since the start of the run, monotonic).
    pub invoked: Duration,
    /// When the client had its answer or gave up (at or after `invoked`).
    pub completed: Duration,
    /// What it was and how it ended.
    pub kind: OpKind,
}

impl Op {
    /// The version this write was acknowledged with, if it is an
    /// acknowledged write.
    pub fn acked_version(&self) -> Option<Version> {
        match &self.kind {
            OpKind::Write {
                value,
                outcome: WriteOutcome::Acked(timestamp),
            } => Some(Version {
                timestamp: *timestamp,
                value: value.clone(),
            }),
            _ => None,
        }
    }

    /// What this read answered (`Some(None)`: not found), if it succeeded.
    pub fn read_result(&self) -> Option<Option<&Version>> {
        match &self.kind {
            OpKind::Read {
                outcome: ReadOutcome::Found(version),
            } => Some(Some(version)),
            OpKind::Read {
                outcome: ReadOutcome::NotFound,
            } => Some(None),
            _ => None,
        }
    }

    /// Whether it failed.
    pub fn failure(&self) -> Option<&Failure> {
        match &self.kind {
            OpKind::Write {
                outcome: WriteOutcome::Failed(failure),
                ..
            }
            | OpKind::Read {
                outcome: ReadOutcome::Failed(failure),
            } => Some(failure),
            _ => None,
        }
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

/// One key after healing: what a read at `ALL` answered, and what each
/// replica holds (read from the replica itself, no coordination).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FinalKey {
    /// The key.
    pub key: String,
    /// The final read at `ALL`.
    pub read_all: ReadOutcome,
    /// Every replica's own cell (`None`: it has none).
    pub replicas: Vec<(NodeId, Option<Version>)>,
}
