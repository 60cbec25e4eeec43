//! `CountingEngine`: an engine wrapper that keeps the books on writes and
//! flushes, for checking group commit and periodic flushing.
//!
//! Every event — a write returning, a flush starting, a flush finishing, a
//! test observing a return — takes the next number from one logical clock, so
//! "flush F started after write W" is `F.started > W`, with no wall clock.
//! Optionally the first flush is held until a number of writes have been made
//! (a slow disk that makes grouping deterministic).

#![allow(dead_code)] // Each test file uses part of the support.

use std::collections::HashMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use ringstore_storage::{Engine, KvIter, MemoryEngine, Result, StorageError, Tree, Updater};
use tokio::sync::watch;

/// One flush as the engine saw it.
#[derive(Clone, Copy, Debug)]
pub struct FlushRecord {
    pub started: u64,
    pub finished: u64,
}

#[derive(Default)]
struct Books {
    /// Per key (of any tree): the clock when its latest write returned.
    writes: HashMap<Vec<u8>, u64>,
    write_count: usize,
    flushes: Vec<FlushRecord>,
    /// The threads tree calls ran on.
    threads: std::collections::HashSet<std::thread::ThreadId>,
}

pub struct CountingEngine {
    inner: MemoryEngine,
    shared: Arc<Shared>,
}

/// What the engine and its trees share.
struct Shared {
    clock: AtomicU64,
    books: Mutex<Books>,
    writes_changed: Condvar,
    /// Hold the first flush until this many writes have been made.
    hold_first_flush_until: Option<usize>,
    fail_flushes: AtomicBool,
    flushes_tx: watch::Sender<usize>,
}

impl Shared {
    fn tick(&self) -> u64 {
        self.clock.fetch_add(1, SeqCst)
    }

    fn record_thread(&self) {
        let mut books = self.books.lock().unwrap();
        books.threads.insert(std::thread::current().id());
    }

    fn record_write(&self, key: &[u8]) {
        let mut books = self.books.lock().unwrap();
        books.threads.insert(std::thread::current().id());
        let at = self.tick();
        books.writes.insert(key.to_vec(), at);
        books.write_count += 1;
        self.writes_changed.notify_all();
    }
}

impl CountingEngine {
    pub fn new() -> Arc<CountingEngine> {
        CountingEngine::build(None)
    }

    /// An engine whose first flush waits until `writes` writes have been made.
    pub fn holding_first_flush_until(writes: usize) -> Arc<CountingEngine> {
        CountingEngine::build(Some(writes))
    }

    fn build(hold: Option<usize>) -> Arc<CountingEngine> {
        Arc::new(CountingEngine {
            inner: MemoryEngine::new(),
            shared: Arc::new(Shared {
                clock: AtomicU64::new(1),
                books: Mutex::default(),
                writes_changed: Condvar::new(),
                hold_first_flush_until: hold,
                fail_flushes: AtomicBool::new(false),
                flushes_tx: watch::channel(0).0,
            }),
        })
    }

    /// The next clock value: call it when a tested operation has returned.
    pub fn tick(&self) -> u64 {
        self.shared.tick()
    }

    pub fn set_failing(&self, fail: bool) {
        self.shared.fail_flushes.store(fail, SeqCst);
    }

    pub fn flushes(&self) -> Vec<FlushRecord> {
        self.shared.books.lock().unwrap().flushes.clone()
    }

    /// The clock when the latest write of `key` (a tree key) returned.
    pub fn write_time(&self, key: &[u8]) -> Option<u64> {
        self.shared.books.lock().unwrap().writes.get(key).copied()
    }

    /// The threads that tree reads and writes ran on.
    pub fn tree_threads(&self) -> std::collections::HashSet<std::thread::ThreadId> {
        self.shared.books.lock().unwrap().threads.clone()
    }

    /// Completed flushes, counted, as a watch for async tests.
    pub fn flush_count(&self) -> watch::Receiver<usize> {
        self.shared.flushes_tx.subscribe()
    }

    /// Whether a flush that started after `written` finished before `returned`.
    pub fn durable_between(&self, written: u64, returned: u64) -> bool {
        self.flushes()
            .iter()
            .any(|flush| flush.started > written && flush.finished < returned)
    }
}

impl Engine for CountingEngine {
    fn open_tree(&self, name: &str) -> Result<Arc<dyn Tree>> {
        Ok(Arc::new(CountingTree {
            inner: self.inner.open_tree(name)?,
            shared: Arc::clone(&self.shared),
        }))
    }

    fn drop_tree(&self, name: &str) -> Result<bool> {
        self.inner.drop_tree(name)
    }

    fn tree_names(&self) -> Vec<String> {
        self.inner.tree_names()
    }

    fn flush(&self) -> Result<()> {
        let shared = &self.shared;
        let mut books = shared.books.lock().unwrap();
        if let Some(writes) = shared.hold_first_flush_until
            && books.flushes.is_empty()
        {
            let (held, timeout) = shared
                .writes_changed
                .wait_timeout_while(books, Duration::from_secs(30), |b| b.write_count < writes)
                .unwrap();
            assert!(!timeout.timed_out(), "the writes never arrived");
            books = held;
        }
        let started = shared.tick();
        drop(books);
        let outcome = if shared.fail_flushes.load(SeqCst) {
            Err(StorageError::Sled(sled::Error::Io(std::io::Error::other(
                "injected flush failure",
            ))))
        } else {
            self.inner.flush()
        };
        let finished = shared.tick();
        let mut books = shared.books.lock().unwrap();
        books.flushes.push(FlushRecord { started, finished });
        let count = books.flushes.len();
        drop(books);
        shared.flushes_tx.send_replace(count);
        outcome
    }

    fn size_on_disk(&self) -> Result<u64> {
        self.inner.size_on_disk()
    }
}

struct CountingTree {
    inner: Arc<dyn Tree>,
    shared: Arc<Shared>,
}

impl Tree for CountingTree {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.shared.record_thread();
        self.inner.get(key)
    }

    fn insert(&self, key: &[u8], value: &[u8]) -> Result<Option<Vec<u8>>> {
        let previous = self.inner.insert(key, value)?;
        self.shared.record_write(key);
        Ok(previous)
    }

    fn remove(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let previous = self.inner.remove(key)?;
        self.shared.record_write(key);
        Ok(previous)
    }

    fn update(&self, key: &[u8], f: &mut Updater<'_>) -> Result<Option<Vec<u8>>> {
        let new = self.inner.update(key, f)?;
        self.shared.record_write(key);
        Ok(new)
    }

    fn range(&self, from: Bound<&[u8]>, to: Bound<&[u8]>) -> KvIter {
        self.inner.range(from, to)
    }

    fn len(&self) -> Result<usize> {
        self.inner.len()
    }
}
