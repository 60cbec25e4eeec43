//! The sans-IO membership state machine: foca plus metadata anti-entropy.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use foca::{AccumulatingRuntime, Foca, NoCustomBroadcast, OwnedNotification, PostcardCodec};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use ringstore_placement::HostId;

use crate::clock::{Clock, SystemClock, WallTime};
use crate::config::MembershipConfig;
use crate::envelope::{Envelope, Rejection};
use crate::identity::NodeIdentity;
use crate::message::{
    Body, ClockMessage, Control, DIGEST_ENTRIES_PER_PACKET, MetadataChunk, chunk_metadata,
    encode_clock, encode_control, encode_swim,
};
use crate::metadata::{MetadataStamp, NodeMetadata};
use crate::offsets::{ClockReport, ClockVerdict, OffsetEstimator};
use crate::stats::MembershipStats;
use crate::view::{
    ClusterView, Liveness, MemberInfo, build_pending_ring, build_ring, joining_tokens,
    removed_members,
};

/// Most chunks one host's metadata may take (bounds reassembly memory).
const MAX_METADATA_CHUNKS: u16 = 64;
/// Most metadata reassemblies in progress at once.
const MAX_PARTIAL_METADATA: usize = 256;
/// Most hosts answered for in one pull (bounds amplification).
const MAX_HOSTS_PER_PULL: usize = 64;

/// A timer the shell must deliver back through [`Membership::handle_timer`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Timer {
    /// One of foca's SWIM timers.
    Swim(foca::Timer<NodeIdentity>),
    /// Time to gossip metadata digests.
    GossipMetadata,
    /// Time to announce to the seeds if still alone.
    AnnounceToSeeds,
    /// Time to probe the live peers' clocks.
    ProbeClocks,
}

/// What changed, for the rest of the node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MembershipEvent {
    /// A member became reachable.
    Up(HostId),
    /// A member was declared down.
    Down(HostId),
    /// A member's metadata changed (the local node's included).
    MetadataChanged(HostId),
    /// The ring changed: a new placement snapshot was built.
    RingChanged {
        /// The new ring's epoch on this node.
        epoch: u64,
        /// The new ring's checksum, equal on nodes with equal views.
        checksum: u64,
    },
}

/// What the state machine asks its shell to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// Send a datagram.
    Send {
        /// Destination.
        to: SocketAddr,
        /// The sealed packet.
        packet: Vec<u8>,
    },
    /// Deliver `timer` after `after`.
    Schedule {
        /// Delay.
        after: Duration,
        /// The timer.
        timer: Timer,
    },
    /// Tell the node.
    Event(MembershipEvent),
}

/// One node's membership: a pure state machine driven by packets and timers,
/// reporting through [`Output`]s. It never blocks, reads time only from its
/// injected [`Clock`] (for clock probes) and takes its randomness from a
/// seed, so a simulation is repeatable.
pub struct Membership {
    config: MembershipConfig,
    foca: Foca<NodeIdentity, PostcardCodec, StdRng, NoCustomBroadcast>,
    runtime: AccumulatingRuntime<NodeIdentity>,
    envelope: Envelope,
    rng: StdRng,
    /// The newest metadata of every known host, the local one included.
    metadata: BTreeMap<HostId, Arc<NodeMetadata>>,
    /// The identities foca reports active, by host.
    live: BTreeMap<HostId, NodeIdentity>,
    partial: BTreeMap<(HostId, MetadataStamp), Vec<Option<Vec<u8>>>>,
    view: Arc<ClusterView>,
    connected: bool,
    /// Set by [`Membership::leave`]: this node is going away on purpose.
    leaving: bool,
    seed_attempts: u32,
    stats: MembershipStats,
    out: Vec<Output>,
    clock: Arc<dyn Clock>,
    offsets: OffsetEstimator,
    clock_report: Arc<ClockReport>,
}

