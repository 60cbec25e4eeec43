//! The proposer: one compare-and-set or serial read, as a state machine the
//! shell drives with replies and gets actions back from.
//!
//! ```text
//! start ──Broadcast(Prepare)──► Preparing ──quorum of promises──► decide
//!   decide: op applies            → Broadcast(Accept(new cell))      ► Accepting
//!           op does not apply, a proposal in progress
//!                                 → Broadcast(Accept(its cell, unchanged)) ► Accepting
//!           op does not apply, nothing in progress → Done(NotApplied | Read)   (1 RT)
//!   Accepting ──quorum of accepts──► Commit(proposal), Done(Applied | NotApplied | Read)
//! ```
//!
//! Every reply is an [`Event`]; each call returns the [`Action`]s to carry
//! out, in order. After [`Action::Done`] the proposer ignores everything.
//! Only the first reply of each electorate member in the current round
//! counts; replies from other hosts, and replies to the other round, are
//! ignored.
//!
//! # Failures
//! - Round 1 (nothing has been written; promises change no value): a
//!   quorum becomes impossible, or the shell's deadline passes. With a
//!   refusal among the replies the outcome is [`Outcome::Contended`] (retry
//!   with a ballot past the one shown); otherwise [`Outcome::NoQuorum`].
//! - Round 2, proposing this operation's own new cell: once a quorum is
//!   impossible, or at the deadline, the outcome is [`Outcome::Unknown`] as
//!   soon as one replica accepted, or while one has not answered: a
//!   proposal held by a minority can still be chosen by a later proposer
//!   that finds it (CASSANDRA-6013). Only when every member answered and
//!   none accepted — refusals, or [`Event::Unreachable`] — is it
//!   [`Outcome::Contended`] (or [`Outcome::NoQuorum`] without a refusal):
//!   no acceptor holds the proposal, so it can never be chosen.
//! - Round 2, finishing an earlier proposal unchanged (this operation does
//!   not apply, or is a read): whatever becomes of that proposal, this
//!   operation's own effect was never proposed, so a failure is
//!   [`Outcome::Contended`] or [`Outcome::NoQuorum`], never unknown, and
//!   the shell retries it like any refusal: a serial read or a failed
//!   condition must not come back "unknown" because another operation's
//!   proposal could not be finished.
//!
//! That last rule trusts a refusal to mean "this replica did not accept": the
//! shell must deliver each request to each host at most once (no
//! retransmission of an accept; a retry is a new proposer with a new ballot),
//! because a retransmitted accept that the replica had accepted and since
//! superseded would be refused the second time.

use std::collections::BTreeMap;

use ringstore_cell::{Cell, Timestamp};
use ringstore_placement::HostId;

use crate::acceptor::{AcceptReply, PrepareReply, Promise, Proposal};
use crate::ballot::Ballot;
use crate::electorate::Electorate;
use crate::operation::Operation;

/// A request the proposer sends to every member of the electorate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Round 1: promise this ballot and send back your Paxos state and data.
    Prepare(Ballot),
    /// Round 2: accept this proposal.
    Accept(Proposal),
}

/// What the shell tells the proposer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// `from` promised the ballot. `data` is its stored cell for the key,
    /// read after its acceptor state was loaded (the shell applies a
    /// commit's cell before recording the commit, so the data holds every
    /// commit the promise reports).
    Promised {
        /// The replica.
        from: HostId,
        /// Its accepted proposal and most recent commit.
        promise: Promise,
        /// Its data cell for the key.
        data: Option<Cell>,
    },
    /// `from` refused the prepare.
    PrepareRejected {
        /// The replica.
        from: HostId,
        /// The newest ballot it holds.
        promised: Ballot,
    },
    /// `from` accepted the proposal.
    Accepted {
        /// The replica.
        from: HostId,
    },
    /// `from` refused the proposal.
    AcceptRejected {
        /// The replica.
        from: HostId,
        /// The newest ballot it holds.
        promised: Ballot,
    },
    /// The current round's request certainly did not reach `from` (known
    /// down, so not sent; refused before it was written to the wire). Not
    /// for a call that failed after sending: that is a silence, ended by
    /// [`Event::Timeout`].
    Unreachable {
        /// The replica.
        from: HostId,
    },
    /// The shell's deadline for the current round passed.
    Timeout,
}

