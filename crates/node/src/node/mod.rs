//! Starting and stopping a node, in named steps, on its
//! [`Platform`](crate::platform::Platform): read what the data
//! directory holds ([`local_state`]), start gossip, bind the ports, build
//! the shared context (and wire it as the subsystems' narrow hosts,
//! [`hosts`]), serve ([`servers`]), start the background work and,
//! for a node not yet in the ring, its join ([`tasks`]). Stopping runs it
//! backwards: servers and tasks end, gossip says goodbye, storage flushes.

mod hosts;
mod local_state;
mod servers;
mod tasks;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ringstore_identity::{NodeKeys, is_derived, key_file};
use ringstore_membership::{
    Clock, Membership, MembershipConfig, MembershipError, MembershipHandle, MetadataStamp,
    NodeIdentity, NodeMetadata, NodeRecord, NodeState,
};
use ringstore_metrics::NodeMetrics;
use ringstore_storage::Store;
use ringstore_streaming::{StreamThrottle, Streams};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::client_auth::store::NodeUsers;
use crate::client_auth::{Authenticator, Gate};
use crate::clock::{self, TimestampSource, WallClock};
use crate::config::{FailureDetection, NodeConfig};
use crate::context::NodeContext;
use crate::error::{NodeError, Result};
use crate::handoff::Handoff;
use crate::internode_auth::PeerDirectory;
use crate::known_members;
use crate::peers::Peers;
use crate::platform::{Network, Platform};
use crate::repair::state::RepairState;
use crate::replica_maps::ReplicaMaps;
use crate::schema::store::SchemaStore;
use crate::security::{self, ClusterSecrets};
use crate::serving::Serving;
use crate::tls::{ServerTls, TlsHandles};
use local_state::LocalState;
use servers::{Listeners, PortSecurity};
use tasks::wait_for;

/// A started node. Dropping it does not stop it: call [`RunningNode::shutdown`].
pub struct RunningNode {
    /// The node's shared state.
    pub context: Arc<NodeContext>,
    /// Where its client service listens.
    pub client_address: SocketAddr,
    /// Where its internode service listens.
    pub internode_address: SocketAddr,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    membership_task: JoinHandle<()>,
}

impl RunningNode {
    /// Resolves when the node asks to be stopped: after it has left the
    /// ring (decommission), or when it could not join it. The caller then
    /// calls [`RunningNode::shutdown`].
    pub async fn stop_requested(&self) {
        let mut requested = self.context.stop_requested.subscribe();
        let _ = requested.wait_for(|&stop| stop).await;
    }

    /// Stops the node: announces its departure to the cluster, stops serving,
    /// and flushes storage. Waits for all of it.
    pub async fn shutdown(self) -> Result<()> {
        let _ = self.stop.send(true);
        for task in self.tasks {
            let _ = task.await;
        }
        let _ = self.membership_task.await;
        clock::save_high_water(&self.context.store, &self.context.clock).await?;
        self.context.store.close().await?;
        tracing::info!("node stopped");
        Ok(())
    }
}

/// Starts a node with `config` on the operating system's network, clock
/// and disk, and returns once it serves requests (a fresh node chooses its
/// tokens in the background).
pub async fn start(config: NodeConfig) -> Result<RunningNode> {
    start_on(config, Platform::os()).await
}

/// Starts a node with `config` on `platform` (a simulation's), as [`start`]
/// does.
pub async fn start_on(config: NodeConfig, platform: Platform) -> Result<RunningNode> {
    let secrets = ClusterSecrets::of(&config)?;
    if matches!(platform.network, Network::Os) {
        security::announce(security::posture(&config)?, &config);
    }
    let wall_clock = wall_clock(&config, platform.clock.clone());
    let (record, keys) = load_identity(&config, &wall_clock)?;
    let local = LocalState::load(&config, wall_clock.clone(), &platform.disk).await?;

    let (stop, stopped) = watch::channel(false);
    let (serving, serving_rx) = watch::channel(Serving::Normal);
    let membership = membership(
        &config,
        &record,
        keys.clone(),
        secrets.as_ref(),
        &local,
        wall_clock,
    );
    let (membership, membership_task) = start_gossip(
        membership,
        &config,
        &platform.network,
        gossip_stop(stopped.clone(), serving_rx),
    )
    .await?;

    let listeners = Listeners::bind(&config, &platform.network).await?;
    let (client_address, internode_address) =
        (listeners.client_address, listeners.internode_address);
    tracing::info!(
        host_id = %record.host_id,
        generation = %record.generation,
        cluster = %config.cluster_name,
        client = %client_address,
        internode = %internode_address,
        gossip = %config.gossip_address,
        "node starting"
    );
    let (internode_tls, internode_client_tls) = config.server_encryption.configs()?.unzip();
    let tls = TlsHandles {
        client: config
            .client_encryption
            .server_config()?
            .map(ServerTls::new),
        internode: internode_tls.map(ServerTls::new),
    };
    // With a secret, calls are signed and checked with the keys members
    // share (see `internode_auth`); without one, the port is open.
    let directory = secrets.is_some().then(|| {
        Arc::new(PeerDirectory::new(
            keys.clone(),
            record.host_id,
            membership.clone(),
        ))
    });
    let peers = Peers::new(
        directory.clone(),
        internode_client_tls,
        config.internode_address.ip(),
        &platform.network,
    );
    let LocalState {
        store,
        schema,
        clock,
        handoff,
        tokens,
        entry,
        ..
    } = local;
    let parts = ContextParts {
        store,
        schema,
        clock,
        handoff,
        membership,
        peers,
        serving,
        tls: tls.clone(),
    };
    let context = Arc::new(node_context(config, &record, parts)?);

    let gate = client_gate(&context);
    let authenticating = gate.is_some();
    let security = PortSecurity {
        tls,
        directory,
        gate,
        keepalive: platform.network.keepalive(),
    };
    let mut tasks = servers::serve(&context, listeners, security, &stopped)?;
    tasks.extend(tasks::spawn_background(&context, authenticating, &stopped));
    tasks.extend(tasks::spawn_ring_entry(&context, entry, tokens, &stopped));
    Ok(RunningNode {
        context,
        client_address,
        internode_address,
        stop,
        tasks,
        membership_task,
    })
}