impl Membership {
    /// A node with identity `identity` and metadata `local` (whose host and
    /// generation must match the identity). Starts its timers; the first
    /// announce to the seeds is due at once.
    pub fn new(
        config: MembershipConfig,
        identity: NodeIdentity,
        local: NodeMetadata,
        seed: u64,
    ) -> Membership {
        debug_assert_eq!(identity.host_id, local.host_id);
        let envelope = Envelope::new(
            &config.cluster_name,
            config.cluster_secret.as_ref(),
            identity.host_id,
            identity.generation,
        );
        let foca = Foca::new(
            identity.clone(),
            config.swim.clone(),
            StdRng::seed_from_u64(seed),
            PostcardCodec,
        );
        let ring = Arc::new(build_ring(1, std::iter::once(&local)));
        let host = local.host_id;
        let max_clock_offset = config.max_clock_offset;
        let mut membership = Membership {
            config,
            foca,
            runtime: AccumulatingRuntime::new(),
            envelope,
            rng: StdRng::seed_from_u64(seed ^ 0x6d65_6d62),
            metadata: BTreeMap::from([(host, Arc::new(local))]),
            live: BTreeMap::new(),
            partial: BTreeMap::new(),
            view: Arc::new(ClusterView {
                local: host,
                members: BTreeMap::new(),
                ring,
                joining: BTreeMap::new(),
                pending_ring: None,
                removed: BTreeSet::new(),
            }),
            connected: false,
            leaving: false,
            seed_attempts: 0,
            stats: MembershipStats::default(),
            out: Vec::new(),
            clock: SystemClock::shared(),
            offsets: OffsetEstimator::default(),
            clock_report: Arc::new(ClockReport::empty(max_clock_offset)),
        };
        membership.rebuild_view(true);
        membership.schedule(Duration::ZERO, Timer::AnnounceToSeeds);
        let interval = membership.config.metadata_gossip_interval;
        membership.schedule(interval, Timer::GossipMetadata);
        let probes = membership.config.clock_probe_interval;
        membership.schedule(probes, Timer::ProbeClocks);
        membership
    }

    /// Starts with the metadata of the members this node knew before a
    /// restart (the node saves them), so that its view holds the whole ring
    /// from the first moment, each such member down until gossip finds it
    /// up, and gossip replaces each copy with any newer one. Without them a
    /// restarted node would place keys on whatever part of the ring gossip
    /// had brought so far. Its own entry and other clusters' are ignored.
    pub fn with_remembered(
        mut self,
        members: impl IntoIterator<Item = NodeMetadata>,
    ) -> Membership {
        for metadata in members {
            let host = metadata.host_id;
            if host == self.view.local || metadata.cluster_name != self.config.cluster_name {
                continue;
            }
            let newer = self
                .metadata
                .get(&host)
                .is_none_or(|known| known.stamp < metadata.stamp);
            if newer {
                self.metadata.insert(host, Arc::new(metadata));
            }
        }
        self.rebuild_view(true);
        self
    }

