//! [`Client::scan`]: a keyspace's rows over the whole ring as one stream,
//! read range by range in parallel, each range from one of its replicas;
//! [`Client::scan_range`]: the rows of one token range, paged.
//!
//! The ring's ranges are cut into at most [`MAX_SCAN_RANGES`] pieces that
//! do not wrap (the `Scan` RPC takes `(start, end]` with `start < end`).
//! Up to `scan_parallelism` pieces are read at once, each by a task paging
//! into a small channel; the stream yields the pieces in token order, so
//! rows come in (token, key) order as from one node's scan, and memory
//! stays bounded by the pieces in flight times two pages.

use futures::stream::{self, Stream, StreamExt};
use ringstore_placement::Token;
use ringstore_proto::v1 as pb;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use crate::client::Client;
use crate::error::Result;
use crate::retry::Idempotence;

/// The most pieces a scan cuts the ring into: a ring of many vnodes has
/// thousands of small ranges, and a page call per range would cost more
/// than the hop a piece spanning several ranges sometimes takes.
pub const MAX_SCAN_RANGES: usize = 256;

/// Pages a piece's task reads ahead of the consumer.
const PAGES_AHEAD: usize = 2;

/// What to scan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanSpec {
    /// The keyspace.
    pub keyspace: String,
    /// The level each page is read at.
    pub consistency: pb::ConsistencyLevel,
    /// Rows per page (1 to 10,000); `None`: the node's default (1,000).
    pub page_size: Option<u32>,
}

impl Client {
    /// Every live row of the keyspace, in (token, key) order. An error
    /// (after the retry policy gave up on a page) ends the stream.
    ///
    /// ```no_run
    /// # async fn example(client: ringstore_client::Client) -> ringstore_client::Result<()> {
    /// use futures::StreamExt;
    /// use ringstore_client::{ScanSpec, pb};
    ///
    /// let spec = ScanSpec {
    ///     keyspace: "ks".into(),
    ///     consistency: pb::ConsistencyLevel::One,
    ///     page_size: None,
    /// };
    /// let mut rows = std::pin::pin!(client.scan(spec));
    /// while let Some(row) = rows.next().await {
    ///     let row = row?;
    ///     println!("{:?} = {:?}", row.key, row.value);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn scan(&self, spec: ScanSpec) -> impl Stream<Item = Result<pb::ScanRow>> + Send + 'static {
        let pieces = scan_pieces(self.routing().tokens(), MAX_SCAN_RANGES);
        self.read_pieces(spec, pieces)
    }

    /// The live rows of `(start, end]` only, in (token, key) order: one
    /// piece, read page by page (each page resuming where the last ended)
    /// from a replica of `end`. The range must not wrap (`start < end`;
    /// the node refuses others); `(Token::MIN, Token::MAX]` is the whole
    /// ring, read from one replica at a time. An error ends the stream.
    ///
    /// ```no_run
    /// # async fn example(client: ringstore_client::Client) -> ringstore_client::Result<()> {
    /// use futures::StreamExt;
    /// use ringstore_client::{ScanSpec, Token, pb};
    ///
    /// let spec = ScanSpec {
    ///     keyspace: "ks".into(),
    ///     consistency: pb::ConsistencyLevel::Quorum,
    ///     page_size: Some(500),
    /// };
    /// let rows = client.scan_range(spec, (Token(-1000), Token(1000)));
    /// let count = rows.count().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn scan_range(
        &self,
        spec: ScanSpec,
        range: (Token, Token),
    ) -> impl Stream<Item = Result<pb::ScanRow>> + Send + 'static {
        self.read_pieces(spec, vec![range])
    }

    /// The rows of `pieces` in their order, `scan_parallelism` pieces read
    /// at once, each by its own task.
    fn read_pieces(
        &self,
        spec: ScanSpec,
        pieces: Vec<(Token, Token)>,
    ) -> impl Stream<Item = Result<pb::ScanRow>> + Send + 'static {
        let parallelism = self.config().scan_parallelism.get();
        let client = self.clone();
        let pages = stream::iter(pieces)
            .map(move |piece| {
                let (sender, receiver) = mpsc::channel(PAGES_AHEAD);
                tokio::spawn(read_piece(client.clone(), spec.clone(), piece, sender));
                futures::future::ready(ReceiverStream::new(receiver))
            })
            .buffered(parallelism)
            .flatten();
        rows_of_pages(pages)
    }
}

/// The rows of `pages` in order, ending after the first page that failed
/// (its error the last item).
fn rows_of_pages(
    pages: impl Stream<Item = Result<Vec<pb::ScanRow>>>,
) -> impl Stream<Item = Result<pb::ScanRow>> {
    pages
        .flat_map(|page: Result<Vec<pb::ScanRow>>| {
            let rows: Vec<Result<pb::ScanRow>> = match page {
                Ok(rows) => rows.into_iter().map(Ok).collect(),
                Err(error) => vec![Err(error)],
            };
            stream::iter(rows)
        })
        .scan(false, |failed, row| {
            let next = (!*failed).then(|| {
                *failed = row.is_err();
                row
            });
            futures::future::ready(next)
        })
}

