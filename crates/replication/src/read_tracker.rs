//! One read's state machine: digests, top-ups, reconciliation and the repairs to make.
//!
//! The node sends [`ReadPlan::requests`] (data from the closest replica,
//! digests from the next ones), then feeds every reply to a [`ReadTracker`]
//! and does what the returned [`ReadAction`] says:
//!
//! 1. **Digest round.** Once answers meet the level (per quota) and include
//!    data, their digests are compared. All equal: `Done` with that data.
//! 2. **Data round**, on a mismatch (Cassandra's "digest mismatch"): every
//!    replica that answered with a digest is asked for its data
//!    (`Contact` with [`Request::Data`]). As soon as the data answers meet
//!    the level (as Cassandra's data resolver blocks for the level's count,
//!    not for every replica asked), the cells are reconciled with
//!    [`Cell::reconcile`] (which needs no clock) and the read is `Done`:
//!    any read quorum holds the newest acknowledged write, so a replica
//!    asked and stalled does not hold the read up to its round timeout (the
//!    whole-cluster simulation found reads waiting 5 s on a replica that
//!    no longer received anything). The outcome carries the winner and the repairs:
//!    the winner, to write to every contacted replica known to hold something
//!    else — from its data, or from a digest that differs from the winner's.
//! 3. **Top-ups.** When a replica fails, enough spares are contacted that
//!    the replies still awaited can meet the level; when the node's round
//!    timer fires ([`ReadTracker::on_timeout`]), every outstanding replica is
//!    treated as slow (its late answer still counts) and spares are contacted
//!    in its place. A data request is re-sent elsewhere if the only one
//!    outstanding is slow or failed — to a spare, or else to a replica that
//!    answered with a digest.
//! 4. **Speculative retry.** A tracker built
//!    [`with_speculative_retry`](ReadTracker::with_speculative_retry) has a
//!    deadline ([`ReadTracker::next_deadline`]) while its digest round is
//!    unfinished. When the node's timer reaches it
//!    ([`ReadTracker::on_timer`]), one spare is contacted — for data if no
//!    data answer has come yet, else for a digest — in a DC whose quota the
//!    answers so far do not meet. Nobody is marked slow: the first answers
//!    that meet the level, whoever sends them, finish the read. It happens
//!    at most once per read, as Cassandra's `speculative_retry`, and not in
//!    the data round.
//! 5. **Damaged replicas.** A replica whose own copy of the cell does not
//!    read back ([`ReadTracker::on_damaged`]: its disk flipped a bit, its
//!    checksum caught it) is a replica fault, not a failed read: it counts
//!    as failed, so a spare is read in its place as for any failure, at
//!    every level, `ONE` included; and it is stale, so once the read is done
//!    its read repair writes the winner to it (it had no readable cell),
//!    replacing the damaged copy. Only when the level needs every replica
//!    of the key ([`ReadPlan::needs_every_replica`]: `ALL`) is there nobody
//!    to read instead, and nothing a live replica holds is missing from the
//!    read: then the damaged replica counts toward the level as a stale
//!    one, and since holders must meet the level, the blocking read repair
//!    waits until it has taken the winner. A damaged answer is never a data
//!    answer: a read with no data answer fails, it never answers "no cell"
//!    for a replica that could not read its cell.
//! 6. **Failure.** `Failed` when failures leave too few replicas that could
//!    still answer, when no data answer has come or can still come, or when
//!    a timeout finds nobody new to ask.
//!
//! The node restarts its round timer whenever it gets `Contact` from a reply
//! or a timeout (not from a speculation, which leaves the round as it was).
//! Once the
//! read is done, [`ReadTracker::read_repair`] hands over the blocking read
//! repair (writing the winner until enough replicas hold it) as a
//! [`ReadRepair`], the state machine of `read_repair.rs`.
//!
//! # Invariants
//! - The winner is the `reconcile` fold of every data answer received, or
//!   `None` if no answer had a cell. With no mismatch all data answers are
//!   equal, so that fold is any of them.
//! - Repairs go to exactly the contacted replicas whose answer (data, or a
//!   digest) shows a cell other than the winner, and to the damaged ones;
//!   none when the winner is `None`. Each repair carries the winner.
//! - A read is `Done` only with at least one data answer.
//! - A replica is asked at most once per kind; each answer counts once;
//!   answers from hosts never asked, and after the read finished, are ignored.
//!
//! # Caveats
//! - Without a spare (a level that needs every replica, or spares down), a
//!   speculation has nobody to ask and a slow replica still costs a round.
//! - A replica that answers a data request with a digest keeps its digest
//!   (for repair decisions) but its data is never gathered.
//! - Replicas that failed or stayed silent in the data round are not repaired
//!   unless their digest showed a difference; anti-entropy repair covers the rest.

