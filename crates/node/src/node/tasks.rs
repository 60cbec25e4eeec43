//! The node's background work, each a task that runs until the node stops:
//! schema pulls, the client-auth bootstrap, the clock's high-water mark,
//! the known members' metadata, load reports, idle internode channels, hint
//! delivery, the disk-failure watch, repair, garbage collection and Paxos
//! repair — and, for a node not yet in the ring, its join.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use ringstore_placement::Token;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::local_state::RingEntry;
use crate::context::NodeContext;
use crate::coordinator::cas;
use crate::error::Result;
use crate::handoff::Handoff;
use crate::topology::{bootstrap, join};

use crate::{client_auth, clock, disk_failure, known_members, removal, repair, schema};

/// Starts every background task; `authenticating` when the client port
/// checks passwords (the default superuser must then exist).
pub(super) fn spawn_background(
    context: &Arc<NodeContext>,
    authenticating: bool,
    stopped: &watch::Receiver<bool>,
) -> Vec<JoinHandle<()>> {
    let mut tasks = vec![
        spawn_until_stopped(
            schema::sync::run(context.clone(), Duration::from_secs(2)),
            stopped,
        ),
        spawn_until_stopped(keep_saving_clock(context.clone()), stopped),
        spawn_until_stopped(report_load(context.clone()), stopped),
        spawn_until_stopped(close_idle_channels(context.clone()), stopped),
        spawn_until_stopped(Handoff::run(context.clone()), stopped),
        spawn_until_stopped(removal::stop_if_removed(context.clone()), stopped),
        spawn_until_stopped(
            known_members::keep_saving(context.membership.clone(), context.store.clone()),
            stopped,
        ),
        spawn_until_stopped(note_ring_switches(context.clone()), stopped),
        spawn_until_stopped(disk_failure::watch(context.clone()), stopped),
        spawn_until_stopped(repair::scheduler::run(context.clone()), stopped),
        spawn_until_stopped(repair::gc::run(context.clone()), stopped),
        spawn_until_stopped(resume_repair(context.clone()), stopped),
    ];
    let paxos_every = context.config.repair.paxos_repair_interval_seconds;
    if paxos_every > 0 {
        let keyspaces = {
            let context = context.clone();
            move || context.keyspaces()
        };
        tasks.push(spawn_until_stopped(
            cas::repair::run_scheduled(
                context.clone(),
                Duration::from_secs(paxos_every),
                keyspaces,
            ),
            stopped,
        ));
    }
    if authenticating {
        tasks.push(spawn_until_stopped(
            client_auth::bootstrap(context.clone()),
            stopped,
        ));
    }
    tasks
}

/// Starts taking the node's place in the ring, unless it has it already.
/// A node that cannot take its place asks to stop: it must not linger
/// half-joined.
pub(super) fn spawn_ring_entry(
    context: &Arc<NodeContext>,
    entry: RingEntry,
    tokens: Option<Vec<Token>>,
    stopped: &watch::Receiver<bool>,
) -> Option<JoinHandle<()>> {
    let joining = context.clone();
    let join: Pin<Box<dyn Future<Output = Result<()>> + Send>> = match entry {
        RingEntry::Resident => return None,
        RingEntry::Replace(address) => Box::pin(bootstrap::replace(joining, address)),
        RingEntry::Join => Box::pin(async move { join::join(joining, tokens).await.map(drop) }),
        RingEntry::Resume(operation) => Box::pin(bootstrap::resume(joining, operation)),
    };
    let failed = context.clone();
    Some(spawn_until_stopped(
        async move {
            if let Err(error) = join.await {
                tracing::error!(%error, "could not join the ring; stopping");
                failed.stop_requested.send_replace(true);
            }
        },
        stopped,
    ))
}

/// Resolves when `stop` turns true (or its sender is gone).
pub(super) async fn wait_for(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|&stopped| stopped).await;
}

/// Runs `task` until it ends or the node stops.
fn spawn_until_stopped(
    task: impl Future<Output = ()> + Send + 'static,
    stop: &watch::Receiver<bool>,
) -> JoinHandle<()> {
    let stop = stop.clone();
    tokio::spawn(async move {
        tokio::select! {
            () = task => {}
            () = wait_for(stop) => {}
        }
    })
}

async fn keep_saving_clock(context: Arc<NodeContext>) {
    clock::keep_saving(context.store.clone(), &context.clock).await;
}

async fn resume_repair(context: Arc<NodeContext>) {
    if let Err(error) = repair::job::resume(context).await {
        tracing::warn!(%error, "could not resume the interrupted repair");
    }
}

/// Notes every ring switch of the node's view in its settling ring (see
/// [`crate::settling_ring`]).
async fn note_ring_switches(context: Arc<NodeContext>) {
    let mut views = context.membership.watch_view();
    let mut current = views.borrow_and_update().ring.clone();
    while views.changed().await.is_ok() {
        let ring = views.borrow_and_update().ring.clone();
        if ring.checksum() != current.checksum() {
            let replaced = std::mem::replace(&mut current, ring);
            context.settling_ring.replaced(replaced);
        }
    }
}

/// Drops the internode channels no call has used for a while (see
/// [`crate::peers`]): only the peers' cache is touched.
async fn close_idle_channels(context: Arc<NodeContext>) {
    context.peers.keep_closing_idle().await;
}

/// Gossips the node's load when it changed by more than 1% (checked every 10 s).
async fn report_load(context: Arc<NodeContext>) {
    let mut reported = context.store.load_bytes();
    let mut ticker = tokio::time::interval(Duration::from_secs(10));
    loop {
        ticker.tick().await;
        let load = context.store.load_bytes();
        if load.abs_diff(reported) > reported / 100 {
            reported = load;
            let _ = context
                .membership
                .update_local(move |m| m.load_bytes = load)
                .await;
        }
    }
}
