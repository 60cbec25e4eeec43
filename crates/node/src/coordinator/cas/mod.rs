//! Lightweight transactions, coordinator side: a compare-and-set or a
//! serial read of one key, run as per-key Paxos among the key's replicas.
//!
//! The protocol is `ringstore_paxos`'s (its essay says why it is safe and
//! why an uncontended compare-and-set takes 2 round trips, a serial read
//! 1); its [`Proposer`] decides everything. This module is the shell:
//!
//! 1. **Queue.** The operation waits for the earlier ones on its key that
//!    this node coordinates ([`key_queue`]): rivals take turns instead of
//!    pre-empting each other's ballots. The wait counts against the
//!    operation's time (the write timeout); an operation still queued when
//!    it runs out is refused as contended, certainly not applied.
//! 2. **Place.** The key's natural and pending replicas from one snapshot
//!    of the view; the serial level picks the electorate among them
//!    ([`electorate`]). Too few of its members up for a quorum: refused
//!    before anything is sent (`UNAVAILABLE`, not applied).
//! 3. **Run** a proposer under a fresh ballot ([`round`]): prepares and
//!    accepts to every member, this node's own replica called directly
//!    ([`calls`]), each round given the write timeout.
//! 4. **Retry on contention.** A proposer refused by a newer ballot before
//!    anything of it was accepted ([`Outcome::Contended`]) changed nothing:
//!    the operation tries again with a ballot past the refusal, after a
//!    random backoff that grows with each attempt (at most 2^attempt ms,
//!    capped at 100 ms), until its time runs out (then `ABORTED`, not
//!    applied). Only a rival on another coordinator can cause it, since
//!    this node runs one operation per key at a time.
//! 5. **Commit** ([`commit`]): once a proposal is chosen, it goes to every
//!    replica in the background; the answer waits for the commit level's
//!    acks (none beyond a hint or this node's own replica at the default,
//!    `ANY`).
//!
//! # Outcomes and what the client is told
//! - applied / not applied (with the value checked against) / the value
//!   read: an answer;
//! - [`Outcome::NoQuorum`]: `UNAVAILABLE`, not applied;
//! - [`Outcome::Unknown`] (a minority or an unknown number of replicas may
//!   hold the proposal; a later round may finish it): `DEADLINE_EXCEEDED`,
//!   and the client must read with a serial read to learn the outcome;
//! - applied but the commit short of its level: `DEADLINE_EXCEEDED`, as
//!   unknown.
//!
//! A status that says "certainly not applied" carries the metadata entry
//! `x-ringstore-cas: not-applied` ([`crate::error::cas`]), so a client can
//! tell it from a transport failure of the same code.
//!
//! Paxos repair ([`repair`]) runs the same shell with
//! [`Operation::Repair`], then collects the replica's state under a floor.
//!
//! # Caveats
//! - Topology changes: a node asked to stream a range first finishes the
//!   proposals it holds unfinished in it ([`repair::finish_range`]), with
//!   the new replica voting as pending, so a version chosen by a quorum
//!   that included the leaving or losing replica is not left behind. What
//!   it cannot cover: a removed (dead) node's unfinished proposals, and a
//!   join that streams from another replica because the losing one is
//!   down (as for plain writes, the guarantee then rests on the replicas
//!   that remain).
//! - Queued operations on one key run one round each; batching them into
//!   one round (CASPaxos's trick) is future work.

mod calls;
mod commit;
mod electorate;
pub(crate) mod host;
pub mod key_queue;
pub(crate) mod repair;
mod round;

use std::sync::Arc;
use std::time::Duration;

use ringstore_paxos::{Operation, Outcome, Proposer, SerialConsistency};
use ringstore_replication::ConsistencyLevel;
use ringstore_storage::Cell;
// Tokio's clock: decisions on time follow a simulation's paused clock.
use tokio::time::Instant;

use crate::empty_ring;
use crate::error::{CasError, CasRound, Result};
use crate::schema::KeyspaceDef;

use self::calls::KeyRef;
use self::commit::Commit;
use super::replicas::{dc_of, write_candidates};

pub(crate) use host::CasHost;
pub use key_queue::CasQueue;

/// The longest backoff between two attempts of a contended operation.
const MAX_BACKOFF: Duration = Duration::from_millis(100);

