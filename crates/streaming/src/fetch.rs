//! One range's fetch as a sans-IO state machine: which source, when to
//! retry, when to fail over, where to resume, whether what arrived is whole.
//!
//! # Driving it
//! The shell (the node's `streaming/fetch.rs`) owns a [`RangeFetcher`] and
//! loops: it does what the last [`FetchAction`] asks and reports how it went
//! as a [`FetchEvent`] to [`step`](RangeFetcher::step), which answers with the
//! next action. Time is a [`Duration`] since any start the shell chooses.
//!
//! | action | the shell does | then reports |
//! |---|---|---|
//! | `Open` | opens a stream of `remaining` from `source`, reads a message | `ChunkReceived`, `StreamEnded` or `SourceFailed` |
//! | `Receive` | reads the next message | the same |
//! | `Apply` | applies the entries, then records the checkpoint, durably | `Applied`, or `ApplyFailed` |
//! | `Rewind` | records the checkpoint (a failure fails the fetch) | `Tick` |
//! | `WaitUntil` | drops any open stream, sleeps until then | `Tick` |
//! | `Done` | records the range done if asked; returns the totals | — |
//! | `GiveUp` | returns the error | — |
//!
//! Before each `Tick` the shell reports every source's liveness
//! (`SourceSeenUp` / `SourceSeenDown`, answered with `Continue`); the choice
//! of source is made on the `Tick` that starts an attempt.
//!
//! # Policy
//! - An attempt begins at the range's resume point: nothing yet (the range's
//!   start), after the last applied chunk's token, or — when that token is
//!   the range's end, or the range is done — no stream at all.
//! - The source is the first live one in order of preference among those
//!   that have failed the fewest *rounds* of
//!   [`failures_before_failover`](FetchConfig::failures_before_failover)
//!   failures: a failing preferred source is retried a few times, then gives
//!   way to the next replica, and is tried again once every other has failed
//!   as often. The first time a source other than the preferred one is used,
//!   `Open` says so (`failover`), for the shell to warn.
//! - A failure (transport, storage, or checksum) costs one attempt and a wait
//!   of [`backoff`](FetchConfig::backoff)`(attempt)`; so does an attempt that
//!   finds no source up. After [`max_attempts`](FetchConfig::max_attempts)
//!   the fetch gives up, naming the last failure.
//! - A checksum mismatch (a chunk's, or the whole stream's count and CRC)
//!   discards the pass: the resume point goes back to where the pass began.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use ringstore_cell::Cell;
use ringstore_placement::{HostId, Token, TokenRange};

use crate::checkpoint::Position;
use crate::chunk::EntryChecksum;
use crate::error::{FetchFailure, StreamingError};

/// The fetch policy's knobs; [`FetchConfig::default`] is what the node uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FetchConfig {
    /// Attempts per range before the fetch gives up (at least 1).
    pub max_attempts: u32,
    /// Failures after which a source gives way to the next one.
    pub failures_before_failover: u32,
    /// The wait after the first attempt fails is twice this; it doubles
    /// with each attempt up to [`max_backoff`](Self::max_backoff).
    pub base_backoff: Duration,
    /// The longest wait between attempts.
    pub max_backoff: Duration,
}

impl Default for FetchConfig {
    /// 30 attempts, failover after 3 failures, waits of 200 ms doubling to 3 s.
    fn default() -> FetchConfig {
        FetchConfig {
            max_attempts: 30,
            failures_before_failover: 3,
            base_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(3),
        }
    }
}

impl FetchConfig {
    /// The wait after attempt number `attempt` (counted from 1).
    pub fn backoff(&self, attempt: u32) -> Duration {
        (self.base_backoff * 2u32.pow(attempt.min(5))).min(self.max_backoff)
    }
}

/// What a fetch moved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FetchTotals {
    /// Ranges fetched (including ones an earlier run finished).
    pub ranges: u64,
    /// Bytes received by this run ([`entry_bytes`](crate::entry_bytes)).
    pub bytes: u64,
    /// Cells received by this run.
    pub entries: u64,
}