impl Event {
    /// The event for `from`'s answer to a prepare; `data` is its data cell,
    /// used only with a promise.
    pub fn from_prepare_reply(from: HostId, reply: PrepareReply, data: Option<Cell>) -> Event {
        match reply {
            PrepareReply::Promised(promise) => Event::Promised {
                from,
                promise,
                data,
            },
            PrepareReply::Rejected { promised } => Event::PrepareRejected { from, promised },
        }
    }

    /// The event for `from`'s answer to an accept.
    pub fn from_accept_reply(from: HostId, reply: AcceptReply) -> Event {
        match reply {
            AcceptReply::Accepted => Event::Accepted { from },
            AcceptReply::Rejected { promised } => Event::AcceptRejected { from, promised },
        }
    }
}

/// What the shell does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send this request to every member of the electorate and feed back
    /// their replies; arm the round's deadline ([`Event::Timeout`]).
    Broadcast(Request),
    /// The proposal is chosen: send it as a commit to every replica of the
    /// key (all DCs, pending ones included). Whether to wait for acks is the
    /// commit level's business ([`CommitTracker`](crate::CommitTracker)).
    Commit(Proposal),
    /// The operation's outcome; the proposer is finished.
    Done(Outcome),
}

/// Which round a [`Outcome::NoQuorum`] happened in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Round {
    /// Prepare (with the read).
    Prepare,
    /// Accept.
    Accept,
}

/// How an operation ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The condition held and the new version is chosen: `current` is it.
    Applied {
        /// The chosen cell (for a delete, a tombstone).
        current: Cell,
    },
    /// The condition did not hold; `current` is the register's version at
    /// the operation's linearization point (to be shown through
    /// [`Cell::visible_value`] at the operation's `now`).
    NotApplied {
        /// The version the condition was checked against.
        current: Option<Cell>,
    },
    /// A serial read's answer.
    Read {
        /// The register's version.
        current: Option<Cell>,
    },
    /// Refused by a newer ballot before anything of this operation was
    /// accepted: nothing changed. Retry with a new proposer and
    /// [`BallotClock::next`](crate::BallotClock::next)`(now, Some(retry_after))`,
    /// after a randomized backoff.
    Contended {
        /// The newest ballot the refusals showed.
        retry_after: Ballot,
    },
    /// Too few replicas answered (or could be reached) for a quorum, and
    /// none refused: nothing changed. The shell answers `Unavailable` if it
    /// knew before sending, a timeout otherwise.
    NoQuorum {
        /// The round that failed.
        round: Round,
        /// Yes votes received.
        votes: usize,
        /// Votes needed.
        required: usize,
    },
    /// Indeterminate: the proposal may be chosen later (a minority, or an
    /// unknown number, of replicas accepted it). Never reported as "not
    /// applied" (CASSANDRA-6013); Cassandra's `CasWriteUnknownResultException`.
    Unknown {
        /// Replicas known to have accepted.
        accepted: usize,
        /// Accepts needed.
        required: usize,
    },
}

/// One member's answer in the current round.
#[derive(Clone, Debug)]
enum Vote {
    Yes,
    Refused(Ballot),
    Unreachable,
}

#[derive(Clone, Debug)]
enum Phase {
    Preparing {
        promises: BTreeMap<HostId, (Promise, Option<Cell>)>,
    },
    Accepting {
        proposal: Proposal,
        /// What to report once the proposal is chosen.
        answer: Outcome,
    },
    Done,
}

/// One CAS or serial read on one key (see the module docs).
#[derive(Clone, Debug)]
pub struct Proposer {
    ballot: Ballot,
    electorate: Electorate,
    operation: Operation,
    now: Timestamp,
    phase: Phase,
    votes: BTreeMap<HostId, Vote>,
    round_trips: u32,
}

impl Proposer {
    /// A proposer for `operation` under `ballot` (fresh from the node's
    /// [`BallotClock`](crate::BallotClock)), with `now` the coordinator's
    /// wall time (for TTLs and expiry); and its first action, the prepare.
    pub fn start(
        ballot: Ballot,
        electorate: Electorate,
        operation: Operation,
        now: Timestamp,
    ) -> (Proposer, Action) {
        let proposer = Proposer {
            ballot,
            electorate,
            operation,
            now,
            phase: Phase::Preparing {
                promises: BTreeMap::new(),
            },
            votes: BTreeMap::new(),
            round_trips: 1,
        };
        (proposer, Action::Broadcast(Request::Prepare(ballot)))
    }

