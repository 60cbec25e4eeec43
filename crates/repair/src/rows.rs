//! Row-level sync of the ranges whose trees differ.
//!
//! Every replica lists the [`RowVersion`]s of its rows in the differing
//! ranges, in token order; a [`RowAligner`] lines them up by key and
//! decides, per key that is not the same everywhere, which replica to read
//! the winning cell from and which replicas must receive it. Only the rows that differ move, each
//! once per replica that lacks it (ScyllaDB's row-level repair, rather than
//! Cassandra's streaming of whole leaves).

use std::cmp::Ordering;
use std::collections::VecDeque;

use ringstore_placement::Token;

use crate::digest::RowVersion;

/// One row as a replica lists it: where it sorts, its key, its version and
/// its size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedRow {
    /// The key's token (rows are listed in `(token, key)` order).
    pub token: Token,
    /// The key.
    pub key: Vec<u8>,
    /// The replica's version of it.
    pub version: RowVersion,
    /// The bytes of its key and value (for batching the sync).
    pub bytes: u64,
}

/// What to do about one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeySync {
    /// The key.
    pub key: Vec<u8>,
    /// Replicas to read the key's cell from (indices into the replicas
    /// compared). Usually one, holding the winning version; several when
    /// versions tie on everything but their values, so that the cells
    /// themselves decide.
    pub sources: Vec<usize>,
    /// Replicas that must receive the winning cell: those holding another
    /// version or none. (When the winner is only known from the values, all
    /// replicas: one already holding it merges it as a no-op.)
    pub targets: Vec<usize>,
    /// The largest size any replica listed for it.
    pub bytes: u64,
}

/// Lines up the row listings of several replicas, which arrive in pages in
/// `(token, key)` order, and yields a [`KeySync`] for every key that is not
/// the same on all of them — without holding more than the pages received.
///
/// Feed it with [`push`](RowAligner::push) and
/// [`finish`](RowAligner::finish); [`wants`](RowAligner::wants) names a
/// replica whose next page is needed before more keys can be decided, and
/// [`pop`](RowAligner::pop) yields the keys decided so far.
#[derive(Clone, Debug)]
pub struct RowAligner {
    buffers: Vec<VecDeque<ListedRow>>,
    finished: Vec<bool>,
    /// Keys compared so far.
    compared: u64,
}

impl RowAligner {
    /// An aligner for `replicas` listings.
    pub fn new(replicas: usize) -> RowAligner {
        RowAligner {
            buffers: vec![VecDeque::new(); replicas],
            finished: vec![false; replicas],
            compared: 0,
        }
    }

    /// Adds the next page of `replica`'s listing (rows in order, after those
    /// already pushed).
    pub fn push(&mut self, replica: usize, rows: impl IntoIterator<Item = ListedRow>) {
        self.buffers[replica].extend(rows);
    }

    /// `replica`'s listing has ended.
    pub fn finish(&mut self, replica: usize) {
        self.finished[replica] = true;
    }

    /// A replica whose next page is needed: its buffer is empty and its
    /// listing has not ended. `None` when keys can be decided (or all ended).
    pub fn wants(&self) -> Option<usize> {
        (0..self.buffers.len()).find(|&r| self.buffers[r].is_empty() && !self.finished[r])
    }

    /// Whether every listing ended and every key was decided.
    pub fn is_done(&self) -> bool {
        self.finished.iter().all(|&f| f) && self.buffers.iter().all(VecDeque::is_empty)
    }

    /// Keys compared so far (same or not).
    pub fn compared(&self) -> u64 {
        self.compared
    }

    /// The keys decided so far that need a sync, in order. Stops when a
    /// replica's next page is needed ([`wants`](RowAligner::wants)).
    pub fn pop(&mut self) -> Vec<KeySync> {
        let mut syncs = Vec::new();
        while self.wants().is_none() {
            let Some((token, key)) = self
                .buffers
                .iter()
                .filter_map(|b| b.front().map(|row| (row.token, row.key.clone())))
                .min()
            else {
                break;
            };
            let mut versions = vec![None; self.buffers.len()];
            let mut bytes = 0;
            for (replica, buffer) in self.buffers.iter_mut().enumerate() {
                if buffer
                    .front()
                    .is_some_and(|row| row.token == token && row.key == key)
                {
                    let row = buffer.pop_front().expect("front checked");
                    versions[replica] = Some(row.version);
                    bytes = bytes.max(row.bytes);
                }
            }
            self.compared += 1;
            if let Some(sync) = sync_key(key, &versions, bytes) {
                syncs.push(sync);
            }
        }
        syncs
    }
}

/// The sync of one key from its versions per replica; `None` when every
/// replica holds the same version.
fn sync_key(key: Vec<u8>, versions: &[Option<RowVersion>], bytes: u64) -> Option<KeySync> {
    let first = versions[0];
    if first.is_some() && versions.iter().all(|v| *v == first) {
        return None;
    }
    let best = best_versions(versions);
    let sources: Vec<usize> = best
        .iter()
        .filter_map(|winner| versions.iter().position(|v| v.as_ref() == Some(winner)))
        .collect();
    let targets = match best.as_slice() {
        [winner] => (0..versions.len())
            .filter(|&i| versions[i].as_ref() != Some(winner))
            .collect(),
        _ => (0..versions.len()).collect(),
    };
    Some(KeySync {
        key,
        sources,
        targets,
        bytes,
    })
}