    /// Reads time from `clock` instead of the system's (the node's offset
    /// clock, or a simulated one).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Membership {
        self.clock = clock;
        self
    }

    /// What this node knows of its live peers' clocks, and the verdict on
    /// its own.
    pub fn clock_report(&self) -> Arc<ClockReport> {
        self.clock_report.clone()
    }

    /// The current view.
    pub fn view(&self) -> Arc<ClusterView> {
        self.view.clone()
    }

    /// Counters of what this node sent, received and dropped.
    pub fn stats(&self) -> &MembershipStats {
        &self.stats
    }

    /// The local node's identity (it changes when foca rejoins by itself).
    pub fn identity(&self) -> &NodeIdentity {
        self.foca.identity()
    }

    /// The outputs accumulated since the last call.
    pub fn drain_outputs(&mut self) -> Vec<Output> {
        std::mem::take(&mut self.out)
    }

    /// Handles a datagram from `from`. Bad packets are counted and dropped.
    pub fn handle_packet(&mut self, from: SocketAddr, packet: &[u8]) {
        self.stats.packets_received += 1;
        self.stats.bytes_received += packet.len() as u64;
        let opened = match self.envelope.open(packet) {
            Ok(opened) => opened,
            Err(rejection) => {
                self.stats.count_rejection(rejection);
                tracing::debug!(%from, ?rejection, "gossip packet dropped");
                return;
            }
        };
        let sender = opened.sender;
        match Body::decode(opened.body) {
            None => self.stats.count_rejection(Rejection::Malformed),
            Some(Body::Swim(data)) => {
                if let Err(error) = self.foca.handle_data(data, &mut self.runtime) {
                    self.stats.swim_errors += 1;
                    tracing::debug!(%from, %error, "foca refused a packet");
                }
                self.drain_swim();
            }
            Some(Body::Control(control)) => self.handle_control(sender, from, control),
            Some(Body::Clock(clock)) => self.handle_clock(sender, from, clock),
        }
    }

    /// Handles a timer scheduled earlier.
    pub fn handle_timer(&mut self, timer: Timer) {
        match timer {
            Timer::Swim(timer) => {
                if let Err(error) = self.foca.handle_timer(timer, &mut self.runtime) {
                    tracing::debug!(%error, "foca timer error");
                }
                self.drain_swim();
            }
            Timer::GossipMetadata => {
                self.gossip_digest();
                let interval = self.config.metadata_gossip_interval;
                self.schedule(interval, Timer::GossipMetadata);
            }
            Timer::AnnounceToSeeds => self.announce_to_seeds(),
            Timer::ProbeClocks => {
                self.probe_clocks();
                let interval = self.config.clock_probe_interval;
                self.schedule(interval, Timer::ProbeClocks);
            }
        }
    }

    /// Changes the local node's metadata (tokens, state, load, …): bumps its
    /// version, updates the view and pushes it to a few live members.
    pub fn update_local(&mut self, change: impl FnOnce(&mut NodeMetadata)) {
        let host = self.view.local;
        let mut metadata = NodeMetadata::clone(&self.metadata[&host]);
        let stamp = metadata.stamp;
        change(&mut metadata);
        metadata.host_id = host;
        metadata.tokens.sort_unstable();
        metadata.stamp = MetadataStamp {
            generation: stamp.generation,
            version: stamp.version + 1,
        };
        let metadata = Arc::new(metadata);
        self.metadata.insert(host, metadata.clone());
        self.out
            .push(Output::Event(MembershipEvent::MetadataChanged(host)));
        self.rebuild_view(true);
        let peers = self.random_live_peers(self.config.metadata_gossip_fanout);
        for peer in peers {
            self.send_metadata(&metadata, peer);
        }
    }

    /// Tells the cluster this node is leaving on purpose (before a shutdown).
    pub fn leave(&mut self) {
        self.leaving = true;
        if let Err(error) = self.foca.leave_cluster(&mut self.runtime) {
            tracing::debug!(%error, "leaving the cluster");
        }
        self.drain_swim();
    }

    fn schedule(&mut self, after: Duration, timer: Timer) {
        self.out.push(Output::Schedule { after, timer });
    }

    fn send(&mut self, to: SocketAddr, body: &[u8]) {
        let packet = self.envelope.seal(body);
        self.stats.packets_sent += 1;
        self.stats.bytes_sent += packet.len() as u64;
        self.out.push(Output::Send { to, packet });
    }

    /// Moves foca's accumulated sends, timers and notifications into outputs.
    fn drain_swim(&mut self) {
        while let Some((to, data)) = self.runtime.to_send() {
            self.send(to.gossip_addr, &encode_swim(&data));
        }
        while let Some((after, timer)) = self.runtime.to_schedule() {
            self.schedule(after, Timer::Swim(timer));
        }
        while let Some(notification) = self.runtime.to_notify() {
            self.on_notification(notification);
        }
    }

    fn on_notification(&mut self, notification: OwnedNotification<NodeIdentity>) {
        match notification {
            OwnedNotification::MemberUp(identity) => {
                let host = identity.host_id;
                self.pull_if_stale(&identity);
                let addr = identity.gossip_addr;
                self.live.insert(host, identity);
                self.out.push(Output::Event(MembershipEvent::Up(host)));
                self.rebuild_view(false);
                // Measure a member that comes up at once, not at the next round.
                self.probe_clock(host, addr);
                self.refresh_clock_report();
            }
            OwnedNotification::MemberDown(identity) => {
                let host = identity.host_id;
                if self.live.get(&host) == Some(&identity) {
                    self.live.remove(&host);
                    self.out.push(Output::Event(MembershipEvent::Down(host)));
                    self.rebuild_view(false);
                    self.refresh_clock_report();
                }
            }
            OwnedNotification::Rename(_, identity) => {
                self.pull_if_stale(&identity);
                if let Some(live) = self.live.get_mut(&identity.host_id) {
                    *live = identity;
                }
            }
            OwnedNotification::Active => {
                self.connected = true;
                if self.seed_attempts > 1 {
                    tracing::info!(attempts = self.seed_attempts, "joined the cluster");
                }
            }
            OwnedNotification::Idle => {
                self.connected = false;
                tracing::warn!("no live member left; announcing to the seeds again");
                self.seed_attempts = 0;
                self.schedule(Duration::ZERO, Timer::AnnounceToSeeds);
            }
            OwnedNotification::Rejoin(identity) => {
                tracing::warn!(?identity, "declared down by the cluster; rejoined");
            }
            OwnedNotification::Defunct if self.leaving => {
                tracing::debug!("left the cluster");
            }
            OwnedNotification::Defunct => {
                tracing::error!("declared down by the cluster and cannot rejoin");
            }
        }
    }

    /// Pulls a member's metadata when ours is older than its identity.
    fn pull_if_stale(&mut self, identity: &NodeIdentity) {
        let stale = self
            .metadata
            .get(&identity.host_id)
            .is_none_or(|m| m.stamp.generation < identity.generation);
        if stale {
            self.send(
                identity.gossip_addr,
                &encode_control(&Control::Pull(vec![identity.host_id])),
            );
        }
    }

    fn announce_to_seeds(&mut self) {
        if self.connected {
            return;
        }
        let own = self.foca.identity().gossip_addr;
        let seeds: Vec<SocketAddr> = self
            .config
            .seeds
            .iter()
            .copied()
            .filter(|&s| s != own)
            .collect();
        if seeds.is_empty() {
            if self.seed_attempts == 0 {
                tracing::info!("no other seed: starting a new cluster");
            }
            self.seed_attempts += 1;
            return;
        }
        self.seed_attempts += 1;
        if self.seed_attempts > QUICK_SEED_RETRIES {
            tracing::warn!(
                attempts = self.seed_attempts,
                ?seeds,
                "no seed has answered yet (unreachable, not started, or another cluster/secret); retrying"
            );
        }
        for seed in seeds {
            if let Err(error) = self
                .foca
                .announce(NodeIdentity::seed(seed), &mut self.runtime)
            {
                tracing::debug!(%seed, %error, "announce failed");
            }
        }
        self.drain_swim();
        let retry = seed_retry(self.seed_attempts, self.config.seed_retry_interval);
        self.schedule(retry, Timer::AnnounceToSeeds);
    }

    fn random_live_peers(&mut self, count: usize) -> Vec<SocketAddr> {
        let peers: Vec<SocketAddr> = self.live.values().map(|i| i.gossip_addr).collect();
        peers.sample(&mut self.rng, count).copied().collect()
    }

    fn gossip_digest(&mut self) {
        let entries: Vec<(HostId, MetadataStamp)> =
            self.metadata.iter().map(|(&h, m)| (h, m.stamp)).collect();
        let peers = self.random_live_peers(self.config.metadata_gossip_fanout);
        for peer in peers {
            for part in entries.chunks(DIGEST_ENTRIES_PER_PACKET) {
                self.send(peer, &encode_control(&Control::Digest(part.to_vec())));
            }
        }
    }

    fn handle_control(&mut self, sender: HostId, from: SocketAddr, control: Control) {
        match control {
            Control::Digest(entries) => {
                let mut wanted = Vec::new();
                let mut newer = Vec::new();
                for (host, stamp) in entries {
                    match self.metadata.get(&host) {
                        Some(mine) if mine.stamp > stamp => newer.push(mine.clone()),
                        Some(mine) if mine.stamp == stamp => {}
                        _ => wanted.push(host),
                    }
                }
                if !wanted.is_empty() {
                    self.send(from, &encode_control(&Control::Pull(wanted)));
                }
                for metadata in newer {
                    self.send_metadata(&metadata, from);
                }
            }
            Control::Pull(hosts) => {
                let found: Vec<Arc<NodeMetadata>> = hosts
                    .iter()
                    .take(MAX_HOSTS_PER_PULL)
                    .filter_map(|h| self.metadata.get(h).cloned())
                    .collect();
                for metadata in found {
                    self.send_metadata(&metadata, from);
                }
            }
            Control::Metadata(chunk) => self.receive_chunk(sender, chunk),
        }
    }

    fn probe_clock(&mut self, host: HostId, addr: SocketAddr) {
        let now = self.clock.wall();
        self.offsets.probe_sent(host, now, self.clock.monotonic());
        self.send(addr, &encode_clock(&ClockMessage::Probe { sent_at: now.0 }));
    }

    /// Sends every live peer a clock probe, and re-judges (samples age).
    fn probe_clocks(&mut self) {
        let peers: Vec<(HostId, SocketAddr)> = self
            .live
            .values()
            .map(|i| (i.host_id, i.gossip_addr))
            .collect();
        for (host, addr) in peers {
            self.probe_clock(host, addr);
        }
        let known = &self.metadata;
        self.offsets.retain(|h| known.contains_key(&h));
        self.refresh_clock_report();
    }

    fn handle_clock(&mut self, sender: HostId, from: SocketAddr, clock: ClockMessage) {
        match clock {
            ClockMessage::Probe { sent_at } => {
                let echo = ClockMessage::Echo {
                    probe_sent_at: sent_at,
                    replied_at: self.clock.wall().0,
                };
                self.send(from, &encode_clock(&echo));
            }
            ClockMessage::Echo {
                probe_sent_at,
                replied_at,
            } => {
                let now = self.clock.monotonic();
                let sample = self.offsets.echo_received(
                    sender,
                    WallTime(probe_sent_at),
                    WallTime(replied_at),
                    now,
                );
                if sample.is_some() {
                    self.refresh_clock_report();
                }
            }
        }
    }

    /// Rebuilds the clock report over the live peers; logs when the verdict
    /// on this node's clock turns.
    fn refresh_clock_report(&mut self) {
        let report = self.offsets.report(
            self.live.keys().copied(),
            self.clock.monotonic(),
            self.config.max_clock_offset,
        );
        if report == *self.clock_report {
            return;
        }
        let bound_ms = self.config.max_clock_offset.as_millis();
        match (self.clock_report.verdict, report.verdict) {
            (
                ClockVerdict::Within { .. },
                ClockVerdict::Skewed {
                    offset_micros,
                    beyond,
                    members,
                },
            ) => tracing::error!(
                offset_ms = offset_micros / 1000,
                max_clock_offset_ms = bound_ms,
                beyond,
                members,
                "this node's clock is off from the majority of the live members by more                  than max_clock_offset; it refuses to coordinate writes until it is back"
            ),
            (ClockVerdict::Skewed { .. }, ClockVerdict::Within { offset_micros }) => {
                tracing::warn!(
                    offset_ms = offset_micros / 1000,
                    max_clock_offset_ms = bound_ms,
                    "this node's clock is back within max_clock_offset of the majority"
                )
            }
            _ => {}
        }
        self.clock_report = Arc::new(report);
    }

    fn send_metadata(&mut self, metadata: &NodeMetadata, to: SocketAddr) {
        for chunk in chunk_metadata(metadata.host_id, metadata.stamp, &metadata.encode()) {
            self.send(to, &encode_control(&chunk));
        }
    }

    fn receive_chunk(&mut self, sender: HostId, chunk: MetadataChunk) {
        let MetadataChunk {
            host_id,
            stamp,
            index,
            count,
            data,
        } = chunk;
        if count == 0 || count > MAX_METADATA_CHUNKS || index >= count {
            self.stats.metadata_rejected += 1;
            return;
        }
        if self
            .metadata
            .get(&host_id)
            .is_some_and(|m| m.stamp >= stamp)
        {
            return;
        }
        if !self.partial.contains_key(&(host_id, stamp))
            && self.partial.len() >= MAX_PARTIAL_METADATA
        {
            self.partial.pop_first();
        }
        let pieces = self
            .partial
            .entry((host_id, stamp))
            .or_insert_with(|| vec![None; count as usize]);
        if pieces.len() != count as usize {
            self.stats.metadata_rejected += 1;
            return;
        }
        pieces[index as usize] = Some(data);
        if pieces.iter().any(Option::is_none) {
            return;
        }
        let pieces = self
            .partial
            .remove(&(host_id, stamp))
            .expect("just completed");
        let bytes: Vec<u8> = pieces.into_iter().flatten().flatten().collect();
        match NodeMetadata::decode(&bytes) {
            Ok(metadata)
                if metadata.host_id == host_id
                    && metadata.stamp == stamp
                    && metadata.cluster_name == self.config.cluster_name =>
            {
                self.accept_metadata(metadata, sender)
            }
            Ok(_) | Err(_) => {
                self.stats.metadata_rejected += 1;
                tracing::warn!(%sender, host = %host_id, "inconsistent or undecodable metadata dropped");
            }
        }
    }

    /// Takes `metadata` (sent by `sender`) if it is newer than what this
    /// node holds of its host, and passes a change on (see
    /// [`Membership::forward_change`]).
    fn accept_metadata(&mut self, metadata: NodeMetadata, sender: HostId) {
        let host = metadata.host_id;
        if host == self.view.local {
            return;
        }
        let known = match self.metadata.get(&host) {
            Some(held) if held.stamp >= metadata.stamp => return,
            Some(_) => true,
            None => false,
        };
        let metadata = Arc::new(metadata);
        self.metadata.insert(host, metadata.clone());
        self.out
            .push(Output::Event(MembershipEvent::MetadataChanged(host)));
        self.rebuild_view(true);
        if known {
            self.forward_change(&metadata, sender);
        }
    }

    /// Passes a newer version of a member's metadata on, once (a node
    /// accepts each version once), to a few live members other than the
    /// one it came from and its subject: a change then spreads from node to
    /// node at the network's speed, as a rumour does, instead of waiting
    /// for anti-entropy rounds (a node that turned `Normal` after a join
    /// was otherwise missed by a third of a 4-node cluster for up to a
    /// round). The first sighting of a member is not passed on: a node
    /// that starts learns every member at once and would flood the cluster.
    fn forward_change(&mut self, metadata: &NodeMetadata, from: HostId) {
        let others: Vec<SocketAddr> = self
            .live
            .iter()
            .filter(|(host, _)| **host != from && **host != metadata.host_id)
            .map(|(_, info)| info.gossip_addr)
            .collect();
        let chosen: Vec<SocketAddr> = others
            .sample(&mut self.rng, self.config.metadata_gossip_fanout)
            .copied()
            .collect();
        for peer in chosen {
            self.send_metadata(metadata, peer);
        }
    }

    /// Builds a new view; with `metadata_changed`, also a new ring if the
    /// token owners changed (logged with its epoch and checksum).
    fn rebuild_view(&mut self, metadata_changed: bool) {
        let local = self.view.local;
        let members: BTreeMap<HostId, MemberInfo> = self
            .metadata
            .iter()
            .map(|(&host, metadata)| {
                let up = host == local || self.live.contains_key(&host);
                let liveness = if up { Liveness::Up } else { Liveness::Down };
                (
                    host,
                    MemberInfo {
                        metadata: metadata.clone(),
                        liveness,
                    },
                )
            })
            .collect();
        let mut ring = self.view.ring.clone();
        let mut joining = self.view.joining.clone();
        let mut pending_ring = self.view.pending_ring.clone();
        let mut removed = self.view.removed.clone();
        if metadata_changed {
            removed = removed_members(self.metadata.values().map(|m| &**m));
            let present = || {
                self.metadata
                    .values()
                    .map(|m| &**m)
                    .filter(|m| !removed.contains(&m.host_id))
            };
            let candidate = build_ring(ring.epoch() + 1, present());
            if candidate.checksum() != ring.checksum() {
                tracing::info!(
                    epoch = candidate.epoch(),
                    checksum = format_args!("{:016x}", candidate.checksum()),
                    hosts = candidate.hosts().len(),
                    tokens = candidate.token_count(),
                    "ring changed"
                );
                self.out.push(Output::Event(MembershipEvent::RingChanged {
                    epoch: candidate.epoch(),
                    checksum: candidate.checksum(),
                }));
                ring = Arc::new(candidate);
            }
            joining = joining_tokens(present());
            let pending = build_pending_ring(
                ring.epoch() + 1,
                self.metadata.values().map(|m| &**m),
                &removed,
            );
            // Keep the same `Arc` while the pending ring is unchanged: users
            // cache per-ring placements by pointer.
            pending_ring = match (pending, pending_ring) {
                (Some(new), Some(old)) if new.checksum() == old.checksum() => Some(old),
                (new, _) => new.map(Arc::new),
            };
        }
        self.view = Arc::new(ClusterView {
            local,
            members,
            ring,
            joining,
            pending_ring,
            removed,
        });
    }

    /// The hosts whose metadata this node holds (for tests and diagnostics).
    pub fn known_hosts(&self) -> BTreeSet<HostId> {
        self.metadata.keys().copied().collect()
    }
}