use std::collections::VecDeque;
use std::fmt;
use std::time::Instant;

use ringstore_cell::{Cell, Timestamp};
use ringstore_placement::{Datacenter, HostId};

use crate::consistency::ConsistencyLevel;
use crate::digest::Digest;
use crate::plan::ReadPlan;
use crate::read_repair::ReadRepair;
use crate::requirement::Requirement;

/// What a replica is asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Request {
    /// The full cell (or its absence).
    Data,
    /// Only the [`Digest`] of the cell.
    Digest,
}

/// What the node must do after feeding the tracker an event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadAction {
    /// Nothing; wait for more replies or the timer.
    Wait,
    /// Send these requests (a top-up or the data round), and restart the round timer.
    Contact(Vec<(HostId, Request)>),
    /// The read succeeded; answer the client (after any blocking read repair).
    Done(ReadOutcome),
    /// The read failed; answer the client with this error.
    Failed(ReadFailure),
}

/// A successful read's result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadOutcome {
    /// The reconciled cell, possibly a tombstone or expired; `None` if no
    /// replica that answered with data had one.
    pub winner: Option<Cell>,
    /// `(replica, winner)` for every contacted replica known to hold
    /// something other than the winner, in contact order.
    pub repairs: Vec<(HostId, Cell)>,
    /// Whether digests disagreed and a data round ran.
    pub digest_mismatch: bool,
}

impl ReadOutcome {
    /// The value the client sees at `now`: `None` if there is no winner, or
    /// it is a tombstone or expired.
    pub fn visible_value(&self, now: Timestamp) -> Option<&[u8]> {
        self.winner
            .as_ref()
            .and_then(|cell| cell.visible_value(now))
    }
}

/// A read that could not gather enough answers. Cassandra's
/// `ReadTimeoutException` (`timed_out`) or `ReadFailureException`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ReadFailure {
    /// The level asked for.
    pub level: ConsistencyLevel,
    /// Answers needed.
    pub required: u32,
    /// Answers that counted toward the level (each DC's capped at its
    /// quota); in the data round, data answers only.
    pub received: u32,
    /// Whether the read ran out of time (rather than of live replicas).
    pub timed_out: bool,
    /// Replicas that answered that their copy does not read back (see
    /// [`ReadTracker::on_damaged`]).
    pub damaged: u32,
}

