//! The commit log's checkpointer: once enough log segments are full, flush
//! the engine, then recycle them.
//!
//! # Design
//! One tokio task per store with a commit log. It sleeps until the log
//! reports [`CommitLogOptions::checkpoint_segments`] full segments, or for
//! [`CommitLogOptions::checkpoint_interval`] if anything was appended since
//! the last checkpoint, notes which segments are full, runs a group-committed engine flush (shared with any other sync
//! in progress), and recycles the noted segments: every record in them was
//! merged into the engine before they closed, so before the flush started
//! (see the commit log's "Checkpoint").
//!
//! The task holds the log weakly and the group commit, never the store: it
//! ends when the store's last clone drops the log (the watch it sleeps on
//! closes with the log's writer), or after a failed flush, which for sled
//! means the engine has failed for good.
//!
//! The interval matters for more than staleness: the log writes into files
//! it reserved in full, so a full disk would go unnoticed while the log
//! alone is written; the engine's flush is where it shows, and a failed
//! flush is announced as the store's failure (`Store::failure`).
//!
//! [`CommitLogOptions::checkpoint_segments`]: crate::CommitLogOptions::checkpoint_segments
//! [`CommitLogOptions::checkpoint_interval`]: crate::CommitLogOptions::checkpoint_interval

use std::sync::{Arc, Weak};

use crate::commit_log::{CommitLog, CommitLogOptions, LogPosition};
use crate::group_commit::GroupCommit;

/// Starts the checkpointer of `log`, flushing through `group`.
///
/// # Panics
/// Outside a tokio runtime.
pub(crate) fn spawn(log: &Arc<CommitLog>, group: Arc<GroupCommit>, options: &CommitLogOptions) {
    let mut full = log.full_segments();
    let (threshold, interval) = (
        options.checkpoint_segments.max(1),
        options.checkpoint_interval,
    );
    let mut checkpointed = log.appended();
    let log = Arc::downgrade(log);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                enough = full.wait_for(|segments| *segments >= threshold) => {
                    if enough.is_err() {
                        return; // the log is gone
                    }
                }
                () = tokio::time::sleep(interval) => {
                    let Some(appended) = log.upgrade().map(|log| log.appended()) else {
                        return;
                    };
                    if appended == checkpointed {
                        continue; // nothing new to flush
                    }
                }
            }
            match checkpoint(&log, &group).await {
                Some(position) => checkpointed = position,
                None => return,
            }
        }
    });
}

/// One checkpoint: the log's position when it started, or `None` when the
/// task should stop.
async fn checkpoint(log: &Weak<CommitLog>, group: &GroupCommit) -> Option<LogPosition> {
    let (segments, position) = log
        .upgrade()
        .map(|log| (log.closed_segments(), log.appended()))?;
    if let Err(error) = group.sync().await {
        tracing::error!(%error, "commit log checkpoint: the engine flush failed; no more checkpoints");
        return None;
    }
    log.upgrade()?.recycle(&segments);
    tracing::debug!(segments = segments.len(), "commit log checkpoint");
    Some(position)
}
