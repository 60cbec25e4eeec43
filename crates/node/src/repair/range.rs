//! Repairing one token range among its replicas, as the coordinator: trees,
//! comparison, row lists, and the sync of the rows that differ.
//!
//! Every replica (this node included, through its own internode port, so
//! all replicas are treated alike) estimates its rows in the range, then
//! builds its tree of the range at the depth those estimates call for
//! ([`depth_for`]); the coordinator walks the trees down to the
//! differing leaves ([`TreeComparison`]), asks every replica for its row
//! versions there, lines them up ([`RowAligner`]) and, batch by batch,
//! reads each differing row from a replica holding the winning version and
//! writes it to the replicas that lack it. Writes pass the node's stream
//! throttle. Bytes exchanged with other nodes are counted for the report.
//!
//! A call to a replica is abandoned as soon as the cluster view shows that
//! replica down or restarted (a paused process may never answer; a
//! restarted one lost its trees), failing the range.
//!
//! The view, the internode clients, the metrics and the stream throttle
//! come through the [`RepairHost`].

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::try_join_all;
use prost::Message;
use ringstore_membership::{ClusterView, Generation, Liveness};
use ringstore_metrics::{InternodeRpc, NodeMetrics};
use ringstore_placement::{HostId, TokenRange};
use ringstore_proto::v1 as pb;
use ringstore_repair::{
    CompareStep, KeySync, RepairOptions, RowAligner, TreeComparison, UnitReport, depth_for,
};
use ringstore_storage::{Cell, KeyspaceId};
use tokio::sync::watch;
use uuid::Uuid;

use crate::convert::range_to_pb;
use crate::convert::{cell_from_pb, cell_to_pb, listed_row_from_pb};
use crate::error::{NodeError, RangeRepairError, Result};
use crate::peers::PeerClient;
use crate::repair::RepairHost;

/// How long one replica may take to build its tree (a big range, read at
/// the validation rate).
const BUILD_TIMEOUT: Duration = Duration::from_secs(3600);
/// How long any other repair call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// How long ending a session may take (it only drops trees and records).
const END_TIMEOUT: Duration = Duration::from_secs(10);
/// Rows synced per batch, at most.
const BATCH_KEYS: usize = 512;
/// Bytes of rows synced per batch, at most (roughly: one big row may pass it).
const BATCH_BYTES: u64 = 1 << 20;

/// One replica taking part.
#[derive(Clone)]
struct Replica {
    host: HostId,
    /// Its generation when the repair began: a restart abandons the repair
    /// (its kept trees are gone).
    generation: Generation,
    client: PeerClient,
    /// Its internode address, and where the calls' latency is recorded.
    address: SocketAddr,
    metrics: Arc<NodeMetrics>,
    /// Whether it is another node (its traffic counts in the report).
    remote: bool,
    /// The cluster view, to abandon a call when the replica goes down.
    views: watch::Receiver<Arc<ClusterView>>,
}

/// A repair of one range of one keyspace among `hosts`, in `session`.
pub struct RangeRepair<'a> {
    /// The node coordinating it.
    node: &'a dyn RepairHost,
    session: Uuid,
    keyspace: KeyspaceId,
    range: TokenRange,
    replicas: Vec<Replica>,
    options: RepairOptions,
    report: UnitReport,
}

