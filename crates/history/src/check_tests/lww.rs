//! The checker's last-write-wins order against the store's own
//! (`ringstore_storage::Cell::compare`): exact for held cells, and never
//! "certainly older" where the store could decide otherwise.

use ringstore_storage::{Cell, Timestamp as StoreTimestamp};

use super::*;
use crate::order::KeyWrite;

/// Cells over two timestamps, values and tombstones, with and without
/// expiries (deletion times).
fn cells() -> Vec<HeldCell> {
    let mut cells = Vec::new();
    for timestamp in [1, 2] {
        for value in [None, Some(b"a".to_vec()), Some(b"b".to_vec())] {
            for expires_at in [None, Some(5), Some(6)] {
                cells.push(HeldCell {
                    timestamp: Timestamp(timestamp),
                    value: value.clone(),
                    expires_at: expires_at.map(Timestamp),
                });
            }
        }
    }
    cells
}

fn store_cell(cell: &HeldCell) -> Cell {
    Cell {
        timestamp: StoreTimestamp(cell.timestamp.0),
        expires_at: cell.expires_at.map(|t| StoreTimestamp(t.0)),
        value: cell.value.clone(),
    }
}

#[test]
fn held_cells_are_ordered_exactly_as_the_store_orders_cells() {
    let cells = cells();
    for a in &cells {
        for b in &cells {
            assert_eq!(
                a.compare(b),
                store_cell(a).compare(&store_cell(b)),
                "{a} against {b}"
            );
        }
    }
}

#[test]
fn a_write_called_older_is_older_in_the_store_whatever_its_expiry() {
    // Every acknowledged write of a grid (timestamp, put / TTL put /
    // delete, value), against every other: when the checker calls one
    // older, the store must agree for every expiry (or deletion time) the
    // coordinators may have given them.
    let mut ops = Vec::new();
    for ts in [1, 2] {
        for (i, ttl) in [None, Some(Duration::from_secs(1))].into_iter().enumerate() {
            for value in ["a", "b"] {
                let value = format!("{value}{i}");
                ops.push(write_op(put_part("k", &value, ttl, Some(ts)), 0, 10));
            }
        }
        ops.push(write_op(
            Write {
                key: "k".into(),
                mutation: Mutation::Delete,
                outcome: WriteOutcome::Acked(Timestamp(ts)),
            },
            0,
            10,
        ));
    }
    let writes: Vec<KeyWrite> = ops
        .iter()
        .enumerate()
        .map(|(i, op)| KeyWrite::new(i, op, &op.writes()[0], None, false))
        .collect();
    let expiries = |w: &KeyWrite| -> Vec<Option<i64>> {
        match w.kind() {
            crate::order::CellKind::Live => vec![None],
            _ => vec![Some(5), Some(6)],
        }
    };
    let mut certain = 0;
    for a in &writes {
        for b in &writes {
            if !a.older_than(b, Duration::ZERO) {
                continue;
            }
            certain += 1;
            for ea in expiries(a) {
                for eb in expiries(b) {
                    let cell = |w: &KeyWrite, e: Option<i64>| Cell {
                        timestamp: StoreTimestamp(w.timestamp.map_or(0, |t| t.0)),
                        expires_at: e.map(StoreTimestamp),
                        value: w.write.value().map(<[u8]>::to_vec),
                    };
                    assert_eq!(
                        cell(a, ea).compare(&cell(b, eb)),
                        std::cmp::Ordering::Less,
                        "{} called older than {}",
                        a.describe(),
                        b.describe()
                    );
                }
            }
        }
    }
    // Not vacuous, and no more lenient than it must be: every write at 1
    // is older than every write at 2 (5 × 5), and at one timestamp the
    // plain values (2) are older than the TTL values (2) and the delete,
    // the TTL values older than the delete, "a0" older than "b0": 9 each.
    // Only the two TTL values at one timestamp stay unordered.
    assert_eq!(certain, 25 + 2 * 9);
}