/// One lightweight transaction, as the client asked for it.
#[derive(Clone, Debug)]
pub(crate) struct CasRequest {
    /// The keyspace.
    pub(crate) keyspace: KeyspaceDef,
    /// The key.
    pub(crate) key: Vec<u8>,
    /// What to do.
    pub(crate) operation: Operation,
    /// Who votes.
    pub(crate) serial: SerialConsistency,
    /// What the commit waits for.
    pub(crate) commit: ConsistencyLevel,
}

/// A lightweight transaction's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum CasAnswer {
    /// The condition held; this is the new version (a tombstone for a
    /// delete).
    Applied(Cell),
    /// The condition did not hold against this version.
    NotApplied(Option<Cell>),
    /// A serial read's version.
    Read(Option<Cell>),
}

/// Runs `request` (see the module docs).
pub(crate) async fn cas<H: CasHost>(context: &Arc<H>, request: CasRequest) -> Result<CasAnswer> {
    let started = Instant::now();
    let timeout = Duration::from_millis(context.write_timeout_ms());
    let give_up = started + timeout;
    let keyspace_id = request.keyspace.id;
    let queued = context.cas_queue().wait_turn(keyspace_id, &request.key);
    let Ok(_turn) = tokio::time::timeout(timeout, queued).await else {
        return Err(CasError::Contended {
            attempts: 0,
            waited_ms: millis(started.elapsed()),
        }
        .into());
    };
    let key = KeyRef {
        keyspace: keyspace_id,
        key: Arc::from(request.key.as_slice()),
    };
    let mut after = None;
    let mut attempts = 0u32;
    loop {
        attempts += 1;
        let view = context.view();
        empty_ring::refuse_while_starting(&view)?;
        let (natural, pending) =
            write_candidates(context.as_ref(), &view, &request.keyspace, &request.key)?;
        let dc = dc_of(context.as_ref());
        let (electorate, alive) =
            electorate::electorate(request.serial, &dc, context.host_id(), &natural, &pending)?;
        if alive < electorate.quorum() {
            return Err(CasError::Unavailable {
                level: request.serial.name(),
                alive,
                members: electorate.len(),
                required: electorate.quorum(),
            }
            .into());
        }
        let commit_to = Commit {
            keyspace: request.keyspace.clone(),
            natural,
            pending,
            level: request.commit,
            dc,
        };
        let ballot = context.next_ballot(after);
        let (proposer, first) =
            Proposer::start(ballot, electorate, request.operation.clone(), context.now());
        let is_up = |host| view.is_up(host);
        let ended = round::run(context, &key, proposer, first, is_up, &commit_to, timeout).await;
        tracing::trace!(round_trips = ended.round_trips, outcome = ?ended.outcome, "paxos round");
        let answer = match ended.outcome {
            Outcome::Applied { current } => CasAnswer::Applied(current),
            Outcome::NotApplied { current } => CasAnswer::NotApplied(current),
            Outcome::Read { current } => CasAnswer::Read(current),
            Outcome::Contended { retry_after } => {
                if Instant::now() >= give_up {
                    return Err(CasError::Contended {
                        attempts,
                        waited_ms: millis(started.elapsed()),
                    }
                    .into());
                }
                after = Some(retry_after);
                tokio::time::sleep(backoff(attempts)).await;
                continue;
            }
            Outcome::NoQuorum {
                round,
                votes,
                required,
            } => {
                let round = match round {
                    ringstore_paxos::Round::Prepare => CasRound::Prepare,
                    ringstore_paxos::Round::Accept => CasRound::Accept,
                };
                return Err(CasError::NoQuorum {
                    round,
                    votes,
                    required,
                }
                .into());
            }
            Outcome::Unknown { accepted, required } => {
                return Err(CasError::Unknown { accepted, required }.into());
            }
        };
        if let Some(commit) = ended.commit {
            // The sender never drops without an answer but on shutdown;
            // then the proposal is still chosen: unknown to the client.
            commit.await.unwrap_or_else(|_| {
                Err(CasError::CommitShort {
                    level: request.commit,
                    acked: 0,
                    required: 1,
                }
                .into())
            })?;
        }
        return Ok(answer);
    }
}

/// A random wait before attempt `attempts + 1`: up to 2^attempts ms, at
/// most [`MAX_BACKOFF`].
fn backoff(attempts: u32) -> Duration {
    let ceiling = Duration::from_millis(1u64 << attempts.min(16)).min(MAX_BACKOFF);
    let span = u64::try_from(ceiling.as_micros()).unwrap_or(u64::MAX);
    let micros = rand::random::<u64>() % (span + 1);
    Duration::from_micros(micros)
}

fn millis(elapsed: Duration) -> u64 {
    u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
}
