//! TTL writes: a value that reads as absent once its TTL, counted from
//! when its coordinator accepted it, has run out, with the clocks' bound
//! allowed either way.

use super::*;

const SECOND: Duration = Duration::from_secs(1);

/// A QUORUM put of `value` with a TTL of one second over `[from, to]` ms.
fn put_ttl(key: &str, value: &str, from: u64, to: u64, ts: Option<i64>) -> Op {
    write_op(put_part(key, value, Some(SECOND), ts), from, to)
}

/// A cell of `value` at `ts` that expires at `expires`.
fn expiring(value: &str, ts: i64, expires: i64) -> HeldCell {
    HeldCell {
        expires_at: Some(Timestamp(expires)),
        ..live(value, ts)
    }
}

/// `key` after healing, long after `cell` expired: every replica holds
/// it, and the ALL read finds nothing.
fn expired(key: &str, cell: HeldCell) -> FinalKey {
    FinalKey {
        read_all: ReadOutcome::NotFound,
        ..settled(key, Some(cell))
    }
}

fn bound(bound: Duration) -> Checks {
    Checks {
        clocks: ClockBound {
            bound,
            exempt: Vec::new(),
        },
        ..RF3
    }
}

#[test]
fn a_value_read_after_its_ttl_and_the_clock_bound_is_expired() {
    // Acknowledged by 10 ms with a TTL of 1 s: the read at 1,020 ms began
    // after both.
    let history = vec![
        put_ttl("k", "a", 0, 10, Some(100)),
        read("k", 500, 510, Some(("a", 100))),
        read("k", 1_020, 1_030, Some(("a", 100))),
    ];
    let finals = [expired("k", expiring("a", 100, 1_000_100))];
    let report = check(&history, &finals, &[], &RF3);
    assert_eq!(kinds(&report), [ViolationKind::Expired], "{report}");
    assert_eq!(report.ttl_writes_acked, 1);
    let text = report.violations[0].to_string();
    assert!(
        text.contains("a read returned \"a\"@100 (TTL 1s), whose TTL had run out"),
        "{text}"
    );
    assert!(text.contains("op #2 [1.020s"), "{text}");
    // With clocks up to 500 ms apart, the read's coordinator may not be
    // past the expiry yet at 1,020 ms; at 1,600 ms it is.
    let history = &history[..3];
    let finals_later = [settled("k", None)];
    assert!(check(history, &finals_later, &[], &bound(ms(500))).is_ok());
    let mut late = history.to_vec();
    late[2] = read("k", 1_600, 1_610, Some(("a", 100)));
    let report = check(&late, &finals_later, &[], &bound(ms(500)));
    assert_eq!(kinds(&report), [ViolationKind::Expired], "{report}");
}

#[test]
fn a_ttl_value_found_missing_before_its_ttl_can_have_run_out_is_stale() {
    let history = |from: u64| {
        vec![
            put_ttl("k", "a", 0, 10, Some(100)),
            read("k", from, from + 10, None),
        ]
    };
    let finals = [settled("k", None)];
    let report = check(&history(500), &finals, &[], &RF3);
    assert_eq!(kinds(&report), [ViolationKind::Stale], "{report}");
    // After the TTL (less the bound) it may be gone.
    assert!(check(&history(995), &finals, &[], &RF3).is_ok());
    assert!(check(&history(500), &finals, &[], &bound(ms(500))).is_ok());
}

#[test]
fn an_expired_value_is_not_lost_but_must_not_be_read_at_the_end() {
    let history = vec![put_ttl("k", "a", 0, 10, Some(100))];
    // The final read, long after, finds nothing; the replicas still hold
    // the expired cell, or garbage collection purged it on some.
    let mut last = settled("k", Some(expiring("a", 100, 1_000_100)));
    last.read_all = ReadOutcome::NotFound;
    last.replicas[0].1 = None;
    let report = check(&history, &[last.clone()], &[], &RF3);
    assert!(report.is_ok(), "{report}");
    last.read_all = ReadOutcome::Found(version("a", 100));
    let report = check(&history, &[last], &[], &RF3);
    assert_eq!(kinds(&report), [ViolationKind::Expired], "{report}");
    // Before its TTL could have run out, a purged copy is divergence.
    let mut early = settled("k", Some(expiring("a", 100, 1_000_100)));
    early.read_at = ms(500);
    early.replicas[0].1 = None;
    let report = check(&history, &[early], &[], &RF3);
    assert_eq!(kinds(&report), [ViolationKind::Divergent], "{report}");
}

#[test]
fn a_ttl_write_wins_over_a_plain_one_at_the_same_timestamp() {
    // At one timestamp the store prefers the expiring cell, whatever the
    // values ("z" > "a").
    let history = |found| {
        vec![
            write("k", "z", 0, 10, Some(100)),
            put_ttl("k", "a", 0, 10, Some(100)),
            read("k", 20, 30, Some(found)),
        ]
    };
    let finals = [expired("k", expiring("a", 100, 1_000_100))];
    assert!(check(&history(("a", 100)), &finals, &[], &RF3).is_ok());
    let report = check(&history(("z", 100)), &finals, &[], &RF3);
    assert_eq!(kinds(&report), [ViolationKind::Stale], "{report}");
    // Two TTL writes at one timestamp: the later expiry wins, which the
    // history does not tell. Either may be read.
    let both = |found| {
        vec![
            put_ttl("k", "a", 0, 10, Some(100)),
            put_ttl("k", "b", 0, 10, Some(100)),
            read("k", 20, 30, Some(found)),
        ]
    };
    let finals = [expired("k", expiring("b", 100, 1_000_100))];
    assert!(check(&both(("a", 100)), &finals, &[], &RF3).is_ok());
    assert!(check(&both(("b", 100)), &finals, &[], &RF3).is_ok());
}

#[test]
fn a_value_held_with_an_expiry_its_write_did_not_ask_for_is_a_phantom() {
    let history = vec![write("k", "a", 0, 10, Some(100))];
    let finals = [settled("k", Some(expiring("a", 100, 1_000_100)))];
    let report = check(&history, &finals, &[], &RF3);
    assert_eq!(kinds(&report), [ViolationKind::Phantom; 3], "{report}");
    assert!(report.violations[0].what.contains("made without a TTL"));
}

#[test]
fn reads_through_a_node_whose_clock_was_pushed_are_not_judged_by_ttl() {
    let history = vec![
        put_ttl("k", "a", 0, 10, Some(100)),
        read("k", 1_020, 1_030, Some(("a", 100))),
        read("k", 200, 210, None),
    ];
    let finals = [settled("k", None)];
    assert_eq!(
        kinds(&check(&history, &finals, &[], &RF3)),
        [ViolationKind::Stale, ViolationKind::Expired]
    );
    // Node 1 coordinated both reads with its clock pushed.
    let pushed = Checks {
        clocks: ClockBound {
            bound: Duration::ZERO,
            exempt: vec![FaultWindow {
                label: "clock jump".into(),
                node: NodeId(1),
                from: ms(100),
                until: Some(ms(2_000)),
            }],
        },
        ..RF3
    };
    let report = check(&history, &finals, &[], &pushed);
    assert!(report.is_ok(), "{report}");
}
