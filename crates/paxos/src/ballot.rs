//! Ballots, and the clock a coordinator issues them from.
//!
//! A [`Ballot`] names one proposal attempt. Ballots are totally ordered by
//! `(micros, tiebreak)`; only an *equal* ballot compares equal, and an
//! acceptor treats an equal ballot as "not newer" (Cassandra's
//! `Commit.isAfter`), so a ballot can win at most once.
//!
//! The [`BallotClock`] (one per coordinator node) makes them: the micros are
//! `max(now, last issued + 1, min)` — the wall clock when it is ahead, one
//! past the last ballot otherwise (so two ballots from one node never tie),
//! and past the highest ballot a rejection showed when retrying (Cassandra's
//! `getTimestampForPaxos`, CASSANDRA-5667). The tiebreak is fixed per node
//! by the shell (a random `u64` drawn at start, as Paxos v2 draws random low
//! bits): two nodes issuing the same micros still issue different ballots,
//! and a restarted node whose clock went back cannot reissue an old ballot
//! unless it also draws the same tiebreak.
//!
//! Clocks matter for liveness only: a node whose clock runs ahead wins more
//! ballots, never a second value for one ballot. Adopting a rejected
//! ballot's micros moves only this ballot clock, which no plain write reads
//! (CASSANDRA-11991: a node in the future must not drag other writes'
//! timestamps along).

use std::fmt;

use ringstore_cell::Timestamp;

/// One proposal attempt's rank: compared by `micros`, then `tiebreak`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ballot {
    /// Microseconds since the Unix epoch on the issuing coordinator's clock
    /// (or past a ballot it saw rejected); the lower bound of the timestamp
    /// of any cell proposed under this ballot.
    pub micros: i64,
    /// The issuing node's fixed tie-breaker: two nodes issuing the same
    /// micros issue different ballots.
    pub tiebreak: u64,
}

impl Ballot {
    /// The micros as a cell timestamp: the least timestamp a cell proposed
    /// under this ballot carries when it is new.
    pub fn timestamp(self) -> Timestamp {
        Timestamp(self.micros)
    }

    pub(crate) fn encode_into(self, bytes: &mut Vec<u8>) {
        bytes.extend_from_slice(&self.micros.to_be_bytes());
        bytes.extend_from_slice(&self.tiebreak.to_be_bytes());
    }

    pub(crate) fn decode(bytes: &[u8]) -> Option<(Ballot, &[u8])> {
        let (micros, rest) = bytes.split_first_chunk::<8>()?;
        let (tiebreak, rest) = rest.split_first_chunk::<8>()?;
        Some((
            Ballot {
                micros: i64::from_be_bytes(*micros),
                tiebreak: u64::from_be_bytes(*tiebreak),
            },
            rest,
        ))
    }
}

impl fmt::Display for Ballot {
    /// `micros.tiebreak` (tiebreak in hex).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:016x}", self.micros, self.tiebreak)
    }
}

/// Issues one coordinator's ballots, strictly increasing.
///
/// Not persisted: after a restart the node draws a new tiebreak, so its new
/// ballots differ from its old ones even if its clock went back.
#[derive(Clone, Debug)]
pub struct BallotClock {
    tiebreak: u64,
    last_micros: Option<i64>,
}

impl BallotClock {
    /// A clock for a node whose ballots carry `tiebreak` (the shell draws a
    /// random one at start).
    pub fn new(tiebreak: u64) -> BallotClock {
        BallotClock {
            tiebreak,
            last_micros: None,
        }
    }

    /// The next ballot: micros `max(now, last issued + 1, after.micros + 1)`.
    /// `now` is the node's wall clock; `after` is the highest ballot a
    /// rejection showed ([`Outcome::Contended`](crate::Outcome::Contended)),
    /// so the retry outranks it whatever the tiebreaks.
    pub fn next(&mut self, now: Timestamp, after: Option<Ballot>) -> Ballot {
        let mut micros = now.0;
        if let Some(last) = self.last_micros {
            micros = micros.max(last.saturating_add(1));
        }
        if let Some(after) = after {
            micros = micros.max(after.micros.saturating_add(1));
        }
        self.last_micros = Some(micros);
        Ballot {
            micros,
            tiebreak: self.tiebreak,
        }
    }

    /// The micros of the last ballot issued, if any.
    pub fn last_micros(&self) -> Option<i64> {
        self.last_micros
    }
}
