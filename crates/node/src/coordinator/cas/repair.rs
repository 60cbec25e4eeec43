//! Paxos repair of a keyspace, as `ringstore repair --paxos-only` runs it
//! on one node: finish what this replica holds unfinished, then collect
//! what its floor covers (`ringstore_paxos`'s `gc.rs` says why each step
//! is safe).
//!
//! 1. **Finish.** Every key whose acceptance this replica never saw
//!    committed ([`paxos::uncommitted`]) gets a repair round
//!    ([`Operation::Repair`]) at `SERIAL`, committed at `QUORUM`: what
//!    was in progress is finished, and the key's current version is
//!    committed under the round's ballot to every replica.
//! 2. **Floor and purge.** A ballot two write timeouts older than a fresh
//!    one becomes the keyspace's floor on this replica, durably (it only
//!    rises), and every state it covers whose acceptance is committed here
//!    is deleted ([`paxos::purge`]). The lag spares the compare-and-sets in
//!    flight, which a floor would refuse; the states of step 1's rounds are
//!    purged by the next run.
//!
//! Each node collects only its own replica's state: running it on every
//! node collects the cluster's.
//!
//! Every node runs it on its own every
//! `repair.paxos_repair_interval_seconds` ([`run_scheduled`]), in each
//! keyspace that holds Paxos state; a keyspace with none is skipped, so its
//! floor is not raised for nothing.
//!
//! A topology change runs step 1 alone ([`finish_range`]): a node asked to
//! stream a range (the leaving node of a decommission, the losing replica
//! of a join) first finishes its unfinished proposals of keys in that
//! range. The change's pending replica is in the electorate then, so the
//! rounds commit the latest chosen version to it directly: a version
//! chosen by a quorum that included the losing replica, and whose commit
//! never landed, is not left behind when that replica leaves the key's
//! electorate. A key whose round failed (replicas down,
//! contention) keeps its state and is counted; a later run finishes it.
//! A dead node cannot do this for the ranges it leaves, so a removenode or
//! replace asks every survivor of them to (`FinishProposals`, see
//! `topology/proposals.rs`).
//! A round that waits for a rival's turn on the key's queue does so as any
//! compare-and-set would.
//!
//! # Caveats
//! - Finding the unfinished keys walks the keyspace's whole Paxos state
//!   (it is keyed by key, not token): once per range streamed during a
//!   topology change. Cheap while `repair --paxos-only` keeps the state
//!   small; slow for millions of uncollected keys.
//! - Rounds run one key at a time.

use std::sync::Arc;
use std::time::Duration;

use ringstore_paxos::{Ballot, Operation, SerialConsistency};
use ringstore_placement::{Murmur3Partitioner, TokenRange};
use ringstore_replication::ConsistencyLevel;

use crate::error::Result;
use crate::paxos::{self, PurgeReport};
use crate::schema::KeyspaceDef;

use super::{CasHost, CasRequest, cas};

/// What a Paxos repair of one keyspace did on this node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct PaxosRepairReport {
    /// The keyspace.
    pub(crate) keyspace: String,
    /// Keys whose unfinished acceptance a round finished.
    pub(crate) finished: u64,
    /// Keys whose round failed; their state stays.
    pub(crate) failed: u64,
    /// The first failure's reason, if any.
    pub(crate) first_error: Option<String>,
    /// What the purge did.
    pub(crate) purge: PurgeReport,
}

/// Runs the Paxos repair of `keyspace` on this node (see the module docs).
pub(crate) async fn repair_keyspace<H: CasHost>(
    context: &Arc<H>,
    keyspace: &KeyspaceDef,
) -> Result<PaxosRepairReport> {
    let keys = paxos::uncommitted(context.paxos_replica(), keyspace.id)?;
    let (finished, failed, first_error) = finish(context, keyspace, keys).await;
    let floor = lagging_floor(context.next_ballot(None), context.write_timeout_ms());
    Ok(PaxosRepairReport {
        keyspace: keyspace.name.clone(),
        finished,
        failed,
        first_error,
        purge: paxos::purge(context.paxos_replica(), keyspace.id, floor).await?,
    })
}

/// How many write timeouts the floor stays behind the newest ballot.
const FLOOR_LAG_TIMEOUTS: i64 = 2;

