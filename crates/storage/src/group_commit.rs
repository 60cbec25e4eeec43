//! Group commit: many writers, few flushes.
//!
//! # Protocol
//! Flushes are numbered by *generation* (1, 2, …) and run one at a time on
//! tokio's blocking pool. A writer, right after its write has been applied,
//! takes a [`Ticket`]: one more than the generation of the latest flush
//! *started*. Every flush of that generation or later started after the write,
//! so the write is durable once such a flush has completed successfully.
//!
//! [`GroupCommit::wait`] loops: if a flush covering the ticket has succeeded it
//! returns; if one has finished but failed it returns the error; if no flush
//! is running the waiter becomes the *leader* and starts the next generation
//! (which covers it and every ticket taken so far); otherwise it follows,
//! sleeping until the running flush finishes. So under load each flush covers
//! every writer that arrived during the previous one.
//!
//! # Invariants
//! - At most one flush runs at a time; generations finish in order.
//! - No lost wakeups: a follower subscribes to the "flush finished" watch
//!   channel while holding the state lock, and the finishing flush updates the
//!   state under that lock before it signals, so a follower either sees the
//!   new state or is woken by the signal.
//! - Cancellation-safe: the flush is owned by its blocking task, not by the
//!   leader's future, so dropping a waiter never strands the others; and if the
//!   task never runs or panics, a drop guard finishes its generation as failed.
//! - The blocking task lets go of the engine *before* it wakes the waiters, so
//!   once the last store handle is dropped nothing of ours keeps the engine
//!   (and sled's file lock) alive.

use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::engine::Engine;
use crate::error::{Result, StorageError};

/// Proof of a write's place in the flush order: the first flush generation
/// that covers it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Ticket(u64);

/// Shares engine flushes among concurrent writers. See the module docs.
pub(crate) struct GroupCommit {
    engine: Arc<dyn Engine>,
    flushes: Arc<Flushes>,
}

/// The bookkeeping a flush task shares with the waiters (not the engine).
struct Flushes {
    state: Mutex<FlushState>,
    /// Carries the latest finished generation; signalled on every finish.
    finished_tx: watch::Sender<u64>,
    /// Told how long each engine flush took (metrics), once set.
    observer: OnceLock<SyncObserver>,
    /// The first flush error the engine reported (see [`GroupCommit::failure`]).
    failure_tx: watch::Sender<Option<Arc<StorageError>>>,
}

/// Told the duration of every engine flush, successful or not.
pub type SyncObserver = Box<dyn Fn(Duration) + Send + Sync>;

/// The flush bookkeeping, guarded by [`Flushes::state`].
#[derive(Debug, Default)]
struct FlushState {
    /// The generation of the latest flush started (0: none yet).
    started: u64,
    /// Whether generation `started` is still running.
    running: bool,
    /// The latest generation that finished, successfully or not.
    finished: u64,
    /// The latest generation that finished successfully.
    durable: u64,
    /// The error of the latest failed generation.
    last_error: Option<Arc<StorageError>>,
}

fn lock(state: &Mutex<FlushState>) -> MutexGuard<'_, FlushState> {
    // Critical sections only assign counters; a panic cannot leave them torn.
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

impl GroupCommit {
    /// Group commit over `engine`'s flush.
    pub(crate) fn new(engine: Arc<dyn Engine>) -> GroupCommit {
        GroupCommit {
            engine,
            flushes: Arc::new(Flushes {
                state: Mutex::new(FlushState::default()),
                finished_tx: watch::channel(0).0,
                observer: OnceLock::new(),
                failure_tx: watch::channel(None).0,
            }),
        }
    }

    /// The ticket of a write that has just been applied. Take it after the
    /// write returns, never before.
    pub(crate) fn ticket(&self) -> Ticket {
        Ticket(lock(&self.flushes.state).started + 1)
    }

    /// Waits until a flush covering `ticket` has completed: `Ok` if it
    /// succeeded, [`StorageError::FlushFailed`] if the flush that covered it
    /// failed. Must run inside a tokio runtime (flushes use the blocking pool).
    pub(crate) async fn wait(&self, ticket: Ticket) -> Result<()> {
        loop {
            let (mut finished, lead) = {
                let mut state = lock(&self.flushes.state);
                if state.durable >= ticket.0 {
                    return Ok(());
                }
                if state.finished >= ticket.0 {
                    let source = state
                        .last_error
                        .clone()
                        .unwrap_or_else(|| Arc::new(StorageError::FlushAbandoned));
                    return Err(StorageError::FlushFailed { source });
                }
                let lead = (!state.running).then(|| {
                    state.started += 1;
                    state.running = true;
                    state.started
                });
                (self.flushes.finished_tx.subscribe(), lead)
            };
            // Started outside the lock: a flush that fails to start finishes
            // (as failed) through the same lock.
            if let Some(generation) = lead {
                self.start_flush(generation);
            }
            // The sender lives as long as `self`, so `changed` only returns on a signal.
            let _ = finished.changed().await;
        }
    }