impl<'a> RangeRepair<'a> {
    /// Prepares the repair; fails if a replica is down or unknown.
    pub fn new(
        node: &'a dyn RepairHost,
        session: Uuid,
        keyspace: KeyspaceId,
        range: TokenRange,
        hosts: &[HostId],
        options: RepairOptions,
    ) -> Result<RangeRepair<'a>> {
        let view = node.view();
        // This node first when it is a replica: rows are read from the
        // first replica holding the winning version, and reading its own
        // costs no transfer.
        let mut hosts = hosts.to_vec();
        hosts.sort_by_key(|&host| host != node.host_id());
        let mut replicas = Vec::with_capacity(hosts.len());
        for host in hosts {
            let member = view
                .member(host)
                .filter(|_| view.is_up(host))
                .ok_or(RangeRepairError::ReplicaDown { host, range })?;
            replicas.push(Replica {
                host,
                generation: member.metadata.stamp.generation,
                client: node.peers().client(member.metadata.internode_addr),
                address: member.metadata.internode_addr,
                metrics: Arc::clone(node.metrics()),
                remote: host != node.host_id(),
                views: node.views(),
            });
        }
        Ok(RangeRepair {
            node,
            session,
            keyspace,
            range,
            replicas,
            options,
            report: UnitReport::default(),
        })
    }

    /// Runs it: the report of what differed and what was sent.
    pub async fn run(mut self) -> Result<UnitReport> {
        if self.replicas.len() < 2 {
            return Ok(self.report);
        }
        let depth = depth_for(self.range, self.estimate_rows().await?);
        let roots = self.build_trees(depth).await?;
        let mut comparison = TreeComparison::new(self.range, depth, &roots);
        let differing = loop {
            match comparison.next_step() {
                CompareStep::Done(ranges) => break ranges,
                CompareStep::AskNodes(nodes) => {
                    let answers = self.tree_nodes(&nodes).await?;
                    comparison.record(&answers)?;
                }
            }
        };
        if !differing.is_empty() {
            self.sync_rows(differing).await?;
        }
        Ok(self.report)
    }

    /// The most rows any replica estimates it holds in the range.
    async fn estimate_rows(&mut self) -> Result<u64> {
        let request = pb::RangeStatsRequest {
            keyspace_id: self.keyspace.to_string(),
            ranges: vec![range_to_pb(self.range)],
        };
        let responses = self
            .call_all(request, CALL_TIMEOUT, |mut c, r| async move {
                c.range_stats(r).await
            })
            .await?;
        Ok(responses
            .iter()
            .filter_map(|response| response.ranges.first())
            .map(|stats| stats.estimated_keys)
            .max()
            .unwrap_or(0))
    }

    /// Every replica builds its tree; their roots.
    async fn build_trees(&mut self, depth: u8) -> Result<Vec<u64>> {
        let request = pb::BuildTreeRequest {
            session_id: self.session.to_string(),
            keyspace_id: self.keyspace.to_string(),
            range: Some(range_to_pb(self.range)),
            depth: u32::from(depth),
        };
        let responses = self
            .call_all(request, BUILD_TIMEOUT, |mut c, r| async move {
                c.build_tree(r).await
            })
            .await?;
        Ok(responses.iter().map(|r| r.root).collect())
    }

    /// Every replica's hashes of `nodes`.
    async fn tree_nodes(&mut self, nodes: &[usize]) -> Result<Vec<Vec<u64>>> {
        let request = pb::TreeNodesRequest {
            session_id: self.session.to_string(),
            keyspace_id: self.keyspace.to_string(),
            range: Some(range_to_pb(self.range)),
            nodes: nodes.iter().map(|&n| n as u32).collect(),
        };
        let responses = self
            .call_all(request, CALL_TIMEOUT, |mut c, r| async move {
                c.tree_nodes(r).await
            })
            .await?;
        Ok(responses.into_iter().map(|r| r.hashes).collect())
    }

    /// Lists every replica's rows in `ranges`, lines them up and syncs the
    /// ones that differ, batch by batch.
    async fn sync_rows(&mut self, ranges: Vec<TokenRange>) -> Result<()> {
        let request = pb::ListRowsRequest {
            keyspace_id: self.keyspace.to_string(),
            ranges: ranges.into_iter().map(range_to_pb).collect(),
        };
        let mut listings = Vec::with_capacity(self.replicas.len());
        for replica in &self.replicas {
            let mut client = replica.client.clone();
            let listing = client
                .list_rows(request.clone())
                .await
                .map_err(|status| lost_or_failed(replica.host, "ListRows", status))?
                .into_inner();
            listings.push(listing);
        }
        let mut aligner = RowAligner::new(self.replicas.len());
        let mut batch: Vec<KeySync> = Vec::new();
        loop {
            batch.extend(aligner.pop());
            if batch.len() >= BATCH_KEYS
                || batch.iter().map(|k| k.bytes).sum::<u64>() >= BATCH_BYTES
            {
                self.sync_batch(std::mem::take(&mut batch)).await?;
            }
            let Some(replica) = aligner.wants() else {
                if aligner.is_done() {
                    break;
                }
                continue;
            };
            let lister = &self.replicas[replica];
            let next = tokio::time::timeout(CALL_TIMEOUT, listings[replica].message());
            let page = tokio::select! {
                page = next => page.map_err(|_| RangeRepairError::ListingTimedOut(lister.host))?,
                gone = until_gone(lister) => return Err(gone),
            }
            .map_err(|status| lost_or_failed(lister.host, "ListRows", status))?;
            match page {
                Some(page) => {
                    if self.replicas[replica].remote {
                        self.report.bytes += page.encoded_len() as u64;
                    }
                    aligner.push(replica, page.rows.into_iter().map(listed_row_from_pb));
                }
                None => aligner.finish(replica),
            }
        }
        self.sync_batch(batch).await
    }

    /// Reads the winning cells of `batch` and writes them to the replicas
    /// that lack them (in a dry run: only counts the keys).
    async fn sync_batch(&mut self, batch: Vec<KeySync>) -> Result<()> {
        self.report.mismatched_keys += batch.len() as u64;
        if batch.is_empty() || self.options.dry_run {
            return Ok(());
        }
        let winners = self.read_winners(&batch).await?;
        let mut writes: BTreeMap<usize, Vec<pb::ReplicaMutation>> = BTreeMap::new();
        for sync in &batch {
            let Some(cell) = winners.get(&sync.key) else {
                continue; // Gone from every source since it was listed.
            };
            for &target in &sync.targets {
                writes.entry(target).or_default().push(pb::ReplicaMutation {
                    keyspace_id: self.keyspace.to_string(),
                    key: sync.key.clone(),
                    cell: Some(cell_to_pb(cell)),
                    deadline_micros: None,
                });
            }
        }
        for (target, mutations) in writes {
            self.write_rows(target, mutations).await?;
        }
        Ok(())
    }

    /// The winning cell of each key of `batch`, read from its sources.
    async fn read_winners(&mut self, batch: &[KeySync]) -> Result<BTreeMap<Vec<u8>, Cell>> {
        let mut by_source: BTreeMap<usize, Vec<Vec<u8>>> = BTreeMap::new();
        for sync in batch {
            for &source in &sync.sources {
                by_source.entry(source).or_default().push(sync.key.clone());
            }
        }
        let mut winners: BTreeMap<Vec<u8>, Cell> = BTreeMap::new();
        for (source, keys) in by_source {
            let replica = self.replicas[source].clone();
            let request = pb::ReadCellsRequest {
                keyspace_id: self.keyspace.to_string(),
                keys,
            };
            let response = self
                .call(&replica, request, CALL_TIMEOUT, |mut c, r| async move {
                    c.read_cells(r).await
                })
                .await?;
            for entry in response.cells {
                let Some(cell) = entry.cell.map(cell_from_pb) else {
                    continue;
                };
                let winner = match winners.remove(&entry.key) {
                    Some(other) => other.reconcile(cell),
                    None => cell,
                };
                winners.insert(entry.key, winner);
            }
        }
        Ok(winners)
    }

    /// Writes `mutations` to replica `target`, through the stream throttle.
    async fn write_rows(
        &mut self,
        target: usize,
        mutations: Vec<pb::ReplicaMutation>,
    ) -> Result<()> {
        let replica = self.replicas[target].clone();
        let rows = mutations.len() as u64;
        // Repair places nothing with the ring of the moment: no checksum.
        let request = pb::ApplyRequest {
            mutations,
            ring_checksum: 0,
        };
        if replica.remote {
            self.node
                .stream_throttle()
                .acquire(request.encoded_len() as u64)
                .await;
        }
        let response = self
            .call(&replica, request, CALL_TIMEOUT, |mut c, r| async move {
                c.apply(r).await
            })
            .await?;
        if let Some(refused) = response.refused.first() {
            return Err(RangeRepairError::RowRefused {
                host: replica.host,
                reason: refused.message.clone(),
            }
            .into());
        }
        self.report.rows_sent += rows;
        Ok(())
    }

    /// Calls every replica with `request` at once; their answers in order.
    async fn call_all<Req, Resp, Fut>(
        &mut self,
        request: Req,
        timeout: Duration,
        call: impl Fn(PeerClient, tonic::Request<Req>) -> Fut + Copy,
    ) -> Result<Vec<Resp>>
    where
        Req: Message + Clone,
        Resp: Message,
        Fut: Future<Output = Result<tonic::Response<Resp>, tonic::Status>>,
    {
        let replicas = self.replicas.clone();
        let calls = replicas.iter().map(|replica| {
            let request = request.clone();
            async move { send(replica, request, timeout, call).await }
        });
        let answers = try_join_all(calls).await?;
        for (replica, (sent, answer)) in replicas.iter().zip(&answers) {
            if replica.remote {
                self.report.bytes += (sent + answer.encoded_len()) as u64;
            }
        }
        Ok(answers.into_iter().map(|(_, answer)| answer).collect())
    }

    /// Calls one replica with `request`; counts the bytes if it is remote.
    async fn call<Req, Resp, Fut>(
        &mut self,
        replica: &Replica,
        request: Req,
        timeout: Duration,
        call: impl Fn(PeerClient, tonic::Request<Req>) -> Fut,
    ) -> Result<Resp>
    where
        Req: Message,
        Resp: Message,
        Fut: Future<Output = Result<tonic::Response<Resp>, tonic::Status>>,
    {
        let (sent, answer) = send(replica, request, timeout, call).await?;
        if replica.remote {
            self.report.bytes += (sent + answer.encoded_len()) as u64;
        }
        Ok(answer)
    }
}

