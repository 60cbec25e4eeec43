//! The built-in repair scheduler (`repair.schedule = "continuous"`): the
//! async shell around [`next_repair`]. It looks after the ranges this node
//! is the primary replica of, repairs the one that is most overdue, one at
//! a time (waiting while a `ringstore repair` runs here), and warns about
//! ranges left unrepaired longer than `gc_grace_seconds`. It also makes
//! the repair part of the metrics page ([`metrics_sample`]). It reads the
//! node through its [`RepairHost`].

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ringstore_metrics::RepairSample;
use ringstore_placement::TokenRange;
use ringstore_repair::{
    RepairOptions, ScheduleDecision, ScheduledRange, UnitState, next_repair, overdue,
};
use ringstore_storage::{KeyspaceId, Timestamp};

use crate::config::RepairSchedule;
use crate::repair::RepairHost;
use crate::repair::job::wait_for_ring_members;
use crate::repair::unit::{DownReplicas, repair_unit};

/// The longest the scheduler sleeps before looking at the ring and the
/// schema again (less when the interval is shorter).
const RECHECK: Duration = Duration::from_secs(60);
/// How long a range that failed waits before it is tried again (at most
/// one interval).
const RETRY_AFTER: Duration = Duration::from_secs(300);
/// How often the overdue warning may repeat.
const WARN_EVERY: Duration = Duration::from_secs(3600);

/// The ranges this node schedules: those it is the primary replica of, in
/// every keyspace, with their history. Also used by `repair status`.
pub fn scheduled_ranges(host: &impl RepairHost) -> Vec<ScheduledRange> {
    scheduled_ranges_of(host)
}

fn scheduled_ranges_of(host: &dyn RepairHost) -> Vec<ScheduledRange> {
    let history = host.repair().history.snapshot();
    let mut ranges = Vec::new();
    for keyspace in host.keyspaces() {
        let map = host.replica_map(&keyspace);
        for replicas in map.ranges() {
            if replicas.ids().next() != Some(host.host_id()) {
                continue;
            }
            let range = replicas.range();
            ranges.push(ScheduledRange {
                keyspace: keyspace.id,
                range,
                last_repaired: history.range_repaired_at(keyspace.id, range),
                retry_at: None,
            });
        }
    }
    ranges
}

/// The `gc_grace_seconds` of a keyspace (10 days if the schema forgot it).
pub fn gc_grace_of(host: &impl RepairHost) -> impl Fn(KeyspaceId) -> Duration {
    gc_grace_in(host)
}

fn gc_grace_in(host: &dyn RepairHost) -> impl Fn(KeyspaceId) -> Duration {
    let grace: HashMap<KeyspaceId, u32> = host
        .keyspaces()
        .into_iter()
        .map(|k| (k.id, k.gc_grace_seconds))
        .collect();
    move |id| Duration::from_secs(grace.get(&id).copied().unwrap_or(864_000).into())
}

/// Runs the scheduler until the node stops (returns at once when it is off).
pub async fn run(host: Arc<dyn RepairHost>) {
    let host = &*host;
    if host.repair_config().schedule != RepairSchedule::Continuous {
        return;
    }
    wait_for_ring_members(host).await;
    let interval = Duration::from_secs(host.repair_config().interval_seconds.max(1));
    // New keyspaces and ring changes are noticed within this.
    let recheck = RECHECK.min(interval);
    let since = host.now();
    let mut failures: HashMap<(KeyspaceId, TokenRange), Timestamp> = HashMap::new();
    let mut warned_at: Option<tokio::time::Instant> = None;
    let mut down = DownReplicas::default();
    loop {
        let now = host.now();
        let mut ranges = scheduled_ranges_of(host);
        for range in &mut ranges {
            range.retry_at = failures.get(&(range.keyspace, range.range)).copied();
        }
        warn_overdue(host, &ranges, since, now, &mut warned_at);
        match next_repair(&ranges, interval, now) {
            ScheduleDecision::Repair(index) => {
                let ScheduledRange {
                    keyspace, range, ..
                } = ranges[index];
                let _running = host.repair().running.lock().await;
                let began = host.now();
                let options = RepairOptions::default();
                let state = repair_unit(host, keyspace, range, options, began, &mut down).await;
                if let UnitState::Failed(_) = state {
                    let wait = RETRY_AFTER.min(interval);
                    let retry = Timestamp(began.0 + wait.as_micros() as i64);
                    failures.insert((keyspace, range), retry);
                } else {
                    failures.remove(&(keyspace, range));
                }
            }
            ScheduleDecision::WaitUntil(due) => {
                let wait = Duration::from_micros(due.0.saturating_sub(now.0).max(0) as u64);
                tokio::time::sleep(wait.min(recheck)).await;
            }
            ScheduleDecision::Idle => tokio::time::sleep(recheck).await,
        }
    }
}

/// Warns (at most hourly) about ranges unrepaired longer than `gc_grace`.
fn warn_overdue(
    host: &dyn RepairHost,
    ranges: &[ScheduledRange],
    since: Timestamp,
    now: Timestamp,
    warned_at: &mut Option<tokio::time::Instant>,
) {
    if warned_at.is_some_and(|at| at.elapsed() < WARN_EVERY) {
        return;
    }
    let late = overdue(ranges, gc_grace_in(host), since, now);
    if let Some(&first) = late.first() {
        tracing::warn!(
            ranges = late.len(),
            first = %ranges[first].range,
            keyspace = %host.keyspace_name(ranges[first].keyspace),
            "ranges have gone unrepaired longer than gc_grace_seconds"
        );
        *warned_at = Some(tokio::time::Instant::now());
    }
}

/// What repairs and garbage collection did on this node, and how long ago
/// the least recently repaired of its primary ranges was repaired (a range
/// never repaired counts from when the node started, `uptime` ago): the
/// repair part of the metrics page.
pub fn metrics_sample(host: &impl RepairHost, uptime: Duration) -> RepairSample {
    let stats = &host.repair().stats;
    let now = host.now();
    let started = now.0 - uptime.as_micros() as i64;
    let oldest = scheduled_ranges_of(host)
        .iter()
        .map(|r| r.last_repaired.map_or(started, |at| at.0))
        .min()
        .map_or(0, |at| (now.0 - at).max(0) as u64 / 1_000_000);
    RepairSample {
        ranges_repaired: stats.ranges_repaired.load(Ordering::Relaxed),
        ranges_failed: stats.ranges_failed.load(Ordering::Relaxed),
        mismatched_keys: stats.mismatched_keys.load(Ordering::Relaxed),
        rows_sent: stats.rows_sent.load(Ordering::Relaxed),
        bytes: stats.bytes.load(Ordering::Relaxed),
        running: u64::from(host.repair().running.try_lock().is_err()),
        oldest_unrepaired_seconds: oldest,
        purged: stats.purged.load(Ordering::Relaxed),
    }
}
