//! Per-key Paxos: the core of linearizable compare-and-set, without the I/O.
//!
//! Each key is one register, replicated CASPaxos-style (Rystsov, 2018): a
//! Paxos round does not choose a log entry but the register's next whole
//! version, computed from the version the round found. The semantics are
//! Cassandra's lightweight transactions (`IF NOT EXISTS`, `IF value = …`,
//! `SERIAL` reads, `SERIAL`/`LOCAL_SERIAL`, a commit consistency level),
//! with the round trips of Cassandra 4.1's Paxos v2: an uncontended CAS takes
//! 2 round trips to a quorum, a serial read 1, and the commit goes in the
//! background.
//!
//! This crate is pure and sans-IO: no sockets, no clock, no storage, no
//! runtime. The node's shell loads and stores acceptor state, moves
//! messages, reads the clock and applies committed cells; everything it
//! passes in is plain data.
//!
//! # Pieces
//! - [`Ballot`] and [`BallotClock`] (`ballot.rs`): ranks of proposal
//!   attempts, `(micros, tiebreak)`, issued strictly increasing per node.
//! - [`AcceptorState`] (`acceptor.rs`): one replica's state for one key
//!   (promise, accepted [`Proposal`], most recent commit) and the rules for
//!   [`prepare`](AcceptorState::prepare), [`accept`](AcceptorState::accept)
//!   and [`commit`](AcceptorState::commit), each returning a [`Step`]: the
//!   state to persist, then the reply. Its stored form (`state_codec.rs`)
//!   carries a format byte and a CRC-32.
//! - [`Operation`] and [`Expected`] (`operation.rs`): `PutIf`, `DeleteIf`,
//!   `SerialRead`, `Repair`; the condition and the new cell.
//! - [`Electorate`] and [`CommitTracker`] (`electorate.rs`): who votes, the
//!   quorum, the commit acks to wait for.
//! - [`SerialConsistency`] (`serial.rs`): `SERIAL` or `LOCAL_SERIAL`.
//! - Garbage collection (`gc.rs`): a replica's floor ballot
//!   ([`AcceptorState::floored`]), what it may purge under it
//!   ([`AcceptorState::purgeable`]), and the repair round
//!   ([`Operation::Repair`]) that makes state purgeable and puts the latest
//!   chosen version in every replica's data.
//! - [`Proposer`] (`proposer.rs`): one operation as a state machine:
//!   [`Event`]s in, [`Action`]s out, ending in an [`Outcome`].
//!
//! # The protocol
//! 1. **Prepare + read (1 RT).** The coordinator takes a ballot from its
//!    clock and broadcasts `Prepare(b)` to the electorate. A replica promises
//!    if `b` is newer than anything it promised or accepted, persists the
//!    promise, and answers with its accepted proposal, its most recent commit
//!    (MRC) ballot and its data cell for the key.
//! 2. **Evaluate.** With a quorum of promises: the newest accepted proposal
//!    is *in progress* if its ballot is newer than every MRC in the quorum;
//!    `current` is the last-write-wins merge ([`Cell::reconcile`](ringstore_cell::Cell::reconcile)) of the
//!    quorum's data cells and the in-progress cell. The operation is
//!    evaluated against `current` at the shell's `now` (an expired or
//!    tombstoned cell is absent).
//!    - It applies: the new cell is the value (with its TTL) or a tombstone,
//!      stamped `max(b.micros, current.timestamp + 1)`.
//!    - It does not apply (or is a read) and nothing is in progress: answer
//!      at once, `NotApplied`/`Read` with `current` (1 RT in all).
//!    - It does not apply but a proposal is in progress: re-propose its cell
//!      **unchanged**, original timestamp included (as Paxos v2 does), under
//!      `b`, then answer.
//! 3. **Accept (1 RT).** Broadcast `Accept(b, cell)`; a replica accepts if it
//!    promised nothing newer, persists, answers. A quorum of accepts chooses
//!    the cell.
//! 4. **Commit (background).** Every replica gets `Commit(b, cell)`, merges
//!    the cell into its data by last-write-wins and records `b` as its MRC.
//!    The client is answered when the cell is chosen, or after the commit
//!    level's acks ([`CommitTracker`]) if the shell's level asks for them.
//!
//! # Invariants and why they hold
//! - **One value per ballot.** A ballot is issued once (strictly increasing
//!   micros per node, a per-node tiebreak) and a proposer proposes one cell
//!   under it. Acceptors treat an equal ballot as not newer.
//! - **A chosen version is never lost or forked.** Any promise quorum at `b`
//!   meets every accept quorum of an earlier chosen ballot `c`, so some
//!   promiser accepted `c` or newer: the newest accepted proposal `p` seen
//!   is at least as new as the newest chosen one. Either `p` is in progress
//!   and its cell is merged into `current`, or a replica of the quorum
//!   committed a ballot at least `p`'s, and committed cells are in that
//!   replica's data. So `current` includes the latest chosen version, and
//!   the next chosen version is built from it (or is it, re-proposed).
//! - **Chosen versions win last-write-wins in ballot order.** A new cell is
//!   stamped past `current`, which holds the last chosen version; a
//!   re-proposed cell is an earlier chosen-or-pending version, itself newer
//!   than everything chosen before it. Replicas merging commits in any order
//!   converge on the newest chosen cell.
//! - **Superseding an in-progress proposal is safe.** When the operation
//!   applies while a proposal is in progress, the new cell is computed from
//!   `current`, which includes the in-progress cell: the state is the whole
//!   register, so proposing the new cell is the same as finishing the old
//!   one and then applying this operation. The old proposal's own operation
//!   has not completed (its proposer lacks a quorum of accepts, so it
//!   reports `Unknown` or is still waiting) and is linearized just before
//!   this one.
//! - **Answering in 1 RT is safe** (a serial read, or a failed condition,
//!   with nothing in progress). The answer's linearization point is the
//!   moment the quorum promised `b`. Afterwards no ballot older than `b` can
//!   gather an accept quorum (it would need a replica of this quorum). A
//!   value that a minority accepted, unseen by this quorum, can be chosen
//!   only later, by a newer proposer that finds it; its operation was still
//!   pending when this answer was given (it had no accept quorum), so it is
//!   linearized after it. Reads need no empty proposal (CASSANDRA-12126's
//!   fix in v1): finishing every in-progress proposal the quorum shows is
//!   what makes two reads agree.
//! - **Never "not applied" after a partial accept.** A proposal that some
//!   replica may hold can be finished by anyone: the outcome is then
//!   `Unknown` (CASSANDRA-6013). `Contended` (retry) only when every
//!   member refused or was unreachable in round 2, or in round 1, or when
//!   round 2 only finished another operation's proposal (this one's own
//!   effect was never proposed, so it is retried, never unknown).
//!
//! # What a replica must sync before it answers
//! The promise (prepare) and the accepted proposal (accept): the [`Step`]'s
//! `persist` is written durably — synced, not merely buffered — before the
//! reply leaves. A replica that forgets a promise can accept an older
//! ballot; one that forgets an accept can let a quorum lose a chosen value.
//! A commit's MRC need not be synced first: losing it only makes a later
//! round re-propose a value that is already chosen. The commit's cell is
//! applied to the data before the MRC is recorded.
//!
//! # Ballots and clocks
//! Ballot micros are the coordinator's clock, `max(now, last + 1, min)`,
//! where `min` is one past the newest ballot a refusal showed. Clocks decide
//! liveness only: a node running ahead wins ballots more often, and a node
//! behind catches up through refusals; no safety argument above uses time.
//! A ballot's micros reach a cell's timestamp only through
//! `max(b.micros, current.timestamp + 1)`, so a fast clock can push one
//! key's next CAS timestamps ahead, never other keys' or other writes'.
//!
//! # Mixing with plain writes
//! A plain (non-serial) write on a key is merged into replicas' data by
//! last-write-wins and is seen by the next round through the quorum's data
//! cells. Two rules keep it from being lost to Paxos: a new cell is stamped
//! past `current` (so a CAS that saw a plain write beats it), and a
//! re-proposal keeps its original timestamp (so a plain write made after a
//! CAS proposal is never overwritten when a later round finishes that older
//! proposal). A plain write that reached no quorum is otherwise outside the
//! guarantee, as in Cassandra: a round whose quorum misses it evaluates
//! without it, and it may then win or lose by timestamp alone.
//!
//! # Left to the shell
//! - Durability (above), a per-key lock around acceptor calls, and reading
//!   the data cell with the promise.
//! - Timers and deadlines ([`Event::Timeout`]), backoff between `Contended`
//!   retries (randomized, growing), and routing a key's CAS to one
//!   coordinator so rivals queue instead of racing.
//! - The commit: sending it to every replica, and waiting for the commit
//!   level's acks if it asks for any ([`CommitTracker`]).
//! - The electorate: natural plus pending replicas, from placement.
//!
//! # Caveats
//! - **Paxos state is collected only where a repair and a floor allow**
//!   (`gc.rs`): a replica that missed a repair's commit keeps its
//!   uncommitted state until a later repair reaches it.
//! - Reads and writes share one promise register, so concurrent serial
//!   reads of one key contend with each other (v2 keeps a separate read
//!   promise).
//! - One register per key: no multi-key or multi-row conditions.
//! - The proposer trusts a refusal in round 2 to mean "not accepted"; the
//!   shell must not retransmit an accept to a host (see `proposer.rs`).

#![deny(missing_docs)]

mod acceptor;
mod ballot;
mod electorate;
mod error;
mod gc;
mod operation;
mod proposer;
mod serial;
mod state_codec;

pub use acceptor::{AcceptReply, AcceptorState, PrepareReply, Promise, Proposal, Step};
pub use ballot::{Ballot, BallotClock};
pub use electorate::{CommitTracker, Electorate};
pub use error::{PaxosError, Result, StateDamage};
pub use operation::{Expected, Operation};
pub use proposer::{Action, Event, Outcome, Proposer, Request, Round};
pub use serial::SerialConsistency;
pub use state_codec::STATE_FORMAT;
