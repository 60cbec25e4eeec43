//! The sans-IO membership state machine: foca plus metadata anti-entropy,
//! with signed records ([`records`]) and judged claims ([`crate::claims`]).

mod records;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::num::NonZeroU8;
use std::sync::Arc;
use std::time::Duration;

use foca::{AccumulatingRuntime, Foca, NoCustomBroadcast, OwnedNotification, PostcardCodec};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use ringstore_identity::{Binding, NodeKeys};
use ringstore_placement::HostId;

use crate::claims::Claims;
use crate::clock::{Clock, SystemClock, WallTime};
use crate::config::MembershipConfig;
use crate::envelope::{ClusterSecret, Envelope, Rejection};
use crate::identity::NodeIdentity;
use crate::message::{
    Body, ClockMessage, Control, DIGEST_ENTRIES_PER_PACKET, digest_hash, encode_clock,
    encode_control, encode_swim,
};
use crate::metadata::{MetadataStamp, NodeMetadata, NodeState, SignedMetadata};
use crate::offsets::{ClockReport, ClockVerdict, OffsetEstimator};
use crate::remembrance::Remembrance;
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
/// How many of the members it knows a disconnected node announces to, on
/// each try, besides its seeds.
const ANNOUNCE_TO_KNOWN_MEMBERS: usize = 16;
/// How many members SWIM has never heard of get an announce each metadata
/// round (see `announce_to_unheard_members`).
const UNHEARD_ANNOUNCES_PER_ROUND: usize = 8;

/// A timer the shell must deliver back through [`Membership::handle_timer`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Timer {
    /// One of foca's SWIM timers.
    Swim(foca::Timer<NodeIdentity>),
    /// Time to gossip metadata digests.
    GossipMetadata,
    /// Time to announce to the seeds (and the members known) if still alone.
    AnnounceToSeeds,
    /// Time to probe the live peers' clocks.
    ProbeClocks,
    /// Time to judge the claims held back until this node settled.
    JudgeClaims,
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
    /// The newest signed record of every known host, the local one included.
    metadata: BTreeMap<HostId, SignedMetadata>,
    /// This node's keys: its own records are signed with them.
    keys: Arc<NodeKeys>,
    /// Which keys may speak for which host id.
    binding: Binding,
    /// The verdicts on what members claim about each other.
    claims: Claims,
    /// When foca last reported this node connected (monotonic), if it is.
    connected_since: Option<Duration>,
    /// When each removed node that kept talking was last told why.
    told_removed: BTreeMap<HostId, Duration>,
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
    /// How many times foca sends each update now (see
    /// [`transmissions_for`]).
    transmissions: NonZeroU8,
}

impl Membership {
    /// A node with identity `identity`, metadata `local` (whose host and
    /// generation must match the identity) and keys `keys` (which sign its
    /// records; their public halves replace `local.keys`). Starts its
    /// timers; the first announce to the seeds is due at once.
    pub fn new(
        config: MembershipConfig,
        identity: NodeIdentity,
        mut local: NodeMetadata,
        keys: Arc<NodeKeys>,
        seed: u64,
    ) -> Membership {
        debug_assert_eq!(identity.host_id, local.host_id);
        local.keys = keys.public();
        let mut binding = Binding::default();
        let bound = binding.admit(local.host_id, &local.keys);
        debug_assert!(bound, "a node's host id is its keys'");
        let envelope = Envelope::with_secrets(
            &config.cluster_name,
            &config.cluster_secrets,
            identity.host_id,
            identity.generation,
        );
        let transmissions = config.swim.max_transmissions;
        let foca = Foca::new(
            identity.clone(),
            config.swim.clone(),
            StdRng::seed_from_u64(seed),
            PostcardCodec,
        );
        let ring = Arc::new(build_ring(1, std::iter::once(&local), None));
        let host = local.host_id;
        let max_clock_offset = config.max_clock_offset;
        let mut membership = Membership {
            config,
            foca,
            runtime: AccumulatingRuntime::new(),
            envelope,
            rng: StdRng::seed_from_u64(seed ^ 0x6d65_6d62),
            metadata: BTreeMap::from([(host, local.sign(&keys))]),
            keys,
            binding,
            claims: Claims::default(),
            connected_since: None,
            told_removed: BTreeMap::new(),
            live: BTreeMap::new(),
            partial: BTreeMap::new(),
            view: Arc::new(ClusterView {
                local: host,
                members: BTreeMap::new(),
                ring,
                joining: BTreeMap::new(),
                pending_ring: None,
                removed: BTreeSet::new(),
                removal_claims: BTreeSet::new(),
            }),
            connected: false,
            leaving: false,
            seed_attempts: 0,
            stats: MembershipStats::default(),
            out: Vec::new(),
            clock: SystemClock::shared(),
            offsets: OffsetEstimator::default(),
            clock_report: Arc::new(ClockReport::empty(max_clock_offset)),
            transmissions,
        };
        membership.rebuild_view(true);
        membership.schedule(Duration::ZERO, Timer::AnnounceToSeeds);
        let interval = membership.config.metadata_gossip_interval;
        membership.schedule(interval, Timer::GossipMetadata);
        let probes = membership.config.clock_probe_interval;
        membership.schedule(probes, Timer::ProbeClocks);
        membership
    }

