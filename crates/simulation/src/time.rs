//! Simulated time, as the nodes' clocks read it.
//!
//! turmoil moves each host's tokio clock (timers, sleeps, timeouts); the
//! nodes' wall clocks — write timestamps, TTLs, hint ages, clock probes —
//! read [`SimTime`], which the driver sets after every step to the
//! simulation's elapsed time. Every node's clock is that time plus the
//! epoch plus its own [`ClockSkew`], which the faults change to try the
//! clock bound.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use ringstore_membership::{Clock, WallTime};

/// When every simulation starts: 2026-12-01T00:00:00Z, in microseconds
/// since the Unix epoch.
pub const EPOCH_MICROS: i64 = 1_764_547_200_000_000;

/// The simulation's elapsed time, shared by the driver and the clocks.
#[derive(Clone, Debug, Default)]
pub struct SimTime(Arc<AtomicU64>);

impl SimTime {
    /// Sets the elapsed time (the driver, after each step).
    pub fn set(&self, elapsed: Duration) {
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.0.store(micros, Ordering::Relaxed);
    }

    /// The elapsed time.
    pub fn elapsed(&self) -> Duration {
        Duration::from_micros(self.0.load(Ordering::Relaxed))
    }
}

/// How far one node's clock is off, in microseconds; changed by the faults.
#[derive(Clone, Debug, Default)]
pub struct ClockSkew(Arc<AtomicI64>);

impl ClockSkew {
    /// Sets the skew.
    pub fn set(&self, skew: Duration, ahead: bool) {
        let micros = i64::try_from(skew.as_micros()).unwrap_or(i64::MAX);
        self.0
            .store(if ahead { micros } else { -micros }, Ordering::Relaxed);
    }

    /// Puts the clock right.
    pub fn clear(&self) {
        self.0.store(0, Ordering::Relaxed);
    }

    fn micros(&self) -> i64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// One node's clock: the simulation's time plus its skew.
#[derive(Debug)]
pub struct NodeClock {
    /// The simulation's time.
    pub time: SimTime,
    /// The node's skew.
    pub skew: ClockSkew,
}

impl Clock for NodeClock {
    fn wall(&self) -> WallTime {
        let elapsed = i64::try_from(self.time.elapsed().as_micros()).unwrap_or(i64::MAX);
        WallTime(EPOCH_MICROS + elapsed + self.skew.micros())
    }

    fn monotonic(&self) -> Duration {
        self.time.elapsed()
    }
}