    /// Waits for a flush of everything written so far: a ticket taken now.
    pub(crate) async fn sync(&self) -> Result<()> {
        let ticket = self.ticket();
        self.wait(ticket).await
    }

    /// Sets the observer told every flush's duration; only the first call
    /// sets it. Whether this call did.
    pub(crate) fn observe(&self, observer: SyncObserver) -> bool {
        self.flushes.observer.set(observer).is_ok()
    }

    /// The first error an engine flush returned, once one has: sled keeps
    /// its first I/O error (a full disk, say) and fails every later write and
    /// flush with it, so the store is no longer usable until reopened. A flush
    /// abandoned at runtime shutdown is not the engine's failure and does not
    /// count.
    pub(crate) fn failure(&self) -> watch::Receiver<Option<Arc<StorageError>>> {
        self.flushes.failure_tx.subscribe()
    }

    /// Announces `error` as the store's failure (see [`GroupCommit::failure`])
    /// if none was announced before: for a commit log that failed, which
    /// fails the store's durable writes for good as a failed engine does.
    pub(crate) fn report_failure(&self, error: &Arc<StorageError>) {
        self.flushes.announce_failure(error);
    }

    fn start_flush(&self, generation: u64) {
        let engine = Arc::clone(&self.engine);
        let run = FlushRun {
            flushes: Arc::clone(&self.flushes),
            generation,
            done: false,
        };
        drop(crate::offload::spawn_blocking(move || {
            let mut run = run;
            let began = Instant::now();
            let outcome = engine.flush();
            if let Some(observe) = run.flushes.observer.get() {
                observe(began.elapsed());
            }
            drop(engine);
            run.finish(outcome);
        }));
    }
}

impl Flushes {
    /// Keeps `error` as the first failure, unless one is kept already.
    fn announce_failure(&self, error: &Arc<StorageError>) {
        self.failure_tx.send_if_modified(|first| {
            let is_first = first.is_none();
            if is_first {
                *first = Some(Arc::clone(error));
            }
            is_first
        });
    }

    fn finish(&self, generation: u64, outcome: Result<()>) {
        let mut state = lock(&self.state);
        debug_assert!(state.running && state.started == generation);
        state.running = false;
        state.finished = generation;
        match outcome {
            Ok(()) => state.durable = generation,
            Err(error) => {
                tracing::warn!(generation, %error, "storage flush failed");
                let error = Arc::new(error);
                if !matches!(*error, StorageError::FlushAbandoned) {
                    self.announce_failure(&error);
                }
                state.last_error = Some(error);
            }
        }
        // Signalled under the lock: see the module's "no lost wakeups".
        self.finished_tx.send_replace(generation);
    }
}

/// One flush generation in flight; finishes it as failed if dropped unfinished
/// (the blocking task was discarded at runtime shutdown, or the engine panicked).
struct FlushRun {
    flushes: Arc<Flushes>,
    generation: u64,
    done: bool,
}

impl FlushRun {
    fn finish(&mut self, outcome: Result<()>) {
        self.done = true;
        self.flushes.finish(self.generation, outcome);
    }
}

