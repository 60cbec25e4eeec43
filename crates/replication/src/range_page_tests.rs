//! Tests of [`merge_pages`] and [`check_page`]: scripted pages, then whole
//! scans over random replicas' contents, paged with random limits, against
//! an oracle (the reconciled union of the replicas).

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::testkit::host;

const NOW: Timestamp = Timestamp(1_000);

fn row(token: i64, key: &str, cell: Cell) -> RangeRow {
    RangeRow {
        token: Token(token),
        key: key.as_bytes().to_vec(),
        cell,
    }
}

fn live(ts: i64, value: &str) -> Cell {
    Cell::live(Timestamp(ts), value.as_bytes().to_vec())
}

fn page(rows: Vec<RangeRow>, complete: bool) -> ReplicaPage {
    ReplicaPage { rows, complete }
}

fn after_row(token: i64, key: &str) -> ScanPoint {
    ScanPoint::AfterRow(RowPosition {
        token: Token(token),
        key: key.as_bytes().to_vec(),
    })
}

const START: ScanPoint = ScanPoint::AfterToken(Token(0));

#[test]
fn only_rows_up_to_the_smallest_last_row_of_the_full_pages_are_final() {
    // Replica 1 stopped at its limit at token 20, replica 2 at token 30:
    // nothing after 20 is known of replica 1, so row 30 waits for the next page.
    let pages = [
        (
            host(1),
            page(
                vec![row(10, "a", live(1, "a")), row(20, "b", live(1, "b"))],
                false,
            ),
        ),
        (
            host(2),
            page(
                vec![row(10, "a", live(1, "a")), row(30, "c", live(1, "c"))],
                false,
            ),
        ),
    ];
    let merged = merge_pages(&START, &pages, 10, NOW);
    let keys: Vec<_> = merged.rows.iter().map(|r| r.key.clone()).collect();
    assert_eq!(keys, vec![b"a".to_vec(), b"b".to_vec()]);
    assert_eq!(merged.next, PageEnd::After(after_row(20, "b")));
    // Replica 2 has no "b" (its page passed 20 without it): it is repaired.
    assert_eq!(
        merged.repairs,
        vec![RowRepair {
            host: host(2),
            row: row(20, "b", live(1, "b"))
        }]
    );
}

#[test]
fn complete_pages_cover_the_piece_so_everything_is_final() {
    let pages = [
        (host(1), page(vec![row(10, "a", live(1, "old"))], true)),
        (
            host(2),
            page(
                vec![row(10, "a", live(2, "new")), row(40, "d", live(1, "d"))],
                true,
            ),
        ),
    ];
    let merged = merge_pages(&START, &pages, 10, NOW);
    assert_eq!(
        merged.rows,
        vec![row(10, "a", live(2, "new")), row(40, "d", live(1, "d"))]
    );
    assert_eq!(merged.next, PageEnd::Complete);
    assert_eq!(
        merged.repairs,
        vec![
            RowRepair {
                host: host(1),
                row: row(10, "a", live(2, "new"))
            },
            RowRepair {
                host: host(1),
                row: row(40, "d", live(1, "d"))
            },
        ]
    );
}

#[test]
fn tombstones_and_expired_cells_hide_rows_but_win_and_are_repaired() {
    let expired = Cell {
        timestamp: Timestamp(5),
        expires_at: Some(Timestamp(NOW.0 - 1)),
        value: Some(b"gone".to_vec()),
    };
    let pages = [
        (
            host(1),
            page(
                vec![
                    row(10, "a", Cell::tombstone(Timestamp(3))),
                    row(20, "b", expired.clone()),
                    row(30, "c", live(1, "c")),
                ],
                true,
            ),
        ),
        (
            host(2),
            page(
                vec![row(10, "a", live(2, "a")), row(20, "b", live(4, "b"))],
                true,
            ),
        ),
    ];
    let merged = merge_pages(&START, &pages, 10, NOW);
    assert_eq!(merged.rows, vec![row(30, "c", live(1, "c"))]);
    assert_eq!(merged.consumed, 3);
    let repaired: Vec<_> = merged
        .repairs
        .iter()
        .map(|r| (r.host, r.row.key.clone(), r.row.cell.clone()))
        .collect();
    assert_eq!(
        repaired,
        vec![
            (host(2), b"a".to_vec(), Cell::tombstone(Timestamp(3))),
            (host(2), b"b".to_vec(), expired),
            (host(2), b"c".to_vec(), live(1, "c")),
        ]
    );
}

#[test]
fn a_page_stops_after_the_rows_wanted_and_resumes_after_the_last_one() {
    let rows = vec![
        row(10, "a", live(1, "a")),
        row(10, "b", live(1, "b")),
        row(11, "c", live(1, "c")),
    ];
    let pages = [
        (host(1), page(rows.clone(), true)),
        (host(2), page(rows, true)),
    ];
    let merged = merge_pages(&START, &pages, 2, NOW);
    assert_eq!(merged.rows.len(), 2);
    // Two keys share token 10: the resume point is the row, not the token.
    assert_eq!(merged.next, PageEnd::After(after_row(10, "b")));
    let rest = merge_pages(&after_row(10, "b"), &pages, 2, NOW);
    assert_eq!(rest.rows, vec![row(11, "c", live(1, "c"))]);
    assert_eq!(rest.next, PageEnd::Complete);
}

