//! The commit of a chosen proposal: sent to every replica of the key, in
//! every data center, pending ones included (whatever the serial level),
//! and waited for only as far as the commit consistency level asks.
//!
//! It is a write like any other, and shares the write path's rules
//! (`write.rs`): each send runs in a task of its own that outlives the
//! request, a replica known down or that fails gets a hint of the cell
//! (which carries the cell, not the commit: the replica then holds the
//! value without the ballot as its most recent commit, which only makes a
//! later round re-propose a value already chosen), and at `ANY` a stored
//! hint counts. The proposal is chosen before any of this starts, so a
//! commit that falls short of its level is no failure of the operation:
//! it answers "applied, commit short" ([`CasError::CommitShort`]), which a
//! client must treat as unknown.

use std::sync::Arc;
use std::time::Duration;

use ringstore_paxos::Proposal;
use ringstore_placement::{Datacenter, HostId};
use ringstore_replication::{ConsistencyLevel, ReplicaCandidate, WriteTracker, plan_write};
use tokio::sync::{mpsc, oneshot};

use crate::error::{CasError, Result};
use crate::schema::KeyspaceDef;

use super::super::write::{ReplicaWrite, Tracked, WriteOutcome, store_hint, track};
use super::calls::{self, KeyRef};
use super::host::CasHost;

/// Where a commit goes and what it waits for.
#[derive(Clone, Debug)]
pub(super) struct Commit {
    /// The key's keyspace.
    pub(super) keyspace: KeyspaceDef,
    /// The key's natural replicas, all DCs.
    pub(super) natural: Vec<ReplicaCandidate>,
    /// Its pending replicas, all DCs.
    pub(super) pending: Vec<ReplicaCandidate>,
    /// The commit consistency level.
    pub(super) level: ConsistencyLevel,
    /// This node's data center, for the `LOCAL_*` levels.
    pub(super) dc: Datacenter,
}

/// Starts committing `proposal` (see the module docs); the receiver has
/// the commit level's result, within `timeout`.
pub(super) fn start<H: CasHost>(
    context: &Arc<H>,
    key: &KeyRef,
    to: &Commit,
    proposal: Proposal,
    timeout: Duration,
) -> oneshot::Receiver<Result<()>> {
    let (answer, result) = oneshot::channel();
    let Some(cell) = proposal.cell.clone() else {
        // An empty proposal changes nothing (this build makes none).
        let _ = answer.send(Ok(()));
        return result;
    };
    let write = Arc::new(ReplicaWrite {
        keyspace: to.keyspace.clone(),
        key: key.key.to_vec(),
        cell,
    });
    let (outcomes, mut replies) = mpsc::unbounded_channel();
    for replica in to.natural.iter().chain(&to.pending) {
        if replica.alive || replica.host == context.host_id() {
            tokio::spawn(send(
                context.clone(),
                replica.host,
                key.clone(),
                proposal.clone(),
                write.clone(),
                outcomes.clone(),
                timeout,
            ));
        } else {
            let hint = store_hint(
                context.clone(),
                replica.host,
                write.clone(),
                Some(outcomes.clone()),
            );
            tokio::spawn(hint);
        }
    }
    drop(outcomes);
    let plan = plan_write(
        to.level,
        &to.keyspace.strategy,
        &to.dc,
        &to.natural,
        &to.pending,
    );
    let mut tracker = match plan {
        Ok(plan) => WriteTracker::new(&plan),
        Err(short) => {
            let _ = answer.send(Err(CasError::CommitShort {
                level: short.level,
                acked: short.alive,
                required: short.required,
            }
            .into()));
            return result;
        }
    };
    tokio::spawn(async move {
        let met = matches!(
            track(&mut tracker, &mut replies, timeout).await,
            Tracked::Satisfied
        );
        let _ = answer.send(if met {
            Ok(())
        } else {
            Err(CasError::CommitShort {
                level: tracker.level(),
                acked: tracker.acked(),
                required: tracker.required(),
            }
            .into())
        });
    });
    result
}

/// Commits `proposal` on replica `host` and reports it; a replica that
/// fails or does not answer in time gets a hint of the cell.
async fn send<H: CasHost>(
    context: Arc<H>,
    host: HostId,
    key: KeyRef,
    proposal: Proposal,
    write: Arc<ReplicaWrite>,
    outcomes: mpsc::UnboundedSender<WriteOutcome>,
    timeout: Duration,
) {
    let committed = calls::commit(context.as_ref(), host, &key, proposal, timeout).await;
    let outcome = match &committed {
        Ok(()) => WriteOutcome::Acked(host),
        Err(error) => {
            tracing::debug!(%host, %error, "paxos commit failed; hinting the cell");
            WriteOutcome::Failed(host)
        }
    };
    let _ = outcomes.send(outcome);
    if committed.is_err() && host != context.host_id() {
        store_hint(context, host, write, None).await;
    }
}
