//! The `Admin` service: what `status`, `ring`, `info`, `describering`,
//! `getendpoints`, the hint commands, `metrics`, `tpstats`,
//! `proxyhistograms`, `tablestats` and `toppartitions` show, and `flush`,
//! `drain` and the log levels. [`status`], [`info`] and [`hints`] are
//! free functions, which the web console's host calls too, so the console
//! and the CLI show the same.

use std::collections::BTreeMap;
use std::sync::Arc;

use ringstore_membership::{ClockReport, ClusterView, Liveness, MemberInfo, NodeState};
use ringstore_placement::{HostId, Murmur3Partitioner};
use ringstore_proto::v1 as pb;
use ringstore_proto::v1::admin_server::Admin;
use tonic::{Request, Response, Status};

use crate::context::NodeContext;
use crate::error::{NodeError, OperatorError, RequestError};
use crate::log_levels;
use crate::services::{node_stats, top_partitions};
use crate::snapshots;

/// Serves `Admin` from a node's context.
pub struct AdminService {
    context: Arc<NodeContext>,
}

impl AdminService {
    /// The service of `context`'s node.
    pub fn new(context: Arc<NodeContext>) -> AdminService {
        AdminService { context }
    }
}

/// Every member but those that left or were removed, with `ownership` per
/// host, in data center and address order. This node's load is its store's
/// now; the others' as they last gossiped it (every 10 s).
fn nodes(
    context: &NodeContext,
    view: &ClusterView,
    ownership: &BTreeMap<HostId, f64>,
) -> Vec<pb::NodeStatus> {
    let clock = context.membership.clock_report();
    let mut nodes: Vec<pb::NodeStatus> = view
        .members
        .values()
        .filter(|m| m.metadata.state != NodeState::Left)
        .filter(|m| !view.removed.contains(&m.metadata.host_id))
        .map(|m| {
            let mut node = node_status(
                m,
                ownership.get(&m.metadata.host_id).copied().unwrap_or(0.0),
                clock_offset(&clock, view.local, m.metadata.host_id),
            );
            if m.metadata.host_id == view.local {
                node.load_bytes = context.store.load_bytes();
            }
            node
        })
        .collect();
    nodes.sort_by(|a, b| {
        (&a.datacenter, &a.client_address).cmp(&(&b.datacenter, &b.client_address))
    });
    nodes
}

/// What `status` shows, as this node's gossip view has it: every member
/// with its primary ownership, or its effective ownership of `keyspace`
/// when one is named (`NOT_FOUND` when it is not held).
pub fn status(context: &NodeContext, keyspace: &str) -> Result<pb::StatusResponse, NodeError> {
    let (view, ownership, effective) = if keyspace.is_empty() {
        let view = context.view();
        let ownership = view.ring.primary_ownership();
        (view, ownership, false)
    } else {
        let keyspace = context.keyspace(keyspace)?;
        let (view, map) = context.placement(&keyspace);
        (view, map.effective_ownership(), true)
    };
    Ok(pb::StatusResponse {
        nodes: nodes(context, &view, &ownership),
        effective,
        ring_epoch: view.ring.epoch(),
        ring_checksum: view.ring.checksum(),
    })
}

/// What `info` shows of this node.
pub fn info(context: &NodeContext) -> Result<pb::InfoResponse, NodeError> {
    let view = context.view();
    let local = view
        .member(context.host_id)
        .ok_or(OperatorError::LocalNodeMissing)?;
    let m = &local.metadata;
    Ok(pb::InfoResponse {
        host_id: context.host_id.to_string(),
        cluster_name: context.config.cluster_name.clone(),
        datacenter: m.dc.to_string(),
        rack: m.rack.to_string(),
        generation: context.generation.0,
        uptime_seconds: context.started.elapsed().as_secs(),
        load_bytes: context.store.load_bytes(),
        tokens: m.tokens.iter().map(|t| t.0).collect(),
        gossip_active: context.is_serving(),
        state: state_name(m.state).to_string(),
        schema_version: context.schema.current().version().to_string(),
        software_version: env!("CARGO_PKG_VERSION").to_string(),
        durability: format!("{:?}", context.config.storage.durability).to_lowercase(),
        pending_hints: context.handoff.pending().values().map(|t| t.hints).sum(),
        pending_hint_bytes: context.handoff.pending().values().map(|t| t.bytes).sum(),
        hint_counters: Some(hint_counters(&context.handoff)),
        disk_bytes: context.store.disk_bytes().unwrap_or(0),
        clock: Some(clock_standing(context)),
        storage_failure: context
            .store
            .failure()
            .borrow()
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default(),
    })
}

