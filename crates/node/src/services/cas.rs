//! The `Client` service's lightweight transactions: `PutIf`, `DeleteIf`
//! and `GetSerial`, checked as the plain writes and reads are (the node
//! serves, its clock is within the bound, key, value and TTL within the
//! limits, the client's deadline not passed), then run by the coordinator's
//! per-key Paxos ([`crate::coordinator::cas`]). Their wire forms are
//! converted here both ways.

use std::num::NonZeroU32;

use ringstore_paxos::{Expected, Operation, SerialConsistency};
use ringstore_proto::v1 as pb;
use ringstore_replication::ConsistencyLevel;
use ringstore_storage::{Cell, Timestamp};

use crate::convert::level_from_pb;
use crate::coordinator::cas::CasAnswer;
use crate::error::{CasError, Result};

/// A wire serial level; unspecified means `SERIAL`.
pub(crate) fn serial_from_pb(level: i32) -> Result<SerialConsistency> {
    use pb::SerialConsistency as P;
    match P::try_from(level).map_err(|_| CasError::UnknownSerialLevel(level))? {
        P::Unspecified | P::Serial => Ok(SerialConsistency::Serial),
        P::LocalSerial => Ok(SerialConsistency::LocalSerial),
    }
}

/// A wire commit level; unspecified means `ANY` (the commit goes on in the
/// background).
pub(crate) fn commit_level_from_pb(level: i32) -> Result<ConsistencyLevel> {
    if level == pb::ConsistencyLevel::Unspecified as i32 {
        return Ok(ConsistencyLevel::Any);
    }
    level_from_pb(level).map_err(|_| CasError::BadCommitLevel(level).into())
}

/// A wire condition; required.
pub(crate) fn expected_from_pb(expected: Option<pb::Expected>) -> Result<Expected> {
    use pb::expected::Condition;
    match expected.and_then(|e| e.condition) {
        None => Err(CasError::MissingExpected.into()),
        Some(Condition::Value(bytes)) => Ok(Expected::Value(bytes)),
        Some(Condition::Absent(_)) => Ok(Expected::Absent),
        Some(Condition::Any(_)) => Ok(Expected::Any),
    }
}

/// The operation of a `PutIf` whose value and TTL were checked.
pub(crate) fn put_if(expected: Expected, value: Vec<u8>, ttl: Option<u32>) -> Operation {
    Operation::PutIf {
        expected,
        value,
        ttl: ttl.and_then(NonZeroU32::new),
    }
}

/// A compare-and-set's answer in its wire form; `now` judges the expiry of
/// the version a condition failed against.
pub(crate) fn cas_response(answer: CasAnswer, now: Timestamp) -> pb::CasResponse {
    match answer {
        CasAnswer::Applied(cell) => pb::CasResponse {
            applied: true,
            timestamp_micros: cell.timestamp.0,
            found: false,
            value: Vec::new(),
        },
        CasAnswer::NotApplied(current) | CasAnswer::Read(current) => {
            let (found, value, timestamp) = visible(current.as_ref(), now);
            pb::CasResponse {
                applied: false,
                timestamp_micros: timestamp,
                found,
                value,
            }
        }
    }
}

/// A serial read's answer in its wire form (a `GetResponse`, as `Get`'s).
pub(crate) fn read_response(answer: CasAnswer, now: Timestamp) -> pb::GetResponse {
    let current = match answer {
        CasAnswer::Read(current) | CasAnswer::NotApplied(current) => current,
        CasAnswer::Applied(cell) => Some(cell),
    };
    let (found, value, timestamp_micros) = visible(current.as_ref(), now);
    pb::GetResponse {
        found,
        value,
        timestamp_micros,
    }
}

fn visible(cell: Option<&Cell>, now: Timestamp) -> (bool, Vec<u8>, i64) {
    match cell.and_then(|c| c.visible_value(now).map(|v| (c, v))) {
        Some((cell, value)) => (true, value.to_vec(), cell.timestamp.0),
        None => (false, Vec::new(), 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unspecified_levels_are_serial_and_any_and_unknown_ones_are_refused() {
        assert_eq!(serial_from_pb(0).unwrap(), SerialConsistency::Serial);
        assert_eq!(serial_from_pb(2).unwrap(), SerialConsistency::LocalSerial);
        assert!(
            serial_from_pb(9)
                .unwrap_err()
                .to_string()
                .contains("serial")
        );
        assert_eq!(commit_level_from_pb(0).unwrap(), ConsistencyLevel::Any);
        assert_eq!(commit_level_from_pb(5).unwrap(), ConsistencyLevel::Quorum);
        assert!(commit_level_from_pb(99).is_err());
        assert!(
            expected_from_pb(None)
                .unwrap_err()
                .to_string()
                .contains("expected")
        );
    }

    #[test]
    fn a_failed_condition_shows_the_visible_value_and_an_expired_one_as_absent() {
        let now = Timestamp(10_000_000);
        let live = Cell::live(Timestamp(5), b"v".to_vec());
        let shown = cas_response(CasAnswer::NotApplied(Some(live)), now);
        assert_eq!(
            (shown.applied, shown.found, shown.value),
            (false, true, b"v".to_vec())
        );
        let expired = Cell::expiring(Timestamp(5), b"v".to_vec(), 1, Timestamp(5));
        let shown = cas_response(CasAnswer::NotApplied(Some(expired)), now);
        assert!(!shown.found);
        let applied = cas_response(CasAnswer::Applied(Cell::live(Timestamp(7), vec![])), now);
        assert_eq!((applied.applied, applied.timestamp_micros), (true, 7));
    }
}
