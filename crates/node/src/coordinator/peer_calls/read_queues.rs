//! The coordinator's replica reads, coalesced per peer (`peer_calls/mod.rs`
//! has the design): how calls to a peer are shaped, and what each read gets
//! back; `read_queues_driver.rs` sends the calls.
//!
//! A read that finds a free call slot leaves alone, as a `Read` of its own
//! (an idle node's reads are unchanged); reads that queued behind busy
//! slots leave together in a `ReadMany`, each answered on its own
//! (`services/replica_reads.rs`).
//!
//! # Caveats
//! - A call that fails fails every read in it, as it would have failed each
//!   of them sent alone over the same connection; the coordinator counts
//!   each as a replica that did not answer.
//! - A read the replica deferred (its response was full) is sent again
//!   alone, so it pays a second round trip. So is every read of a call to a
//!   peer without `ReadMany` (an earlier build); after its first refusal the
//!   peer's reads go alone at once for a while (`read_many_refusals.rs`).

use std::sync::Arc;

use ringstore_proto::v1 as pb;
use ringstore_replication::BatchLimits;

use crate::coordinator::peer_calls::{self, PeerQueues};
use crate::error::NodeError;

/// How calls to one peer are shaped, as for writes (`write_queues.rs`):
/// one slot (against two: QUORUM reads per second within ±14 %, p99 lower
/// in three rounds of three). The bytes counted are the requests' (keys);
/// the replica bounds its answer (`RESPONSE_BUDGET_BYTES`).
pub(crate) const LIMITS: BatchLimits = BatchLimits {
    calls_in_flight: 1,
    max_items: 256,
    max_bytes: 1024 * 1024,
};

/// What the replica answered to one read.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ReadAnswer {
    /// The cell (absent: none, or a digest was asked for) and the digest
    /// (0 unless asked for).
    Answered { cell: Option<pb::Cell>, digest: u64 },
    /// The replica refused the read, with the status a `Read` of its own
    /// would have failed with.
    Refused { code: tonic::Code, message: String },
    /// Not answered in this call (left out of a full response, or the peer
    /// has no `ReadMany`): to be sent again alone.
    Deferred,
}

/// One replica read's part of a call's answer.
#[derive(Clone, Debug)]
pub(crate) struct ReadDelivered {
    pub answer: ReadAnswer,
    /// The members the replica showed in a newer state than the call's ring.
    pub members: Arc<[pb::MemberStamp]>,
}

/// What a read submitted to a queue gets back.
pub(crate) type ReadDelivery = std::result::Result<ReadDelivered, Arc<NodeError>>;

/// A queued read: the read, and where its answer goes.
pub(crate) type ReadWaiter = peer_calls::Waiter<pb::ReplicaRead, ReadDelivered>;

/// The node's per-peer queues of replica reads.
pub(crate) type ReadQueues = PeerQueues<ReadWaiter>;

impl Default for ReadQueues {
    fn default() -> ReadQueues {
        PeerQueues::new(LIMITS)
    }
}