impl Drop for FlushRun {
    fn drop(&mut self) {
        if !self.done {
            self.flushes
                .finish(self.generation, Err(StorageError::FlushAbandoned));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;
    use crate::MemoryEngine;
    use crate::engine::Tree;

    /// An engine whose flushes announce their start and then block until the
    /// test sends the outcome they should return.
    struct ScriptedEngine {
        memory: MemoryEngine,
        started: tokio::sync::mpsc::UnboundedSender<()>,
        outcomes: Mutex<mpsc::Receiver<Result<()>>>,
    }

    impl Engine for ScriptedEngine {
        fn open_tree(&self, name: &str) -> Result<Arc<dyn Tree>> {
            self.memory.open_tree(name)
        }
        fn drop_tree(&self, name: &str) -> Result<bool> {
            self.memory.drop_tree(name)
        }
        fn tree_names(&self) -> Vec<String> {
            self.memory.tree_names()
        }
        fn flush(&self) -> Result<()> {
            self.started.send(()).unwrap();
            let outcomes = self.outcomes.lock().unwrap();
            outcomes.recv().unwrap()
        }
        fn size_on_disk(&self) -> Result<u64> {
            self.memory.size_on_disk()
        }
    }

    /// A safety net so that a broken protocol fails the test instead of hanging it.
    async fn within<T>(future: impl Future<Output = T>) -> T {
        tokio::time::timeout(Duration::from_secs(30), future)
            .await
            .expect("a waiter or flush never made progress")
    }

    struct Script {
        group: Arc<GroupCommit>,
        started: tokio::sync::mpsc::UnboundedReceiver<()>,
        outcomes: mpsc::Sender<Result<()>>,
    }

    fn scripted() -> Script {
        let (started_tx, started) = tokio::sync::mpsc::unbounded_channel();
        let (outcomes, outcomes_rx) = mpsc::channel();
        let engine = ScriptedEngine {
            memory: MemoryEngine::new(),
            started: started_tx,
            outcomes: Mutex::new(outcomes_rx),
        };
        Script {
            group: Arc::new(GroupCommit::new(Arc::new(engine))),
            started,
            outcomes,
        }
    }

    #[tokio::test]
    async fn a_write_made_during_a_flush_waits_for_the_next_flush() {
        let mut script = scripted();
        let group = Arc::clone(&script.group);
        let first = tokio::spawn({
            let (group, ticket) = (Arc::clone(&group), group.ticket());
            async move { group.wait(ticket).await }
        });
        within(script.started.recv()).await.unwrap();

        // Taken while flush 1 runs: flush 1 may have started before this write.
        let second = tokio::spawn({
            let (group, ticket) = (Arc::clone(&group), group.ticket());
            async move { group.wait(ticket).await }
        });
        script.outcomes.send(Ok(())).unwrap();
        within(first).await.unwrap().unwrap();

        within(script.started.recv()).await.unwrap();
        assert!(!second.is_finished(), "flush 2 has not completed yet");
        script.outcomes.send(Ok(())).unwrap();
        within(second).await.unwrap().unwrap();
        assert_eq!(lock(&group.flushes.state).durable, 2);
    }

    #[tokio::test]
    async fn writers_that_arrive_during_a_flush_share_the_next_one() {
        let mut script = scripted();
        let group = Arc::clone(&script.group);
        let leader = tokio::spawn({
            let (group, ticket) = (Arc::clone(&group), group.ticket());
            async move { group.wait(ticket).await }
        });
        within(script.started.recv()).await.unwrap();
        let followers: Vec<_> = (0..10)
            .map(|_| {
                let (group, ticket) = (Arc::clone(&group), group.ticket());
                tokio::spawn(async move { group.wait(ticket).await })
            })
            .collect();
        script.outcomes.send(Ok(())).unwrap();
        within(script.started.recv()).await.unwrap();
        script.outcomes.send(Ok(())).unwrap();
        within(leader).await.unwrap().unwrap();
        for follower in followers {
            within(follower).await.unwrap().unwrap();
        }
        assert_eq!(
            lock(&group.flushes.state).started,
            2,
            "eleven writers, two flushes"
        );
    }

    #[tokio::test]
    async fn a_failed_flush_fails_its_writers_and_a_later_flush_can_succeed() {
        let mut script = scripted();
        let group = Arc::clone(&script.group);
        let failure = group.failure();
        assert!(failure.borrow().is_none());
        let failing = tokio::spawn({
            let (group, ticket) = (Arc::clone(&group), group.ticket());
            async move { group.wait(ticket).await }
        });
        within(script.started.recv()).await.unwrap();
        script
            .outcomes
            .send(Err(StorageError::Sled(sled::Error::Unsupported(
                "disk on fire".into(),
            ))))
            .unwrap();
        let error = within(failing).await.unwrap().unwrap_err();
        assert!(matches!(error, StorageError::FlushFailed { .. }));
        assert!(error.is_retryable());
        let first = failure.borrow().clone().expect("the failure is announced");
        assert!(first.to_string().contains("disk on fire"), "{first}");

        let retry = tokio::spawn({
            let group = Arc::clone(&group);
            async move { group.sync().await }
        });
        within(script.started.recv()).await.unwrap();
        script.outcomes.send(Ok(())).unwrap();
        within(retry).await.unwrap().unwrap();
        let second = tokio::spawn(async move { group.sync().await });
        within(script.started.recv()).await.unwrap();
        script
            .outcomes
            .send(Err(StorageError::Sled(sled::Error::Unsupported(
                "a second fire".into(),
            ))))
            .unwrap();
        within(second).await.unwrap().unwrap_err();
        let kept = failure.borrow().clone().unwrap();
        assert!(
            kept.to_string().contains("disk on fire"),
            "the first is kept: {kept}"
        );
    }

    #[tokio::test]
    async fn a_flush_whose_engine_panics_fails_its_writers_instead_of_hanging() {
        struct PanickingEngine(MemoryEngine);
        impl Engine for PanickingEngine {
            fn open_tree(&self, name: &str) -> Result<Arc<dyn Tree>> {
                self.0.open_tree(name)
            }
            fn drop_tree(&self, name: &str) -> Result<bool> {
                self.0.drop_tree(name)
            }
            fn tree_names(&self) -> Vec<String> {
                self.0.tree_names()
            }
            fn flush(&self) -> Result<()> {
                panic!("engine bug")
            }
            fn size_on_disk(&self) -> Result<u64> {
                self.0.size_on_disk()
            }
        }
        let group = GroupCommit::new(Arc::new(PanickingEngine(MemoryEngine::new())));
        let error = within(group.sync()).await.unwrap_err();
        assert!(matches!(
            error,
            StorageError::FlushFailed { source } if matches!(*source, StorageError::FlushAbandoned)
        ));
        assert!(
            group.failure().borrow().is_none(),
            "an abandoned flush is not the engine's failure"
        );
    }
}
