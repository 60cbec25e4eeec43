//! `drain`: readies a node to be stopped for maintenance, as `nodetool
//! drain`. In order: the node refuses writes from clients and coordinators
//! (`UNAVAILABLE`, naming the drain), waits for the writes already admitted
//! (at most the write timeout), syncs its storage, and stops gossip with a
//! departure notice, so the cluster sees it down at once and hints its
//! writes. Reads are still served. Idempotent; only a restart undoes it.
//!
//! A node that is joining or leaving is refused (`FAILED_PRECONDITION`):
//! stopping its gossip and writes mid-way would make its bootstrap or
//! decommission fail and the node stop. Drain it once it is `Normal`.
//!
//! What it needs of the node is its [`DrainHost`] (the context implements
//! it in `node/hosts/serving.rs`).

use std::sync::Arc;
use std::time::Duration;

use ringstore_membership::{ClusterView, MembershipHandle, NodeState};
use ringstore_metrics::{NodeMetrics, Stage};
use ringstore_placement::HostId;
use ringstore_storage::Store;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::error::{OperationError, Result};
use crate::serving::Serving;

/// What draining uses of the node it drains.
pub trait DrainHost: Send + Sync {
    /// This node's host id, to find its own state in the view.
    fn host_id(&self) -> HostId;
    /// The current cluster view: a node joining or leaving is not drained.
    fn view(&self) -> Arc<ClusterView>;
    /// Whether the node serves: drain moves it to [`Serving::Drained`],
    /// which refuses writes and stops gossip.
    fn serving(&self) -> &watch::Sender<Serving>;
    /// The write timeout (ms): the longest drain waits for the writes
    /// already admitted.
    fn write_timeout_ms(&self) -> u64;
    /// The node's metrics: the stages that count the writes in flight.
    fn metrics(&self) -> &NodeMetrics;
    /// Its storage, synced once the writes are in.
    fn store(&self) -> &Store;
    /// Its gossip agent, to see it stop (its handle then answers nothing).
    fn membership(&self) -> &MembershipHandle;
}
/// How long drain waits for the gossip task to stop.
const GOSSIP_STOP_LIMIT: Duration = Duration::from_secs(5);

/// Drains the node (see the module docs); returns once it is done.
pub async fn drain(context: &impl DrainHost) -> Result<()> {
    refuse_during_movement(context)?;
    let already = !context.serving().send_if_modified(|serving| match serving {
        Serving::Normal => {
            *serving = Serving::Drained;
            true
        }
        Serving::Drained | Serving::DiskFailed(_) => false,
    });
    if !already {
        tracing::info!("draining: refusing writes from now on");
    }
    let limit = Duration::from_millis(context.write_timeout_ms());
    let admitted = Instant::now() + limit;
    while writes_in_flight(context) > 0 && Instant::now() < admitted {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    context.store().sync().await?;
    // The gossip task stops once the node no longer serves (see
    // `node::start`); its handle
    // then answers nothing.
    let stopping = Instant::now() + GOSSIP_STOP_LIMIT;
    while context.membership().stats().await.is_ok() && Instant::now() < stopping {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    if !already {
        tracing::info!("drained: writes refused, storage synced, gossip stopped");
    }
    Ok(())
}

/// Refuses to drain a node whose own join or departure is under way.
fn refuse_during_movement(context: &impl DrainHost) -> Result<()> {
    let view = context.view();
    let state = view.member(context.host_id()).map(|m| m.metadata.state);
    match state {
        Some(state @ (NodeState::Joining | NodeState::Leaving)) => {
            Err(OperationError::DrainWhileMoving { state }.into())
        }
        _ => Ok(()),
    }
}

/// Client requests and replica writes under way (client reads included:
/// the stage does not tell them apart).
fn writes_in_flight(context: &impl DrainHost) -> u64 {
    let (client, _, _) = context.metrics().stage_numbers(Stage::ClientRequest);
    let (apply, _, _) = context.metrics().stage_numbers(Stage::InternodeApply);
    client + apply
}