/// Sends `request` to `replica` with a deadline; the request's size and
/// the answer.
async fn send<Req, Resp, Fut>(
    replica: &Replica,
    request: Req,
    timeout: Duration,
    call: impl Fn(PeerClient, tonic::Request<Req>) -> Fut,
) -> Result<(usize, Resp)>
where
    Req: Message,
    Fut: Future<Output = Result<tonic::Response<Resp>, tonic::Status>>,
{
    let sent = request.encoded_len();
    let mut request = tonic::Request::new(request);
    request.set_timeout(timeout);
    let started = Instant::now();
    let answer = tokio::select! {
        answer = call(replica.client.clone(), request) => answer,
        gone = until_gone(replica) => return Err(gone),
    };
    replica
        .metrics
        .internode(replica.address, InternodeRpc::Repair, started.elapsed());
    let answer = answer.map_err(|status| lost_or_failed(replica.host, "a repair call", status))?;
    Ok((sent, answer.into_inner()))
}

/// Resolves, with the error to report, once `replica` is seen down or
/// restarted: a call to it may then never answer (a paused process, a
/// connection to a server that is gone), and its trees are lost.
async fn until_gone(replica: &Replica) -> NodeError {
    let mut views = replica.views.clone();
    loop {
        {
            let view = views.borrow_and_update();
            let present = view.member(replica.host).is_some_and(|m| {
                m.liveness == Liveness::Up && m.metadata.stamp.generation == replica.generation
            });
            if !present {
                return NodeError::ReplicaLost(replica.host);
            }
        }
        if views.changed().await.is_err() {
            return NodeError::ShuttingDown;
        }
    }
}