impl fmt::Display for ReadFailure {
    /// `read timed out at consistency level QUORUM: 1 of 2 required responses received`,
    /// then `; 1 replica's copy does not read back` when one did not.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = if self.timed_out {
            "timed out"
        } else {
            "failed"
        };
        write!(
            f,
            "read {what} at consistency level {}: {} of {} required responses received",
            self.level, self.received, self.required
        )?;
        match self.damaged {
            0 => Ok(()),
            1 => write!(f, "; 1 replica's copy does not read back"),
            n => write!(f, "; {n} replicas' copies do not read back"),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Answer {
    Waiting,
    Data(Option<Cell>),
    Digest(Digest),
    Failed,
    /// Its copy does not read back (see the module docs).
    Damaged,
}

#[derive(Clone, Debug)]
struct Contacted {
    host: HostId,
    dc: Datacenter,
    asked: Request,
    answer: Answer,
    /// Still waiting when a round timed out; its answer is welcome but no
    /// longer expected.
    slow: bool,
    /// The digest of the last answer (data or digest), kept across re-asks.
    digest: Option<Digest>,
}

impl Contacted {
    fn new(host: HostId, dc: Datacenter, asked: Request) -> Contacted {
        Contacted {
            host,
            dc,
            asked,
            answer: Answer::Waiting,
            slow: false,
            digest: None,
        }
    }

    fn expected(&self) -> bool {
        self.answer == Answer::Waiting && !self.slow
    }

    fn reask_for_data(&mut self) -> (HostId, Request) {
        self.asked = Request::Data;
        self.answer = Answer::Waiting;
        self.slow = false;
        (self.host, Request::Data)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Digests,
    Data,
    Finished,
}

/// The state of one read. Built from its [`ReadPlan`].
#[derive(Clone, Debug)]
pub struct ReadTracker {
    level: ConsistencyLevel,
    requirement: Requirement,
    contacted: Vec<Contacted>,
    spares: VecDeque<(HostId, Datacenter)>,
    phase: Phase,
    /// When to contact one more replica, until it is done (then `None`).
    speculate_at: Option<Instant>,
    /// Whether a damaged replica counts toward the level (as a stale one):
    /// only when the level needs every replica.
    damaged_counts: bool,
}

impl ReadTracker {
    /// A tracker for `plan`'s first requests ([`ReadPlan::requests`], which
    /// the node sends).
    pub fn new(plan: &ReadPlan) -> ReadTracker {
        let contacted = plan
            .requests()
            .into_iter()
            .map(|(host, asked)| Contacted::new(host, plan.dc_of(host).clone(), asked))
            .collect();
        let spares = plan
            .spares()
            .iter()
            .map(|&host| (host, plan.dc_of(host).clone()))
            .collect();
        ReadTracker {
            level: plan.level(),
            requirement: plan.requirement().clone(),
            contacted,
            spares,
            phase: Phase::Digests,
            speculate_at: None,
            damaged_counts: plan.needs_every_replica(),
        }
    }

    /// The same tracker, speculating at `at` (see the module docs): the node
    /// computes it as the read's start plus its keyspace's
    /// [`SpeculativeRetry::delay`](crate::SpeculativeRetry::delay).
    pub fn with_speculative_retry(mut self, at: Instant) -> ReadTracker {
        self.speculate_at = Some(at);
        self
    }

    /// When the node should call [`ReadTracker::on_timer`] next: the
    /// speculation deadline while it is pending and the digest round runs;
    /// `None` when there is nothing to wait for but replies and the round
    /// timer.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.speculate_at.filter(|_| self.phase == Phase::Digests)
    }

    /// The node's timer fired at `now`: if the speculation deadline has
    /// passed, contact one spare (`Contact` with one request); otherwise,
    /// or with no spare to ask, `Wait`.
    pub fn on_timer(&mut self, now: Instant) -> ReadAction {
        match self.next_deadline() {
            Some(at) if now >= at => {
                self.speculate_at = None;
                self.speculate()
            }
            _ => ReadAction::Wait,
        }
    }

    /// `host` answered with its cell (`None`: it has none).
    pub fn on_data(&mut self, host: HostId, cell: Option<Cell>) -> ReadAction {
        let Some(replica) = self.waiting(host) else {
            return ReadAction::Wait;
        };
        replica.digest = Some(Digest::of(cell.as_ref()));
        replica.answer = Answer::Data(cell);
        self.advance(false)
    }

    /// `host` answered with the digest of its cell.
    pub fn on_digest(&mut self, host: HostId, digest: Digest) -> ReadAction {
        let Some(replica) = self.waiting(host) else {
            return ReadAction::Wait;
        };
        replica.digest = Some(digest);
        replica.answer = Answer::Digest(digest);
        self.advance(false)
    }

    /// `host` reported an error, or the node gave up on it.
    pub fn on_failure(&mut self, host: HostId) -> ReadAction {
        let Some(replica) = self.waiting(host) else {
            return ReadAction::Wait;
        };
        replica.answer = Answer::Failed;
        self.advance(false)
    }

    /// `host` answered that its own copy of the cell does not read back (a
    /// damaged cell): failed for this read, and to be repaired with the
    /// winner (see the module docs).
    pub fn on_damaged(&mut self, host: HostId) -> ReadAction {
        let Some(replica) = self.waiting(host) else {
            return ReadAction::Wait;
        };
        replica.answer = Answer::Damaged;
        self.advance(false)
    }

    /// The node's round timer fired: outstanding replicas become slow, and
    /// spares replace them; with nobody new to ask, the read fails.
    pub fn on_timeout(&mut self) -> ReadAction {
        if self.phase == Phase::Finished {
            return ReadAction::Wait;
        }
        for replica in &mut self.contacted {
            if replica.answer == Answer::Waiting {
                replica.slow = true;
            }
        }
        self.advance(true)
    }

    /// Whether the read returned `Done` or `Failed`; later events are ignored.
    pub fn is_finished(&self) -> bool {
        self.phase == Phase::Finished
    }

    /// The level asked for.
    pub fn level(&self) -> ConsistencyLevel {
        self.level
    }

    /// Answers needed.
    pub fn required(&self) -> u32 {
        self.requirement.total()
    }

    fn waiting(&mut self, host: HostId) -> Option<&mut Contacted> {
        if self.phase == Phase::Finished {
            return None;
        }
        self.contacted
            .iter_mut()
            .find(|r| r.host == host && r.answer == Answer::Waiting)
    }

    /// Whether an answer (or the wait for one) can count toward the level in
    /// the current round: in the data round, digests no longer do.
    fn counts(&self, replica: &Contacted, include_slow: bool) -> bool {
        match replica.answer {
            Answer::Waiting => include_slow || !replica.slow,
            Answer::Data(_) => true,
            Answer::Digest(_) => self.phase == Phase::Digests,
            Answer::Failed => false,
            Answer::Damaged => self.damaged_counts,
        }
    }

    fn answered(&self, replica: &Contacted) -> bool {
        replica.answer != Answer::Waiting && self.counts(replica, false)
    }

    fn answered_dcs(&self) -> impl Iterator<Item = &Datacenter> {
        self.contacted
            .iter()
            .filter(|r| self.answered(r))
            .map(|r| &r.dc)
    }

    fn advance(&mut self, timed_out: bool) -> ReadAction {
        let mut contacts = Vec::new();
        if self.phase == Phase::Digests && self.digest_round_complete() {
            let digests: Vec<_> = self
                .contacted
                .iter()
                .filter_map(|r| match r.answer {
                    Answer::Data(_) | Answer::Digest(_) => r.digest,
                    _ => None,
                })
                .collect();
            if digests.windows(2).all(|pair| pair[0] == pair[1]) {
                return self.finish_done(false);
            }
            self.phase = Phase::Data;
        }
        if self.phase == Phase::Data {
            // Data answers that meet the level finish the read, whoever is
            // still expected: any read quorum holds the newest acknowledged
            // write, and a replica asked and stalled must not hold it up.
            if self.requirement.is_met_by(self.answered_dcs()) {
                return self.finish_done(true);
            }
            for replica in &mut self.contacted {
                if replica.asked == Request::Digest && matches!(replica.answer, Answer::Digest(_)) {
                    contacts.push(replica.reask_for_data());
                }
            }
        }
        contacts.extend(self.top_up());
        let could_answer = self
            .contacted
            .iter()
            .filter(|r| self.counts(r, true))
            .map(|r| &r.dc);
        // Data, or someone who may yet send it (a replica still waited for
        // can be asked for data once it answers): damaged replicas counting
        // toward the level must not finish a read that has none.
        let data_possible = self
            .contacted
            .iter()
            .any(|r| matches!(r.answer, Answer::Data(_) | Answer::Waiting));
        if !self.requirement.is_met_by(could_answer)
            || !data_possible
            || (timed_out && contacts.is_empty())
        {
            return self.finish_failed(timed_out);
        }
        if contacts.is_empty() {
            ReadAction::Wait
        } else {
            ReadAction::Contact(contacts)
        }
    }

    /// Contacts the first spare that counts toward a quota the answers so
    /// far leave short: for data if none came yet, else for a digest.
    fn speculate(&mut self) -> ReadAction {
        let tally = self.requirement.tally(self.answered_dcs());
        let quotas: Vec<u32> = self.requirement.quotas().iter().map(|&(_, n)| n).collect();
        let short = |dc: &Datacenter| {
            self.requirement
                .quota_of(dc)
                .is_some_and(|q| tally[q] < quotas[q])
        };
        let Some(index) = self.spares.iter().position(|(_, dc)| short(dc)) else {
            return ReadAction::Wait;
        };
        let (host, dc) = self.spares.remove(index).expect("index is in bounds");
        let has_data = self
            .contacted
            .iter()
            .any(|r| matches!(r.answer, Answer::Data(_)));
        let asked = if has_data {
            Request::Digest
        } else {
            Request::Data
        };
        self.contacted.push(Contacted::new(host, dc, asked));
        ReadAction::Contact(vec![(host, asked)])
    }

    /// Digest round: enough answers, data among them.
    fn digest_round_complete(&self) -> bool {
        let has_data = self
            .contacted
            .iter()
            .any(|r| matches!(r.answer, Answer::Data(_)));
        has_data && self.requirement.is_met_by(self.answered_dcs())
    }

    /// Contacts spares until the answers received and expected meet every
    /// quota, and makes sure a data answer is received or expected.
    fn top_up(&mut self) -> Vec<(HostId, Request)> {
        let mut tally = self.requirement.tally(
            self.contacted
                .iter()
                .filter(|r| self.counts(r, false))
                .map(|r| &r.dc),
        );
        let quotas: Vec<u32> = self.requirement.quotas().iter().map(|&(_, n)| n).collect();
        let mut need_data = match self.phase {
            Phase::Digests => !self.contacted.iter().any(|r| {
                matches!(r.answer, Answer::Data(_)) || (r.asked == Request::Data && r.expected())
            }),
            Phase::Data | Phase::Finished => false,
        };
        let all_data = self.phase == Phase::Data;
        let mut contacts = Vec::new();
        let mut index = 0;
        while index < self.spares.len() {
            let quota = self.requirement.quota_of(&self.spares[index].1);
            match quota {
                Some(q) if tally[q] < quotas[q] => {
                    tally[q] += 1;
                    let (host, dc) = self.spares.remove(index).expect("index is in bounds");
                    let asked = if all_data || need_data {
                        Request::Data
                    } else {
                        Request::Digest
                    };
                    need_data = false;
                    self.contacted.push(Contacted::new(host, dc, asked));
                    contacts.push((host, asked));
                }
                _ => index += 1,
            }
        }
        if need_data {
            if let Some((host, dc)) = self.spares.pop_front() {
                self.contacted.push(Contacted::new(host, dc, Request::Data));
                contacts.push((host, Request::Data));
            } else if let Some(replica) = self
                .contacted
                .iter_mut()
                .find(|r| matches!(r.answer, Answer::Digest(_)))
            {
                contacts.push(replica.reask_for_data());
            }
        }
        contacts
    }

    /// The reconcile fold of every data answer received.
    fn winner(&self) -> Option<Cell> {
        self.contacted
            .iter()
            .filter_map(|r| match &r.answer {
                Answer::Data(cell) => cell.clone(),
                _ => None,
            })
            .reduce(Cell::reconcile)
    }

    /// The contacted replicas known to hold something other than `winner`:
    /// damaged ones included (what they hold does not read back).
    fn stale<'a>(&'a self, winner: &'a Cell) -> impl Iterator<Item = &'a Contacted> + 'a {
        let winner_digest = Digest::of(Some(winner));
        self.contacted.iter().filter(move |r| match &r.answer {
            Answer::Data(cell) => cell.as_ref() != Some(winner),
            Answer::Damaged => true,
            _ => r.digest.is_some_and(|d| d != winner_digest),
        })
    }

    /// The blocking read repair a finished read needs, or `None` if it needs
    /// none (it failed, found no cell, or every answer held the winner).
    ///
    /// Holders are the contacted replicas whose answer (data, or a digest)
    /// shows the winner; stale ones are those known to hold something else,
    /// damaged ones included; spares are the replicas never contacted, then
    /// the contacted ones whose answer failed or never came.
    pub fn read_repair(&self) -> Option<ReadRepair> {
        if self.phase != Phase::Finished {
            return None;
        }
        let winner = self.winner()?;
        let located = |r: &Contacted| (r.host, r.dc.clone());
        let stale: Vec<_> = self.stale(&winner).map(located).collect();
        if stale.is_empty() {
            return None;
        }
        let winner_digest = Digest::of(Some(&winner));
        let holders = self
            .contacted
            .iter()
            .filter(|r| r.digest == Some(winner_digest))
            .map(located)
            .collect();
        let unanswered = self
            .contacted
            .iter()
            .filter(|r| r.digest.is_none() && r.answer != Answer::Damaged)
            .map(located);
        let spares = self.spares.iter().cloned().chain(unanswered).collect();
        Some(ReadRepair::new(
            self.level,
            self.requirement.clone(),
            winner,
            holders,
            stale,
            spares,
        ))
    }

    fn finish_done(&mut self, digest_mismatch: bool) -> ReadAction {
        self.phase = Phase::Finished;
        let winner = self.winner();
        let repairs = match &winner {
            None => Vec::new(),
            Some(w) => self.stale(w).map(|r| (r.host, w.clone())).collect(),
        };
        ReadAction::Done(ReadOutcome {
            winner,
            repairs,
            digest_mismatch,
        })
    }

    fn finish_failed(&mut self, timed_out: bool) -> ReadAction {
        // A damaged replica counting toward the level is no response.
        let received = self.requirement.credited(
            self.contacted
                .iter()
                .filter(|r| self.answered(r) && r.answer != Answer::Damaged)
                .map(|r| &r.dc),
        );
        self.phase = Phase::Finished;
        let damaged = self
            .contacted
            .iter()
            .filter(|r| r.answer == Answer::Damaged)
            .count() as u32;
        ReadAction::Failed(ReadFailure {
            level: self.level,
            required: self.requirement.total(),
            received,
            timed_out,
            damaged,
        })
    }
}

#[cfg(test)]
#[path = "read_tracker_tests.rs"]
mod tests;
