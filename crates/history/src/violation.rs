//! A broken promise, told so that a reader can find it in the logs: the
//! key, the operations with their times and coordinators, the node, and
//! the faults that were active meanwhile.

use std::fmt;

use crate::history::{FaultWindow, Mutation, NodeId, Op, Version, Write, WriteOutcome};

/// Which promise was broken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ViolationKind {
    /// An acknowledged write is not in the final state.
    Lost,
    /// A read returned less than a write acknowledged before it began.
    Stale,
    /// A read returned less than a read that completed before it began.
    NonMonotonic,
    /// A value nobody wrote (to this key, by then, or at that timestamp).
    Phantom,
    /// Replicas of a key hold different cells after repair.
    Divergent,
    /// The final read of a key failed.
    Unreadable,
    /// Two writes further apart than the clock bound ended in the wrong
    /// order.
    Reordered,
    /// A write its client was told failed overwrote a later write of the
    /// same client that was acknowledged.
    LateWrite,
    /// A value came back after a delete of its key was acknowledged.
    Resurrected,
    /// A value was read after its TTL had run out (clock bound allowed).
    Expired,
}

/// One violation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Which promise.
    pub kind: ViolationKind,
    /// The key.
    pub key: String,
    /// What went wrong, in a sentence.
    pub what: String,
    /// The operations involved, by their index in the history, with a line
    /// each (times, client, coordinator, outcome).
    pub ops: Vec<(usize, String)>,
    /// The node at fault, when one is (a replica that lacks the write).
    pub node: Option<NodeId>,
    /// The faults active during the operations involved.
    pub faults: Vec<String>,
}

impl Violation {
    /// A violation about `ops` of `history`, with the faults active during
    /// any of them.
    pub(crate) fn new(
        kind: ViolationKind,
        key: &str,
        what: String,
        ops: &[(usize, &Op)],
        node: Option<NodeId>,
        faults: &[FaultWindow],
    ) -> Violation {
        let active = faults
            .iter()
            .filter(|f| {
                ops.iter()
                    .any(|(_, op)| f.overlaps(op.invoked, op.completed))
            })
            .map(ToString::to_string)
            .collect();
        Violation {
            kind,
            key: key.to_string(),
            what,
            ops: ops.iter().map(|&(i, op)| (i, describe(op))).collect(),
            node,
            faults: active,
        }
    }
}

/// `[1.200s–1.250s] client2 via node1 at Quorum: put "v": acked @17`.
pub(crate) fn describe(op: &Op) -> String {
    use crate::history::{OpKind, ReadOutcome};
    let what = match &op.kind {
        OpKind::Write(write) => describe_write(write),
        OpKind::Batch(parts) => {
            let parts: Vec<String> = parts
                .iter()
                .map(|w| format!("{} {}", w.key, describe_write(w)))
                .collect();
            format!("batch [{}]", parts.join("; "))
        }
        OpKind::Read { outcome, .. } => match outcome {
            ReadOutcome::Found(version) => format!("read: {version}"),
            ReadOutcome::NotFound => "read: not found".to_string(),
            ReadOutcome::Failed(failure) => format!("read: failed ({failure})"),
        },
    };
    format!(
        "[{:.3}s–{:.3}s] {} via {} at {:?}: {what}",
        op.invoked.as_secs_f64(),
        op.completed.as_secs_f64(),
        op.client,
        op.coordinator,
        op.level
    )
}

/// `put "v" (TTL 3s): acked @17`, `delete: failed (Timeout: …)`.
fn describe_write(write: &Write) -> String {
    let outcome = match &write.outcome {
        WriteOutcome::Acked(ts) => format!("acked @{}", ts.0),
        WriteOutcome::Failed(failure) => format!("failed ({failure})"),
    };
    match &write.mutation {
        Mutation::Put { value, ttl: None } => {
            format!("put {:?}: {outcome}", String::from_utf8_lossy(value))
        }
        Mutation::Put {
            value,
            ttl: Some(ttl),
        } => format!(
            "put {:?} (TTL {ttl:?}): {outcome}",
            String::from_utf8_lossy(value)
        ),
        Mutation::Delete => format!("delete: {outcome}"),
    }
}

/// `"v"@17`, or `nothing`.
pub(crate) fn show(version: Option<&Version>) -> String {
    version.map_or_else(|| "nothing".to_string(), ToString::to_string)
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} key {:?}: {}", self.kind, self.key, self.what)?;
        if let Some(node) = self.node {
            write!(f, " (on {node})")?;
        }
        for (index, line) in &self.ops {
            write!(f, "\n    op #{index} {line}")?;
        }
        if self.faults.is_empty() {
            write!(f, "\n    faults active meanwhile: none")
        } else {
            write!(
                f,
                "\n    faults active meanwhile: {}",
                self.faults.join("; ")
            )
        }
    }
}