/// The distinct versions that may win: the greatest one, or all that tie
/// with it on everything but their values.
fn best_versions(versions: &[Option<RowVersion>]) -> Vec<RowVersion> {
    let mut best: Vec<RowVersion> = Vec::new();
    for version in versions.iter().flatten() {
        match best.first().map(|b| version.compare(b)) {
            None | Some(Some(Ordering::Greater)) => best = vec![*version],
            Some(None) if !best.contains(version) => best.push(*version),
            Some(_) => {}
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringstore_cell::{Cell, Timestamp};
    use ringstore_placement::Murmur3Partitioner;

    fn version(ts: i64, value: &[u8]) -> RowVersion {
        RowVersion::of(&Cell::live(Timestamp(ts), value.to_vec()))
    }

    fn tombstone(ts: i64) -> RowVersion {
        RowVersion::of(&Cell::tombstone(Timestamp(ts)))
    }

    /// A listing in `(token, key)` order.
    fn rows(entries: &[(&str, RowVersion)]) -> Vec<ListedRow> {
        let mut rows: Vec<ListedRow> = entries
            .iter()
            .map(|(k, v)| ListedRow {
                token: Murmur3Partitioner::token(k.as_bytes()).unwrap(),
                key: k.as_bytes().to_vec(),
                version: *v,
                bytes: 10,
            })
            .collect();
        rows.sort_by(|a, b| (a.token, &a.key).cmp(&(b.token, &b.key)));
        rows
    }

    /// Runs an aligner over whole listings, pushed one row per page.
    fn plan(listings: &[Vec<ListedRow>]) -> Vec<KeySync> {
        let mut aligner = RowAligner::new(listings.len());
        let mut next = vec![0; listings.len()];
        let mut syncs = Vec::new();
        while !aligner.is_done() {
            syncs.extend(aligner.pop());
            if let Some(r) = aligner.wants() {
                match listings[r].get(next[r]) {
                    Some(row) => aligner.push(r, [row.clone()]),
                    None => aligner.finish(r),
                }
                next[r] += 1;
            }
        }
        syncs
    }

    fn targets(syncs: &[KeySync], replica: usize) -> usize {
        syncs
            .iter()
            .filter(|k| k.targets.contains(&replica))
            .count()
    }

    #[test]
    fn identical_listings_need_nothing() {
        let a = rows(&[
            ("a", version(1, b"x")),
            ("b", tombstone(2)),
            ("c", version(3, b"z")),
        ]);
        assert_eq!(plan(&[a.clone(), a.clone(), a]), Vec::new());
    }

    #[test]
    fn the_newest_version_goes_to_every_replica_without_it() {
        let syncs = plan(&[
            rows(&[("a", version(1, b"old")), ("b", version(5, b"b"))]),
            rows(&[("a", version(2, b"new")), ("b", version(5, b"b"))]),
            rows(&[("b", version(5, b"b"))]),
        ]);
        assert_eq!(
            syncs,
            vec![KeySync {
                key: b"a".to_vec(),
                sources: vec![1],
                targets: vec![0, 2],
                bytes: 10,
            }]
        );
        assert_eq!(
            (targets(&syncs, 0), targets(&syncs, 1), targets(&syncs, 2)),
            (1, 0, 1)
        );
    }

    #[test]
    fn a_tombstone_wins_over_older_values_and_reaches_the_replica_that_missed_it() {
        let syncs = plan(&[
            rows(&[("k", tombstone(9))]),
            rows(&[("k", tombstone(9))]),
            rows(&[("k", version(3, b"zombie"))]),
        ]);
        assert_eq!(syncs[0].sources, vec![0]);
        assert_eq!(syncs[0].targets, vec![2]);
    }

    #[test]
    fn rows_only_some_replicas_have_are_sent_to_the_others() {
        let keys: Vec<String> = (0..50).map(|i| format!("key{i}")).collect();
        let all: Vec<(&str, RowVersion)> = keys
            .iter()
            .map(|k| (k.as_str(), version(1, k.as_bytes())))
            .collect();
        let even: Vec<(&str, RowVersion)> = all.iter().step_by(2).copied().collect();
        let syncs = plan(&[rows(&all), rows(&even), rows(&[])]);
        assert_eq!(syncs.len(), 50);
        assert_eq!(
            (targets(&syncs, 0), targets(&syncs, 1), targets(&syncs, 2)),
            (0, 25, 50)
        );
        assert!(syncs.iter().all(|k| k.sources == vec![0]));
    }

    #[test]
    fn versions_tied_but_for_their_values_are_all_read_and_sent_everywhere() {
        let syncs = plan(&[
            rows(&[("k", version(4, b"left"))]),
            rows(&[("k", version(4, b"right"))]),
            rows(&[("k", version(4, b"left"))]),
        ]);
        assert_eq!(syncs[0].sources, vec![0, 1]);
        assert_eq!(syncs[0].targets, vec![0, 1, 2]);
    }

    #[test]
    fn the_aligner_waits_for_a_replica_with_nothing_buffered() {
        let mut aligner = RowAligner::new(2);
        aligner.push(0, rows(&[("a", version(1, b"a"))]));
        assert_eq!(aligner.wants(), Some(1));
        assert!(aligner.pop().is_empty());
        aligner.finish(1);
        assert_eq!(aligner.pop().len(), 1);
        assert_eq!(aligner.compared(), 1);
        assert_eq!(aligner.wants(), Some(0));
        aligner.finish(0);
        assert!(aligner.is_done());
    }
}
