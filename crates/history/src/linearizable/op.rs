//! One recorded operation on one key's register.

use std::fmt;
use std::time::Duration;

use super::model::RegisterCall;
use crate::history::ClientId;

/// One client operation on a key's register, with its answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegisterOp {
    /// The key: each key is a register of its own, checked on its own.
    pub key: String,
    /// Who made it (for the report: the checker needs only the times).
    pub client: ClientId,
    /// When the client sent it (since the start of the run, monotonic; the
    /// clock of the existing checker's [`Op`](crate::Op)).
    pub invoked: Duration,
    /// When the client had its answer (at or after `invoked`; an earlier
    /// one is taken as `invoked`). Ignored when the outcome is unknown: such
    /// an operation may take effect at any time after it was invoked, as if
    /// it completed at the end of time.
    pub completed: Duration,
    /// What it was and what came back.
    pub call: RegisterCall,
}

impl RegisterOp {
    /// When it must have taken effect by: `completed`, or never for an
    /// operation of unknown outcome.
    pub fn deadline(&self) -> Option<Duration> {
        if self.call.is_unknown() {
            None
        } else {
            Some(self.completed.max(self.invoked))
        }
    }
}

impl fmt::Display for RegisterOp {
    /// `client3 [0.012s–0.014s] cas(absent -> "v7") = applied`; an unknown
    /// operation's interval is open: `[0.012s–…]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let until = self
            .deadline()
            .map_or_else(|| "…".to_string(), |d| format!("{:.3}s", d.as_secs_f64()));
        write!(
            f,
            "{} [{:.3}s–{until}] {}",
            self.client,
            self.invoked.as_secs_f64(),
            self.call
        )
    }
}
