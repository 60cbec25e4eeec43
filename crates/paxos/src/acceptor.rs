//! The acceptor: one replica's Paxos state for one key, and its three rules.
//!
//! The acceptor is a value, not an object with a life: the shell loads the
//! key's [`AcceptorState`] from its system keyspace (or starts from
//! [`AcceptorState::default`]), calls [`prepare`](AcceptorState::prepare),
//! [`accept`](AcceptorState::accept) or [`commit`](AcceptorState::commit),
//! and gets a [`Step`]: the state to persist, if it changed, and the reply.
//! **The shell must make `persist` durable before it sends `reply`**: a
//! promise or an accept that is forgotten in a crash after it was answered
//! lets a second value be chosen for the key. The shell also serializes the
//! calls for one key (a per-key lock, as Cassandra stripes them).
//!
//! # Rules
//! - Prepare `b`: promise iff `b` is newer than both the promise held and the
//!   accepted ballot (an equal ballot is not newer). The promise carries the
//!   accepted proposal and the most recent commit (MRC) ballot.
//! - Accept `p`: accept iff `p.ballot >= promised` and `p.ballot` is newer than
//!   the accepted ballot. An accept of the very proposal already accepted is
//!   answered `Accepted` again without a write: a duplicated message whose
//!   first reply was lost must not read as a refusal (a proposer that took
//!   it for one could report "not applied" while its value sits on a
//!   replica, CASSANDRA-6013).
//! - Commit `p`: record `p.ballot` as the MRC if it is newer, and hand the
//!   cell back for the shell to merge into the data store by last-write-wins.
//!   An older commit still hands its cell back (merging it is harmless), but
//!   never moves the MRC back.
//!
//! Invariants kept: `promised` only grows; `accepted.ballot` only grows and
//! never exceeds `promised`; `committed` only grows.

use ringstore_cell::Cell;

use crate::ballot::Ballot;

/// A value proposed under a ballot: the whole register, as CASPaxos
/// replicates it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Proposal {
    /// The ballot it is proposed under; never reused for another value.
    pub ballot: Ballot,
    /// The register's new version: a live cell, a tombstone, or `None`
    /// (nothing to apply; this crate's proposer never makes one, but the
    /// stored format keeps room for Cassandra's empty proposals).
    pub cell: Option<Cell>,
}

/// One replica's Paxos state for one key, as stored in the system keyspace
/// ([`encode`](AcceptorState::encode) / [`decode`](AcceptorState::decode)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AcceptorState {
    /// The newest ballot promised (or accepted): older prepares and accepts
    /// are refused.
    pub promised: Option<Ballot>,
    /// The newest proposal accepted.
    pub accepted: Option<Proposal>,
    /// The ballot of the most recent commit applied here (MRC).
    pub committed: Option<Ballot>,
}

/// What an acceptor call decided: the state to persist (if it changed),
/// then the reply.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use = "persist the state, then send the reply"]
pub struct Step<R> {
    /// The new state, to be made durable **before** `reply` is sent; `None`
    /// when nothing changed (the reply may go at once).
    pub persist: Option<AcceptorState>,
    /// What to answer the proposer (for a commit: what to apply).
    pub reply: R,
}

/// What a replica promises with: what it has accepted and committed. On the
/// wire the shell adds the replica's data cell for the key, read after the
/// state was loaded (see [`Event::Promised`](crate::Event::Promised)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Promise {
    /// The newest proposal this replica accepted.
    pub accepted: Option<Proposal>,
    /// The ballot of the most recent commit it applied.
    pub committed: Option<Ballot>,
}

/// The answer to a prepare.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PrepareReply {
    /// The ballot was newer: promised.
    Promised(Promise),
    /// Refused; `promised` is the newest ballot this replica holds, for the
    /// proposer's next ballot to outrank.
    Rejected {
        /// The newest ballot promised or accepted here.
        promised: Ballot,
    },
}

/// The answer to an accept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AcceptReply {
    /// Accepted (and durable, once the step's state is persisted).
    Accepted,
    /// Refused: a newer ballot was promised or accepted.
    Rejected {
        /// The newest ballot promised or accepted here.
        promised: Ballot,
    },
}

impl AcceptorState {
    /// The newest ballot this replica has promised or accepted.
    pub fn highest(&self) -> Option<Ballot> {
        let accepted = self.accepted.as_ref().map(|p| p.ballot);
        self.promised.max(accepted)
    }

    /// Handles a prepare of `ballot` (see the module docs).
    pub fn prepare(&self, ballot: Ballot) -> Step<PrepareReply> {
        match self.highest() {
            Some(held) if ballot <= held => Step {
                persist: None,
                reply: PrepareReply::Rejected { promised: held },
            },
            _ => Step {
                persist: Some(AcceptorState {
                    promised: Some(ballot),
                    ..self.clone()
                }),
                reply: PrepareReply::Promised(Promise {
                    accepted: self.accepted.clone(),
                    committed: self.committed,
                }),
            },
        }
    }

    /// Handles an accept of `proposal` (see the module docs).
    pub fn accept(&self, proposal: Proposal) -> Step<AcceptReply> {
        let accepted = self.accepted.as_ref();
        if accepted == Some(&proposal) {
            // A duplicate: already accepted and persisted.
            return Step {
                persist: None,
                reply: AcceptReply::Accepted,
            };
        }
        let promised_ok = self.promised.is_none_or(|held| proposal.ballot >= held);
        let newer = accepted.is_none_or(|held| proposal.ballot > held.ballot);
        if promised_ok && newer {
            return Step {
                persist: Some(AcceptorState {
                    promised: self.promised.max(Some(proposal.ballot)),
                    accepted: Some(proposal),
                    committed: self.committed,
                }),
                reply: AcceptReply::Accepted,
            };
        }
        Step {
            persist: None,
            reply: AcceptReply::Rejected {
                // `highest` is `Some` here: a refusal needs a held ballot.
                promised: self.highest().unwrap_or(proposal.ballot),
            },
        }
    }

    /// Handles a commit of `proposal`: the reply is the cell the shell
    /// merges into the data store. The shell applies it **before**
    /// persisting the new MRC, so that a prepare reading the MRC and then
    /// the data never sees a commit the data lacks.
    pub fn commit(&self, proposal: Proposal) -> Step<Option<Cell>> {
        let newer = self.committed.is_none_or(|held| proposal.ballot > held);
        Step {
            persist: newer.then(|| AcceptorState {
                committed: Some(proposal.ballot),
                ..self.clone()
            }),
            reply: proposal.cell,
        }
    }
}