/// What the hint commands show: the hints pending per target (with its
/// client address, empty when gossip no longer knows it), the counters and
/// the delivery settings.
pub fn hints(context: &NodeContext) -> pb::HintsResponse {
    let handoff = &context.handoff;
    let view = context.view();
    let targets = handoff
        .pending()
        .into_iter()
        .map(|(host, stats)| pb::HintTarget {
            host_id: host.to_string(),
            address: view
                .member(host)
                .map(|m| m.metadata.client_addr.to_string())
                .unwrap_or_default(),
            hints: stats.hints,
            bytes: stats.bytes,
        })
        .collect();
    pb::HintsResponse {
        targets,
        counters: Some(hint_counters(handoff)),
        enabled: handoff.is_enabled(),
        paused: handoff.is_paused(),
        throttle_kib: handoff.throttle_kib(),
    }
}

fn hint_counters(handoff: &crate::handoff::Handoff) -> pb::HintCounters {
    let c = handoff.counters();
    pb::HintCounters {
        stored: c.stored,
        replayed: c.replayed,
        dropped_over_cap: c.dropped_over_cap,
        dropped_expired: c.dropped_expired,
        dropped_outside_window: c.dropped_outside_window,
        truncated: c.truncated,
        dropped_keyspace: c.dropped_keyspace,
        dropped_refused: c.dropped_refused,
        dropped_corrupt: c.dropped_corrupt,
    }
}

fn snapshot_files(tag: String, entries: Vec<snapshots::SnapshotEntry>) -> pb::SnapshotFiles {
    pb::SnapshotFiles {
        files: entries
            .into_iter()
            .map(|e| pb::SnapshotFile {
                tag: e.tag,
                keyspace: e.keyspace,
                keys: e.keys,
                bytes: e.bytes,
            })
            .collect(),
        tag,
    }
}

fn state_name(state: NodeState) -> &'static str {
    match state {
        NodeState::Joining => "JOINING",
        NodeState::Normal => "NORMAL",
        NodeState::Leaving => "LEAVING",
        NodeState::Left => "LEFT",
    }
}

/// `host`'s clock minus the local node's and its uncertainty, in µs, if
/// measured (zero for the local node itself).
fn clock_offset(report: &ClockReport, local: HostId, host: HostId) -> Option<(i64, i64)> {
    if host == local {
        return Some((0, 0));
    }
    report
        .peers
        .get(&host)
        .map(|p| (p.offset_micros, p.uncertainty_micros))
}

/// The `info` view of this node's clock.
fn clock_standing(context: &NodeContext) -> pb::ClockStanding {
    let report = context.membership.clock_report();
    pb::ClockStanding {
        offset_micros: report.verdict.offset_micros(),
        max_offset_ms: report.max_offset.as_millis() as u64,
        skewed: report.verdict.is_skewed(),
        peers_measured: report.peers.len() as u32,
        peers_beyond: report
            .peers
            .values()
            .filter(|p| p.exceeds(report.max_offset))
            .count() as u32,
        refused_writes: context.clock_guard.refused(),
        test_offset_ms: context.clock.wall_clock().offset_ms(),
    }
}

fn node_status(member: &MemberInfo, ownership: f64, clock: Option<(i64, i64)>) -> pb::NodeStatus {
    let m = &member.metadata;
    pb::NodeStatus {
        host_id: m.host_id.to_string(),
        client_address: m.client_addr.to_string(),
        datacenter: m.dc.to_string(),
        rack: m.rack.to_string(),
        up: member.liveness == Liveness::Up,
        state: state_name(m.state).to_string(),
        load_bytes: m.load_bytes,
        token_count: m.tokens.len() as u32,
        ownership,
        tokens: m.tokens.iter().map(|t| t.0).collect(),
        schema_version: m.schema_version.to_string(),
        software_version: m.software_version.clone(),
        clock_offset_micros: clock.map(|c| c.0),
        clock_uncertainty_micros: clock.map(|c| c.1),
    }
}

fn gossip_endpoint(member: &MemberInfo, clock: Option<(i64, i64)>) -> pb::GossipEndpoint {
    let m = &member.metadata;
    pb::GossipEndpoint {
        gossip_address: m.gossip_addr.to_string(),
        host_id: m.host_id.to_string(),
        generation: m.stamp.generation.0,
        version: m.stamp.version,
        state: state_name(m.state).to_string(),
        up: member.liveness == Liveness::Up,
        load_bytes: m.load_bytes,
        schema_version: m.schema_version.to_string(),
        datacenter: m.dc.to_string(),
        rack: m.rack.to_string(),
        software_version: m.software_version.clone(),
        client_address: m.client_addr.to_string(),
        internode_address: m.internode_addr.to_string(),
        token_count: m.tokens.len() as u32,
        clock_offset_micros: clock.map(|c| c.0),
        clock_uncertainty_micros: clock.map(|c| c.1),
    }
}

