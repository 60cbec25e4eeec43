//! Counting a stage's work in flight and done.

use prometheus::{IntCounter, IntGauge};

/// One unit of a recorded stage's work: counted in flight from its creation,
/// and completed when dropped (whatever the outcome, cancellation included).
#[must_use = "the work is counted in flight only while the guard lives"]
pub struct StageGuard<'a> {
    active: &'a IntGauge,
    completed: &'a IntCounter,
}

impl<'a> StageGuard<'a> {
    pub(crate) fn enter(active: &'a IntGauge, completed: &'a IntCounter) -> StageGuard<'a> {
        active.inc();
        StageGuard { active, completed }
    }
}

impl Drop for StageGuard<'_> {
    fn drop(&mut self) {
        self.active.dec();
        self.completed.inc();
    }
}