    /// This proposer's ballot.
    pub fn ballot(&self) -> Ballot {
        self.ballot
    }

    /// The electorate it counts votes in.
    pub fn electorate(&self) -> &Electorate {
        &self.electorate
    }

    /// Rounds broadcast so far (1 or 2): an uncontended CAS takes 2, a serial
    /// read or a failed condition with nothing in progress 1.
    pub fn round_trips(&self) -> u32 {
        self.round_trips
    }

    /// Whether the outcome was reported.
    pub fn is_done(&self) -> bool {
        matches!(self.phase, Phase::Done)
    }

    /// Feeds one event; returns the actions to carry out, in order.
    pub fn step(&mut self, event: Event) -> Vec<Action> {
        match (&mut self.phase, event) {
            (Phase::Done, _) => Vec::new(),
            (
                Phase::Preparing { promises },
                Event::Promised {
                    from,
                    promise,
                    data,
                },
            ) => {
                if !self.electorate.contains(from) || self.votes.contains_key(&from) {
                    return Vec::new();
                }
                self.votes.insert(from, Vote::Yes);
                promises.insert(from, (promise, data));
                self.after_vote(Round::Prepare)
            }
            (Phase::Accepting { .. }, Event::Accepted { from }) => {
                self.vote(from, Vote::Yes, Round::Accept)
            }
            (Phase::Preparing { .. }, Event::PrepareRejected { from, promised }) => {
                self.vote(from, Vote::Refused(promised), Round::Prepare)
            }
            (Phase::Accepting { .. }, Event::AcceptRejected { from, promised }) => {
                self.vote(from, Vote::Refused(promised), Round::Accept)
            }
            (Phase::Preparing { .. }, Event::Unreachable { from }) => {
                self.vote(from, Vote::Unreachable, Round::Prepare)
            }
            (Phase::Accepting { .. }, Event::Unreachable { from }) => {
                self.vote(from, Vote::Unreachable, Round::Accept)
            }
            (Phase::Preparing { .. }, Event::Timeout) => self.fail(Round::Prepare),
            (Phase::Accepting { .. }, Event::Timeout) => {
                if !self.proposing_own_cell() {
                    return self.fail(Round::Accept);
                }
                let accepted = self.count(|vote| matches!(vote, Vote::Yes));
                self.finish(Outcome::Unknown {
                    accepted,
                    required: self.electorate.quorum(),
                })
            }
            // A reply to the other round (late or misrouted): ignored.
            (Phase::Preparing { .. } | Phase::Accepting { .. }, _) => Vec::new(),
        }
    }

    fn vote(&mut self, from: HostId, vote: Vote, round: Round) -> Vec<Action> {
        if !self.electorate.contains(from) || self.votes.contains_key(&from) {
            return Vec::new();
        }
        self.votes.insert(from, vote);
        self.after_vote(round)
    }

    /// Whether the current round proposes this operation's own new cell
    /// (it applies), rather than finishing an earlier proposal unchanged.
    fn proposing_own_cell(&self) -> bool {
        matches!(
            self.phase,
            Phase::Accepting {
                answer: Outcome::Applied { .. },
                ..
            }
        )
    }

    fn count(&self, which: impl Fn(&Vote) -> bool) -> usize {
        self.votes.values().filter(|vote| which(vote)).count()
    }

    fn newest_refusal(&self) -> Option<Ballot> {
        self.votes
            .values()
            .filter_map(|vote| match vote {
                Vote::Refused(ballot) => Some(*ballot),
                Vote::Yes | Vote::Unreachable => None,
            })
            .max()
    }