#[tonic::async_trait]
impl Admin for AdminService {
    async fn status(
        &self,
        request: Request<pb::StatusRequest>,
    ) -> Result<Response<pb::StatusResponse>, Status> {
        let keyspace = request.into_inner().keyspace;
        Ok(Response::new(status(&self.context, &keyspace)?))
    }

    async fn ring(
        &self,
        _: Request<pb::RingRequest>,
    ) -> Result<Response<pb::RingResponse>, Status> {
        let view = self.context.view();
        let ownership = view.ring.primary_ownership();
        Ok(Response::new(pb::RingResponse {
            nodes: nodes(&self.context, &view, &ownership),
            ring_epoch: view.ring.epoch(),
            ring_checksum: view.ring.checksum(),
        }))
    }

    async fn info(
        &self,
        _: Request<pb::InfoRequest>,
    ) -> Result<Response<pb::InfoResponse>, Status> {
        Ok(Response::new(info(&self.context)?))
    }

    async fn describe_ring(
        &self,
        request: Request<pb::DescribeRingRequest>,
    ) -> Result<Response<pb::DescribeRingResponse>, Status> {
        let keyspace = self.context.keyspace(&request.into_inner().keyspace)?;
        let (view, map) = self.context.placement(&keyspace);
        let ranges = map
            .ranges()
            .map(|replicas| {
                let members: Vec<&MemberInfo> =
                    replicas.ids().filter_map(|h| view.member(h)).collect();
                pb::TokenRangeReplicas {
                    start_token: replicas.range().start.0,
                    end_token: replicas.range().end.0,
                    endpoints: members
                        .iter()
                        .map(|m| m.metadata.internode_addr.to_string())
                        .collect(),
                    rpc_endpoints: members
                        .iter()
                        .map(|m| m.metadata.client_addr.to_string())
                        .collect(),
                    endpoint_details: members
                        .iter()
                        .map(|m| pb::EndpointDetails {
                            host: m.metadata.internode_addr.to_string(),
                            datacenter: m.metadata.dc.to_string(),
                            rack: m.metadata.rack.to_string(),
                        })
                        .collect(),
                }
            })
            .collect();
        Ok(Response::new(pb::DescribeRingResponse {
            schema_version: self.context.schema.current().version().to_string(),
            ranges,
        }))
    }

    async fn get_endpoints(
        &self,
        request: Request<pb::GetEndpointsRequest>,
    ) -> Result<Response<pb::GetEndpointsResponse>, Status> {
        let request = request.into_inner();
        let keyspace = self.context.keyspace(&request.keyspace)?;
        let token =
            Murmur3Partitioner::token(&request.key).map_err(RequestError::KeyWithoutToken)?;
        let (view, map) = self.context.placement(&keyspace);
        let endpoints = map
            .replicas(token)
            .ids()
            .map(|h| match view.member(h) {
                Some(m) => m.metadata.client_addr.to_string(),
                None => h.to_string(),
            })
            .collect();
        Ok(Response::new(pb::GetEndpointsResponse {
            endpoints,
            token: token.0,
        }))
    }

    async fn hints(
        &self,
        _: Request<pb::HintsRequest>,
    ) -> Result<Response<pb::HintsResponse>, Status> {
        Ok(Response::new(hints(&self.context)))
    }

    async fn set_handoff(
        &self,
        request: Request<pb::SetHandoffRequest>,
    ) -> Result<Response<pb::SetHandoffResponse>, Status> {
        let r = request.into_inner();
        self.context
            .handoff
            .set(r.enabled, r.paused, r.throttle_kib);
        tracing::info!(enabled = ?r.enabled, paused = ?r.paused, throttle_kib = ?r.throttle_kib, "hinted handoff settings changed");
        Ok(Response::new(pb::SetHandoffResponse {}))
    }

    async fn flush(
        &self,
        _: Request<pb::FlushRequest>,
    ) -> Result<Response<pb::FlushResponse>, Status> {
        self.context.store.sync().await.map_err(NodeError::from)?;
        Ok(Response::new(pb::FlushResponse {}))
    }

    async fn gossip_info(
        &self,
        _: Request<pb::GossipInfoRequest>,
    ) -> Result<Response<pb::GossipInfoResponse>, Status> {
        let view = self.context.view();
        let clock = self.context.membership.clock_report();
        let endpoints = view
            .members
            .values()
            .map(|m| gossip_endpoint(m, clock_offset(&clock, view.local, m.metadata.host_id)))
            .collect();
        Ok(Response::new(pb::GossipInfoResponse { endpoints }))
    }

