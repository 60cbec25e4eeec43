//! One blocking read repair: writing a read's winner until enough replicas
//! hold it for the read's consistency level.
//!
//! A read at `QUORUM` that saw two versions must not answer with the newer
//! one until a quorum holds it, or the next `QUORUM` read could meet only
//! stale replicas and go back in time (monotonic reads; Cassandra 4's
//! `BlockingReadRepair`). The replicas that answered with the winner already
//! hold it; the stale ones the read met are sent the winner. The read may
//! answer as soon as the holders meet the level's [`Requirement`] — not only
//! when every stale replica acked: a stale replica that answered the read but
//! cannot take the write (its disk is full, it was just killed) must not fail
//! a read the rest of the replicas can serve.
//!
//! Built by [`ReadTracker::read_repair`](crate::ReadTracker::read_repair)
//! once a read is done; the node sends the winner to
//! [`ReadRepair::targets`], feeds each write's result back, and does what the
//! returned [`RepairAction`] says:
//! - **`Done`**: the holders meet the level; answer the client. Writes still
//!   in flight carry on and may yet repair more replicas.
//! - **`Send`**: a repair failed (or the node's timer fired) and the
//!   outstanding writes can no longer meet the level: send the winner to
//!   these replicas too — ones the read did not contact (as Cassandra's
//!   additional repair writes), then ones whose read failed or was slow.
//! - **`Failed`**: nobody is left to write to; answer with a timeout.
//!
//! # Invariants
//! - `Done` only when the replicas known to hold the winner (the read's and
//!   those whose repair acked) meet every quota of the requirement.
//! - Each replica is written to at most once, and each ack counts once; an
//!   ack that arrives after a timeout still counts.
//! - The status moves to `Done` or `Failed` once and stays.
//!
//! # Caveats
//! - A replica the read did not contact may already hold the winner; it is
//!   written to anyway (the write is idempotent under last-write-wins).

use std::collections::VecDeque;

use ringstore_cell::Cell;
use ringstore_placement::{Datacenter, HostId};

use crate::consistency::ConsistencyLevel;
use crate::requirement::Requirement;

/// What the node must do after feeding a [`ReadRepair`] an event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RepairAction {
    /// Wait for more repair writes to answer, or for the timer.
    Wait,
    /// Send the winner to these replicas as well, and restart the timer.
    Send(Vec<HostId>),
    /// Enough replicas hold the winner: answer the client.
    Done,
    /// Too few replicas can hold the winner: answer with this error.
    Failed(ReadRepairFailure),
}

/// A read whose winner could not be written to enough replicas in time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "read repair at consistency level {level}: only {holding} of {required} required replicas \
     hold the newest value"
)]
pub struct ReadRepairFailure {
    /// The read's level.
    pub level: ConsistencyLevel,
    /// Replicas (counted toward the level) known to hold the winner.
    pub holding: u32,
    /// Replicas the level needs.
    pub required: u32,
}

/// Where one replica stands in the repair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Write {
    /// Holds the winner: it answered the read with it, or its repair acked.
    Holds,
    /// Sent the winner; no answer yet.
    Sent,
    /// Sent the winner, not answered before the timer: its ack still counts.
    Slow,
    /// Its repair write failed.
    Failed,
}

/// The state of one blocking read repair.
#[derive(Clone, Debug)]
pub struct ReadRepair {
    level: ConsistencyLevel,
    requirement: Requirement,
    winner: Cell,
    replicas: Vec<(HostId, Datacenter, Write)>,
    spares: VecDeque<(HostId, Datacenter)>,
    finished: bool,
}

impl ReadRepair {
    /// A repair of `winner` at `level`: `holders` answered the read with it,
    /// `stale` (sent the winner at once) with something else, and `spares`
    /// may be written to, in this order, if too few stale replicas ack.
    pub(crate) fn new(
        level: ConsistencyLevel,
        requirement: Requirement,
        winner: Cell,
        holders: Vec<(HostId, Datacenter)>,
        stale: Vec<(HostId, Datacenter)>,
        spares: VecDeque<(HostId, Datacenter)>,
    ) -> ReadRepair {
        let replicas = holders
            .into_iter()
            .map(|(host, dc)| (host, dc, Write::Holds))
            .chain(stale.into_iter().map(|(host, dc)| (host, dc, Write::Sent)))
            .collect();
        ReadRepair {
            level,
            requirement,
            winner,
            replicas,
            spares,
            finished: false,
        }
    }

