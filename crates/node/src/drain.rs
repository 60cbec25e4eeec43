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

use std::time::Duration;

use ringstore_membership::NodeState;
use ringstore_metrics::Stage;
use tokio::time::Instant;

use crate::context::NodeContext;
use crate::error::{NodeError, Result};
use crate::serving::Serving;

/// How long drain waits for the gossip task to stop.
const GOSSIP_STOP_LIMIT: Duration = Duration::from_secs(5);

/// Drains the node (see the module docs); returns once it is done.
pub async fn drain(context: &NodeContext) -> Result<()> {
    refuse_during_movement(context)?;
    let already = !context.serving.send_if_modified(|serving| match serving {
        Serving::Normal => {
            *serving = Serving::Drained;
            true
        }
        Serving::Drained | Serving::DiskFailed(_) => false,
    });
    if !already {
        tracing::info!("draining: refusing writes from now on");
    }
    let limit = Duration::from_millis(context.config.timeouts.write_ms);
    let admitted = Instant::now() + limit;
    while writes_in_flight(context) > 0 && Instant::now() < admitted {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    context.store.sync().await?;
    // The gossip task stops once the node no longer serves (see
    // `node::start`); its handle
    // then answers nothing.
    let stopping = Instant::now() + GOSSIP_STOP_LIMIT;
    while context.membership.stats().await.is_ok() && Instant::now() < stopping {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    if !already {
        tracing::info!("drained: writes refused, storage synced, gossip stopped");
    }
    Ok(())
}

/// Refuses to drain a node whose own join or departure is under way.
fn refuse_during_movement(context: &NodeContext) -> Result<()> {
    let view = context.view();
    let state = view.member(context.host_id).map(|m| m.metadata.state);
    let moving = match state {
        Some(NodeState::Joining) => "joining the ring (bootstrap or replace under way)",
        Some(NodeState::Leaving) => "leaving the ring (decommission under way)",
        _ => return Ok(()),
    };
    Err(NodeError::FailedPrecondition(format!(
        "this node is {moving}: draining it now would abort that and stop the node; \
         drain it once `status` shows it UN"
    )))
}

/// Client requests and replica writes under way (client reads included:
/// the stage does not tell them apart).
fn writes_in_flight(context: &NodeContext) -> u64 {
    let (client, _, _) = context.metrics.stage_numbers(Stage::ClientRequest);
    let (apply, _, _) = context.metrics.stage_numbers(Stage::InternodeApply);
    client + apply
}
