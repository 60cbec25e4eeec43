//! The sampling sessions running on a node (see the crate's essay).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::space_saving::{Counted, SpaceSaving};

/// Sessions that may run at once on a node.
pub const MAX_SESSIONS: usize = 4;

/// The most counters a session keeps per operation (Cassandra's limit too).
pub const MAX_CAPACITY: usize = 1024;

/// What a session samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operation {
    /// Local reads (data and digest).
    Reads,
    /// Local writes (puts, deletes, batch mutations).
    Writes,
}

impl Operation {
    /// Both, in the order they are reported.
    pub const ALL: [Operation; 2] = [Operation::Writes, Operation::Reads];
}

/// Why a session could not start.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SampleError {
    /// The capacity is 0 or above [`MAX_CAPACITY`].
    #[error("capacity must be between 1 and {MAX_CAPACITY}, not {0}")]
    Capacity(usize),
    /// No operation was asked for.
    #[error("sample reads, writes or both")]
    NoOperation,
    /// [`MAX_SESSIONS`] are running already.
    #[error(
        "{MAX_SESSIONS} sampling sessions are running on this node already; wait for one to end"
    )]
    TooManySessions,
}

/// What one session saw of one operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperationSample {
    /// The operation.
    pub operation: Operation,
    /// Operations sampled in all.
    pub sampled: u64,
    /// The session's counters for it.
    pub capacity: usize,
    /// The hottest keys, hottest first.
    pub top: Vec<Counted<Vec<u8>>>,
}

struct Running<S> {
    id: u64,
    scope: S,
    summaries: Vec<(Operation, SpaceSaving<Vec<u8>>)>,
}

/// The sessions of one node, over scopes of type `S` (the keyspace).
pub struct Samplers<S> {
    /// Sessions running: read without the lock on every operation.
    running: AtomicUsize,
    /// Held only to record or to start and end a session, never across an
    /// await.
    sessions: Mutex<(u64, Vec<Running<S>>)>,
}

impl<S> Default for Samplers<S> {
    fn default() -> Samplers<S> {
        Samplers {
            running: AtomicUsize::new(0),
            sessions: Mutex::new((0, Vec::new())),
        }
    }
}

impl<S: PartialEq> Samplers<S> {
    /// Counts one `operation` on `key` in `scope` in every session that
    /// samples it. One atomic load when no session runs.
    pub fn record(&self, scope: &S, operation: Operation, key: &[u8]) {
        if self.running.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut sessions = self.lock();
        for session in sessions.1.iter_mut().filter(|s| s.scope == *scope) {
            for (sampled, summary) in &mut session.summaries {
                if *sampled == operation {
                    summary.offer(key);
                }
            }
        }
    }

    /// Starts sampling `operations` in `scope` with `capacity` counters
    /// each. The session ends when the returned handle is finished or
    /// dropped.
    pub fn start(
        &self,
        scope: S,
        operations: &[Operation],
        capacity: usize,
    ) -> Result<Session<'_, S>, SampleError> {
        if capacity == 0 || capacity > MAX_CAPACITY {
            return Err(SampleError::Capacity(capacity));
        }
        let wanted: Vec<Operation> = Operation::ALL
            .into_iter()
            .filter(|o| operations.contains(o))
            .collect();
        if wanted.is_empty() {
            return Err(SampleError::NoOperation);
        }
        let mut sessions = self.lock();
        if sessions.1.len() >= MAX_SESSIONS {
            return Err(SampleError::TooManySessions);
        }
        sessions.0 += 1;
        let id = sessions.0;
        sessions.1.push(Running {
            id,
            scope,
            summaries: wanted
                .into_iter()
                .map(|o| (o, SpaceSaving::new(capacity)))
                .collect(),
        });
        self.running.store(sessions.1.len(), Ordering::Relaxed);
        Ok(Session {
            samplers: self,
            id,
            ended: false,
        })
    }

    /// Removes session `id`, returning what it saw.
    fn end(&self, id: u64) -> Option<Running<S>> {
        let mut sessions = self.lock();
        let index = sessions.1.iter().position(|s| s.id == id)?;
        let running = sessions.1.swap_remove(index);
        self.running.store(sessions.1.len(), Ordering::Relaxed);
        Some(running)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (u64, Vec<Running<S>>)> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A running session; dropping it ends the session unreported.
pub struct Session<'a, S: PartialEq> {
    samplers: &'a Samplers<S>,
    id: u64,
    ended: bool,
}

impl<S: PartialEq> Session<'_, S> {
    /// Ends the session: for each operation sampled, its `top` hottest keys.
    pub fn finish(mut self, top: usize) -> Vec<OperationSample> {
        self.ended = true;
        let Some(running) = self.samplers.end(self.id) else {
            return Vec::new();
        };
        running
            .summaries
            .into_iter()
            .map(|(operation, summary)| OperationSample {
                operation,
                sampled: summary.total(),
                capacity: summary.capacity(),
                top: summary.top(top),
            })
            .collect()
    }
}

impl<S: PartialEq> Drop for Session<'_, S> {
    fn drop(&mut self) {
        if !self.ended {
            self.samplers.end(self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_counts_its_scope_and_operations_only() {
        let samplers = Samplers::<&str>::default();
        samplers.record(&"ks", Operation::Reads, b"before");
        let session = samplers.start("ks", &[Operation::Reads], 8).unwrap();
        samplers.record(&"ks", Operation::Reads, b"a");
        samplers.record(&"ks", Operation::Reads, b"a");
        samplers.record(&"ks", Operation::Writes, b"written");
        samplers.record(&"other", Operation::Reads, b"elsewhere");
        samplers.record(&"ks", Operation::Reads, b"b");
        let report = session.finish(10);
        assert_eq!(report.len(), 1);
        assert_eq!(report[0].operation, Operation::Reads);
        assert_eq!(report[0].sampled, 3);
        let keys: Vec<&[u8]> = report[0].top.iter().map(|c| c.key.as_slice()).collect();
        assert_eq!(keys, [b"a".as_slice(), b"b"]);
        assert_eq!(samplers.running.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn sessions_are_bounded_and_a_dropped_one_frees_its_place() {
        let samplers = Samplers::<u8>::default();
        let sessions: Vec<_> = (0..MAX_SESSIONS)
            .map(|_| samplers.start(1, &Operation::ALL, 4).unwrap())
            .collect();
        assert_eq!(
            samplers.start(1, &Operation::ALL, 4).err(),
            Some(SampleError::TooManySessions)
        );
        drop(sessions);
        let again = samplers.start(1, &Operation::ALL, 4).unwrap();
        samplers.record(&1, Operation::Writes, b"k");
        let report = again.finish(1);
        let writes: Vec<u64> = report.iter().map(|r| r.sampled).collect();
        assert_eq!(writes, [1, 0], "writes first, then reads");
    }

    #[test]
    fn a_bad_capacity_or_no_operation_is_refused() {
        let samplers = Samplers::<u8>::default();
        assert_eq!(
            samplers.start(1, &Operation::ALL, 0).err(),
            Some(SampleError::Capacity(0))
        );
        assert_eq!(
            samplers.start(1, &Operation::ALL, MAX_CAPACITY + 1).err(),
            Some(SampleError::Capacity(MAX_CAPACITY + 1))
        );
        assert_eq!(
            samplers.start(1, &[], 8).err(),
            Some(SampleError::NoOperation)
        );
    }
}
