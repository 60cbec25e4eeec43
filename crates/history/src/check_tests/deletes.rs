//! Deletes: a tombstone with its own timestamp, which beats a value at the
//! same timestamp; a deleted value must not come back, in a read or in the
//! final state, and a purged tombstone is no divergence.

use super::*;

/// A QUORUM delete of `key` over `[from, to]` ms by client 0 via node 0:
/// acknowledged at `ts`, or failed (`None`).
fn delete(key: &str, from: u64, to: u64, ts: Option<i64>) -> Op {
    write_op(delete_part(key, ts), from, to)
}

fn delete_part(key: &str, ts: Option<i64>) -> Write {
    Write {
        key: key.into(),
        mutation: Mutation::Delete,
        outcome: outcome(ts),
    }
}

fn tombstone(ts: i64) -> HeldCell {
    HeldCell {
        timestamp: Timestamp(ts),
        value: None,
        expires_at: Some(Timestamp(ts)),
    }
}

#[test]
fn a_value_read_after_its_delete_was_acknowledged_is_resurrected() {
    let deleted = |found| {
        vec![
            write("k", "a", 0, 10, Some(100)),
            delete("k", 20, 30, Some(200)),
            read("k", 40, 50, found),
        ]
    };
    let finals = [settled("k", Some(tombstone(200)))];
    let report = check(&deleted(None), &finals, &[], &RF3);
    assert!(report.is_ok(), "{report}");
    assert_eq!(report.deletes_acked, 1);

    let report = check(&deleted(Some(("a", 100))), &finals, &[], &RF3);
    assert_eq!(kinds(&report), [ViolationKind::Resurrected], "{report}");
    let text = report.violations[0].to_string();
    assert!(
        text.contains("a read returned \"a\"@100, which the delete@200 had deleted"),
        "{text}"
    );
    assert!(text.contains("op #1 [0.020s–0.030s] client0 via node0 at Quorum: delete: acked @200"));
}

#[test]
fn a_read_concurrent_with_a_delete_may_still_return_the_value() {
    let history = vec![
        write("k", "a", 0, 10, Some(100)),
        delete("k", 20, 60, Some(200)),
        read("k", 30, 50, Some(("a", 100))),
        read("k", 40, 70, None),
    ];
    let report = check(&history, &[settled("k", Some(tombstone(200)))], &[], &RF3);
    assert!(report.is_ok(), "{report}");
}

#[test]
fn a_delete_beats_a_value_at_its_own_timestamp() {
    // The put and the delete were stamped alike: the tombstone wins.
    let history = |found| {
        vec![
            write("k", "a", 0, 10, Some(100)),
            delete("k", 0, 10, Some(100)),
            read("k", 20, 30, found),
        ]
    };
    let finals = [settled("k", Some(tombstone(100)))];
    assert!(check(&history(None), &finals, &[], &RF3).is_ok());
    let report = check(&history(Some(("a", 100))), &finals, &[], &RF3);
    assert_eq!(kinds(&report), [ViolationKind::Resurrected], "{report}");
    // A value stamped after the delete is no resurrection.
    let later = vec![
        delete("k", 0, 10, Some(100)),
        write("k", "b", 0, 10, Some(101)),
        read("k", 20, 30, Some(("b", 101))),
    ];
    let report = check(&later, &[converged("k", Some(("b", 101)))], &[], &RF3);
    assert!(report.is_ok(), "{report}");
}

#[test]
fn a_delete_at_a_level_that_does_not_overlap_the_read_promises_nothing() {
    let history = vec![
        write("k", "a", 0, 10, Some(100)),
        at(Level::One, delete("k", 20, 30, Some(200))),
        at(Level::One, read("k", 40, 50, Some(("a", 100)))),
    ];
    let report = check(&history, &[settled("k", Some(tombstone(200)))], &[], &RF3);
    assert!(report.is_ok(), "{report}");
}

#[test]
fn a_deleted_value_in_the_final_state_is_resurrected() {
    let history = vec![
        write("k", "a", 0, 10, Some(100)),
        delete("k", 20, 30, Some(200)),
    ];
    let report = check(&history, &[converged("k", Some(("a", 100)))], &[], &RF3);
    assert_eq!(kinds(&report), [ViolationKind::Resurrected], "{report}");
    assert!(
        report.violations[0]
            .what
            .contains("the final read at ALL returned \"a\"@100, which the delete@200 had deleted"),
        "{report}"
    );
}

