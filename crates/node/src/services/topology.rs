//! The `Topology` service: decommission, removenode, cleanup, netstats, the
//! stream throttle, and movement plans.
//!
//! It takes the node as topology's host ([`TopologyHost`], which extends
//! streaming's: `netstats` and the throttle are the streams').
//! [`net_stats`] is a free function, which the web console's host calls
//! too.

use std::sync::Arc;

use ringstore_placement::{HostId, Location};
use ringstore_proto::v1 as pb;
use ringstore_proto::v1::topology_server::Topology;
use tonic::{Request, Response, Status};

use crate::convert::strategy_from_pb;
use crate::error::{NodeError, OperatorError, RequestError};
use crate::topology::host::TopologyHost;
use crate::topology::preview::{Change, preview};
use crate::topology::{cleanup, decommission, removenode};
use ringstore_streaming::SessionState;

/// Serves `Topology` from a node, its host (see the module docs).
pub struct TopologyService<H> {
    /// In an `Arc`: topology operations spawn tasks that outlive a call.
    host: Arc<H>,
}

impl<H: TopologyHost + 'static> TopologyService<H> {
    /// The service of `host`'s node.
    pub fn new(host: Arc<H>) -> TopologyService<H> {
        TopologyService { host }
    }
}

/// The most tokens a join plan may give the new node.
const MAX_NUM_TOKENS: u32 = 1024;

fn host_id(text: &str) -> Result<HostId, NodeError> {
    text.parse().map(HostId).map_err(|source| {
        RequestError::BadHostId {
            field: "host",
            text: text.to_string(),
            source,
        }
        .into()
    })
}

/// What `netstats` shows: this node's mode, its stream sessions (running
/// ones and the last finished ones, oldest first) and the stream throttle.
pub fn net_stats(host: &impl TopologyHost) -> pb::NetStatsResponse {
    let view = host.view();
    let mode = view
        .member(host.host_id())
        .map(|m| m.metadata.state.to_string().to_uppercase())
        .unwrap_or_default();
    let streams = host
        .streams()
        .snapshot()
        .into_iter()
        .map(|s| pb::StreamProgress {
            eta_seconds: s.eta_seconds(),
            operation: s.info.operation,
            direction: s.info.direction.as_str().into(),
            peer_host_id: s.info.peer.to_string(),
            peer_address: s
                .info
                .peer_address
                .map(|a| a.to_string())
                .unwrap_or_default(),
            keyspace: s.info.keyspace,
            ranges_done: s.ranges_done,
            ranges_total: s.info.ranges_total,
            bytes_done: s.bytes_done,
            bytes_total: s.info.bytes_total,
            bytes_per_second: s.bytes_per_second,
            state: match s.state {
                SessionState::Running => "running".into(),
                SessionState::Done => "done".into(),
                SessionState::Failed(reason) => format!("failed: {reason}"),
            },
        })
        .collect();
    pb::NetStatsResponse {
        mode,
        streams,
        stream_throughput_mib_per_sec: host.stream_throttle().mib_per_sec(),
    }
}