    /// Decides the round if the votes so far allow it.
    fn after_vote(&mut self, round: Round) -> Vec<Action> {
        let quorum = self.electorate.quorum();
        let yes = self.count(|vote| matches!(vote, Vote::Yes));
        if yes >= quorum {
            return match round {
                Round::Prepare => self.decide(),
                Round::Accept => self.chosen(),
            };
        }
        let no = self.votes.len() - yes;
        let possible = self.electorate.len() - no;
        if possible >= quorum {
            return Vec::new();
        }
        match round {
            Round::Prepare => self.fail(Round::Prepare),
            // Finishing another operation's proposal failed: this one's
            // cell was never proposed, so it certainly did not apply.
            Round::Accept if !self.proposing_own_cell() => self.fail(Round::Accept),
            Round::Accept if yes > 0 => self.finish(Outcome::Unknown {
                accepted: yes,
                required: quorum,
            }),
            // Some member has not answered: it may have accepted.
            Round::Accept if self.votes.len() < self.electorate.len() => Vec::new(),
            Round::Accept => self.fail(Round::Accept),
        }
    }

    /// Ends a round that certainly changed nothing.
    fn fail(&mut self, round: Round) -> Vec<Action> {
        let outcome = match self.newest_refusal() {
            Some(retry_after) => Outcome::Contended { retry_after },
            None => Outcome::NoQuorum {
                round,
                votes: self.count(|vote| matches!(vote, Vote::Yes)),
                required: self.electorate.quorum(),
            },
        };
        self.finish(outcome)
    }

    fn finish(&mut self, outcome: Outcome) -> Vec<Action> {
        self.phase = Phase::Done;
        vec![Action::Done(outcome)]
    }

    /// A quorum promised: read the register, evaluate, and propose or answer.
    fn decide(&mut self) -> Vec<Action> {
        let Phase::Preparing { promises } = std::mem::replace(&mut self.phase, Phase::Done) else {
            return Vec::new();
        };
        let newest_commit = promises.values().filter_map(|(p, _)| p.committed).max();
        // The newest accepted proposal is in progress unless a commit at
        // least as new is known: then it was chosen and its cell (or a newer
        // one built on it) is in the committing replica's data.
        let in_progress = promises
            .values()
            .filter_map(|(p, _)| p.accepted.as_ref())
            .max_by_key(|p| p.ballot)
            .filter(|p| newest_commit.is_none_or(|c| p.ballot > c))
            .and_then(|p| p.cell.clone());
        let current = promises
            .into_values()
            .filter_map(|(_, data)| data)
            .chain(in_progress.clone())
            .reduce(Cell::reconcile);
        let answer = |current: Option<Cell>, read: bool| {
            if read {
                Outcome::Read { current }
            } else {
                Outcome::NotApplied { current }
            }
        };
        let read = self.operation.is_read();
        if self.operation == Operation::Repair {
            return self.repair(current, in_progress.is_some());
        }
        let (cell, answer) = match (
            self.operation
                .apply(current.as_ref(), self.ballot, self.now),
            in_progress,
        ) {
            (Some(new), _) => (new.clone(), Outcome::Applied { current: new }),
            (None, Some(unfinished)) => (unfinished, answer(current, read)),
            (None, None) => return self.finish(answer(current, read)),
        };
        self.propose(cell, answer)
    }

    /// A repair's quorum promised (see `gc.rs`): with a proposal in
    /// progress, propose the current version (the in-progress cell merged
    /// with the quorum's data) and commit it once chosen; with none, commit
    /// the current version under this ballot at once.
    fn repair(&mut self, current: Option<Cell>, in_progress: bool) -> Vec<Action> {
        let answer = Outcome::Read {
            current: current.clone(),
        };
        match current {
            Some(cell) if in_progress => self.propose(cell, answer),
            cell => {
                let proposal = Proposal {
                    ballot: self.ballot,
                    cell,
                };
                self.phase = Phase::Done;
                vec![Action::Commit(proposal), Action::Done(answer)]
            }
        }
    }

    /// Starts round 2: `cell` proposed under this ballot, `answer` given
    /// once it is chosen.
    fn propose(&mut self, cell: Cell, answer: Outcome) -> Vec<Action> {
        let proposal = Proposal {
            ballot: self.ballot,
            cell: Some(cell),
        };
        self.phase = Phase::Accepting {
            proposal: proposal.clone(),
            answer,
        };
        self.votes.clear();
        self.round_trips += 1;
        vec![Action::Broadcast(Request::Accept(proposal))]
    }

    /// A quorum accepted: the proposal is chosen.
    fn chosen(&mut self) -> Vec<Action> {
        match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Accepting { proposal, answer } => {
                vec![Action::Commit(proposal), Action::Done(answer)]
            }
            Phase::Preparing { .. } | Phase::Done => Vec::new(),
        }
    }
}
