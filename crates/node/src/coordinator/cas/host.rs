//! What a compare-and-set's coordinator needs of the node: the
//! coordinator's host ([`CoordinatorHost`]: the view, the replica maps,
//! the peers, hints, metrics), this node's own Paxos replica (called
//! directly, without a network hop, when it is in the electorate), the
//! ballot clock and the queue of rivals per key.

use ringstore_paxos::Ballot;

use crate::coordinator::CoordinatorHost;
use crate::paxos::PaxosReplicaHost;

use super::key_queue::CasQueue;

/// The node as a lightweight transaction's coordinator sees it.
///
/// The replica is reached through [`CasHost::paxos_replica`] rather than
/// as a supertrait: both hosts have a `store` and a `check_serving`, and a
/// caller bound by both would find those calls ambiguous.
pub(crate) trait CasHost: CoordinatorHost {
    /// This node's Paxos replica.
    type Replica: PaxosReplicaHost;
    /// This node as a Paxos replica, for the rounds it votes in.
    fn paxos_replica(&self) -> &Self::Replica;
    /// A ballot newer than every one this node issued, and than `after`
    /// (the newest a refusal showed), from the node's clock and its
    /// tie-breaker (`ringstore_paxos::BallotClock`).
    fn next_ballot(&self, after: Option<Ballot>) -> Ballot;
    /// The operations waiting for their turn on each key.
    fn cas_queue(&self) -> &CasQueue;
}
