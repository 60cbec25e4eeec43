//! One page of a range scan: aligning the replicas' pages, choosing each
//! row's winner, what to repair, and where the next page starts.
//!
//! A scan walks a token range in `(token, key)` order, one piece (a range
//! with one replica set) at a time. For each page the coordinator asks the
//! replicas a [`RangeReadTracker`](crate::RangeReadTracker) picks for their
//! rows strictly after a [`ScanPoint`] up to the piece's last token, at most
//! `limit` rows each, and gets back [`ReplicaPage`]s, which
//! [`check_page`] validates. [`merge_pages`] then:
//!
//! 1. **Aligns** the pages. A page that stopped at its limit (not
//!    [`complete`](ReplicaPage::complete)) says nothing of the rows after its
//!    last one, so only rows up to the *smallest last row of the incomplete
//!    pages* (the bound) are final: every replica asked has answered for
//!    each of them. A complete page covers the piece to its end; when every
//!    page is complete there is no bound.
//! 2. **Reconciles** every final row by [`Cell::reconcile`], as a point read
//!    does: a replica whose page lacks the row has no cell for it.
//! 3. **Repairs**: every replica whose cell differs from the winner (or that
//!    has none) gets the winner, tombstones included.
//! 4. **Hides** tombstones and cells expired at `now` from the rows
//!    returned; they still win over older values.
//! 5. **Stops** after `want` visible rows, or at the bound, and says where
//!    the next page starts ([`PageEnd`]): strictly after the last row
//!    consumed, so no row is returned twice and none is skipped.
//!
//! # Invariants
//! - Every row returned or repaired is final (at or before the bound), is
//!   strictly after the scan point, and rows come in `(token, key)` order.
//! - The next page starts strictly after the last row consumed, and after
//!   the scan point: a scan always advances when any page has rows.
//! - Repairs go to exactly the answering replicas whose cell of a consumed
//!   row differs from its winner, each with the winner.
//!
//! # Caveats
//! - Rows after the stopping point are dropped and fetched again by the next
//!   page: a replica's page past the bound costs bandwidth, not correctness.
//! - Replicas that did not answer are not repaired (anti-entropy repair
//!   covers them), as in point reads.

use std::collections::BTreeMap;
use std::fmt;

use ringstore_cell::{Cell, Timestamp};
use ringstore_placement::{HostId, Token};

/// A row's place in a scan: `(token, key)` order, as storage keeps it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RowPosition {
    /// The key's token.
    pub token: Token,
    /// The key.
    pub key: Vec<u8>,
}

/// Where a scan resumes: strictly after this point.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ScanPoint {
    /// After every row of this token (a range's exclusive start).
    AfterToken(Token),
    /// After this row (the last row a page consumed).
    AfterRow(RowPosition),
}

impl ScanPoint {
    /// Whether `row` lies strictly after the point.
    pub fn is_before(&self, row: &RowPosition) -> bool {
        match self {
            ScanPoint::AfterToken(token) => row.token > *token,
            ScanPoint::AfterRow(position) => row > position,
        }
    }

    /// The first token that may still hold rows after the point, `None`
    /// when the point is past every token.
    pub fn first_token(&self) -> Option<Token> {
        match self {
            ScanPoint::AfterToken(Token::MAX) => None,
            ScanPoint::AfterToken(token) => Some(token.advance(1)),
            ScanPoint::AfterRow(position) => Some(position.token),
        }
    }
}

/// A row of a scan: a key, its token and a replica's (or the winning) cell.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RangeRow {
    /// The key's token.
    pub token: Token,
    /// The key.
    pub key: Vec<u8>,
    /// The cell: a value (possibly expiring or expired) or a tombstone.
    pub cell: Cell,
}

impl RangeRow {
    /// The row's position.
    pub fn position(&self) -> RowPosition {
        RowPosition {
            token: self.token,
            key: self.key.clone(),
        }
    }

    /// Bytes of key and value (the unit of page byte limits).
    pub fn bytes(&self) -> usize {
        self.key.len() + self.cell.value.as_ref().map_or(0, Vec::len)
    }
}

/// One replica's answer to a page request: its rows after the scan point,
/// in order, up to the limit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaPage {
    /// Rows strictly after the scan point, in `(token, key)` order.
    pub rows: Vec<RangeRow>,
    /// Whether the replica has no rows after the last one (up to the last
    /// token asked for): it stopped because it ran out, not at a limit.
    pub complete: bool,
}

/// Why a replica's page cannot be used (the coordinator treats the replica
/// as failed).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PageError {
    /// A row at or before the scan point, or after the last token asked for.
    #[error("a row lies outside the range asked for")]
    OutOfRange,
    /// Rows not in strictly ascending `(token, key)` order.
    #[error("rows are not in strictly ascending (token, key) order")]
    Unordered,
    /// More rows than the limit.
    #[error("{rows} rows exceed the limit of {limit}")]
    OverLimit {
        /// Rows received.
        rows: usize,
        /// The limit asked for.
        limit: usize,
    },
    /// An incomplete page without rows: it would never advance.
    #[error("an incomplete page has no rows")]
    EmptyIncomplete,
}

