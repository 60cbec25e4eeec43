//! The background flusher of [`Durability::Periodic`](crate::Durability::Periodic).
//!
//! # Design
//! One tokio task ticks every `interval` (the first tick one interval after
//! start) and runs a group-committed flush, so it shares flushes with explicit
//! `Store::sync` calls and durable metadata writes. Ticks missed while a slow
//! flush runs are delayed, not bunched.
//!
//! The task holds the group commit, never the store, so it cannot keep the
//! store alive. It stops when told ([`PeriodicFlusher::stop`]) or when the
//! flusher handle is dropped (the store's last clone went away), and flushes
//! once more on the way out.
//!
//! # Caveats
//! - A failed flush is logged and retried at the next tick; writers in
//!   periodic mode are never told.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};

use crate::group_commit::GroupCommit;

/// The shortest interval; a zero interval is raised to it.
const MIN_INTERVAL: Duration = Duration::from_millis(1);

/// A running periodic flusher; dropping it stops the task (after a last flush).
pub(crate) struct PeriodicFlusher {
    stop_tx: watch::Sender<()>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl PeriodicFlusher {
    /// Starts flushing `group` every `interval` (at least 1 ms).
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub(crate) fn spawn(group: Arc<GroupCommit>, interval: Duration) -> PeriodicFlusher {
        let (stop_tx, stop_rx) = watch::channel(());
        let task = tokio::spawn(run(group, interval.max(MIN_INTERVAL), stop_rx));
        PeriodicFlusher {
            stop_tx,
            task: Mutex::new(Some(task)),
        }
    }

    /// Stops the task and waits until its last flush has finished. Later calls
    /// return at once.
    pub(crate) async fn stop(&self) {
        self.stop_tx.send_replace(());
        let task = self
            .task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(task) = task
            && let Err(error) = task.await
        {
            tracing::warn!(%error, "periodic flusher task failed");
        }
    }
}

async fn run(group: Arc<GroupCommit>, interval: Duration, mut stop_rx: watch::Receiver<()>) {
    let mut ticker = tokio::time::interval_at(Instant::now() + interval, interval);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {
                if let Err(error) = group.sync().await {
                    tracing::warn!(%error, "periodic flush failed; retrying next interval");
                }
            }
            // A stop signal, or the handle was dropped: either way, stop.
            _ = stop_rx.changed() => break,
        }
    }
    if let Err(error) = group.sync().await {
        tracing::warn!(%error, "final flush of the periodic flusher failed");
    }
}