/// The floor a repair sets: `newest` (a ballot newer than every round it
/// ran) moved back by [`FLOOR_LAG_TIMEOUTS`] write timeouts. A round still
/// running began within a timeout and carries a newer ballot, so the floor
/// does not refuse it (a floor at `newest` would turn every compare-and-set
/// in flight on the keyspace into a refused accept: an unknown outcome).
/// Any floor is safe; a state newer than this one is purged by a later run.
fn lagging_floor(newest: Ballot, write_timeout_ms: u64) -> Ballot {
    let lag = i64::try_from(write_timeout_ms)
        .unwrap_or(i64::MAX)
        .saturating_mul(1000 * FLOOR_LAG_TIMEOUTS);
    Ballot {
        micros: newest.micros.saturating_sub(lag),
        tiebreak: 0,
    }
}

/// Runs [`repair_keyspace`] every `every` (the first pass one interval
/// after start) in each keyspace `keyspaces` lists that holds Paxos state
/// on this node, until the node stops. A failure is logged and the pass
/// goes on to the next keyspace; what it left is tried again next time.
pub(crate) async fn run_scheduled<H: CasHost>(
    context: Arc<H>,
    every: Duration,
    keyspaces: impl Fn() -> Vec<KeyspaceDef>,
) {
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    loop {
        ticker.tick().await;
        for keyspace in keyspaces() {
            let holds_state = context
                .store()
                .paxos_page(keyspace.id, None, 1)
                .map(|page| !page.is_empty());
            if matches!(holds_state, Ok(false)) {
                continue;
            }
            match repair_keyspace(&context, &keyspace).await {
                Ok(report) if report.failed > 0 => tracing::warn!(
                    keyspace = %report.keyspace, finished = report.finished,
                    failed = report.failed, error = report.first_error.unwrap_or_default(),
                    purged = report.purge.purged,
                    "the scheduled Paxos repair could not finish every compare-and-set"
                ),
                Ok(report) if report.finished + report.purge.purged > 0 => tracing::info!(
                    keyspace = %report.keyspace, finished = report.finished,
                    purged = report.purge.purged, kept = report.purge.kept,
                    "scheduled Paxos repair"
                ),
                Ok(_) => {}
                Err(error) => tracing::warn!(
                    keyspace = %keyspace.name, %error, "the scheduled Paxos repair failed"
                ),
            }
        }
    }
}

/// Finishes this replica's unfinished proposals of keys in `range` (before
/// it streams the range, or when a removenode or replace asks; see the
/// module docs): how many rounds finished and failed. A failed round is
/// logged and counted, not returned: the stream goes on, and the key's
/// state stays for a later repair.
pub(crate) async fn finish_range<H: CasHost>(
    context: &Arc<H>,
    keyspace: &KeyspaceDef,
    range: TokenRange,
) -> Result<(u64, u64)> {
    let keys: Vec<Vec<u8>> = paxos::uncommitted(context.paxos_replica(), keyspace.id)?
        .into_iter()
        .filter(|key| Murmur3Partitioner::token(key).is_ok_and(|token| range.contains(token)))
        .collect();
    if keys.is_empty() {
        return Ok((0, 0));
    }
    let (finished, failed, first_error) = finish(context, keyspace, keys).await;
    if let Some(error) = first_error {
        tracing::warn!(
            keyspace = %keyspace.name, %range, finished, failed, %error,
            "could not finish every compare-and-set of a range"
        );
    } else {
        tracing::info!(keyspace = %keyspace.name, %range, finished, "finished the compare-and-sets of a range");
    }
    Ok((finished, failed))
}

/// One repair round per key: (finished, failed, the first failure).
async fn finish<H: CasHost>(
    context: &Arc<H>,
    keyspace: &KeyspaceDef,
    keys: Vec<Vec<u8>>,
) -> (u64, u64, Option<String>) {
    let (mut finished, mut failed, mut first_error) = (0, 0, None);
    for key in keys {
        let request = CasRequest {
            keyspace: keyspace.clone(),
            key,
            operation: Operation::Repair,
            serial: SerialConsistency::Serial,
            commit: ConsistencyLevel::Quorum,
        };
        match cas(context, request).await {
            Ok(_) => finished += 1,
            Err(error) => {
                tracing::debug!(keyspace = %keyspace.name, %error, "a Paxos repair round failed");
                failed += 1;
                first_error.get_or_insert_with(|| error.to_string());
            }
        }
    }
    (finished, failed, first_error)
}
