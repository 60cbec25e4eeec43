//! Why this node refused or failed a repair, as the coordinator of one (a
//! replica down, another repair or a range movement under way) or as a
//! replica taking part in one (a tree it does not keep, a request too big).
//!
//! The repair crate's own errors (a malformed answer, a bad setting) are
//! [`ringstore_repair::RepairError`]. Imports nothing of the node crate:
//! every module imports the error folder.

use ringstore_placement::{HostId, TokenRange};
use tonic::Code;
use uuid::Uuid;

use super::topology::MovementsUnderway;

/// Why a repair, or a replica's part in one, was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum RangeRepairError {
    /// A replica of the range is down: every replica must take part.
    #[error("replica {host} of range {range} is down: every replica must take part")]
    ReplicaDown {
        /// The replica.
        host: HostId,
        /// The range.
        range: TokenRange,
    },

    /// A replica did not send its next page of rows within the call
    /// timeout.
    #[error("replica {0} did not list its rows in time")]
    ListingTimedOut(HostId),

    /// A replica refused a row the repair sent it.
    #[error("replica {host} refused a repaired row: {reason}")]
    RowRefused {
        /// The replica.
        host: HostId,
        /// The replica's reason, as it sent it.
        reason: String,
    },

    /// A replica to end a session on is down: its session stays open (until
    /// it expires there).
    #[error("replica {0} is down: its session stays open")]
    SessionLeftOpen(HostId),

    /// Range movements are under way: the ranges' replicas are changing.
    #[error("range movements are under way ({0}); repair once they are over")]
    MovementsUnderway(MovementsUnderway),

    /// The scope asked for holds no range.
    #[error("nothing to repair: the ring is empty or the sub-range holds no range")]
    NothingToRepair,

    /// A repair job runs on this node already (`job`: its id, when known).
    #[error(
        "{} is running on this node; see `ringstore repair status`",
        job.map_or("a repair".to_string(), |id| format!("repair {id}"))
    )]
    AlreadyRunning {
        /// The running job.
        job: Option<Uuid>,
    },

    /// A replica was asked for nodes of a tree it does not keep.
    #[error("no repair tree of range {range} for session {session} (never built, or expired)")]
    NoTree {
        /// The range.
        range: TokenRange,
        /// The repair session.
        session: Uuid,
    },

    /// A replica was asked for a node its tree does not have.
    #[error("the tree of depth {depth} has no node {node}")]
    NoTreeNode {
        /// The tree's depth.
        depth: u8,
        /// The node asked for.
        node: u32,
    },

    /// A replica was asked for cells that add up to more than it answers
    /// with at once.
    #[error("the cells asked for exceed {max} bytes; ask for fewer keys")]
    ReadTooLarge {
        /// The limit, in bytes.
        max: usize,
    },
}

impl RangeRepairError {
    /// The gRPC status code of this error.
    pub fn code(&self) -> Code {
        use RangeRepairError as E;
        match self {
            E::ReplicaDown { .. } | E::SessionLeftOpen(_) => Code::Unavailable,
            E::ListingTimedOut(_) => Code::DeadlineExceeded,
            E::NoTreeNode { .. } | E::ReadTooLarge { .. } => Code::InvalidArgument,
            E::RowRefused { .. }
            | E::MovementsUnderway(_)
            | E::NothingToRepair
            | E::AlreadyRunning { .. }
            | E::NoTree { .. } => Code::FailedPrecondition,
        }
    }
}
