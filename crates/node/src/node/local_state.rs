//! The first step of a start: what the node reads from its data directory
//! before it talks to anyone — storage, tokens, schema, the write clock,
//! hints, takeovers — and from that, how it takes its place in the ring.

use std::sync::Arc;
use std::time::Duration;

use ringstore_membership::{Remembrance, Takeovers};
use ringstore_placement::Token;
use ringstore_storage::{
    CommitLogOptions, Durability, Engine, FileSystem, OsFileSystem, SledEngine, SledOptions, Store,
};
use ringstore_streaming::StreamOperation;

use crate::clock::{self, Resumed, TimestampSource, WallClock};
use crate::config::{DurabilityMode, NodeConfig};
use crate::error::{NodeError, Result, TopologyError};
use crate::handoff::Handoff;
use crate::known_members;
use crate::platform::Disk;
use crate::schema::store::SchemaStore;
use crate::topology::persisted;

/// What the node found on disk.
pub(super) struct LocalState {
    pub store: Store,
    pub schema: SchemaStore,
    pub clock: TimestampSource,
    pub handoff: Handoff,
    pub takeovers: Takeovers,
    /// The members it knew before a restart, and the claims it accepted.
    pub known_members: Remembrance,
    /// Its tokens, saved by an earlier start or fixed by `initial_token`.
    pub tokens: Option<Vec<Token>>,
    /// How it takes its place in the ring.
    pub entry: RingEntry,
}

/// How a starting node takes its place in the ring.
pub(super) enum RingEntry {
    /// It holds its ranges already: it serves as `Normal`.
    Resident,
    /// A fresh node: it joins (its tokens `initial_token`, or chosen when
    /// its turn comes).
    Join,
    /// A fresh node that takes over the dead node `replace_address` names.
    Replace(String),
    /// It stopped in the middle of this bootstrap, and resumes it.
    Resume(StreamOperation),
}

impl RingEntry {
    /// Whether it gossips `Normal` from the start.
    pub fn is_resident(&self) -> bool {
        matches!(self, RingEntry::Resident)
    }

    /// Whether it has no tokens to gossip yet (it gossips them only when
    /// its turn to join comes).
    pub fn is_fresh(&self) -> bool {
        matches!(self, RingEntry::Join | RingEntry::Replace(_))
    }
}

impl LocalState {
    /// Opens the node's storage on `disk` and reads what it kept; refuses a
    /// node that was decommissioned or whose settings contradict what it
    /// saved.
    pub async fn load(
        config: &NodeConfig,
        wall_clock: Arc<WallClock>,
        disk: &Disk,
    ) -> Result<LocalState> {
        let store = open_store(config, disk).await?;
        if persisted::was_decommissioned(&store)? {
            return Err(NodeError::Decommissioned {
                data_dir: config.data_dir.clone(),
            });
        }
        if config.replace_address.is_some() && config.initial_token.is_some() {
            return Err(TopologyError::ReplaceWithInitialToken.into());
        }
        let fresh = persisted::saved_tokens(&store)?.is_none();
        if fresh {
            // Before any token is saved: a restart after it must still bootstrap.
            persisted::set_unfinished_bootstrap(&store, Some(StreamOperation::Bootstrap)).await?;
        }
        let tokens = persisted::startup_tokens(&store, config.initial_token.as_deref()).await?;
        let entry = match (fresh, persisted::unfinished_bootstrap(&store)?) {
            (true, _) => match &config.replace_address {
                Some(address) => RingEntry::Replace(address.clone()),
                None => RingEntry::Join,
            },
            (false, Some(operation)) => RingEntry::Resume(operation),
            (false, None) => RingEntry::Resident,
        };
        Ok(LocalState {
            schema: SchemaStore::load(store.clone())?,
            clock: resume_clock(&store, config, wall_clock.clone())?,
            handoff: Handoff::open(&store, &config.hints, wall_clock)?,
            takeovers: persisted::saved_takeovers(&store)?,
            known_members: known_members::load(&store)?,
            tokens,
            entry,
            store,
        })
    }
}

/// Opens the node's storage, on the blocking pool: opening sled reads its
/// files, and after a crash the store recounts every keyspace's live bytes.
async fn open_store(config: &NodeConfig, disk: &Disk) -> Result<Store> {
    let options = SledOptions {
        cache_capacity_bytes: config.storage.cache_capacity_mb << 20,
        flush_every_ms: None,
    };
    let path = config.data_dir.join("db");
    let durability = match config.storage.durability {
        DurabilityMode::Batch => Durability::Batch,
        DurabilityMode::Periodic => Durability::Periodic {
            interval: Duration::from_millis(config.storage.periodic_sync_ms.max(1)),
        },
    };
    let disk = disk.clone();
    let runs_dir = config.data_dir.join("runs");
    let commit_log = config.storage.commit_log.then(|| CommitLogOptions {
        sync_window: Duration::from_micros(config.storage.commit_log_sync_window_us),
        ..CommitLogOptions::new(config.data_dir.join("commitlog"))
    });
    ringstore_storage::offload::spawn_blocking(move || {
        // The commit log and the runs of bulk loads (see `Store::start_run`)
        // live beside the engine, on the same disk.
        let (engine, files): (Arc<dyn Engine>, Arc<dyn FileSystem>) = match disk {
            Disk::Sled => (
                Arc::new(SledEngine::open(path, options)?),
                OsFileSystem::shared(),
            ),
            Disk::Simulated { engine, files } => (engine, files),
        };
        Ok(match commit_log {
            Some(log) => Store::open_on_files(engine, durability, log, Some(runs_dir), files)?,
            None => Store::open(engine, durability)?,
        })
    })
    .await
    .map_err(NodeError::task("opening the storage"))?
}

/// The write-timestamp source, resumed above the mark the previous run saved
/// unless that mark is implausibly far ahead of the wall clock.
fn resume_clock(
    store: &Store,
    config: &NodeConfig,
    wall_clock: Arc<WallClock>,
) -> Result<TimestampSource> {
    let max_ahead = Duration::from_secs(config.max_client_timestamp_skew_seconds);
    let saved = clock::load_high_water(store)?;
    let (source, resumed) = TimestampSource::resume(saved, wall_clock, max_ahead);
    if let Resumed::Distrusted { saved, now } = resumed {
        tracing::warn!(
            %saved,
            %now,
            "the saved clock high-water mark is far ahead of the wall clock; ignoring it \
             (was the clock wrong before the restart?)"
        );
    }
    Ok(source)
}