/// How many announces to the seeds follow each other quickly before the
/// retries slow to `seed_retry_interval` (and a warning is logged).
const QUICK_SEED_RETRIES: u32 = 3;

/// The wait after the `attempts`-th announce to the seeds: 250 ms, 500 ms,
/// 1 s, then `interval` (never more than it). Nodes started together often
/// find their seeds not listening yet; a quick retry keeps them from joining
/// seconds after the others (and choosing tokens with a view that lacks them).
fn seed_retry(attempts: u32, interval: Duration) -> Duration {
    if attempts > QUICK_SEED_RETRIES {
        return interval;
    }
    (Duration::from_millis(250) * 2u32.pow(attempts.saturating_sub(1))).min(interval)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::ClusterSecret;
    use crate::identity::Generation;
    use crate::message::encode_control;
    use proptest::prelude::*;

    fn node(secret: Option<&str>) -> Membership {
        let mut metadata = crate::metadata::tests::sample(1, 16);
        metadata.cluster_name = "test".into();
        let identity = NodeIdentity {
            host_id: metadata.host_id,
            gossip_addr: metadata.gossip_addr,
            generation: metadata.stamp.generation,
            rejoin: 0,
        };
        let config =
            MembershipConfig::lan("test", vec![]).with_secret(secret.and_then(ClusterSecret::new));
        Membership::new(config, identity, metadata, 1)
    }

    proptest! {
        /// Bodies that pass the envelope (so a peer, or an attacker holding the
        /// secret, sent them) but hold garbage never panic the node nor change
        /// its view.
        #[test]
        fn garbage_inside_a_valid_envelope_changes_nothing(
            swim in proptest::collection::vec(any::<u8>(), 0..600),
            control in proptest::collection::vec(any::<u8>(), 0..600),
        ) {
            let mut membership = node(Some("s"));
            let before = membership.view();
            let mut peer = Envelope::new("test", ClusterSecret::new("s").as_ref(), HostId::from_u128(2), Generation(1));
            let from: SocketAddr = "127.0.0.2:7000".parse().unwrap();
            membership.handle_packet(from, &peer.seal(&encode_swim(&swim)));
            let mut body = vec![1u8];
            body.extend_from_slice(&control);
            membership.handle_packet(from, &peer.seal(&body));
            prop_assert_eq!(membership.view().members.len(), before.members.len());
            prop_assert_eq!(membership.view().ring.checksum(), before.ring.checksum());
        }
    }

    proptest! {
        /// Clock echoes nobody asked for, and garbage clock bodies, leave no
        /// estimate behind (and never panic).
        #[test]
        fn forged_clock_echoes_and_garbage_change_no_estimate(
            probe_sent_at in any::<i64>(),
            replied_at in any::<i64>(),
            garbage in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let mut membership = node(None);
            let mut peer = Envelope::new("test", None, HostId::from_u128(2), Generation(1));
            let from: SocketAddr = "127.0.0.2:7000".parse().unwrap();
            let echo = ClockMessage::Echo { probe_sent_at, replied_at };
            membership.handle_packet(from, &peer.seal(&encode_clock(&echo)));
            let mut body = vec![2u8];
            body.extend_from_slice(&garbage);
            membership.handle_packet(from, &peer.seal(&body));
            prop_assert!(membership.clock_report().peers.is_empty());
            prop_assert!(!membership.clock_report().verdict.is_skewed());
        }
    }

    #[test]
    fn remembered_members_are_in_the_ring_at_once_and_down_until_seen() {
        let alone = node(None);
        assert_eq!(alone.view().ring.hosts().len(), 1);
        let mut peer = crate::metadata::tests::sample(2, 16);
        peer.cluster_name = "test".into();
        peer.tokens.iter_mut().for_each(|token| token.0 += 1);
        let mut stranger = crate::metadata::tests::sample(3, 16);
        stranger.cluster_name = "another".into();
        let mut own = crate::metadata::tests::sample(1, 16);
        own.cluster_name = "test".into();
        own.tokens.clear();
        let membership = node(None).with_remembered([peer.clone(), stranger, own]);
        let view = membership.view();
        assert_eq!(
            view.ring.hosts().len(),
            2,
            "this node and the remembered peer"
        );
        assert!(!view.is_up(peer.host_id), "down until gossip finds it up");
        assert_eq!(
            view.member(view.local).unwrap().metadata.tokens.len(),
            16,
            "its own entry is its own, not the remembered one"
        );
    }

    #[test]
    fn a_clock_probe_is_echoed_at_once_to_its_sender() {
        let mut membership = node(None);
        membership.drain_outputs();
        let mut peer = Envelope::new("test", None, HostId::from_u128(2), Generation(1));
        let from: SocketAddr = "127.0.0.2:7000".parse().unwrap();
        let probe = ClockMessage::Probe { sent_at: 42 };
        membership.handle_packet(from, &peer.seal(&encode_clock(&probe)));
        let sends: Vec<Vec<u8>> = membership
            .drain_outputs()
            .into_iter()
            .filter_map(|o| match o {
                Output::Send { to, packet } if to == from => Some(packet),
                _ => None,
            })
            .collect();
        assert_eq!(sends.len(), 1);
        let opened = peer.open(&sends[0]).unwrap();
        let before = crate::clock::system_micros();
        match Body::decode(opened.body) {
            Some(Body::Clock(ClockMessage::Echo {
                probe_sent_at,
                replied_at,
            })) => {
                assert_eq!(probe_sent_at, 42);
                assert!((replied_at - before).abs() < 60_000_000, "the system clock");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn inconsistent_metadata_chunks_are_counted_and_dropped() {
        let mut membership = node(None);
        let mut peer = Envelope::new("test", None, HostId::from_u128(2), Generation(1));
        let from: SocketAddr = "127.0.0.2:7000".parse().unwrap();
        let mut other = crate::metadata::tests::sample(2, 4);
        other.cluster_name = "another".into();
        for chunk in chunk_metadata(other.host_id, other.stamp, &other.encode()) {
            membership.handle_packet(from, &peer.seal(&encode_control(&chunk)));
        }
        let bad = Control::Metadata(MetadataChunk {
            host_id: HostId::from_u128(3),
            stamp: other.stamp,
            index: 5,
            count: 2,
            data: vec![1, 2, 3],
        });
        membership.handle_packet(from, &peer.seal(&encode_control(&bad)));
        assert_eq!(membership.stats().metadata_rejected, 2);
        assert_eq!(membership.view().members.len(), 1);
    }
}