/// What the node context is built from, besides the configuration.
struct ContextParts {
    store: Store,
    schema: SchemaStore,
    clock: TimestampSource,
    handoff: Handoff,
    membership: MembershipHandle,
    peers: Peers,
    serving: watch::Sender<Serving>,
    tls: TlsHandles,
}

/// The node's shared state, with its repair state loaded and its metrics
/// registered (the storage reports its syncs to them).
fn node_context(
    config: NodeConfig,
    record: &NodeRecord,
    parts: ContextParts,
) -> Result<NodeContext> {
    let repair = RepairState::load(&parts.store, config.repair.validation_mib_per_sec)?;
    let metrics = Arc::new(NodeMetrics::new()?);
    let observed = metrics.clone();
    parts
        .store
        .observe_syncs(move |elapsed| observed.storage_synced(elapsed));
    let observed = metrics.clone();
    parts
        .store
        .observe_log_syncs(move |elapsed| observed.commitlog_synced(elapsed));
    metrics.commitlog_damage_found(parts.store.commit_log_damage());
    Ok(NodeContext {
        host_id: record.host_id,
        generation: record.generation,
        store: parts.store,
        membership: parts.membership,
        schema: parts.schema,
        replica_maps: ReplicaMaps::default(),
        peers: parts.peers,
        clock: parts.clock,
        clock_guard: Default::default(),
        handoff: parts.handoff,
        started: Instant::now(),
        stream_throttle: StreamThrottle::new(config.stream_throughput_mib_per_sec),
        streams: Streams::default(),
        operation: tokio::sync::Mutex::new(()),
        repair,
        stop_requested: watch::channel(false).0,
        metrics,
        read_latencies: Default::default(),
        read_flights: Default::default(),
        apply_queues: Default::default(),
        apply_streams: Default::default(),
        read_queues: Default::default(),
        read_many_refusals: Default::default(),
        paxos_locks: Default::default(),
        paxos_floors: Default::default(),
        ballot_clock: std::sync::Mutex::new(None),
        cas_queue: Default::default(),
        hot_keys: Default::default(),
        ring_lag: Default::default(),
        settling_ring: Default::default(),
        serving: parts.serving,
        tls: parts.tls,
        config,
    })
}

/// The node's wall clock: the platform's, deliberately off by
/// `test_clock_offset_ms` (for tests of clock skew).
fn wall_clock(config: &NodeConfig, base: Arc<dyn Clock>) -> Arc<WallClock> {
    if config.test_clock_offset_ms != 0 {
        tracing::warn!(
            offset_ms = config.test_clock_offset_ms,
            "test_clock_offset_ms is set: this node's clock is deliberately wrong (for tests only)"
        );
    }
    Arc::new(WallClock::on(base, config.test_clock_offset_ms))
}