#[test]
fn a_purged_tombstone_is_neither_lost_nor_divergent_but_must_hide_every_older_value() {
    let history = vec![
        write("k", "a", 0, 10, Some(100)),
        delete("k", 20, 30, Some(200)),
    ];
    // Garbage collection purged the tombstone on node1 (or everywhere).
    let mut last = settled("k", Some(tombstone(200)));
    last.replicas[1].1 = None;
    let report = check(&history, &[last.clone()], &[], &RF3);
    assert!(report.is_ok(), "{report}");
    let report = check(&history, &[settled("k", None)], &[], &RF3);
    assert!(report.is_ok(), "{report}");

    // But under it node1 still holds the deleted value: divergent.
    last.replicas[1].1 = Some(live("a", 100));
    let report = check(&history, &[last], &[], &RF3);
    assert_eq!(kinds(&report), [ViolationKind::Divergent], "{report}");
    assert_eq!(report.violations[0].node, Some(NodeId(1)));
    // And a live value is no tombstone: nothing in its place is divergent.
    let put_only = &history[..1];
    let mut last = converged("k", Some(("a", 100)));
    last.replicas[2].1 = None;
    let report = check(put_only, &[last], &[], &RF3);
    assert_eq!(kinds(&report), [ViolationKind::Divergent], "{report}");
}

#[test]
fn a_tombstone_no_delete_can_have_stamped_is_a_phantom() {
    let history = vec![
        write("k", "a", 0, 10, Some(100)),
        delete("k", 20, 30, Some(200)),
    ];
    let report = check(&history, &[settled("k", Some(tombstone(300)))], &[], &RF3);
    assert_eq!(kinds(&report), [ViolationKind::Phantom; 3], "{report}");
    assert!(
        report.violations[0]
            .what
            .contains("holds a tombstone at 300")
    );
    // A failed delete's timestamp is unknown: it may be that tombstone.
    let history = vec![write("k", "a", 0, 10, Some(100)), delete("k", 20, 30, None)];
    let report = check(&history, &[settled("k", Some(tombstone(300)))], &[], &RF3);
    assert!(report.is_ok(), "{report}");
}

#[test]
fn a_key_deleted_for_good_is_not_lost_but_one_found_empty_without_a_delete_is() {
    let history = vec![write("k", "a", 0, 10, Some(100)), delete("k", 20, 30, None)];
    // The failed delete may have landed: nothing at the end is explained.
    assert!(check(&history, &[settled("k", None)], &[], &RF3).is_ok());
    let report = check(&history[..1], &[settled("k", None)], &[], &RF3);
    assert_eq!(kinds(&report), [ViolationKind::Lost], "{report}");
    // A delete older than the acknowledged write explains nothing.
    let older = vec![
        delete("k", 0, 10, Some(50)),
        write("k", "a", 20, 30, Some(100)),
    ];
    let report = check(&older, &[settled("k", None)], &[], &RF3);
    assert_eq!(kinds(&report), [ViolationKind::Lost], "{report}");
}

#[test]
fn a_read_that_finds_nothing_after_a_write_needs_a_newer_delete() {
    let history = |delete_invoked: u64| {
        vec![
            write("k", "a", 0, 10, Some(100)),
            delete("k", delete_invoked, delete_invoked + 10, Some(50)),
            read("k", 40, 50, None),
        ]
    };
    // The delete is stamped older than "a" (a slow clock): it hides nothing.
    let report = check(&history(20), &[converged("k", Some(("a", 100)))], &[], &RF3);
    assert_eq!(kinds(&report), [ViolationKind::Stale], "{report}");
    assert!(
        report.violations[0]
            .what
            .contains("a read returned nothing after \"a\"@100 was acknowledged"),
        "{report}"
    );
    // A newer delete, sent before the read ended, explains it.
    let mut newer = history(20);
    newer[1] = delete("k", 20, 30, Some(150));
    let report = check(&newer, &[settled("k", Some(tombstone(150)))], &[], &RF3);
    assert!(report.is_ok(), "{report}");
}

#[test]
fn a_failed_delete_is_ordered_by_real_time_and_the_stamp_deadline() {
    // Client 0's delete got no answer; a second later it wrote "b", which
    // was acknowledged; a read after that found nothing. If nodes stamp no
    // write after its deadline, the delete cannot be newer than "b".
    let history = vec![
        write("k", "a", 0, 10, Some(100)),
        write_op(
            Write {
                key: "k".into(),
                mutation: Mutation::Delete,
                outcome: WriteOutcome::Failed(gave_up()),
            },
            20,
            1_020,
        ),
        write("k", "b", 2_000, 2_010, Some(2_000_000)),
        read("k", 3_000, 3_010, None),
    ];
    let finals = [settled("k", Some(tombstone(2_500_000)))];
    // Without a deadline the delete may have been stamped any time.
    assert!(check(&history, &finals, &[], &RF3).is_ok());
    let deadline = Checks {
        stamp_deadline: Some(ms(1_500)),
        ..RF3
    };
    let report = check(&history, &finals, &[], &deadline);
    assert_eq!(
        kinds(&report),
        [ViolationKind::Stale, ViolationKind::Lost],
        "{report}"
    );
    // A deadline later than "b" was sent leaves it possible.
    let late = Checks {
        stamp_deadline: Some(ms(1_990)),
        ..RF3
    };
    assert!(check(&history, &finals, &[], &late).is_ok());
}