impl std::ops::AddAssign for FetchTotals {
    fn add_assign(&mut self, other: FetchTotals) {
        self.ranges += other.ranges;
        self.bytes += other.bytes;
        self.entries += other.entries;
    }
}

/// What happened, as the shell reports it to [`RangeFetcher::step`].
#[derive(Debug)]
pub enum FetchEvent {
    /// Time passed: start an attempt if one is due. The first event.
    Tick,
    /// Membership sees this source up.
    SourceSeenUp(HostId),
    /// Membership sees this source down: it is not chosen while down.
    SourceSeenDown(HostId),
    /// A chunk arrived on the open stream.
    ChunkReceived {
        /// Its keys and cells, in token order (entries the wire could not
        /// carry are left out: the checksums catch them).
        entries: Vec<(Vec<u8>, Cell)>,
        /// The CRC-32 the source computed over them.
        checksum: u32,
        /// The token of its last entry.
        last_token: Token,
    },
    /// The stream's final message arrived.
    StreamEnded {
        /// How many entries the source sent.
        total_entries: u64,
        /// Their CRC-32, as the source computed it.
        total_checksum: u32,
    },
    /// The last `Apply` is applied and checkpointed, durably.
    Applied,
    /// The source or the network failed: the stream could not be opened,
    /// broke, ended early or went idle.
    SourceFailed(Box<dyn std::error::Error + Send + Sync>),
    /// Applying or checkpointing the last `Apply` failed.
    ApplyFailed(Box<dyn std::error::Error + Send + Sync>),
}

/// What the shell should do next (see the module docs for the protocol).
#[derive(Debug)]
pub enum FetchAction {
    /// Open a stream of `remaining` from `source` and report its first message.
    Open {
        /// The source chosen.
        source: HostId,
        /// What is left of the range: from the resume point to its end.
        remaining: TokenRange,
        /// This is the first time the fetch leaves its preferred source.
        failover: bool,
    },
    /// Report the open stream's next message.
    Receive,
    /// Apply these entries, then record `checkpoint`, durably; report
    /// `Applied` (then count `bytes` as moved) or `ApplyFailed`.
    Apply {
        /// The chunk's verified entries.
        entries: Vec<(Vec<u8>, Cell)>,
        /// Their size ([`entry_bytes`](crate::entry_bytes)).
        bytes: u64,
        /// The resume point once they are stored.
        checkpoint: Position,
    },
    /// The pass was corrupt: record this resume point (`None`: not begun),
    /// durably, failing the fetch if that fails; then report `Tick`.
    Rewind(Option<Position>),
    /// Drop any open stream; report `Tick` at this time.
    WaitUntil(Duration),
    /// Nothing new: carry on.
    Continue,
    /// The range is stored and verified: record it done (if `record`) and
    /// return the totals.
    Done {
        /// Whether the checkpoint must still be set to [`Position::Done`].
        record: bool,
        /// What this fetch moved.
        totals: FetchTotals,
    },
    /// Out of attempts: fail with this error (the checkpoint is kept).
    GiveUp(StreamingError),
}

/// Where a fetch stands.
#[derive(Debug)]
enum State {
    /// Between attempts: the next begins at `until`.
    Waiting { until: Duration },
    /// A stream from `source` is open.
    Streaming {
        source: HostId,
        /// The resume point when the pass began.
        pass_start: Option<Position>,
        /// The whole pass's checksum so far.
        total: EntryChecksum,
        /// A chunk handed out to `Apply`, not yet reported applied: its
        /// resume point, bytes and entries.
        applying: Option<(Position, u64, u64)>,
    },
    /// Done or given up: every event is answered with `Continue`.
    Finished,
}

