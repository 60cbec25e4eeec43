//! What a node does once its storage has failed for good: its
//! `storage.disk_failure_policy`, as Cassandra's `disk_failure_policy`.
//!
//! sled keeps the first I/O error it meets (a full disk, a failing device)
//! and fails every later write and flush with it, even once space is freed:
//! the store is unusable until the process reopens it. A node that carried
//! on would fail every write sent to it while gossip shows it `UN`, so
//! coordinators would keep choosing it, and it would keep serving reads from
//! data that misses every write since. The policies:
//!
//! - **`stop`** (the default): the node stops taking writes (`UNAVAILABLE`
//!   naming the failure) and stops gossip with a departure notice, as a
//!   drain does: the cluster sees it down at once, hints its writes, and
//!   reads go to the other replicas. The process stays up, for `info`,
//!   `tpstats` and logs; restart it once the disk is mended, and the hints
//!   replay.
//! - **`die`**: the node asks to stop; `ringstore server` exits with an
//!   error, so a supervisor (systemd's `Restart=on-failure`) restarts it,
//!   which recovers on its own once the disk has room.
//! - **`ignore`**: log it and carry on (writes keep failing).
//!
//! # Caveats
//! - Only a failed flush is seen (the store's [`failure`] watch): with
//!   `durability = periodic`, writes acknowledged since the last good flush
//!   are lost with the process, as after a crash; `batch` acknowledges
//!   nothing that was not flushed.
//!
//! [`failure`]: ringstore_storage::Store::failure
//!
//! What it needs of the node is its [`DiskFailureHost`] (the context
//! implements it in `node/hosts/serving.rs`).

use std::sync::Arc;

use ringstore_storage::Store;
use tokio::sync::watch::Sender;

use crate::config::DiskFailurePolicy;
use crate::serving::Serving;

/// What the disk failure policy uses of the node it watches.
pub trait DiskFailureHost: Send + Sync {
    /// Its storage, whose first failure is watched.
    fn store(&self) -> &Store;
    /// The policy to apply (`storage.disk_failure_policy`).
    fn disk_failure_policy(&self) -> DiskFailurePolicy;
    /// Whether the node serves: `stop` and `die` move it to
    /// [`Serving::DiskFailed`].
    fn serving(&self) -> &Sender<Serving>;
    /// Asks the node to stop (`die`).
    fn request_stop(&self);
}

/// Waits for the store's first failure and applies the policy.
pub async fn watch<H: DiskFailureHost>(context: Arc<H>) {
    let mut failure = context.store().failure();
    let Ok(error) = failure.wait_for(Option::is_some).await else {
        return;
    };
    let error = error.as_ref().expect("waited for Some").to_string();
    apply(context.as_ref(), context.disk_failure_policy(), error);
}

/// Acts on a storage failure described by `error`.
fn apply(context: &impl DiskFailureHost, policy: DiskFailurePolicy, error: String) {
    match policy {
        DiskFailurePolicy::Stop => {
            tracing::error!(
                %error,
                "storage failed: refusing writes and stopping gossip (disk_failure_policy = \
                 stop); mend the disk, then restart the node"
            );
            context.serving().send_if_modified(|serving| match serving {
                Serving::DiskFailed(_) => false,
                Serving::Normal | Serving::Drained => {
                    *serving = Serving::DiskFailed(error);
                    true
                }
            });
        }
        DiskFailurePolicy::Die => {
            tracing::error!(
                %error,
                "storage failed: stopping the node (disk_failure_policy = die)"
            );
            context.serving().send_replace(Serving::DiskFailed(error));
            context.request_stop();
        }
        DiskFailurePolicy::Ignore => {
            tracing::error!(
                %error,
                "storage failed; serving on (disk_failure_policy = ignore): writes to this \
                 node will fail until it is restarted"
            );
        }
    }
}