/// Starts gossip on the network's datagram socket at the gossip address.
async fn start_gossip(
    membership: Membership,
    config: &NodeConfig,
    network: &Network,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(MembershipHandle, JoinHandle<()>)> {
    let address = config.gossip_address;
    let started = match network {
        Network::Os => ringstore_membership::start(membership, address, shutdown).await,
        Network::Simulated(transport) => match transport.bind_datagram(address).await {
            Ok(socket) => ringstore_membership::start_on(membership, socket, shutdown),
            Err(source) => Err(MembershipError::Socket {
                addr: address,
                source,
            }),
        },
    };
    Ok(started?)
}

/// The node's keys (made at the first start), its host id (the keys'
/// for a new node) and a new generation (seconds since the epoch, higher
/// than the last start's). A derived host id that the keys do not make is
/// refused: the key file was lost or swapped.
fn load_identity(
    config: &NodeConfig,
    wall_clock: &WallClock,
) -> Result<(NodeRecord, Arc<NodeKeys>)> {
    let now = u64::try_from(wall_clock.now().0 / 1_000_000)
        .unwrap_or(1)
        .max(1);
    let (keys, origin) = key_file::load_or_create(&config.data_dir)?;
    let record =
        NodeRecord::load_for_start(&config.data_dir, &config.cluster_name, now, keys.host_id())?;
    if record.host_id != keys.host_id() {
        if is_derived(record.host_id) {
            return Err(NodeError::ForeignIdentity {
                key_file: config.data_dir.join(key_file::KEY_FILE),
                host: record.host_id,
            });
        }
        if origin == key_file::Origin::Created {
            tracing::info!(
                host_id = %record.host_id,
                "made this node's identity keys; its host id (from before identities) \
                 is bound to them by the others on first sight"
            );
        }
    }
    Ok((record, Arc::new(keys)))
}

/// The gossip agent, with this node's first metadata: `Normal` with its
/// tokens if it is in the ring; `Joining` otherwise, and without tokens
/// while it is fresh (it gossips them only when its turn to join comes).
fn membership(
    config: &NodeConfig,
    record: &NodeRecord,
    keys: Arc<NodeKeys>,
    secrets: Option<&ClusterSecrets>,
    local: &LocalState,
    wall_clock: Arc<WallClock>,
) -> Membership {
    let metadata = NodeMetadata {
        host_id: record.host_id,
        keys: keys.public(),
        stamp: MetadataStamp {
            generation: record.generation,
            version: 1,
        },
        cluster_name: config.cluster_name.clone(),
        dc: config.dc.as_str().into(),
        rack: config.rack.as_str().into(),
        client_addr: config.advertised_client_address(),
        internode_addr: config.advertised_internode_address(),
        gossip_addr: config.advertised_gossip_address(),
        state: if local.entry.is_resident() {
            NodeState::Normal
        } else {
            NodeState::Joining
        },
        tokens: if local.entry.is_fresh() {
            Vec::new()
        } else {
            local.tokens.clone().unwrap_or_default()
        },
        load_bytes: local.store.load_bytes(),
        schema_version: local.schema.current().version(),
        software_version: env!("CARGO_PKG_VERSION").to_string(),
        takeovers: local.takeovers.clone(),
    };
    let identity = NodeIdentity {
        host_id: record.host_id,
        gossip_addr: config.advertised_gossip_address(),
        generation: record.generation,
        rejoin: 0,
    };
    let preset = match config.failure_detection {
        FailureDetection::Lan => MembershipConfig::lan,
        FailureDetection::Relaxed => MembershipConfig::relaxed,
    };
    let mut membership_config = preset(config.cluster_name.clone(), seeds(config, local))
        .with_secrets(secrets.map(ClusterSecrets::for_gossip).unwrap_or_default())
        .with_max_clock_offset(Duration::from_millis(config.max_clock_offset_ms));
    if config.test_metadata_digest_interval_seconds > 0 {
        membership_config.metadata_gossip_interval =
            Duration::from_secs(config.test_metadata_digest_interval_seconds);
    }
    Membership::new(membership_config, identity, metadata, keys, rand::random())
        .with_remembered(local.known_members.clone())
        .with_clock(wall_clock)
}

/// Where gossip announces the node: its seeds, and after a restart also
/// the members it knew ([`crate::known_members`]).
fn seeds(config: &NodeConfig, local: &LocalState) -> Vec<SocketAddr> {
    let mut seeds = config.seeds.clone();
    let known: Vec<SocketAddr> = known_members::gossip_addresses(&local.known_members)
        .into_iter()
        .filter(|peer| !seeds.contains(peer) && *peer != config.advertised_gossip_address())
        .collect();
    if !known.is_empty() {
        tracing::info!(
            known = known.len(),
            "announcing to the members known before the restart as well as to the seeds"
        );
    }
    seeds.extend(known);
    seeds
}

/// Resolves when gossip must stop: the node stops, or no longer serves
/// (drained, or stopped by a disk failure).
async fn gossip_stop(stopped: watch::Receiver<bool>, mut serving: watch::Receiver<Serving>) {
    tokio::select! {
        () = wait_for(stopped) => {}
        _ = serving.wait_for(|serving| !serving.is_normal()) => {}
    }
}

/// The client authenticator's gate, when passwords are checked.
fn client_gate(context: &Arc<NodeContext>) -> Option<Arc<Gate>> {
    let config = &context.config;
    if config
        .auth
        .passwords_in_clear(config.listen_address, config.client_encryption.enabled)
    {
        tracing::warn!(
            listen_address = %config.listen_address,
            "UNSAFE: passwords reach this node's plaintext client port in clear, readable by \
             anyone on the network path (auth.allow_plaintext_passwords = true); turn on \
             [client_encryption]"
        );
    }
    match config.auth.authenticator {
        Authenticator::Password => Some(Arc::new(Gate::new(
            Arc::new(NodeUsers(context.clone())),
            context.config.auth.validity_ms,
        ))),
        Authenticator::AllowAll => {
            tracing::info!(
                "authenticator = allow_all: anyone who reaches the client port may read, write \
                 and operate the cluster"
            );
            None
        }
    }
}