/// One range's fetch (see the module docs).
#[derive(Debug)]
pub struct RangeFetcher {
    config: FetchConfig,
    range: TokenRange,
    /// In order of preference.
    sources: Vec<HostId>,
    down: HashSet<HostId>,
    failures: HashMap<HostId, u32>,
    /// The resume point (mirrors the durable checkpoint).
    position: Option<Position>,
    /// Attempts begun so far.
    attempt: u32,
    warned: bool,
    last_failure: Option<FetchFailure>,
    received: FetchTotals,
    state: State,
}

impl RangeFetcher {
    /// The fetch of `range` from `sources` (in order of preference; every
    /// one counts as up until reported down), resuming from `checkpoint`.
    /// Its first attempt begins on the first [`FetchEvent::Tick`].
    pub fn new(
        config: FetchConfig,
        range: TokenRange,
        sources: Vec<HostId>,
        checkpoint: Option<Position>,
    ) -> RangeFetcher {
        RangeFetcher {
            config,
            range,
            sources,
            down: HashSet::new(),
            failures: HashMap::new(),
            position: checkpoint,
            attempt: 0,
            warned: false,
            last_failure: None,
            received: FetchTotals {
                ranges: 1,
                ..FetchTotals::default()
            },
            state: State::Waiting {
                until: Duration::ZERO,
            },
        }
    }

    /// The resume point now.
    pub fn position(&self) -> Option<Position> {
        self.position
    }

    /// Attempts begun so far.
    pub fn attempts(&self) -> u32 {
        self.attempt
    }

    /// Why the last failed attempt failed, if one did.
    pub fn last_failure(&self) -> Option<&FetchFailure> {
        self.last_failure.as_ref()
    }

    /// Takes in what happened at `now`; returns what to do next. An event
    /// that does not fit the current state (a chunk while no stream is open)
    /// is ignored with [`FetchAction::Continue`].
    pub fn step(&mut self, event: FetchEvent, now: Duration) -> FetchAction {
        match event {
            FetchEvent::SourceSeenUp(host) => {
                self.down.remove(&host);
                FetchAction::Continue
            }
            FetchEvent::SourceSeenDown(host) => {
                self.down.insert(host);
                FetchAction::Continue
            }
            FetchEvent::Tick => match self.state {
                State::Waiting { until } if now < until => FetchAction::WaitUntil(until),
                State::Waiting { .. } => self.begin_attempt(now),
                _ => FetchAction::Continue,
            },
            FetchEvent::ChunkReceived {
                entries,
                checksum,
                last_token,
            } => self.chunk(entries, checksum, last_token, now),
            FetchEvent::StreamEnded {
                total_entries,
                total_checksum,
            } => self.ended(total_entries, total_checksum, now),
            FetchEvent::Applied => self.applied(),
            FetchEvent::SourceFailed(error) => self.failed(now, |source_host| {
                FetchFailure::Transport { source_host, error }
            }),
            FetchEvent::ApplyFailed(error) => self.failed(now, |source_host| FetchFailure::Local {
                source_host,
                error,
            }),
        }
    }

    fn begin_attempt(&mut self, now: Duration) -> FetchAction {
        if self.attempt >= self.config.max_attempts {
            self.state = State::Finished;
            return FetchAction::GiveUp(StreamingError::GaveUp {
                range: self.range,
                attempts: self.attempt,
                last_error: self.last_failure.take().unwrap_or(FetchFailure::NoSourceUp),
            });
        }
        self.attempt += 1;
        let start = match self.position {
            Some(Position::Done) => return self.finish(false),
            Some(Position::After(token)) if token == self.range.end => return self.finish(true),
            Some(Position::After(token)) => token,
            None => self.range.start,
        };
        let Some(source) = self.choose_source() else {
            return self.wait(now);
        };
        let failover = self.sources.first() != Some(&source) && !self.warned;
        self.warned |= failover;
        self.state = State::Streaming {
            source,
            pass_start: self.position,
            total: EntryChecksum::default(),
            applying: None,
        };
        FetchAction::Open {
            source,
            remaining: TokenRange::new(start, self.range.end),
            failover,
        }
    }