    /// Starts with the records of the members this node knew before a
    /// restart and the claims it had accepted (the node saves them:
    /// [`Membership::remembrance`]), so that its view holds the whole ring
    /// from the first moment, each such member down until gossip finds it
    /// up, and gossip replaces each copy with any newer one. Without them a
    /// restarted node would place keys on whatever part of the ring gossip
    /// had brought so far. Its own entry, other clusters' and records whose
    /// keys may not speak for their host are ignored.
    pub fn with_remembered(mut self, memory: Remembrance) -> Membership {
        for record in memory.records {
            let metadata = &record.metadata;
            let host = metadata.host_id;
            if host == self.view.local || metadata.cluster_name != self.config.cluster_name {
                continue;
            }
            if record.signature.is_some() && !self.binding.admit(host, &metadata.keys) {
                tracing::warn!(%host, "a remembered record signed by other keys than its host's; ignored");
                continue;
            }
            let newer = self
                .metadata
                .get(&host)
                .is_none_or(|known| known.metadata.stamp < metadata.stamp);
            if newer {
                self.metadata.insert(host, record);
            }
        }
        self.claims = Claims::remembered(memory.claims);
        self.rebuild_view(true);
        self
    }

    /// What a restart must remember (see [`Membership::with_remembered`]).
    pub fn remembrance(&self) -> Remembrance {
        Remembrance {
            records: self
                .metadata
                .iter()
                .filter(|(host, _)| **host != self.view.local)
                .map(|(_, record)| record.clone())
                .collect(),
            claims: self.claims.accepted().copied().collect(),
        }
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
        if self.view.removed.contains(&sender) {
            self.refuse_removed(sender, from);
            return;
        }
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
                self.announce_to_unheard_members();
                let interval = self.config.metadata_gossip_interval;
                self.schedule(interval, Timer::GossipMetadata);
            }
            Timer::AnnounceToSeeds => self.announce_to_seeds(),
            Timer::ProbeClocks => {
                self.probe_clocks();
                let interval = self.config.clock_probe_interval;
                self.schedule(interval, Timer::ProbeClocks);
            }
            Timer::JudgeClaims => self.rebuild_view(true),
        }
    }

    /// Changes the local node's metadata (tokens, state, load, …): bumps its
    /// version, updates the view and pushes it to a few live members.
    pub fn update_local(&mut self, change: impl FnOnce(&mut NodeMetadata)) {
        let host = self.view.local;
        let mut metadata = NodeMetadata::clone(&self.metadata[&host].metadata);
        let stamp = metadata.stamp;
        change(&mut metadata);
        metadata.stamp = MetadataStamp {
            generation: stamp.generation,
            version: stamp.version + 1,
        };
        self.publish_local(metadata);
    }

    /// Signs `metadata` as this node's newest record, updates the view and
    /// pushes it to a few live members.
    fn publish_local(&mut self, mut metadata: NodeMetadata) {
        let host = self.view.local;
        metadata.host_id = host;
        metadata.keys = self.keys.public();
        metadata.tokens.sort_unstable();
        let record = metadata.sign(&self.keys);
        self.metadata.insert(host, record.clone());
        self.out
            .push(Output::Event(MembershipEvent::MetadataChanged(host)));
        self.rebuild_view(true);
        let peers = self.random_live_peers(self.config.metadata_gossip_fanout);
        for peer in peers {
            self.send_metadata(&record, peer);
        }
    }

    /// Replaces the cluster secrets (a step of a rotation: the first seals,
    /// every one opens). Refused (`false`) when it would turn
    /// authentication on or off.
    pub fn set_secrets(&mut self, secrets: Vec<ClusterSecret>) -> bool {
        let changed = self.envelope.set_secrets(&secrets);
        if changed {
            self.config.cluster_secrets = secrets;
        }
        changed
    }

    /// Asks the node at `from` (a gossip address) for its copies of `hosts`'
    /// records: the way to fetch what another member is known to hold —
    /// a down member's record, say, that no digest has brought yet.
    /// Answered as any pull is: each record it holds, signed by its host.
    pub fn pull(&mut self, from: SocketAddr, hosts: &[HostId]) {
        for part in hosts.chunks(MAX_HOSTS_PER_PULL) {
            self.send(from, &encode_control(&Control::Pull(part.to_vec())));
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
        // One packet can bring many members up or down (a feed, a gossip
        // of joins): the view and the clock verdict are rebuilt once for
        // all of them, not once each (a start of n nodes at once cost each
        // node n rebuilds of an n-member view).
        let mut liveness_changed = false;
        while let Some(notification) = self.runtime.to_notify() {
            liveness_changed |= self.on_notification(notification);
        }
        if liveness_changed {
            self.rebuild_view(false);
            self.refresh_clock_report();
        }
    }

    /// Fits how many times foca sends each update to the cluster's size:
    /// the preset's count, or more once the members known call for it
    /// ([`transmissions_for`]). Called when records or liveness change.
    fn fit_transmissions(&mut self) {
        let members = self.metadata.len().max(self.live.len() + 1);
        let wanted = transmissions_for(members).max(self.config.swim.max_transmissions);
        if wanted == self.transmissions {
            return;
        }
        let mut swim = self.config.swim.clone();
        swim.max_transmissions = wanted;
        match self.foca.set_config(swim) {
            Ok(()) => {
                tracing::debug!(members, transmissions = wanted, "updates sent more often");
                self.transmissions = wanted;
            }
            Err(error) => tracing::warn!(%error, "foca refused the transmission count"),
        }
    }

    /// Acts on one of foca's notifications; true when a member came up or
    /// went down (the caller rebuilds the view).
    fn on_notification(&mut self, notification: OwnedNotification<NodeIdentity>) -> bool {
        match notification {
            OwnedNotification::MemberUp(identity) => {
                let host = identity.host_id;
                self.pull_if_stale(&identity);
                let addr = identity.gossip_addr;
                tracing::info!(%host, %addr, "member up");
                self.live.insert(host, identity);
                self.out.push(Output::Event(MembershipEvent::Up(host)));
                // Measure a member that comes up at once, not at the next
                // round, where every member is probed each round anyway (a
                // whole big cluster coming up would cost n² probes at once).
                if self.live.len() <= self.config.clock_probe_fanout {
                    self.probe_clock(host, addr);
                }
                return true;
            }
            OwnedNotification::MemberDown(identity) => {
                let host = identity.host_id;
                if self.live.get(&host) == Some(&identity) {
                    tracing::info!(%host, addr = %identity.gossip_addr, "member down");
                    self.live.remove(&host);
                    self.out.push(Output::Event(MembershipEvent::Down(host)));
                    return true;
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
                self.connected_since = Some(self.clock.monotonic());
                let settle = self.config.claim_settle;
                self.schedule(settle, Timer::JudgeClaims);
                if self.seed_attempts > 1 {
                    tracing::info!(attempts = self.seed_attempts, "joined the cluster");
                }
            }
            OwnedNotification::Idle => {
                self.connected = false;
                self.connected_since = None;
                tracing::warn!("no live member left; announcing to the seeds again");
                self.seed_attempts = 0;
                self.schedule(Duration::ZERO, Timer::AnnounceToSeeds);
            }
            OwnedNotification::Rejoin(identity) => {
                // foca took a new identity and starts over disconnected: no
                // probes, no announces, until a message reaches the new
                // identity. Those its peers send go to the old one and are
                // dropped, so when every node rejoins at once (a paused node's
                // held verdicts delivered together) nobody would speak again:
                // announce to the seeds and members known, until one
                // answers (simulation seed 8984).
                tracing::warn!(?identity, "declared down by the cluster; rejoined");
                self.connected = false;
                self.connected_since = None;
                self.seed_attempts = 0;
                self.schedule(Duration::ZERO, Timer::AnnounceToSeeds);
            }
            OwnedNotification::Defunct if self.leaving => {
                tracing::debug!("left the cluster");
            }
            OwnedNotification::Defunct => {
                tracing::error!("declared down by the cluster and cannot rejoin");
            }
        }
        false
    }

    /// Pulls a member's metadata when ours is older than its identity.
    fn pull_if_stale(&mut self, identity: &NodeIdentity) {
        let stale = self
            .metadata
            .get(&identity.host_id)
            .is_none_or(|m| m.metadata.stamp.generation < identity.generation);
        if stale {
            self.send(
                identity.gossip_addr,
                &encode_control(&Control::Pull(vec![identity.host_id])),
            );
        }
    }

    /// Announces to the seeds, and to every member this node knows of (not
    /// removed), while it has no live member: a node alone, a node that just
    /// rejoined, or the only seed after a cut (it has no other seed). A new
    /// node knows no member, so it announces to the seeds alone; with
    /// neither, it starts a new cluster.
    fn announce_to_seeds(&mut self) {
        if self.connected {
            return;
        }
        let own = self.foca.identity().gossip_addr;
        let mut seeds: Vec<SocketAddr> = self
            .config
            .seeds
            .iter()
            .copied()
            .filter(|&s| s != own)
            .collect();
        let own_host = self.foca.identity().host_id;
        let known: Vec<SocketAddr> = self
            .metadata
            .values()
            .map(|m| &m.metadata)
            .filter(|m| m.host_id != own_host && !self.view.removed.contains(&m.host_id))
            .map(|m| m.gossip_addr)
            .filter(|addr| *addr != own && !seeds.contains(addr))
            .collect();
        // A sample of the members known, not all: one answer is enough,
        // and a whole cluster restarted together would otherwise send n²
        // announces (and their n² feeds) at once.
        seeds.extend(
            known
                .sample(&mut self.rng, ANNOUNCE_TO_KNOWN_MEMBERS)
                .copied(),
        );
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
        self.announce_to(seeds);
        let retry = seed_retry(self.seed_attempts, self.config.seed_retry_interval);
        self.schedule(retry, Timer::AnnounceToSeeds);
    }

    /// Announces to a few members whose signed metadata this node holds but
    /// of whom SWIM has never heard, neither up nor down. When many nodes
    /// start at once, SWIM's dissemination of the joins ends (each update
    /// is sent a bounded number of times) with some pairs that never met;
    /// each would find the other only when one happened to probe it, on
    /// average n/2 probe periods later (a 200-node start took 81 simulated
    /// seconds, most of it waiting for the last two such pairs). The
    /// metadata gossip already told this node the member exists and where:
    /// an announce makes the member answer with its own view, and each
    /// side then counts the other as up. Members removed, left, or known to
    /// SWIM as down are not announced to (foca announces to down members by
    /// itself).
    fn announce_to_unheard_members(&mut self) {
        if !self.connected {
            // The announce-to-seeds loop is running.
            return;
        }
        let heard: BTreeSet<HostId> = self
            .foca
            .iter_membership_state()
            .map(|member| member.id().host_id)
            .collect();
        let local = self.view.local;
        let unheard: Vec<SocketAddr> = self
            .metadata
            .values()
            .map(|record| &record.metadata)
            .filter(|m| {
                m.host_id != local
                    && m.state != NodeState::Left
                    && !self.view.removed.contains(&m.host_id)
                    && !heard.contains(&m.host_id)
            })
            .map(|m| m.gossip_addr)
            .collect();
        let chosen: Vec<SocketAddr> = unheard
            .sample(&mut self.rng, UNHEARD_ANNOUNCES_PER_ROUND)
            .copied()
            .collect();
        self.announce_to(chosen);
    }

    /// Sends foca's announce to each address (answered with the receiver's
    /// view of the cluster).
    fn announce_to(&mut self, addrs: Vec<SocketAddr>) {
        for addr in addrs {
            if let Err(error) = self
                .foca
                .announce(NodeIdentity::seed(addr), &mut self.runtime)
            {
                tracing::debug!(%addr, %error, "announce failed");
            }
        }
        self.drain_swim();
    }

    fn random_live_peers(&mut self, count: usize) -> Vec<SocketAddr> {
        let peers: Vec<SocketAddr> = self.live.values().map(|i| i.gossip_addr).collect();
        peers.sample(&mut self.rng, count).copied().collect()
    }

    /// Sends the hash of this node's digest to a few random live peers;
    /// a peer whose own differs asks for the whole digest
    /// ([`Membership::send_digest`]).
    fn gossip_digest(&mut self) {
        let hash = Control::DigestHash(self.digest_hash());
        let peers = self.random_live_peers(self.config.metadata_gossip_fanout);
        for peer in peers {
            self.send(peer, &encode_control(&hash));
        }
    }

    /// The hash of the (host, stamp) of every record held.
    fn digest_hash(&self) -> u64 {
        digest_hash(
            self.metadata
                .iter()
                .map(|(host, record)| (host, &record.metadata.stamp)),
        )
    }

    /// Sends `to` the (host, stamp) of every record held, a packet per
    /// [`DIGEST_ENTRIES_PER_PACKET`] entries: it pulls what is newer here
    /// and pushes back what it holds newer.
    fn send_digest(&mut self, to: SocketAddr) {
        let entries: Vec<(HostId, MetadataStamp)> = self
            .metadata
            .iter()
            .map(|(&h, m)| (h, m.metadata.stamp))
            .collect();
        for part in entries.chunks(DIGEST_ENTRIES_PER_PACKET) {
            self.send(to, &encode_control(&Control::Digest(part.to_vec())));
        }
    }

    fn handle_control(&mut self, sender: HostId, from: SocketAddr, control: Control) {
        match control {
            Control::Digest(entries) => {
                let mut wanted = Vec::new();
                let mut newer = Vec::new();
                for (host, stamp) in entries {
                    match self.metadata.get(&host) {
                        Some(mine) if mine.metadata.stamp > stamp => newer.push(mine.clone()),
                        Some(mine) if mine.metadata.stamp == stamp => {}
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
                let found: Vec<SignedMetadata> = hosts
                    .iter()
                    .take(MAX_HOSTS_PER_PULL)
                    .filter_map(|h| self.metadata.get(h).cloned())
                    .collect();
                for metadata in found {
                    self.send_metadata(&metadata, from);
                }
            }
            Control::Metadata(chunk) => self.receive_chunk(sender, chunk),
            Control::DigestHash(hash) => {
                if hash != self.digest_hash() {
                    self.send(from, &encode_control(&Control::SendDigest));
                }
            }
            // Only to a live member: the answer is many packets.
            Control::SendDigest => {
                if self.live.contains_key(&sender) {
                    self.send_digest(from);
                }
            }
        }
    }

    fn probe_clock(&mut self, host: HostId, addr: SocketAddr) {
        let now = self.clock.wall();
        self.offsets.probe_sent(host, now, self.clock.monotonic());
        self.send(addr, &encode_clock(&ClockMessage::Probe { sent_at: now.0 }));
    }

    /// Probes the clocks of up to `clock_probe_fanout` random live peers
    /// (all of them in a small cluster): a fixed number per interval, not
    /// one per member, so a node's probe traffic does not grow with the
    /// cluster. The verdict rests on whichever peers have a recent estimate,
    /// and is judged again each interval (samples age).
    fn probe_clocks(&mut self) {
        let live: Vec<(HostId, SocketAddr)> = self
            .live
            .values()
            .map(|i| (i.host_id, i.gossip_addr))
            .collect();
        let peers: Vec<(HostId, SocketAddr)> = live
            .sample(&mut self.rng, self.config.clock_probe_fanout)
            .copied()
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
                // The verdict is judged again at the next probe round, not
                // on every echo: judging reads every peer's estimate, and
                // echoes come `clock_probe_fanout` to a round.
                let now = self.clock.monotonic();
                self.offsets.echo_received(
                    sender,
                    WallTime(probe_sent_at),
                    WallTime(replied_at),
                    now,
                );
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

    /// Builds a new view; with `metadata_changed` (or a claim newly
    /// accepted), also a new ring if the token owners changed (logged with
    /// its epoch and checksum). Claims are judged first (see
    /// [`crate::claims`]): the view shows each member's takeovers with the
    /// refused and pending claims left out.
    fn rebuild_view(&mut self, metadata_changed: bool) {
        let local = self.view.local;
        let judgement = self.judge_claims();
        let metadata_changed = metadata_changed
            || !judgement.newly_accepted.is_empty()
            || !judgement.newly_refused.is_empty();
        let effective: BTreeMap<HostId, Arc<NodeMetadata>> = self
            .metadata
            .iter()
            .map(|(&host, record)| (host, self.claims.effective(&record.metadata)))
            .collect();
        let members: BTreeMap<HostId, MemberInfo> = effective
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
            self.stats.ring_builds += 1;
            removed = removed_members(effective.values().map(|m| &**m));
            let present = || {
                effective
                    .values()
                    .map(|m| &**m)
                    .filter(|m| !removed.contains(&m.host_id))
            };
            let candidate = build_ring(ring.epoch() + 1, present(), Some(&ring));
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
                effective.values().map(|m| &**m),
                &removed,
                &ring,
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
            removal_claims: self.claims.against(local),
        });
        self.fit_transmissions();
    }

    /// Judges the claims of every record held; counts and logs the refused.
    fn judge_claims(&mut self) -> crate::claims::Judgement {
        let local = self.view.local;
        let settled = self.connected_since.is_some_and(|since| {
            self.clock.monotonic().saturating_sub(since) >= self.config.claim_settle
        });
        let live = &self.live;
        let judgement = self.claims.judge(
            self.metadata.values().map(|r| &*r.metadata),
            local,
            |host| live.contains_key(&host),
            settled,
        );
        for claim in &judgement.newly_refused {
            self.stats.claims_refused += 1;
            tracing::warn!(
                claimant = %claim.claimant,
                subject = %claim.subject,
                kind = ?claim.kind,
                "a member claims to take over a node this node sees up (or this node \
                 itself): refused"
            );
        }
        for claim in &judgement.newly_accepted {
            tracing::info!(
                claimant = %claim.claimant,
                subject = %claim.subject,
                kind = ?claim.kind,
                "accepted a member's claim about a node this node sees down"
            );
        }
        judgement
    }

    /// The hosts whose metadata this node holds (for tests and diagnostics).
    pub fn known_hosts(&self) -> BTreeSet<HostId> {
        self.metadata.keys().copied().collect()
    }
}

/// How many announces to the seeds follow each other quickly before the
/// retries slow to `seed_retry_interval` (and a warning is logged).
const QUICK_SEED_RETRIES: u32 = 3;

/// How many times each SWIM update (a member up, suspected, down) must be
/// sent for it to reach every one of `members`: `4 · log10(members + 1)`,
/// rounded up (memberlist's and foca's rule). An update spreads as an
/// epidemic in which each node that has it sends it `k` times, and the
/// share of members it never reaches is about `e^-k`. At a fixed 8 that
/// is one member in 3,000, so at 1,000 nodes, by this estimate, some
/// member missed a death in more than a quarter of the cases and learned
/// it only when it probed the dead node itself, up to n probe periods
/// later (a 1,000-node simulation waited more than 600 s). At 1,000
/// members the count is 13: one member in 440,000.
pub(crate) fn transmissions_for(members: usize) -> NonZeroU8 {
    let count = (4.0 * ((members as f64) + 1.0).log10()).ceil();
    NonZeroU8::new(count.clamp(1.0, f64::from(u8::MAX)) as u8).expect("at least one")
}

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
mod tests;
