//! Histories that have a linearization.

use super::*;

#[track_caller]
fn accepted(ops: &[RegisterOp]) {
    let report = check(ops, Budget::default());
    assert!(report.is_linearizable(), "{report}");
}

#[test]
fn an_empty_history_is_linearizable() {
    assert!(check(&[], Budget::default()).is_linearizable());
}

#[test]
fn a_sequential_history_is_linearizable() {
    accepted(&[
        read(1, 0, 1, None),
        cas(1, 2, 3, None, "a", CasOutcome::Applied),
        read(2, 4, 5, Some("a")),
        cas(2, 6, 7, None, "b", not_applied(Some("a"))),
        cas(3, 8, 9, Some("a"), "b", CasOutcome::Applied),
        write(1, 10, 11, "c"),
        op(
            2,
            12,
            13,
            RegisterCall::Delete {
                ack: WriteAck::Acked,
            },
        ),
        read(3, 14, 15, None),
        cas(3, 16, 17, Some("c"), "d", not_applied(None)),
    ]);
}

#[test]
fn overlapping_writes_may_take_effect_in_either_order() {
    for last in ["a", "b"] {
        accepted(&[
            write(1, 0, 10, "a"),
            write(2, 5, 15, "b"),
            read(3, 20, 21, Some(last)),
            read(1, 22, 23, Some(last)),
        ]);
    }
    // And a read overlapping both may see either, or neither.
    for seen in [None, Some("a"), Some("b")] {
        accepted(&[
            write(1, 0, 10, "a"),
            write(2, 5, 15, "b"),
            read(3, 1, 12, seen),
        ]);
    }
}

#[test]
fn operations_that_touch_count_as_concurrent() {
    // The read completes at the instant the write is invoked.
    accepted(&[write(1, 5, 10, "a"), read(2, 0, 5, Some("a"))]);
}

#[test]
fn a_cas_race_where_exactly_one_applies_is_linearizable() {
    for winner in ["a", "b", "c"] {
        let outcome = |me: &str| {
            if me == winner {
                CasOutcome::Applied
            } else {
                not_applied(Some(winner))
            }
        };
        accepted(&[
            cas(1, 0, 10, None, "a", outcome("a")),
            cas(2, 1, 11, None, "b", outcome("b")),
            cas(3, 2, 12, None, "c", outcome("c")),
            read(4, 20, 21, Some(winner)),
        ]);
    }
}

#[test]
fn an_unknown_write_may_have_taken_effect_or_not() {
    let unknown = op(
        1,
        0,
        5,
        RegisterCall::Write {
            value: v("u"),
            ack: WriteAck::Unknown,
        },
    );
    // Seen long after its client gave up: it took effect late.
    accepted(&[
        write(2, 0, 1, "a"),
        unknown.clone(),
        read(2, 100, 101, Some("a")),
        read(3, 200, 201, Some("u")),
    ]);
    // Never seen: it did not take effect (it is set aside before the search).
    accepted(&[
        write(2, 0, 1, "a"),
        unknown.clone(),
        read(2, 100, 101, Some("a")),
    ]);
    let report = check(&[write(2, 0, 1, "a"), unknown], Budget::default());
    assert_eq!(report.keys[0].set_aside, 1, "{report}");
}

#[test]
fn an_unknown_cas_may_have_taken_effect_or_not() {
    let unknown = cas(1, 10, 20, None, "u", CasOutcome::Unknown);
    // It applied, after the delete.
    accepted(&[
        write(2, 0, 1, "a"),
        op(
            2,
            30,
            31,
            RegisterCall::Delete {
                ack: WriteAck::Acked,
            },
        ),
        unknown.clone(),
        read(3, 40, 41, Some("u")),
    ]);
    // It did not.
    accepted(&[
        write(2, 0, 1, "a"),
        unknown.clone(),
        read(3, 40, 41, Some("a")),
    ]);
    // An unknown delete explains a set expecting absent.
    accepted(&[
        write(2, 0, 1, "a"),
        op(
            1,
            2,
            3,
            RegisterCall::Delete {
                ack: WriteAck::Unknown,
            },
        ),
        cas(3, 40, 41, None, "b", CasOutcome::Applied),
    ]);
}

#[test]
fn keys_are_checked_independently() {
    let mut other = write(1, 0, 10, "x");
    other.key = "other".into();
    let report = check(
        &[write(1, 0, 10, "a"), other, read(2, 20, 21, Some("a"))],
        Budget::default(),
    );
    assert_eq!(report.keys.len(), 2);
    assert!(report.is_linearizable(), "{report}");
}

#[test]
fn the_model_steps_as_a_register() {
    let a = Some(v("a"));
    let cas_call = |expected: Expected, outcome| RegisterCall::Cas {
        expected,
        new: Some(v("b")),
        outcome,
    };
    assert_eq!(
        step(a.as_ref(), &cas_call(Expected::Any, CasOutcome::Applied)),
        Ok(Some(v("b")))
    );
    assert_eq!(
        step(a.as_ref(), &cas_call(Expected::Absent, CasOutcome::Applied)),
        Err(Refusal::AppliedWithoutMatch)
    );
    assert_eq!(
        step(None, &cas_call(Expected::Absent, not_applied(None))),
        Err(Refusal::NotAppliedDespiteMatch)
    );
    assert_eq!(
        step(
            a.as_ref(),
            &cas_call(Expected::Absent, not_applied(Some("z")))
        ),
        Err(Refusal::WrongCurrent)
    );
    assert_eq!(
        step(
            a.as_ref(),
            &cas_call(Expected::Value(v("z")), CasOutcome::Unknown)
        ),
        Ok(a.clone())
    );
    assert_eq!(
        step(a.as_ref(), &RegisterCall::Read { observed: None }),
        Err(Refusal::ReadOther)
    );
}