    /// The first live source, preferring those that have failed the fewest
    /// rounds of `failures_before_failover` failures.
    fn choose_source(&self) -> Option<HostId> {
        let round = self.config.failures_before_failover.max(1);
        self.sources
            .iter()
            .enumerate()
            .filter(|(_, host)| !self.down.contains(host))
            .min_by_key(|(i, host)| (self.failures.get(host).copied().unwrap_or(0) / round, *i))
            .map(|(_, host)| *host)
    }

    fn chunk(
        &mut self,
        entries: Vec<(Vec<u8>, Cell)>,
        checksum: u32,
        last_token: Token,
        now: Duration,
    ) -> FetchAction {
        let State::Streaming {
            total,
            applying: applying @ None,
            ..
        } = &mut self.state
        else {
            return FetchAction::Continue;
        };
        // Each cell is encoded once, for the chunk's and the stream's checksums.
        let mut chunk = EntryChecksum::default();
        for (key, cell) in &entries {
            let encoded = cell.canonical_bytes();
            chunk.add(key, &encoded);
            total.add(key, &encoded);
        }
        if chunk.value() != checksum {
            let detail = format!(
                "a chunk's CRC is {checksum:08x}, its entries' {:08x}",
                chunk.value()
            );
            return self.corrupt(detail, now);
        }
        let checkpoint = Position::After(last_token);
        *applying = Some((checkpoint, chunk.bytes(), entries.len() as u64));
        FetchAction::Apply {
            entries,
            bytes: chunk.bytes(),
            checkpoint,
        }
    }

    fn applied(&mut self) -> FetchAction {
        let State::Streaming { applying, .. } = &mut self.state else {
            return FetchAction::Continue;
        };
        let Some((checkpoint, bytes, entries)) = applying.take() else {
            return FetchAction::Continue;
        };
        self.position = Some(checkpoint);
        self.received.bytes += bytes;
        self.received.entries += entries;
        FetchAction::Receive
    }

    fn ended(&mut self, total_entries: u64, total_checksum: u32, now: Duration) -> FetchAction {
        let State::Streaming {
            total,
            applying: None,
            ..
        } = &self.state
        else {
            return FetchAction::Continue;
        };
        if total_entries != total.entries() || total_checksum != total.value() {
            let detail = format!(
                "the source sent {total_entries} entries with CRC {total_checksum:08x}, \
                 {} arrived with CRC {:08x}",
                total.entries(),
                total.value()
            );
            return self.corrupt(detail, now);
        }
        self.finish(true)
    }

    /// A checksum failed: the pass is discarded, back to where it began.
    fn corrupt(&mut self, detail: String, now: Duration) -> FetchAction {
        let State::Streaming { pass_start, .. } = self.state else {
            return FetchAction::Continue;
        };
        if let FetchAction::WaitUntil(_) = self.failed(now, |source_host| FetchFailure::Corrupt {
            source_host,
            detail,
        }) {
            self.position = pass_start;
            return FetchAction::Rewind(pass_start);
        }
        FetchAction::Continue
    }

    /// The pass from the current source failed: count it against the source
    /// and wait before the next attempt.
    fn failed(
        &mut self,
        now: Duration,
        failure: impl FnOnce(HostId) -> FetchFailure,
    ) -> FetchAction {
        let State::Streaming { source, .. } = self.state else {
            return FetchAction::Continue;
        };
        *self.failures.entry(source).or_default() += 1;
        self.last_failure = Some(failure(source));
        self.wait(now)
    }

    fn wait(&mut self, now: Duration) -> FetchAction {
        let until = now + self.config.backoff(self.attempt);
        self.state = State::Waiting { until };
        FetchAction::WaitUntil(until)
    }

    fn finish(&mut self, record: bool) -> FetchAction {
        self.state = State::Finished;
        self.position = Some(Position::Done);
        FetchAction::Done {
            record,
            totals: self.received,
        }
    }
}

#[cfg(test)]
#[path = "fetch_tests.rs"]
mod tests;
