//! Hinted handoff on a node: storing hints for replicas a write could not
//! reach, and replaying them, throttled, when those replicas are up again.
//!
//! The bookkeeping is `ringstore_hints` (the durable hint store, the hint
//! window, and the sans-IO replay scheduler with its throttle); this module
//! feeds it membership events and the clock, and carries hints to their
//! targets over the internode `Apply` RPC. A hint is deleted only after its
//! target acknowledged it; a failed delivery is retried with backoff. Order
//! does not matter: replicas merge by last write wins.
//!
//! A hint that can never be applied must not block the ones behind it: hints
//! of a keyspace this node's schema knows to be dropped are discarded before
//! sending, and those the target refuses for good (listed in its
//! `ApplyResponse`) are discarded on its answer, each counted by reason.
//!
//! Liveness comes from the membership *view*, not its event stream: the task
//! watches the view (a `watch` channel keeps only the newest, so it cannot
//! lag) and on every change rescans each member's liveness into the window
//! and the scheduler, so a lost `Up` cannot strand a target's hints.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use ringstore_hints::{
    Hint, HintCounters, HintId, HintLimits, HintStore, HintWindow, ReplayAction, ReplayConfig,
    ReplayScheduler, TargetStats, Undeliverable,
};
use ringstore_membership::{ClusterView, Liveness, MembershipHandle, NodeState};
use ringstore_metrics::{InternodeRpc, NodeMetrics};
use ringstore_placement::HostId;
use ringstore_proto::v1 as pb;
use ringstore_storage::{Cell, KeyspaceId, Store};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::clock::WallClock;
use crate::config::HintsConfig;
use crate::convert::cell_to_pb;
use crate::error::{NodeError, Result};
use crate::peers::Peers;
use crate::schema::Schema;

/// What hinted handoff needs from the running node, and nothing more: the
/// node's context implements it (in `context.rs`), so this module never
/// names the context and the two do not import each other.
pub trait HandoffHost: Send + Sync {
    /// This node's host id.
    fn host_id(&self) -> HostId;
    /// Its storage (hints taken over are applied to it).
    fn store(&self) -> &Store;
    /// Its handoff.
    fn handoff(&self) -> &Handoff;
    /// The current schema.
    fn schema(&self) -> Arc<Schema>;
    /// Its membership task (views to watch, the current view).
    fn membership(&self) -> &MembershipHandle;
    /// Internode clients.
    fn peers(&self) -> &Peers;
    /// The write timeout, in milliseconds.
    fn write_timeout_ms(&self) -> u64;
    /// Where internode latency is recorded.
    fn metrics(&self) -> &NodeMetrics;
}

/// The node's hinted handoff.
pub struct Handoff {
    /// Shared with the blocking-pool tasks that scan and write it.
    hints: Arc<HintStore>,
    window: Mutex<HintWindow>,
    scheduler: Mutex<ReplayScheduler>,
    enabled: AtomicBool,
    paused: AtomicBool,
    /// Wakes the replay task: a hint was stored or a setting changed.
    wake: Notify,
    started: Instant,
    /// The node's wall clock: hint creation times and ages.
    clock: Arc<WallClock>,
    gc_grace: Duration,
    /// Hints the coordinator could not store (a storage failure).
    store_failures: AtomicU64,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Critical sections only update in-memory bookkeeping.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Handoff {
    /// Opens the hint store of `store` with the settings of `config`; hint
    /// times are read from `clock`.
    pub fn open(store: &Store, config: &HintsConfig, clock: Arc<WallClock>) -> Result<Handoff> {
        let hints = HintStore::open(
            store.hints(),
            HintLimits {
                max_bytes_per_target: config.max_hint_bytes_per_target,
            },
        )
        .map_err(NodeError::hints("opening the hint store"))?;
        let started = Instant::now();
        Ok(Handoff {
            hints: Arc::new(hints),
            window: Mutex::new(HintWindow::new(Duration::from_secs(
                config.max_hint_window_seconds,
            ))),
            scheduler: Mutex::new(ReplayScheduler::new(
                ReplayConfig {
                    bytes_per_second: config.hinted_handoff_throttle_kib * 1024,
                    ..ReplayConfig::default()
                },
                Duration::ZERO,
            )),
            enabled: AtomicBool::new(config.enabled),
            paused: AtomicBool::new(false),
            wake: Notify::new(),
            started,
            clock,
            gc_grace: Duration::from_secs(config.gc_grace_seconds),
            store_failures: AtomicU64::new(0),
        })
    }

    fn now(&self) -> Duration {
        self.started.elapsed()
    }

    /// The `gc_grace` of each keyspace: the schema's, or the node's
    /// `hints.gc_grace_seconds` for a keyspace the schema does not know.
    fn gc_grace_lookup(
        &self,
        context: &dyn HandoffHost,
    ) -> impl Fn(KeyspaceId) -> Duration + Send + 'static {
        let (schema, fallback) = (context.schema(), self.gc_grace);
        move |id| {
            schema
                .entries()
                .find(|e| e.keyspace.id == id)
                .map_or(fallback, |e| {
                    Duration::from_secs(e.keyspace.gc_grace_seconds.into())
                })
        }
    }

