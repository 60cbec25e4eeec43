//! Batches: one operation writing several keys, each part with its own
//! outcome and judged as a write of its own.

use super::*;

fn batch(parts: Vec<Write>, from: u64, to: u64) -> Op {
    Op {
        kind: OpKind::Batch(parts),
        ..write("unused", "unused", from, to, None)
    }
}

#[test]
fn each_part_of_a_batch_is_judged_as_a_write_of_its_own() {
    let parts = vec![
        put_part("j", "j1", None, Some(100)),
        put_part("k", "k1", Some(Duration::from_secs(5)), None),
        Write {
            key: "l".into(),
            mutation: Mutation::Delete,
            outcome: WriteOutcome::Acked(Timestamp(102)),
        },
    ];
    let history = vec![
        write("l", "l0", 0, 5, Some(50)),
        batch(parts, 10, 20),
        read("j", 30, 40, Some(("j1", 100))),
        // The failed part may or may not have landed.
        read("k", 30, 40, None),
        read("k", 50, 60, Some(("k1", 101))),
        read("l", 30, 40, None),
    ];
    // k's value has expired by the final read; the replicas still hold it.
    let mut k_expired = settled(
        "k",
        Some(HeldCell {
            expires_at: Some(Timestamp(5_000_101)),
            ..live("k1", 101)
        }),
    );
    k_expired.read_all = ReadOutcome::NotFound;
    let finals = [
        converged("j", Some(("j1", 100))),
        k_expired,
        settled(
            "l",
            Some(HeldCell {
                timestamp: Timestamp(102),
                value: None,
                expires_at: Some(Timestamp(102)),
            }),
        ),
    ];
    let report = check(&history, &finals, &[], &RF3);
    assert!(report.is_ok(), "{report}");
    assert_eq!(
        (
            report.keys,
            report.batches,
            report.writes_acked,
            report.writes_failed,
            report.deletes_acked,
            report.reads_of_failed_writes
        ),
        (3, 1, 3, 1, 1, 1),
        "{report}"
    );

    // The acknowledged part of j is stale in a later read, and l's value,
    // deleted by the batch, comes back: both name the batch.
    let mut broken = history.clone();
    broken[2] = read("j", 30, 40, None);
    broken[5] = read("l", 30, 40, Some(("l0", 50)));
    let report = check(&broken, &finals, &[], &RF3);
    assert_eq!(
        kinds(&report),
        [ViolationKind::Stale, ViolationKind::Resurrected],
        "{report}"
    );
    let text = report.violations[0].to_string();
    assert!(text.contains("op #1 [0.010s–0.020s] client0 via node0 at Quorum: batch [j put \"j1\": acked @100; k put \"k1\" (TTL 5s): failed"), "{text}");
}
