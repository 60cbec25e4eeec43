//! Garbage collection of Paxos state: floors, purges, and the repair round
//! that makes state purgeable.
//!
//! Every key ever compare-and-set leaves a small [`AcceptorState`] on each
//! of its replicas. Deleting it carelessly breaks Paxos in two ways:
//! - **A forgotten promise.** A replica that promised ballot `b` and then
//!   forgets it can accept an older ballot afterwards, and two values can
//!   be chosen for the key.
//! - **A forgotten acceptance.** A proposal accepted by a quorum is chosen
//!   even if no commit has reached any replica's data yet; if the replicas
//!   forget it before the commit lands, the chosen value is lost.
//!
//! Cassandra 4.1's answer ("Paxos repair" and a low bound on ballots) is
//! the model here, reduced to two local rules and one repair round.
//!
//! # The floor
//! A replica keeps, per keyspace, a *floor* ballot that only rises and is
//! made durable before anything is purged under it. Under a floor `f` the
//! acceptor behaves as if it had promised `f` ([`AcceptorState::floored`]):
//! it refuses a prepare at or below `f` and an accept below it, and the
//! refusal shows `f`, so the proposer's next ballot goes past it. Refusing
//! is always safe in Paxos (an acceptor may refuse anything); the cost is
//! liveness only: a round whose ballot is older than a replica's floor is
//! refused there and retried. The floor therefore stands in for every
//! promise older than itself, forgotten or not.
//!
//! # What may be purged
//! A state is purgeable under floor `f` ([`AcceptorState::purgeable`]) when
//! every ballot it holds (promise, acceptance, most recent commit) is older
//! than `f`, and its accepted proposal, if any, is committed **here**
//! (`accepted.ballot <= committed`): the replica applies a commit's cell to
//! its data before it records the commit, so the data holds the accepted
//! cell or a newer one. Purging such a state forgets nothing the floor and
//! the data do not still say. Each replica decides alone, with its own
//! floor: no coordination is needed for safety.
//!
//! Forgetting a most recent commit (MRC) is harmless too. Another replica
//! may still hold an older accepted proposal whose commit never reached
//! it; a round that no longer sees a newer MRC takes it as in progress and
//! re-proposes it unchanged, with its original timestamp. That proposal is
//! older than every version chosen after it, whose timestamps are past it
//! (see the crate essay), so last-write-wins keeps the newer data: one
//! extra accept round, no change of value.
//!
//! # The repair round
//! A state whose acceptance never got its commit here (a commit lost on
//! the way, a coordinator that died after the accept quorum) is never
//! purgeable by itself. [`Operation::Repair`](crate::Operation::Repair)
//! makes it so: a serial read that finishes what is in progress, proposing
//! the register's current version, and then **always** commits that version
//! under its ballot to every replica, even when nothing was in progress.
//! After it, each replica that took the commit holds the current version in
//! its data and an MRC newer than anything accepted before the round, so
//! its state becomes purgeable once a floor passes the round's ballot.
//!
//! Committing a version under a ballot nobody accepted is safe for the
//! reason a serial read's answer is: the round's promise quorum saw the
//! newest chosen version (it is in `current`), and no ballot older than the
//! round's can gather an accept quorum any more, so every older accepted
//! proposal it marks as committed is either chosen and in `current`, or
//! never will be chosen (Cassandra commits an empty proposal the same way).
//!
//! The repair round is also what a topology change needs: once it has
//! committed at a quorum that includes the pending replicas, the new
//! electorate's data holds every chosen version, whatever Paxos state it
//! lacks.
//!
//! # Caveats
//! - A replica that misses the repair's commit keeps its uncommitted state
//!   until a later repair reaches it.
//! - The repair round's own ballot is newer than a floor taken before it:
//!   the states it touched become purgeable only under a later floor (the
//!   shell takes the floor after its repair rounds for that reason).

use crate::acceptor::AcceptorState;
use crate::ballot::Ballot;

impl AcceptorState {
    /// This state as the acceptor must see it under `floor`: promised at
    /// least the floor (see the module docs). Persisting the result is
    /// harmless; the shell need not.
    pub fn floored(&self, floor: Option<Ballot>) -> AcceptorState {
        AcceptorState {
            promised: self.promised.max(floor),
            ..self.clone()
        }
    }

    /// Whether this state may be deleted once `floor` is durable: every
    /// ballot it holds is older than the floor, and what it accepted is
    /// committed here (see the module docs).
    pub fn purgeable(&self, floor: Ballot) -> bool {
        let accepted = self.accepted.as_ref().map(|p| p.ballot);
        let older = [self.promised, accepted, self.committed]
            .into_iter()
            .flatten()
            .all(|ballot| ballot < floor);
        let committed_here = accepted.is_none_or(|a| self.committed.is_some_and(|c| a <= c));
        older && committed_here
    }
}