#[test]
fn pages_are_checked_against_the_request() {
    let after = after_row(10, "b");
    let good = page(
        vec![row(10, "c", live(1, "c")), row(12, "a", live(1, "a"))],
        false,
    );
    assert_eq!(check_page(&after, Token(12), 2, &good), Ok(()));
    assert_eq!(
        check_page(&after, Token(12), 1, &good),
        Err(PageError::OverLimit { rows: 2, limit: 1 })
    );
    assert_eq!(
        check_page(&after, Token(11), 2, &good),
        Err(PageError::OutOfRange)
    );
    let before = page(vec![row(10, "b", live(1, "b"))], true);
    assert_eq!(
        check_page(&after, Token(12), 2, &before),
        Err(PageError::OutOfRange)
    );
    let unordered = page(
        vec![row(12, "a", live(1, "a")), row(11, "a", live(1, "a"))],
        true,
    );
    assert_eq!(
        check_page(&after, Token(12), 2, &unordered),
        Err(PageError::Unordered)
    );
    assert_eq!(
        check_page(&after, Token(12), 2, &page(vec![], false)),
        Err(PageError::EmptyIncomplete)
    );
    assert_eq!(
        check_page(&after, Token(12), 2, &page(vec![], true)),
        Ok(())
    );
}

#[test]
fn scan_points_know_their_first_token() {
    assert_eq!(ScanPoint::AfterToken(Token::MAX).first_token(), None);
    assert_eq!(
        ScanPoint::AfterToken(Token(4)).first_token(),
        Some(Token(5))
    );
    assert_eq!(after_row(4, "k").first_token(), Some(Token(4)));
}

/// A replica's contents: position → cell.
type Replica = BTreeMap<RowPosition, Cell>;

/// The page a replica answers: at most `limit` rows after `after`.
fn answer(replica: &Replica, after: &ScanPoint, limit: usize) -> ReplicaPage {
    let mut rows: Vec<RangeRow> = replica
        .iter()
        .filter(|(p, _)| after.is_before(p))
        .map(|(p, cell)| RangeRow {
            token: p.token,
            key: p.key.clone(),
            cell: cell.clone(),
        })
        .take(limit + 1)
        .collect();
    let complete = rows.len() <= limit;
    rows.truncate(limit);
    ReplicaPage { rows, complete }
}

fn any_cell() -> impl Strategy<Value = Cell> {
    (
        0i64..4,
        proptest::option::of(NOW.0 - 2..NOW.0 + 2),
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..2)),
    )
        .prop_map(|(ts, expires, value)| Cell {
            timestamp: Timestamp(ts),
            expires_at: expires.map(Timestamp),
            value,
        })
}

fn any_replica() -> impl Strategy<Value = Replica> {
    // Few tokens and keys, so replicas overlap and tokens collide.
    proptest::collection::btree_map(
        (0i64..12, proptest::collection::vec(0u8..3, 1..2)).prop_map(|(t, key)| RowPosition {
            token: Token(t),
            key,
        }),
        any_cell(),
        0..14,
    )
}

proptest! {
    /// A whole scan, page after page with random per-replica limits (as byte
    /// caps cut pages short) and random page sizes, returns every visible
    /// winner of the replicas' union exactly once and in order, and its
    /// repairs leave every replica holding every winner.
    #[test]
    fn a_paged_scan_returns_every_visible_winner_once_in_order_and_repairs_every_replica(
        mut replicas in proptest::collection::vec(any_replica(), 1..4),
        limits in proptest::collection::vec(1usize..5, 1..40),
        wants in proptest::collection::vec(1usize..5, 1..40),
    ) {
        let mut oracle: BTreeMap<RowPosition, Cell> = BTreeMap::new();
        for replica in &replicas {
            for (position, cell) in replica {
                let merged = match oracle.remove(position) {
                    Some(other) => other.reconcile(cell.clone()),
                    None => cell.clone(),
                };
                oracle.insert(position.clone(), merged);
            }
        }
        let expected: Vec<RangeRow> = oracle
            .iter()
            .filter(|(_, cell)| cell.visible_value(NOW).is_some())
            .map(|(p, cell)| RangeRow { token: p.token, key: p.key.clone(), cell: cell.clone() })
            .collect();

        let mut after = ScanPoint::AfterToken(Token(-1));
        let mut returned = Vec::new();
        let mut round = 0;
        loop {
            prop_assert!(round < 1000, "the scan does not advance");
            let pages: Vec<(HostId, ReplicaPage)> = replicas
                .iter()
                .enumerate()
                .map(|(i, replica)| {
                    let limit = limits[(round + i) % limits.len()];
                    let page = answer(replica, &after, limit);
                    prop_assert_eq!(check_page(&after, Token(12), limit, &page), Ok(()));
                    Ok((host(i as u128 + 1), page))
                })
                .collect::<Result<_, TestCaseError>>()?;
            let want = wants[round % wants.len()];
            let merged = merge_pages(&after, &pages, want, NOW);
            prop_assert!(merged.rows.len() <= want);
            for repair in merged.repairs {
                let index = (0..replicas.len()).find(|&i| host(i as u128 + 1) == repair.host).unwrap();
                replicas[index].insert(repair.row.position(), repair.row.cell);
            }
            returned.extend(merged.rows);
            match merged.next {
                PageEnd::Complete => break,
                PageEnd::After(next) => {
                    if let ScanPoint::AfterRow(position) = &next {
                        prop_assert!(after.is_before(position), "the scan moved backwards");
                    }
                    after = next;
                }
            }
            round += 1;
        }
        prop_assert_eq!(&returned, &expected);
        for replica in &replicas {
            prop_assert_eq!(replica, &oracle);
        }
    }
}