    /// The cell to write.
    pub fn winner(&self) -> &Cell {
        &self.winner
    }

    /// The stale replicas, to send the winner to first.
    pub fn targets(&self) -> Vec<HostId> {
        self.replicas
            .iter()
            .filter(|(_, _, write)| *write == Write::Sent)
            .map(|(host, _, _)| *host)
            .collect()
    }

    /// Where the repair stands before any write answered: `Done` if the
    /// read's holders already meet the level (the writes still go out).
    pub fn status(&mut self) -> RepairAction {
        self.advance(false)
    }

    /// `host` applied the winner.
    pub fn on_ack(&mut self, host: HostId) -> RepairAction {
        self.set(host, Write::Holds);
        self.advance(false)
    }

    /// `host`'s repair write failed or timed out.
    pub fn on_failure(&mut self, host: HostId) -> RepairAction {
        self.set(host, Write::Failed);
        self.advance(false)
    }

    /// The node's timer fired: writes still outstanding no longer count as
    /// coming (their acks still do), so spares are written to in their place;
    /// with nobody new to write to, the repair fails.
    pub fn on_timeout(&mut self) -> RepairAction {
        if self.finished {
            return RepairAction::Wait;
        }
        for (_, _, write) in &mut self.replicas {
            if *write == Write::Sent {
                *write = Write::Slow;
            }
        }
        self.advance(true)
    }

    fn set(&mut self, host: HostId, to: Write) {
        if self.finished {
            return;
        }
        if let Some((_, _, write)) = self
            .replicas
            .iter_mut()
            .find(|(h, _, w)| *h == host && matches!(w, Write::Sent | Write::Slow))
        {
            *write = to;
        }
    }

    fn dcs_in<'a>(&'a self, states: &'a [Write]) -> impl Iterator<Item = &'a Datacenter> + 'a {
        self.replicas
            .iter()
            .filter(|(_, _, write)| states.contains(write))
            .map(|(_, dc, _)| dc)
    }

    fn advance(&mut self, timed_out: bool) -> RepairAction {
        if self.finished {
            return RepairAction::Wait;
        }
        if self.requirement.is_met_by(self.dcs_in(&[Write::Holds])) {
            self.finished = true;
            return RepairAction::Done;
        }
        let sends = self.top_up();
        if !sends.is_empty() {
            return RepairAction::Send(sends);
        }
        // Before the timer fired, slow writes cannot exist; after a failure
        // that follows a timeout, their acks may still meet the level.
        let possible: &[Write] = if timed_out {
            &[Write::Holds, Write::Sent]
        } else {
            &[Write::Holds, Write::Sent, Write::Slow]
        };
        if self.requirement.is_met_by(self.dcs_in(possible)) {
            return RepairAction::Wait;
        }
        self.finished = true;
        RepairAction::Failed(ReadRepairFailure {
            level: self.level,
            holding: self.requirement.credited(self.dcs_in(&[Write::Holds])),
            required: self.requirement.total(),
        })
    }

    /// Takes spares, in order, that count toward a quota the holders and the
    /// outstanding writes leave short, until none is short or none is left.
    fn top_up(&mut self) -> Vec<HostId> {
        let mut sends = Vec::new();
        let mut index = 0;
        while index < self.spares.len() {
            let coming = self.dcs_in(&[Write::Holds, Write::Sent]);
            let Some((scope, _, _)) = self.requirement.shortfall(coming) else {
                break;
            };
            let spare_dc = &self.spares[index].1;
            let counts = match &scope {
                None => self.requirement.counts_toward(spare_dc),
                Some(dc) => dc == spare_dc,
            };
            if counts {
                let (host, dc) = self.spares.remove(index).expect("index is in bounds");
                self.replicas.push((host, dc, Write::Sent));
                sends.push(host);
                // The shortfall may have moved to another quota: look again
                // from the first spare.
                index = 0;
            } else {
                index += 1;
            }
        }
        sends
    }
}

#[cfg(test)]
#[path = "read_repair_tests.rs"]
mod tests;