/// The error of a repair call that failed: the replica is lost when the
/// connection to it broke (it went away, or stopped answering even its
/// connection's keep-alive pings, as a paused process does), so that the
/// unit is repaired again once it is back; otherwise the replica's own
/// error.
fn lost_or_failed(host: HostId, what: &'static str, status: tonic::Status) -> NodeError {
    let broken = std::error::Error::source(&status).is_some();
    if broken {
        tracing::debug!(%host, %status, "the connection to a replica broke during its repair");
        return NodeError::ReplicaLost(host);
    }
    replica_failed(host, what, status)
}

/// The error of a replica that failed a call.
fn replica_failed(host: HostId, what: &'static str, status: tonic::Status) -> NodeError {
    NodeError::Peer {
        peer: format!("replica {host}"),
        doing: what,
        status: Box::new(status),
    }
}

/// Ends `session` on every replica in `hosts` that is up, recording
/// `repaired` (when not empty) as repaired as of `began`. Every replica
/// must confirm a record; dropping trees is best effort.
pub async fn end_session(
    node: &dyn RepairHost,
    session: Uuid,
    hosts: &[HostId],
    repaired: &[(KeyspaceId, TokenRange)],
    began: ringstore_storage::Timestamp,
) -> Result<()> {
    let view = node.view();
    let request = pb::EndRepairSessionRequest {
        session_id: session.to_string(),
        repaired: repaired
            .iter()
            .map(|&(keyspace, range)| pb::RepairedRange {
                keyspace_id: keyspace.to_string(),
                range: Some(range_to_pb(range)),
            })
            .collect(),
        began_micros: began.0,
    };
    // Only replicas seen up are called: a call to one that is down may hang.
    let addresses: Vec<(HostId, Option<SocketAddr>)> = hosts
        .iter()
        .map(|&host| {
            let up = view.member(host).filter(|_| view.is_up(host));
            (host, up.map(|m| m.metadata.internode_addr))
        })
        .collect();
    let calls = addresses.into_iter().map(|(host, address)| {
        let request = request.clone();
        async move {
            let address = address.ok_or(RangeRepairError::SessionLeftOpen(host))?;
            let mut client = node.peers().client(address);
            let mut request = tonic::Request::new(request);
            request.set_timeout(END_TIMEOUT);
            client
                .end_repair_session(request)
                .await
                .map_err(|status| replica_failed(host, "EndRepairSession", status))?;
            Ok::<(), NodeError>(())
        }
    });
    let outcomes = futures::future::join_all(calls).await;
    if repaired.is_empty() {
        return Ok(());
    }
    outcomes.into_iter().collect::<Result<Vec<()>>>().map(drop)
}