/// Checks a replica's page for a request of at most `limit` rows strictly
/// after `after` up to token `last`.
pub fn check_page(
    after: &ScanPoint,
    last: Token,
    limit: usize,
    page: &ReplicaPage,
) -> Result<(), PageError> {
    if page.rows.len() > limit {
        return Err(PageError::OverLimit {
            rows: page.rows.len(),
            limit,
        });
    }
    if !page.complete && page.rows.is_empty() {
        return Err(PageError::EmptyIncomplete);
    }
    let mut previous: Option<RowPosition> = None;
    for row in &page.rows {
        let position = row.position();
        if !after.is_before(&position) || row.token > last {
            return Err(PageError::OutOfRange);
        }
        if previous.as_ref().is_some_and(|p| *p >= position) {
            return Err(PageError::Unordered);
        }
        previous = Some(position);
    }
    Ok(())
}

/// A stale replica's repair: the winning cell of one row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowRepair {
    /// The replica to write to.
    pub host: HostId,
    /// The row with its winning cell.
    pub row: RangeRow,
}

/// Where the scan goes on after a merged page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PageEnd {
    /// More rows may follow: the next page starts strictly after this point.
    After(ScanPoint),
    /// The piece is done through the last token asked for.
    Complete,
}

/// The result of [`merge_pages`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MergedPage {
    /// The visible winners, in order: at most `want`.
    pub rows: Vec<RangeRow>,
    /// Writes that bring stale replicas up to the winners.
    pub repairs: Vec<RowRepair>,
    /// Where the next page starts.
    pub next: PageEnd,
    /// Rows consumed, hidden ones (tombstones, expired) included.
    pub consumed: usize,
}

impl fmt::Display for PageEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PageEnd::After(ScanPoint::AfterToken(t)) => write!(f, "after token {t}"),
            PageEnd::After(ScanPoint::AfterRow(p)) => write!(f, "after a row of token {}", p.token),
            PageEnd::Complete => f.write_str("complete"),
        }
    }
}

/// Merges the (checked) pages that replicas returned for a request strictly
/// after `after`: the final rows' winners, visible ones returned up to `want`
/// (at least 1), the repairs of the rows consumed, and where the next page
/// starts. See the module docs.
pub fn merge_pages(
    after: &ScanPoint,
    pages: &[(HostId, ReplicaPage)],
    want: usize,
    now: Timestamp,
) -> MergedPage {
    let want = want.max(1);
    // The smallest last row of the pages that stopped at their limit.
    let bound = pages
        .iter()
        .filter(|(_, page)| !page.complete)
        .filter_map(|(_, page)| page.rows.last().map(RangeRow::position))
        .min();
    let is_final = |position: &RowPosition| bound.as_ref().is_none_or(|b| position <= b);
    // Every final row, with each replica's cell (index into `pages`).
    let mut rows: BTreeMap<RowPosition, Vec<(usize, &Cell)>> = BTreeMap::new();
    for (index, (_, page)) in pages.iter().enumerate() {
        for row in &page.rows {
            let position = row.position();
            if is_final(&position) && after.is_before(&position) {
                rows.entry(position).or_default().push((index, &row.cell));
            }
        }
    }
    let mut merged = MergedPage {
        rows: Vec::new(),
        repairs: Vec::new(),
        next: match bound {
            Some(bound) => PageEnd::After(ScanPoint::AfterRow(bound)),
            None => PageEnd::Complete,
        },
        consumed: 0,
    };
    let total = rows.len();
    for (position, cells) in rows {
        let winner = cells
            .iter()
            .map(|(_, cell)| (*cell).clone())
            .reduce(Cell::reconcile)
            .expect("a row has at least one replica's cell");
        for (index, (host, _)) in pages.iter().enumerate() {
            let held = cells.iter().find(|(i, _)| *i == index).map(|(_, c)| *c);
            if held != Some(&winner) {
                merged.repairs.push(RowRepair {
                    host: *host,
                    row: RangeRow {
                        token: position.token,
                        key: position.key.clone(),
                        cell: winner.clone(),
                    },
                });
            }
        }
        merged.consumed += 1;
        let visible = winner.visible_value(now).is_some();
        let last_consumed = merged.consumed == total;
        let stop = visible && merged.rows.len() + 1 == want;
        if stop && !last_consumed {
            merged.next = PageEnd::After(ScanPoint::AfterRow(position.clone()));
        }
        if visible {
            merged.rows.push(RangeRow {
                token: position.token,
                key: position.key,
                cell: winner,
            });
        }
        if stop {
            break;
        }
    }
    merged
}

#[cfg(test)]
#[path = "range_page_tests.rs"]
mod tests;
