//! The node's streams, as `netstats` shows them: one record per stream
//! session (an operation's ranges of one keyspace to or from one peer).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ringstore_placement::HostId;
use tokio::time::Instant;

/// How many finished sessions `netstats` keeps showing.
const KEEP_FINISHED: usize = 32;
/// The window over which the current rate is measured.
const RATE_WINDOW: Duration = Duration::from_secs(5);

/// Which way a session's data flows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// This node pulls from the peer.
    Receiving,
    /// The peer pulls from this node.
    Sending,
}

impl Direction {
    /// `receiving` or `sending`.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Receiving => "receiving",
            Direction::Sending => "sending",
        }
    }
}

/// What a session is for and with whom; fixed at its start.
#[derive(Clone, Debug)]
pub struct SessionInfo {
    /// What the session is for, as `netstats` shows it: a stream
    /// operation's [`kind`](crate::StreamOperation::kind), or `repair <id>`.
    pub operation: String,
    /// Which way.
    pub direction: Direction,
    /// The peer.
    pub peer: HostId,
    /// The peer's client address, when known.
    pub peer_address: Option<SocketAddr>,
    /// The keyspace's name (its id when the name is unknown).
    pub keyspace: String,
    /// The ranges it covers.
    pub ranges_total: u32,
    /// The bytes it is expected to move (an estimate until it is done).
    pub bytes_total: u64,
}

/// The outcome of a session, once it has one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionState {
    /// Still streaming.
    Running,
    /// Every range is done.
    Done,
    /// Given up, with the reason.
    Failed(String),
}

/// A session's progress, as `netstats` reads it.
#[derive(Clone, Debug)]
pub struct SessionSnapshot {
    /// Its fixed description.
    pub info: SessionInfo,
    /// Ranges completed.
    pub ranges_done: u32,
    /// Bytes moved so far.
    pub bytes_done: u64,
    /// Bytes per second over the last few seconds.
    pub bytes_per_second: f64,
    /// Where it stands.
    pub state: SessionState,
}

impl SessionSnapshot {
    /// The seconds left at the current rate, while running with a known rate.
    pub fn eta_seconds(&self) -> Option<f64> {
        if self.state != SessionState::Running || self.bytes_per_second <= 0.0 {
            return None;
        }
        let left = self.info.bytes_total.saturating_sub(self.bytes_done);
        Some(left as f64 / self.bytes_per_second)
    }
}

/// One session's live record.
pub struct Session {
    info: SessionInfo,
    progress: Mutex<Progress>,
    totals: Arc<Totals>,
}

/// Bytes moved by every session since the node started (for metrics).
#[derive(Default)]
struct Totals {
    received: AtomicU64,
    sent: AtomicU64,
}

struct Progress {
    ranges_done: u32,
    bytes_done: u64,
    samples: VecDeque<(Instant, u64)>,
    state: SessionState,
}

impl Session {
    fn lock(&self) -> std::sync::MutexGuard<'_, Progress> {
        self.progress.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts `bytes` moved.
    pub fn add_bytes(&self, bytes: u64) {
        let now = Instant::now();
        let total = match self.info.direction {
            Direction::Receiving => &self.totals.received,
            Direction::Sending => &self.totals.sent,
        };
        total.fetch_add(bytes, Ordering::Relaxed);
        let mut progress = self.lock();
        progress.bytes_done += bytes;
        let done = progress.bytes_done;
        progress.samples.push_back((now, done));
        while progress
            .samples
            .front()
            .is_some_and(|(at, _)| now.duration_since(*at) > RATE_WINDOW)
        {
            progress.samples.pop_front();
        }
    }

    /// Counts a range done.
    pub fn range_done(&self) {
        self.lock().ranges_done += 1;
    }

    /// Ends the session: done, or failed with `reason`.
    pub fn finish(&self, outcome: Result<(), String>) {
        self.lock().state = match outcome {
            Ok(()) => SessionState::Done,
            Err(reason) => SessionState::Failed(reason),
        };
    }

    /// The bytes moved so far.
    pub fn bytes_done(&self) -> u64 {
        self.lock().bytes_done
    }

