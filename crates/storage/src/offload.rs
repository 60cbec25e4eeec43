//! Where blocking work runs: on tokio's blocking pool, except on a thread
//! that runs a deterministic simulation, where it runs inline.
//!
//! # Why
//! Scans, flushes and other loops over many keys must not hold an async
//! worker, so the node sends them to tokio's blocking pool. A simulation
//! (`crates/simulation`) runs a whole cluster on one thread in simulated
//! time and must replay exactly from its seed; a pool thread finishing
//! sooner or later than the simulated tasks around it would make each run
//! different. On a thread that called [`run_inline_on_this_thread`], the
//! work runs where it is started, in the simulation's order.
//!
//! Work that feeds an async consumer through a channel uses [`channel`]:
//! on the pool its sends wait for room (the consumer paces the scan); run
//! inline, the producer cannot wait for a consumer that runs after it, so
//! the channel takes everything (simulations hold little data).
//!
//! # Caveats
//! - The switch is per thread and never turned off: only a thread made for
//!   a simulation should turn it on.
//! - Inline work blocks every task of its runtime while it runs; on a
//!   simulation's thread nothing else could run meanwhile anyway.

use std::cell::Cell;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::sync::mpsc;
use tokio::task::{JoinError, JoinHandle};

thread_local! {
    static INLINE: Cell<bool> = const { Cell::new(false) };
}

/// Makes blocking work started on this thread run inline. For
/// deterministic simulations only.
pub fn run_inline_on_this_thread() {
    INLINE.set(true);
}

/// Whether blocking work started on this thread runs inline.
pub fn runs_inline() -> bool {
    INLINE.get()
}

/// Starts `op` on tokio's blocking pool (or runs it now, on a simulation's
/// thread). Await the result, or drop it to let the work go on unwatched,
/// as with [`tokio::task::spawn_blocking`].
pub fn spawn_blocking<T: Send + 'static>(op: impl FnOnce() -> T + Send + 'static) -> Blocking<T> {
    if runs_inline() {
        Blocking::Done(Some(op()))
    } else {
        Blocking::Pool(tokio::task::spawn_blocking(op))
    }
}

/// Blocking work started by [`spawn_blocking`]; resolves to its result, or
/// to the pool's error (the work panicked, or the runtime shut down first).
pub enum Blocking<T> {
    /// It ran inline.
    Done(Option<T>),
    /// It runs on the pool.
    Pool(JoinHandle<T>),
}

// Never pinned structurally: the result is moved out, the handle is `Unpin`.
impl<T> Unpin for Blocking<T> {}

impl<T> Future for Blocking<T> {
    type Output = Result<T, JoinError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            Blocking::Done(result) => {
                Poll::Ready(Ok(result.take().expect("polled after completion")))
            }
            Blocking::Pool(handle) => Pin::new(handle).poll(cx),
        }
    }
}

/// A channel from blocking work to an async consumer: `capacity` items
/// ahead on the pool; unbounded when the work runs inline (see the module
/// docs).
pub fn channel<T>(capacity: usize) -> (Feed<T>, mpsc::Receiver<T>) {
    let capacity = if runs_inline() {
        tokio::sync::Semaphore::MAX_PERMITS
    } else {
        capacity
    };
    let (sender, receiver) = mpsc::channel(capacity);
    (
        Feed {
            sender,
            inline: runs_inline(),
        },
        receiver,
    )
}

/// The sending side of [`channel`], for blocking work.
pub struct Feed<T> {
    sender: mpsc::Sender<T>,
    inline: bool,
}

/// The consumer has gone away: the item was not delivered.
#[derive(Debug, PartialEq, Eq)]
pub struct Gone;

impl<T> Feed<T> {
    /// Hands `item` to the consumer, waiting for room on the pool.
    pub fn send(&self, item: T) -> Result<(), Gone> {
        if self.inline {
            self.sender.try_send(item).map_err(|_| Gone)
        } else {
            self.sender.blocking_send(item).map_err(|_| Gone)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn work_goes_to_the_pool_unless_the_thread_asked_for_inline() {
        let caller = std::thread::current().id();
        let elsewhere = spawn_blocking(move || std::thread::current().id() != caller)
            .await
            .unwrap();
        assert!(elsewhere, "the blocking pool runs it on another thread");

        let inline = std::thread::spawn(|| {
            run_inline_on_this_thread();
            let runtime = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            let caller = std::thread::current().id();
            runtime.block_on(spawn_blocking(move || {
                std::thread::current().id() == caller
            }))
        })
        .join()
        .unwrap();
        assert!(inline.unwrap(), "a simulation's thread runs it inline");
        assert!(!runs_inline(), "the switch is per thread");
    }

    #[test]
    fn an_inline_producer_hands_over_everything_before_its_consumer_runs() {
        std::thread::spawn(|| {
            run_inline_on_this_thread();
            let runtime = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            runtime.block_on(async {
                let (feed, mut items) = channel(2);
                let producer =
                    spawn_blocking(move || (0..100).try_for_each(|i| feed.send(i)).map(|()| 100));
                assert_eq!(producer.await.unwrap(), Ok(100));
                let mut received = Vec::new();
                while let Some(item) = items.recv().await {
                    received.push(item);
                }
                assert_eq!(received, (0..100).collect::<Vec<_>>());
            });
        })
        .join()
        .unwrap();
    }

    #[tokio::test]
    async fn on_the_pool_a_producer_stops_when_its_consumer_goes_away() {
        let (feed, mut items) = channel(1);
        let producer = spawn_blocking(move || {
            let mut sent = 0;
            while feed.send(sent).is_ok() {
                sent += 1;
            }
            sent
        });
        assert_eq!(items.recv().await, Some(0));
        drop(items);
        let sent = producer.await.unwrap();
        assert!((1..=2).contains(&sent), "stopped after {sent} items");
    }
}
