//! Indeterminate writes under the monotonic-read rule: a failed write may
//! be read or not, but once read it never disappears again, nor does the
//! absence a failed delete made, also across topology changes where the
//! rule can hold.

use super::*;

fn failed_delete(key: &str, from: u64, to: u64) -> Op {
    write_op(
        Write {
            key: key.into(),
            mutation: Mutation::Delete,
            outcome: WriteOutcome::Failed(timeout()),
        },
        from,
        to,
    )
}

#[test]
fn a_failed_write_once_read_never_disappears_again() {
    let history = |second| {
        vec![
            write("k", "a", 0, 10, Some(100)),
            write("k", "b", 20, 2_020, None),
            read("k", 30, 40, Some(("b", 150))),
            read("k", 50, 60, second),
        ]
    };
    let finals = [converged("k", Some(("b", 150)))];
    assert!(check(&history(Some(("b", 150))), &finals, &[], &RF3).is_ok());
    let report = check(&history(Some(("a", 100))), &finals, &[], &RF3);
    assert_eq!(kinds(&report), [ViolationKind::NonMonotonic], "{report}");
    // Nor may the key read as empty: nothing that could hide "b" was
    // written. ("a" at ONE, so that only the earlier read binds this one.)
    let mut empty = history(None);
    empty[0].level = Level::One;
    let report = check(&empty, &finals, &[], &RF3);
    assert_eq!(kinds(&report), [ViolationKind::NonMonotonic], "{report}");
    assert!(
        report.violations[0]
            .what
            .contains("nothing that could hide it")
    );
}

#[test]
fn a_failed_delete_once_it_hid_the_key_never_lets_the_value_back() {
    // "a" was acknowledged before the delete was sent: the delete, if it
    // landed, is newer. A read found nothing: the delete landed.
    let history = |second| {
        vec![
            write("k", "a", 0, 10, Some(100)),
            failed_delete("k", 20, 1_020),
            read("k", 30, 40, None),
            read("k", 50, 60, second),
        ]
    };
    let finals = [settled("k", None)];
    assert!(check(&history(None), &finals, &[], &RF3).is_ok());
    let report = check(&history(Some(("a", 100))), &finals, &[], &RF3);
    assert_eq!(kinds(&report), [ViolationKind::NonMonotonic], "{report}");
    assert!(
        report.violations[0]
            .what
            .contains("another read had found nothing, which only writes newer than it can explain (the delete (timestamp unknown))"),
        "{report}"
    );
    // The first read, had it found "a", would tell nothing of the delete.
    let mut unseen = history(Some(("a", 100)));
    unseen[2] = read("k", 30, 40, Some(("a", 100)));
    assert!(check(&unseen, &[converged("k", Some(("a", 100)))], &[], &RF3).is_ok());
    // Nor does an empty read that nothing bound: the key may have been new.
    let fresh = vec![
        read("k", 0, 5, None),
        write("k", "a", 10, 20, Some(100)),
        read("k", 30, 40, Some(("a", 100))),
    ];
    assert!(check(&fresh, &[converged("k", Some(("a", 100)))], &[], &RF3).is_ok());
}

#[test]
fn a_read_made_while_a_range_moved_binds_no_later_read() {
    let history = vec![
        write("k", "a", 0, 10, Some(100)),
        write("k", "b", 20, 2_020, None),
        read("k", 30, 40, Some(("b", 150))),
        read("k", 5_000, 5_010, Some(("a", 100))),
    ];
    let finals = [converged("k", Some(("b", 150)))];
    let window = |from, until| FaultWindow {
        label: "node4 joins (bootstrap)".into(),
        node: NodeId(4),
        from: ms(from),
        until: Some(ms(until)),
    };
    // The first read overlapped the join: its repair may have missed the
    // pending replica.
    let moving = Checks {
        range_movements: vec![window(35, 3_000)],
        ..RF3
    };
    assert!(check(&history, &finals, &[], &moving).is_ok());
    // It ended before the join began: it binds the read after the join.
    let before = Checks {
        range_movements: vec![window(100, 3_000)],
        ..RF3
    };
    let report = check(&history, &finals, &[], &before);
    assert_eq!(kinds(&report), [ViolationKind::NonMonotonic], "{report}");
}