    async fn set_logging_level(
        &self,
        request: Request<pb::SetLoggingLevelRequest>,
    ) -> Result<Response<pb::LoggingLevels>, Status> {
        let request = request.into_inner();
        let filter = log_levels::set(&request.target, &request.level)?;
        tracing::info!(%filter, "log levels changed");
        Ok(Response::new(pb::LoggingLevels { filter }))
    }

    async fn get_logging_levels(
        &self,
        _: Request<pb::GetLoggingLevelsRequest>,
    ) -> Result<Response<pb::LoggingLevels>, Status> {
        Ok(Response::new(pb::LoggingLevels {
            filter: log_levels::current()?,
        }))
    }

    async fn truncate_hints(
        &self,
        request: Request<pb::TruncateHintsRequest>,
    ) -> Result<Response<pb::TruncateHintsResponse>, Status> {
        let host = request.into_inner().host_id;
        let target = if host.is_empty() {
            None
        } else {
            Some(
                host.parse::<HostId>()
                    .map_err(|source| RequestError::BadHostId {
                        field: "host_id",
                        text: host.clone(),
                        source,
                    })?,
            )
        };
        let removed = self.context.handoff.truncate(target)?;
        Ok(Response::new(pb::TruncateHintsResponse { removed }))
    }

    async fn tp_stats(
        &self,
        _: Request<pb::TpStatsRequest>,
    ) -> Result<Response<pb::TpStatsResponse>, Status> {
        Ok(Response::new(node_stats::tp_stats(&self.context).await?))
    }

    async fn proxy_histograms(
        &self,
        _: Request<pb::ProxyHistogramsRequest>,
    ) -> Result<Response<pb::ProxyHistogramsResponse>, Status> {
        Ok(Response::new(node_stats::proxy_histograms(&self.context)))
    }

    async fn table_stats(
        &self,
        request: Request<pb::TableStatsRequest>,
    ) -> Result<Response<pb::TableStatsResponse>, Status> {
        let keyspace = request.into_inner().keyspace;
        Ok(Response::new(
            node_stats::table_stats(&self.context, &keyspace).await?,
        ))
    }

    async fn top_partitions(
        &self,
        request: Request<pb::TopPartitionsRequest>,
    ) -> Result<Response<pb::TopPartitionsResponse>, Status> {
        let answer = top_partitions::top_partitions(&self.context, request.into_inner()).await?;
        Ok(Response::new(answer))
    }

    async fn drain(
        &self,
        _: Request<pb::DrainRequest>,
    ) -> Result<Response<pb::DrainResponse>, Status> {
        crate::drain::drain(self.context.as_ref()).await?;
        Ok(Response::new(pb::DrainResponse {}))
    }

    async fn reload_secrets(
        &self,
        _: Request<pb::ReloadSecretsRequest>,
    ) -> Result<Response<pb::ReloadSecretsResponse>, Status> {
        let reloaded = crate::rotation::reload(&self.context.rotation()).await?;
        Ok(Response::new(pb::ReloadSecretsResponse {
            secrets: reloaded.secrets as u32,
            tls_reloaded: reloaded.tls.iter().map(|port| port.to_string()).collect(),
            secrets_reloaded: reloaded.secrets_reloaded,
        }))
    }

    async fn snapshot(
        &self,
        request: Request<pb::SnapshotRequest>,
    ) -> Result<Response<pb::SnapshotFiles>, Status> {
        let r = request.into_inner();
        let (tag, entries) = snapshots::take(&*self.context, &r.tag, &r.keyspace).await?;
        Ok(Response::new(snapshot_files(tag, entries)))
    }

    async fn list_snapshots(
        &self,
        _: Request<pb::ListSnapshotsRequest>,
    ) -> Result<Response<pb::SnapshotFiles>, Status> {
        let entries = snapshots::list(&*self.context)?;
        Ok(Response::new(snapshot_files(String::new(), entries)))
    }

    async fn clear_snapshot(
        &self,
        request: Request<pb::ClearSnapshotRequest>,
    ) -> Result<Response<pb::ClearSnapshotResponse>, Status> {
        let r = request.into_inner();
        let removed = snapshots::clear(&*self.context, &r.tag, r.all)?;
        Ok(Response::new(pb::ClearSnapshotResponse { removed }))
    }

    async fn restore_snapshot(
        &self,
        request: Request<pb::RestoreSnapshotRequest>,
    ) -> Result<Response<pb::SnapshotFiles>, Status> {
        let r = request.into_inner();
        let entries = snapshots::restore(&*self.context, &r.tag, &r.keyspace).await?;
        Ok(Response::new(snapshot_files(r.tag, entries)))
    }

    async fn metrics(
        &self,
        _: Request<pb::MetricsRequest>,
    ) -> Result<Response<pb::MetricsResponse>, Status> {
        Ok(Response::new(pb::MetricsResponse {
            text: crate::metrics::page(self.context.as_ref()).await?,
        }))
    }
}
