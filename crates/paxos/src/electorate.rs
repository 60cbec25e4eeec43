//! Who votes on a key, how many votes make a quorum, and how many commit
//! acks the shell waits for.

use std::collections::BTreeSet;

use ringstore_placement::HostId;

use crate::error::{PaxosError, Result};

/// The replicas that vote on one key's Paxos rounds.
///
/// The shell passes the key's natural replicas and, during a join, a leave
/// or a move, its pending replicas (those gaining the range). For `SERIAL`
/// it passes all of them; for `LOCAL_SERIAL` only those in the
/// coordinator's DC, which linearizes only against other `LOCAL_SERIAL`
/// operations of that DC (mixing the two on one key gives two independent
/// orders).
///
/// The quorum is `natural / 2 + 1 + pending` (Cassandra's Paxos v2): any
/// two quorums share a natural replica's majority, and a quorum counted
/// after the range moves (when the pending replicas have become natural and
/// some old ones left) still meets one counted before it, because every
/// pending replica had to vote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Electorate {
    natural: Vec<HostId>,
    pending: Vec<HostId>,
}

impl Electorate {
    /// An electorate of `natural` and `pending` replicas: refused if there is
    /// no natural replica, or a host is listed twice.
    pub fn new(natural: Vec<HostId>, pending: Vec<HostId>) -> Result<Electorate> {
        if natural.is_empty() {
            return Err(PaxosError::NoNaturalReplicas);
        }
        let mut seen = BTreeSet::new();
        for &host in natural.iter().chain(&pending) {
            if !seen.insert(host) {
                return Err(PaxosError::DuplicateHost { host });
            }
        }
        Ok(Electorate { natural, pending })
    }

    /// Votes needed: `natural / 2 + 1 + pending`.
    pub fn quorum(&self) -> usize {
        self.natural.len() / 2 + 1 + self.pending.len()
    }

    /// Every voter: natural replicas first, then pending ones.
    pub fn hosts(&self) -> impl Iterator<Item = HostId> + '_ {
        self.natural.iter().chain(&self.pending).copied()
    }

    /// The number of voters.
    pub fn len(&self) -> usize {
        self.natural.len() + self.pending.len()
    }

    /// Always `false`: an electorate has a natural replica.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Whether `host` votes.
    pub fn contains(&self, host: HostId) -> bool {
        self.natural.contains(&host) || self.pending.contains(&host)
    }

    /// The natural replicas.
    pub fn natural(&self) -> &[HostId] {
        &self.natural
    }

    /// The pending replicas.
    pub fn pending(&self) -> &[HostId] {
        &self.pending
    }
}

/// Counts acks of one commit until the commit consistency level is met.
///
/// The shell computes `required` from the statement's commit level with the
/// replication crate (`QUORUM`, `LOCAL_QUORUM`, … plus pending replicas); at
/// `ANY` it is 0, the commit goes in the background and the client is
/// answered on the value being chosen (2 round trips). Waiting for acks
/// costs a third round trip but lets a later non-serial read at that level
/// see the value.
#[derive(Clone, Debug)]
pub struct CommitTracker {
    targets: BTreeSet<HostId>,
    acked: BTreeSet<HostId>,
    required: usize,
}

impl CommitTracker {
    /// A tracker for a commit sent to `targets`, met at `required` acks.
    pub fn new(targets: impl IntoIterator<Item = HostId>, required: usize) -> CommitTracker {
        CommitTracker {
            targets: targets.into_iter().collect(),
            acked: BTreeSet::new(),
            required,
        }
    }

    /// Counts `from`'s ack (once; hosts that are not targets are ignored)
    /// and says whether the level is met.
    pub fn on_ack(&mut self, from: HostId) -> bool {
        if self.targets.contains(&from) {
            self.acked.insert(from);
        }
        self.is_met()
    }

    /// Whether enough targets acked.
    pub fn is_met(&self) -> bool {
        self.acked.len() >= self.required
    }

    /// Acks counted so far.
    pub fn acked(&self) -> usize {
        self.acked.len()
    }

    /// Acks needed.
    pub fn required(&self) -> usize {
        self.required
    }
}