    /// Its progress now.
    pub fn snapshot(&self) -> SessionSnapshot {
        let progress = self.lock();
        let mut info = self.info.clone();
        if progress.state == SessionState::Done {
            info.bytes_total = progress.bytes_done;
        }
        let bytes_per_second = match (progress.samples.front(), progress.samples.back()) {
            (Some((first_at, first)), Some((last_at, last)))
                if progress.state == SessionState::Running =>
            {
                let span = Instant::now()
                    .duration_since(*first_at)
                    .max(last_at.duration_since(*first_at));
                if span.is_zero() {
                    0.0
                } else {
                    (last - first) as f64 / span.as_secs_f64()
                }
            }
            _ => 0.0,
        };
        SessionSnapshot {
            info,
            ranges_done: progress.ranges_done,
            bytes_done: progress.bytes_done,
            bytes_per_second,
            state: progress.state.clone(),
        }
    }
}

/// Every session of this node: running ones, and the last finished ones.
#[derive(Default)]
pub struct Streams {
    sessions: Mutex<VecDeque<Arc<Session>>>,
    totals: Arc<Totals>,
}

impl Streams {
    /// Starts recording a session.
    pub fn open(&self, info: SessionInfo) -> Arc<Session> {
        let session = Arc::new(Session {
            info,
            progress: Mutex::new(Progress {
                ranges_done: 0,
                bytes_done: 0,
                samples: VecDeque::new(),
                state: SessionState::Running,
            }),
            totals: self.totals.clone(),
        });
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.push_back(session.clone());
        prune(&mut sessions);
        session
    }

    /// Bytes received and sent by every session since the node started.
    pub fn bytes_moved(&self) -> (u64, u64) {
        (
            self.totals.received.load(Ordering::Relaxed),
            self.totals.sent.load(Ordering::Relaxed),
        )
    }

    /// The sessions still running.
    pub fn running(&self) -> usize {
        let sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions
            .iter()
            .filter(|s| s.lock().state == SessionState::Running)
            .count()
    }

    /// Every recorded session, oldest first.
    pub fn snapshot(&self) -> Vec<SessionSnapshot> {
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        prune(&mut sessions);
        sessions.iter().map(|s| s.snapshot()).collect()
    }
}

/// Forgets the oldest finished sessions beyond the few kept.
fn prune(sessions: &mut VecDeque<Arc<Session>>) {
    let finished = |s: &Arc<Session>| s.lock().state != SessionState::Running;
    let mut excess = sessions
        .iter()
        .filter(|s| finished(s))
        .count()
        .saturating_sub(KEEP_FINISHED);
    sessions.retain(|s| {
        if excess > 0 && finished(s) {
            excess -= 1;
            false
        } else {
            true
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> SessionInfo {
        SessionInfo {
            operation: "bootstrap".into(),
            direction: Direction::Receiving,
            peer: HostId::from_u128(1),
            peer_address: None,
            keyspace: "ks".into(),
            ranges_total: 4,
            bytes_total: 1000,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn progress_rate_and_eta() {
        let streams = Streams::default();
        let session = streams.open(info());
        session.add_bytes(0);
        tokio::time::advance(Duration::from_secs(1)).await;
        session.add_bytes(100);
        session.range_done();
        let now = streams.snapshot().pop().unwrap();
        assert_eq!((now.ranges_done, now.bytes_done), (1, 100));
        assert!((now.bytes_per_second - 100.0).abs() < 1.0);
        assert!((now.eta_seconds().unwrap() - 9.0).abs() < 0.1);
        session.finish(Ok(()));
        let done = streams.snapshot().pop().unwrap();
        assert_eq!(done.state, SessionState::Done);
        assert_eq!(
            done.info.bytes_total, 100,
            "the final count replaces the estimate"
        );
        assert_eq!(done.eta_seconds(), None);
        assert_eq!(streams.bytes_moved(), (100, 0));
        assert_eq!(streams.running(), 0);
    }

    #[test]
    fn only_a_few_finished_sessions_are_kept() {
        let streams = Streams::default();
        let running = streams.open(info());
        for _ in 0..100 {
            streams.open(info()).finish(Err("x".into()));
        }
        let all = streams.snapshot();
        assert_eq!(all.len(), KEEP_FINISHED + 1);
        assert_eq!(all[0].state, SessionState::Running);
        drop(running);
    }
}