    /// Runs `op` on the hint store on tokio's blocking pool: its scans and
    /// writes are sled calls that may block on I/O.
    async fn off_worker<T: Send + 'static>(
        &self,
        op: impl FnOnce(&HintStore) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let hints = self.hints.clone();
        ringstore_storage::offload::spawn_blocking(move || op(&hints))
            .await
            .map_err(NodeError::task("a hint store call"))?
    }

    /// The next batch of `target`'s hints, of at most `max_bytes`, read off
    /// the async workers.
    async fn next_batch(
        &self,
        context: &dyn HandoffHost,
        target: HostId,
        max_bytes: u64,
    ) -> Result<Vec<(HintId, Hint)>> {
        let max_age = self.gc_grace_lookup(context);
        let now = self.clock.now();
        self.off_worker(move |hints| {
            hints
                .next_batch(target, max_bytes, now, max_age)
                .map_err(NodeError::hints("reading hints"))
        })
        .await
    }

    /// Whether this node's schema knows keyspace `id` to be dropped.
    fn is_dropped(context: &dyn HandoffHost, id: KeyspaceId) -> bool {
        context
            .schema()
            .entries()
            .any(|e| e.dropped && e.keyspace.id == id)
    }

    /// How long ago the oldest hint pending for `target` was created: the
    /// hint window survives a restart through it.
    async fn oldest_hint_age(&self, target: HostId) -> Option<Duration> {
        let oldest = self
            .off_worker(move |hints| {
                hints
                    .oldest_hint(target)
                    .map_err(NodeError::hints("reading the oldest hint"))
            })
            .await;
        let oldest = match oldest {
            Ok(oldest) => oldest?,
            Err(error) => {
                tracing::warn!(%target, %error, "reading the oldest hint");
                return None;
            }
        };
        let micros = self.clock.now().0.saturating_sub(oldest.0);
        Some(Duration::from_micros(u64::try_from(micros).unwrap_or(0)))
    }

    /// Stores a hint of `cell` for `target`, if handoff is enabled and the
    /// target is within the hint window; durable on return. Whether it was stored.
    pub async fn hint(
        &self,
        store: &Store,
        target: HostId,
        keyspace: KeyspaceId,
        key: &[u8],
        cell: &Cell,
    ) -> Result<bool> {
        if !self.enabled.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let oldest_hint_age = self.oldest_hint_age(target).await;
        if !lock(&self.window).should_hint(target, self.now(), oldest_hint_age) {
            self.hints.note_outside_window();
            tracing::warn!(%target, "not storing a hint: the replica has been down longer than max_hint_window; it needs a repair");
            return Ok(false);
        }
        let hint = Hint {
            target,
            keyspace,
            key: key.to_vec(),
            cell: cell.clone(),
            created_at: self.clock.now(),
        };
        let outcome = self
            .off_worker(move |hints| {
                hints
                    .store(&hint)
                    .map_err(NodeError::hints("storing a hint"))
            })
            .await?;
        if outcome.dropped_oldest > 0 {
            tracing::warn!(%target, dropped = outcome.dropped_oldest, "hint cap reached: dropped the oldest hints");
        }
        store.sync().await?;
        self.wake.notify_one();
        Ok(outcome.stored())
    }

    /// Takes hints handed over by a leaving node: those for this node are
    /// applied at once, the others stored as this node's own (they keep
    /// their age; the hint window was the leaving node's business).
    pub async fn take(&self, context: &dyn HandoffHost, hints: &[Hint]) -> Result<u64> {
        let (mine, others): (Vec<&Hint>, Vec<Hint>) = {
            let (mine, others): (Vec<&Hint>, Vec<&Hint>) =
                hints.iter().partition(|h| h.target == context.host_id());
            (mine, others.into_iter().cloned().collect())
        };
        // A hint of a keyspace dropped since can never be applied: one such
        // must not fail the whole handover.
        let (dropped, live): (Vec<&Hint>, Vec<&Hint>) = mine
            .into_iter()
            .partition(|h| Self::is_dropped(context, h.keyspace));
        if !dropped.is_empty() {
            tracing::info!(
                dropped = dropped.len(),
                "handed-over hints of keyspaces that no longer exist are dropped"
            );
        }
        let writes: Vec<_> = live
            .iter()
            .map(|h| (h.keyspace, h.key.clone(), h.cell.clone()))
            .collect();
        context.store().apply_many(&writes).await?;
        let stored = self
            .off_worker(move |hints| {
                let mut stored = 0;
                for hint in &others {
                    let outcome = hints
                        .store(hint)
                        .map_err(NodeError::hints("storing a hint"))?;
                    stored += u64::from(outcome.stored());
                }
                Ok(stored)
            })
            .await?;
        context.store().sync().await?;
        self.wake.notify_one();
        Ok(stored + writes.len() as u64)
    }

    /// Hands every pending hint to the node at `recipient` (internode
    /// address), deleting each batch once the recipient has stored it. How
    /// many hints it handed over.
    pub async fn hand_off(
        &self,
        context: &dyn HandoffHost,
        recipient: std::net::SocketAddr,
    ) -> Result<u64> {
        let mut handed = 0;
        for target in self.pending().into_keys() {
            loop {
                let batch = self.next_batch(context, target, 1 << 20).await?;
                if batch.is_empty() {
                    break;
                }
                let request = pb::TakeHintsRequest {
                    hints: batch
                        .iter()
                        .map(|(_, hint)| pb::HandedHint {
                            target_host_id: hint.target.to_string(),
                            keyspace_id: hint.keyspace.to_string(),
                            key: hint.key.clone(),
                            cell: Some(cell_to_pb(&hint.cell)),
                            created_at_micros: hint.created_at.0,
                        })
                        .collect(),
                };
                let started = Instant::now();
                let taken = context.peers().client(recipient).take_hints(request).await;
                context
                    .metrics()
                    .internode(recipient, InternodeRpc::TakeHints, started.elapsed());
                taken.map_err(NodeError::peer(recipient, "take hints"))?;
                let ids: Vec<_> = batch.iter().map(|(id, _)| *id).collect();
                self.hints
                    .delete(&ids)
                    .map_err(NodeError::hints("deleting handed hints"))?;
                handed += ids.len() as u64;
            }
        }
        Ok(handed)
    }

    /// Moves the hints for `from` to `to` (the node that replaced it); their
    /// age is checked when they are replayed.
    fn retarget(&self, from: HostId, to: HostId) -> Result<u64> {
        let mut moved = 0;
        loop {
            let batch = self
                .hints
                .next_batch(from, 1 << 20, self.clock.now(), |_| Duration::MAX)
                .map_err(NodeError::hints("reading hints"))?;
            if batch.is_empty() {
                return Ok(moved);
            }
            for (_, hint) in &batch {
                let hint = Hint {
                    target: to,
                    ..hint.clone()
                };
                self.hints
                    .store(&hint)
                    .map_err(NodeError::hints("storing a hint"))?;
            }
            let ids: Vec<_> = batch.iter().map(|(id, _)| *id).collect();
            self.hints
                .delete(&ids)
                .map_err(NodeError::hints("deleting moved hints"))?;
            moved += ids.len() as u64;
        }
    }

    /// Pending hints per target.
    pub fn pending(&self) -> std::collections::BTreeMap<HostId, TargetStats> {
        self.hints.pending()
    }

    /// The counters.
    pub fn counters(&self) -> HintCounters {
        self.hints.counters()
    }

    /// Counts a hint that could not be stored.
    pub fn note_store_failure(&self) {
        self.store_failures.fetch_add(1, Ordering::Relaxed);
    }

    /// Hints that could not be stored since the node started.
    pub fn store_failures(&self) -> u64 {
        self.store_failures.load(Ordering::Relaxed)
    }

    /// Whether hints are stored.
    pub fn is_enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// Whether delivery is paused.
    pub fn is_paused(&self) -> bool {
        self.paused.load(Ordering::Relaxed)
    }

    /// The replay rate in KiB/s.
    pub fn throttle_kib(&self) -> u64 {
        lock(&self.scheduler).config().bytes_per_second / 1024
    }

    /// Changes the settings given.
    pub fn set(&self, enabled: Option<bool>, paused: Option<bool>, throttle_kib: Option<u64>) {
        if let Some(enabled) = enabled {
            self.enabled.store(enabled, Ordering::Relaxed);
        }
        let mut scheduler = lock(&self.scheduler);
        if let Some(paused) = paused {
            self.paused.store(paused, Ordering::Relaxed);
            if paused {
                scheduler.pause();
            } else {
                scheduler.resume();
            }
        }
        if let Some(kib) = throttle_kib {
            scheduler.set_rate(kib * 1024, self.now());
        }
        drop(scheduler);
        self.wake.notify_one();
    }

    /// Deletes the pending hints of `target`, or all.
    pub fn truncate(&self, target: Option<HostId>) -> Result<u64> {
        self.hints
            .truncate(target)
            .map_err(NodeError::hints("truncating hints"))
    }

    /// Sets each member's liveness (`members` excludes this node) in the
    /// window and the scheduler from a snapshot of the view, whatever events
    /// were or were not seen: a member newly up is replayed to at once, one
    /// down starts (or keeps) its window.
    fn rescan(&self, members: impl IntoIterator<Item = (HostId, Liveness)>) {
        let now = self.now();
        let mut window = lock(&self.window);
        let mut scheduler = lock(&self.scheduler);
        for (host, liveness) in members {
            let up = liveness == Liveness::Up;
            if up {
                window.mark_up(host);
            } else {
                window.mark_down(host, now);
            }
            scheduler.set_liveness(host, up, now);
        }
    }

    /// The view changed (or the task started): rescans liveness and settles
    /// the hints of departed nodes.
    fn on_view(&self, context: &dyn HandoffHost, view: &ClusterView) {
        self.rescan(
            view.members
                .values()
                .filter(|m| m.metadata.host_id != context.host_id())
                .map(|m| (m.metadata.host_id, m.liveness)),
        );
        self.on_departures(view);
    }

    /// The scheduler's next action now.
    fn next_action(&self) -> ReplayAction {
        let hints = &self.hints;
        lock(&self.scheduler).poll(self.now(), |h| hints.has_hints(h))
    }

    /// Settles the hints of nodes that are gone: those of a replaced node go
    /// to its replacement (once it is `Normal`); those of a node that left or
    /// was removed are dropped.
    fn on_departures(&self, view: &ClusterView) {
        for host in self.hints.pending().into_keys() {
            if view.member(host).is_none() {
                continue;
            }
            let replacement = view.replacement_of(host).filter(|r| {
                view.member(*r)
                    .is_some_and(|m| m.metadata.state == NodeState::Normal)
            });
            if let Some(replacement) = replacement {
                match self.retarget(host, replacement) {
                    Ok(moved) => {
                        tracing::info!(%host, %replacement, moved, "hints for a replaced node go to its replacement");
                        self.wake.notify_one();
                    }
                    Err(error) => {
                        tracing::warn!(%host, %error, "moving the hints of a replaced node")
                    }
                }
                continue;
            }
            if view.has_left(host) {
                match self.truncate(Some(host)) {
                    Ok(removed) => {
                        tracing::info!(%host, removed, "dropped the hints of a node that left")
                    }
                    Err(error) => {
                        tracing::warn!(%host, %error, "dropping the hints of a node that left")
                    }
                }
            }
        }
    }

    /// Replays hints until the node stops.
    pub async fn run(context: Arc<dyn HandoffHost>) {
        let context = &*context;
        let handoff = context.handoff();
        let mut views = context.membership().watch_view();
        let view = views.borrow_and_update().clone();
        handoff.on_view(context, &view);
        loop {
            let wait_until = match handoff.next_action() {
                ReplayAction::Deliver { target, max_bytes } => {
                    handoff.deliver(context, target, max_bytes).await;
                    continue;
                }
                ReplayAction::WaitUntil(at) => Some(handoff.started + at),
                ReplayAction::Idle => None,
            };
            let sleep = async {
                match wait_until {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = sleep => {}
                // A hint was stored: it may be for a node that has just
                // left (its write was under way meanwhile), which no view
                // change would settle any more.
                () = handoff.wake.notified() => {
                    let view = views.borrow().clone();
                    handoff.on_departures(&view);
                }
                changed = views.changed() => {
                    if changed.is_err() {
                        return; // Membership stopped: the node is stopping.
                    }
                    let view = views.borrow_and_update().clone();
                    handoff.on_view(context, &view);
                }
            }
        }
    }

    /// Sends one batch of `target`'s hints; deletes them once acknowledged,
    /// and discards those that can never be applied.
    async fn deliver(&self, context: &dyn HandoffHost, target: HostId, max_bytes: u64) {
        let batch = match self.next_batch(context, target, max_bytes).await {
            Ok(batch) => batch,
            Err(error) => {
                tracing::warn!(%target, %error, "reading hints");
                lock(&self.scheduler).failed(target, self.now());
                return;
            }
        };
        let (dropped, batch): (Vec<_>, Vec<_>) = batch
            .into_iter()
            .partition(|(_, hint)| Self::is_dropped(context, hint.keyspace));
        let dropped: Vec<HintId> = dropped.into_iter().map(|(id, _)| id).collect();
        self.discard(target, &dropped, Undeliverable::KeyspaceDropped);
        let bytes: u64 = batch.iter().map(|(_, h)| h.size_bytes()).sum();
        if batch.is_empty() {
            lock(&self.scheduler).delivered(target, 0, self.now());
            return;
        }
        let Some(address) = context
            .membership()
            .view()
            .member(target)
            .map(|m| m.metadata.internode_addr)
        else {
            lock(&self.scheduler).failed(target, self.now());
            return;
        };
        let request = pb::ApplyRequest {
            mutations: batch
                .iter()
                .map(|(_, hint)| pb::ReplicaMutation {
                    keyspace_id: hint.keyspace.to_string(),
                    key: hint.key.clone(),
                    cell: Some(cell_to_pb(&hint.cell)),
                    // A hint waits for its replica, not for a client.
                    deadline_micros: None,
                })
                .collect(),
            // A hint goes to the replica it was stored for, whatever the
            // ring: no checksum.
            ring_checksum: 0,
        };
        let timeout = Duration::from_millis(context.write_timeout_ms().max(1000) * 5);
        let started = Instant::now();
        let sent =
            tokio::time::timeout(timeout, context.peers().client(address).apply(request)).await;
        context
            .metrics()
            .internode(address, InternodeRpc::HintReplay, started.elapsed());
        match sent {
            Ok(Ok(response)) => {
                let ids: Vec<HintId> = batch.iter().map(|(id, _)| *id).collect();
                self.settle(target, &ids, &response.into_inner().refused);
                lock(&self.scheduler).delivered(target, bytes, self.now());
            }
            Ok(Err(status)) => {
                tracing::debug!(%target, message = status.message(), "hint delivery failed; will retry");
                lock(&self.scheduler).failed(target, self.now());
            }
            Err(_) => {
                tracing::debug!(%target, "hint delivery timed out; will retry");
                lock(&self.scheduler).failed(target, self.now());
            }
        }
    }

    /// `target` answered a batch of the hints `ids` (in request order):
    /// those it refused are discarded by reason, the rest deleted as replayed.
    fn settle(&self, target: HostId, ids: &[HintId], refused: &[pb::RefusedMutation]) {
        let mut delivered = ids.to_vec();
        let mut keyspace_dropped = Vec::new();
        let mut invalid = Vec::new();
        // Highest index first, so that earlier indices stay valid.
        let mut refused: Vec<&pb::RefusedMutation> = refused.iter().collect();
        refused.sort_by_key(|r| std::cmp::Reverse(r.index));
        refused.dedup_by_key(|r| r.index);
        for refusal in refused {
            let Some(index) = usize::try_from(refusal.index)
                .ok()
                .filter(|&i| i < delivered.len())
            else {
                tracing::warn!(%target, index = refusal.index, "the replica refused a hint that was not sent");
                continue;
            };
            let id = delivered.remove(index);
            match refusal.reason() {
                pb::RefusalReason::KeyspaceDropped => keyspace_dropped.push(id),
                pb::RefusalReason::Invalid | pb::RefusalReason::Unspecified => invalid.push(id),
                // Hints carry no deadline, so only a confused replica says
                // this: kept for the next replay, neither deleted nor dropped.
                pb::RefusalReason::Expired => {
                    tracing::warn!(%target, message = refusal.message, "the replica called a hint expired; keeping it");
                    continue;
                }
            }
            tracing::debug!(%target, message = refusal.message, "the replica refused a hint for good; dropping it");
        }
        self.discard(target, &keyspace_dropped, Undeliverable::KeyspaceDropped);
        self.discard(target, &invalid, Undeliverable::Refused);
        if let Err(error) = self.hints.delete(&delivered) {
            tracing::warn!(%target, %error, "deleting delivered hints");
        }
    }

    /// Discards `target`'s hints `ids`, which can never be applied.
    fn discard(&self, target: HostId, ids: &[HintId], reason: Undeliverable) {
        if ids.is_empty() {
            return;
        }
        match self.hints.discard(ids, reason) {
            Ok(discarded) => {
                tracing::info!(%target, discarded, ?reason, "dropped hints that can never be applied")
            }
            Err(error) => tracing::warn!(%target, %error, "dropping undeliverable hints"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringstore_storage::{Durability, MemoryEngine, Timestamp};

    fn handoff() -> (Store, Handoff) {
        let store = Store::open(Arc::new(MemoryEngine::new()), Durability::Batch).unwrap();
        let config = HintsConfig {
            hinted_handoff_throttle_kib: 0,
            ..HintsConfig::default()
        };
        let handoff = Handoff::open(&store, &config, Arc::default()).unwrap();
        (store, handoff)
    }

    #[tokio::test]
    async fn hints_the_replica_refused_are_dropped_by_reason_and_the_rest_count_as_replayed() {
        let (store, handoff) = handoff();
        let target = HostId::from_u128(2);
        let cell = Cell::live(Timestamp(1), b"v".to_vec());
        let keyspace = KeyspaceId(uuid::Uuid::from_u128(7));
        for key in [b"a", b"b", b"c", b"d"] {
            handoff
                .hint(&store, target, keyspace, key, &cell)
                .await
                .unwrap();
        }
        let batch = handoff
            .hints
            .next_batch(target, u64::MAX, Timestamp::now(), |_| Duration::MAX)
            .unwrap();
        let ids: Vec<HintId> = batch.iter().map(|(id, _)| *id).collect();
        let refusal = |index, reason: pb::RefusalReason| pb::RefusedMutation {
            index,
            reason: reason.into(),
            message: "refused".into(),
        };
        let refused = [
            refusal(3, pb::RefusalReason::Invalid),
            refusal(0, pb::RefusalReason::KeyspaceDropped),
            refusal(9, pb::RefusalReason::Invalid), // not sent: ignored
        ];
        handoff.settle(target, &ids, &refused);
        let counters = handoff.counters();
        assert_eq!(
            (
                counters.replayed,
                counters.dropped_keyspace,
                counters.dropped_refused
            ),
            (2, 1, 1)
        );
        assert!(handoff.pending().is_empty());
    }

    #[tokio::test]
    async fn a_rescan_replays_to_a_target_whose_up_event_was_lost() {
        let (store, handoff) = handoff();
        let target = HostId::from_u128(2);
        handoff.rescan([(target, Liveness::Down)]);
        let cell = Cell::live(Timestamp(1), b"v".to_vec());
        let keyspace = KeyspaceId(uuid::Uuid::from_u128(7));
        assert!(
            handoff
                .hint(&store, target, keyspace, b"k", &cell)
                .await
                .unwrap()
        );
        assert_eq!(
            handoff.next_action(),
            ReplayAction::Idle,
            "the target is down"
        );
        // Its `Up` event was lost (the broadcast lagged): the view says up.
        handoff.rescan([(target, Liveness::Up)]);
        assert!(
            matches!(handoff.next_action(), ReplayAction::Deliver { target: t, .. } if t == target),
            "a rescan finds the target up"
        );
        // A rescan that finds it down again stops replay to it.
        lock(&handoff.scheduler).failed(target, handoff.now());
        handoff.rescan([(target, Liveness::Down)]);
        assert!(lock(&handoff.window).down_since(target).is_some());
    }
}