#[tonic::async_trait]
impl<H: TopologyHost + 'static> Topology for TopologyService<H> {
    async fn decommission(
        &self,
        _: Request<pb::DecommissionRequest>,
    ) -> Result<Response<pb::DecommissionResponse>, Status> {
        let done = decommission::decommission(&self.host).await?;
        Ok(Response::new(pb::DecommissionResponse {
            ranges_streamed: done.streamed.ranges,
            bytes_streamed: done.streamed.bytes,
            hints_handed_off: done.hints_handed_off,
        }))
    }

    async fn remove_node(
        &self,
        request: Request<pb::RemoveNodeRequest>,
    ) -> Result<Response<pb::RemoveNodeResponse>, Status> {
        let dead = host_id(&request.into_inner().host_id)?;
        let totals = removenode::removenode(&self.host, dead).await?;
        Ok(Response::new(pb::RemoveNodeResponse {
            ranges_streamed: totals.ranges,
            bytes_streamed: totals.bytes,
        }))
    }

    async fn cleanup(
        &self,
        request: Request<pb::CleanupRequest>,
    ) -> Result<Response<pb::CleanupResponse>, Status> {
        let keyspace = request.into_inner().keyspace;
        let keyspace = (!keyspace.is_empty()).then_some(keyspace.as_str());
        let cleaned = cleanup::cleanup(&self.host, keyspace).await?;
        Ok(Response::new(pb::CleanupResponse {
            keyspaces: cleaned
                .into_iter()
                .map(|c| pb::CleanupKeyspace {
                    keyspace: c.keyspace,
                    keys_removed: c.keys_removed,
                    bytes_removed: c.bytes_removed,
                    keys_kept: c.keys_kept,
                })
                .collect(),
        }))
    }

    async fn net_stats(
        &self,
        _: Request<pb::NetStatsRequest>,
    ) -> Result<Response<pb::NetStatsResponse>, Status> {
        Ok(Response::new(net_stats(self.host.as_ref())))
    }

    async fn set_stream_throughput(
        &self,
        request: Request<pb::SetStreamThroughputRequest>,
    ) -> Result<Response<pb::SetStreamThroughputResponse>, Status> {
        let mib = request.into_inner().mib_per_sec;
        if mib > 1 << 20 {
            return Err(OperatorError::ThroughputTooHigh { mib_per_sec: mib }.into());
        }
        let previous = self.host.stream_throttle().set_mib_per_sec(mib);
        tracing::info!(previous, now = mib, "stream throughput changed (MiB/s)");
        Ok(Response::new(pb::SetStreamThroughputResponse {
            previous_mib_per_sec: previous,
        }))
    }

    async fn plan(
        &self,
        request: Request<pb::PlanRequest>,
    ) -> Result<Response<pb::PlanResponse>, Status> {
        let change = match request.into_inner().change {
            Some(pb::plan_request::Change::Join(join)) => {
                if join.datacenter.is_empty() || join.rack.is_empty() {
                    return Err(OperatorError::JoinWithoutLocation.into());
                }
                let num_tokens = if join.num_tokens == 0 {
                    // At most 1024 (checked at start), so it fits.
                    self.host.token_allocation().num_tokens as u32
                } else {
                    join.num_tokens
                };
                if num_tokens > MAX_NUM_TOKENS {
                    return Err(OperatorError::NumTokensOutOfRange {
                        num_tokens,
                        max: MAX_NUM_TOKENS,
                    }
                    .into());
                }
                Change::Join {
                    location: Location::new(join.datacenter.as_str(), join.rack.as_str()),
                    num_tokens,
                }
            }
            Some(pb::plan_request::Change::Decommission(host)) => {
                Change::Decommission(host_id(&host)?)
            }
            Some(pb::plan_request::Change::Removenode(host)) => Change::Removenode(host_id(&host)?),
            Some(pb::plan_request::Change::Alter(alter)) => Change::Alter {
                keyspace: alter.keyspace,
                strategy: strategy_from_pb(alter.replication)?,
            },
            None => {
                return Err(OperatorError::NoChangeToPlan.into());
            }
        };
        let plan = preview(&self.host, &change).await?;
        let throughput = self.host.stream_throttle().mib_per_sec();
        let view = self.host.view();
        let address = |host: HostId| {
            view.member(host)
                .map(|m| m.metadata.client_addr.to_string())
                .unwrap_or_else(|| "new".into())
        };
        Ok(Response::new(pb::PlanResponse {
            description: plan.description.clone(),
            estimated_bytes: plan.estimated_bytes(),
            estimated_seconds: plan.estimated_seconds(throughput),
            stream_throughput_mib_per_sec: throughput,
            replica_fraction_moved: plan.replica_fraction_moved,
            primary_fraction_moved: plan.primary_fraction_moved,
            ranges: plan
                .ranges
                .iter()
                .map(|r| pb::PlannedRange {
                    keyspace: r.keyspace.clone(),
                    start_token: r.range.start.0,
                    end_token: r.range.end.0,
                    source: r.source.to_string(),
                    target: r.target.to_string(),
                    estimated_bytes: r.estimated_bytes,
                })
                .collect(),
            ownership: plan
                .ownership
                .iter()
                .map(|o| pb::PlannedOwnership {
                    host_id: o.host.to_string(),
                    address: address(o.host),
                    keyspace: o.keyspace.clone(),
                    before: o.before,
                    after: o.after,
                })
                .collect(),
        }))
    }
}