/// Reads piece `(start, end]` page by page into `pages` until it is done,
/// a page fails (sent, then the task ends), or the consumer went away.
async fn read_piece(
    client: Client,
    spec: ScanSpec,
    (start, end): (Token, Token),
    pages: mpsc::Sender<Result<Vec<pb::ScanRow>>>,
) {
    let mut resume_token = Vec::new();
    loop {
        let plan = client.plan_for_token(&spec.keyspace, end);
        let request = pb::ScanRequest {
            keyspace: spec.keyspace.clone(),
            start_token: Some(start.0),
            end_token: Some(end.0),
            page_size: spec.page_size,
            consistency: spec.consistency as i32,
            resume_token: resume_token.clone(),
        };
        let page = client
            .execute(plan, Idempotence::Idempotent, |mut node| {
                let request = request.clone();
                async move { node.scan(request).await }
            })
            .await;
        let (rows, next) = match page {
            Ok(page) => (Ok(page.rows), page.resume_token),
            Err(error) => (Err(error), Vec::new()),
        };
        let failed = rows.is_err();
        if pages.send(rows).await.is_err() || failed || next.is_empty() {
            return;
        }
        resume_token = next;
    }
}

/// The ring `(Token::MIN, Token::MAX]` cut at the ring's `tokens`
/// (ascending) into pieces that do not wrap, merged into at most `max`
/// neighbours. Without tokens, the whole ring in one piece.
pub(crate) fn scan_pieces(tokens: &[Token], max: usize) -> Vec<(Token, Token)> {
    let mut ends: Vec<Token> = tokens
        .iter()
        .copied()
        .filter(|&t| t != Token::MIN)
        .collect();
    if ends.last() != Some(&Token::MAX) {
        ends.push(Token::MAX);
    }
    let stride = ends.len().div_ceil(max.max(1));
    let mut pieces = Vec::with_capacity(ends.len() / stride + 1);
    let mut start = Token::MIN;
    for chunk in ends.chunks(stride) {
        let end = *chunk.last().expect("chunks are not empty");
        pieces.push((start, end));
        start = end;
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ClientError;

    fn covers_the_ring(pieces: &[(Token, Token)]) {
        assert_eq!(pieces.first().unwrap().0, Token::MIN);
        assert_eq!(pieces.last().unwrap().1, Token::MAX);
        for pair in pieces.windows(2) {
            assert_eq!(pair[0].1, pair[1].0, "contiguous");
        }
        assert!(pieces.iter().all(|(s, e)| s < e), "none wraps: {pieces:?}");
    }

    #[test]
    fn pieces_cover_the_ring_once_cut_at_its_tokens() {
        let tokens = [Token(-100), Token(0), Token(100)];
        let pieces = scan_pieces(&tokens, 256);
        covers_the_ring(&pieces);
        assert_eq!(
            pieces,
            [
                (Token::MIN, Token(-100)),
                (Token(-100), Token(0)),
                (Token(0), Token(100)),
                (Token(100), Token::MAX)
            ]
        );
        assert_eq!(scan_pieces(&[], 256), [(Token::MIN, Token::MAX)]);
        let edges = scan_pieces(&[Token::MIN, Token(5), Token::MAX], 256);
        covers_the_ring(&edges);
        assert_eq!(edges.len(), 2);
    }

    fn row(key: &str) -> pb::ScanRow {
        pb::ScanRow {
            key: key.into(),
            ..pb::ScanRow::default()
        }
    }

    #[tokio::test]
    async fn rows_come_page_after_page_and_end_at_the_first_failed_page() {
        let pages = vec![
            Ok(vec![row("a"), row("b")]),
            Ok(vec![]),
            Ok(vec![row("c")]),
            Err(ClientError::NoNode),
            Ok(vec![row("d")]),
        ];
        let rows: Vec<Result<pb::ScanRow>> = rows_of_pages(stream::iter(pages)).collect().await;
        let keys: Vec<&[u8]> = rows.iter().flatten().map(|r| &r.key[..]).collect();
        assert_eq!(keys, [&b"a"[..], b"b", b"c"]);
        assert_eq!(rows.len(), 4, "the error is the last row");
        assert!(matches!(rows.last(), Some(Err(ClientError::NoNode))));
    }

    #[test]
    fn many_ranges_merge_into_at_most_the_maximum() {
        let tokens: Vec<Token> = (0..1000).map(|i| Token(i * 1000)).collect();
        let pieces = scan_pieces(&tokens, 256);
        covers_the_ring(&pieces);
        assert!(pieces.len() <= 256, "{}", pieces.len());
        let few = scan_pieces(&tokens, 1);
        assert_eq!(few, [(Token::MIN, Token::MAX)]);
    }
}
