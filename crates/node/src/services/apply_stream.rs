//! `Internode/ApplyStream`, the replica's side: a coordinator's `Apply`
//! calls on one long-lived stream (`write_streams.rs` has the caller's
//! side and the reasons).
//!
//! The stream's shape:
//! - Frames are answered in order, one at a time: the next frame is read
//!   once the last is answered. A coordinator sends its replica writes one
//!   call at a time per peer anyway (`peer_calls/mod.rs`; a scan's repair
//!   writes take their turn between them), so this runs about as much in
//!   parallel as unary calls did, and one stream can hold no more than one
//!   frame's writes in this node's memory: HTTP/2's flow control holds back
//!   a caller that sends ahead.
//! - A call's failure (a storage error, a node that is draining) is its
//!   answer's code and message; the stream goes on. A frame that does not
//!   decode ends the stream with the decoder's status, as it would end a
//!   unary call.
//! - Before each frame the caller's membership is checked again
//!   (`admitted`): a stream opened by a node that has since left the
//!   cluster ends with `UNAUTHENTICATED` at its next frame, as a unary call
//!   of that node would be refused.
//! - When the node stops it reads no more frames, answers the one it has,
//!   and ends the stream with OK: a server's graceful shutdown waits for
//!   its streams. The caller sees the end, and its next call opens a new
//!   stream (to wherever the peer now is).
//!
//! What a call does is the `Internode` service's (`internode.rs`), passed
//! in as `apply`.

use std::pin::Pin;

use futures::{Stream, StreamExt};
use ringstore_proto::v1 as pb;
use tonic::Status;

/// The answers of one stream, as the service returns them.
pub type Answers = Pin<Box<dyn Stream<Item = Result<pb::ApplyAnswer, Status>> + Send>>;

/// Answers every frame of `frames` with `apply`, in order, until `frames`
/// ends, `admitted` refuses the caller, or `stop` resolves.
pub fn answers<S, F, Fut>(
    frames: S,
    admitted: impl Fn() -> Result<(), Status> + Send + 'static,
    apply: F,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Answers
where
    S: Stream<Item = Result<pb::ApplyFrame, Status>> + Send + 'static,
    F: Fn(pb::ApplyRequest) -> Fut + Send + 'static,
    Fut: Future<Output = Result<pb::ApplyResponse, Status>> + Send + 'static,
{
    let answered = frames.take_until(stop).then(move |frame| {
        let started = frame.and_then(|frame| {
            admitted()?;
            Ok((frame.id, frame.request.map(&apply)))
        });
        async move {
            let (id, pending) = started?;
            let result = match pending {
                Some(pending) => pending.await,
                None => Err(Status::invalid_argument(
                    "an apply frame must hold a request",
                )),
            };
            Ok(answer(id, result))
        }
    });
    // The first error (a broken stream, a caller that left) is the last
    // item: the stream ends with it.
    Box::pin(answered.scan(false, |failed, item| {
        let next = (!*failed).then(|| {
            *failed = item.is_err();
            item
        });
        std::future::ready(next)
    }))
}

/// The answer to frame `id`.
fn answer(id: u64, result: Result<pb::ApplyResponse, Status>) -> pb::ApplyAnswer {
    match result {
        Ok(response) => pb::ApplyAnswer {
            id,
            code: 0,
            message: String::new(),
            response: Some(response),
        },
        Err(status) => pb::ApplyAnswer {
            id,
            code: status.code() as i32,
            message: status.message().to_string(),
            response: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    fn frame(id: u64, ring_checksum: u64) -> Result<pb::ApplyFrame, Status> {
        Ok(pb::ApplyFrame {
            id,
            request: Some(pb::ApplyRequest {
                mutations: Vec::new(),
                ring_checksum,
            }),
        })
    }

    /// Answers after as many milliseconds as the ring checksum says,
    /// refusing one mutation index of that number; 99 fails.
    async fn slow_echo(request: pb::ApplyRequest) -> Result<pb::ApplyResponse, Status> {
        if request.ring_checksum == 99 {
            return Err(Status::unavailable("the node is draining"));
        }
        tokio::time::sleep(Duration::from_millis(request.ring_checksum)).await;
        Ok(pb::ApplyResponse {
            refused: vec![pb::RefusedMutation {
                index: u32::try_from(request.ring_checksum).unwrap(),
                ..Default::default()
            }],
            members: Vec::new(),
        })
    }

    fn admit_all() -> Result<(), Status> {
        Ok(())
    }

    #[tokio::test(start_paused = true)]
    async fn frames_are_answered_in_order_one_at_a_time_and_a_failure_does_not_end_the_stream() {
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let (r, m) = (running.clone(), most.clone());
        let apply = move |request| {
            let (r, m) = (r.clone(), m.clone());
            async move {
                m.fetch_max(r.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                let result = slow_echo(request).await;
                r.fetch_sub(1, Ordering::SeqCst);
                result
            }
        };
        let input = futures::stream::iter([frame(7, 30), frame(8, 99), frame(9, 10)]);
        let out: Vec<pb::ApplyAnswer> = answers(input, admit_all, apply, std::future::pending())
            .map(|item| item.expect("answered"))
            .collect()
            .await;
        let ids: Vec<u64> = out.iter().map(|a| a.id).collect();
        assert_eq!(ids, [7, 8, 9]);
        assert_eq!(most.load(Ordering::SeqCst), 1, "one frame at a time");
        assert_eq!(out[0].response.as_ref().unwrap().refused[0].index, 30);
        assert_eq!(out[1].code, tonic::Code::Unavailable as i32);
        assert!(out[1].message.contains("draining"), "{:?}", out[1]);
        assert!(out[1].response.is_none());
        assert_eq!(out[2].response.as_ref().unwrap().refused[0].index, 10);
    }

    #[tokio::test(start_paused = true)]
    async fn an_empty_frame_is_refused_alone_and_a_broken_stream_ends_with_its_status() {
        let input = futures::stream::iter([
            Ok(pb::ApplyFrame {
                id: 1,
                request: None,
            }),
            frame(2, 0),
            Err(Status::internal("failed to decode")),
            frame(3, 0),
        ]);
        let out: Vec<_> = answers(input, admit_all, slow_echo, std::future::pending())
            .collect()
            .await;
        assert_eq!(out.len(), 3, "nothing after the broken frame: {out:?}");
        assert_eq!(
            out[0].as_ref().unwrap().code,
            tonic::Code::InvalidArgument as i32
        );
        assert_eq!(out[1].as_ref().unwrap().code, 0);
        assert_eq!(out[2].as_ref().unwrap_err().code(), tonic::Code::Internal);
    }

    #[tokio::test(start_paused = true)]
    async fn a_caller_that_left_is_refused_at_its_next_frame_and_the_stream_ends() {
        let left = Arc::new(AtomicBool::new(false));
        let flag = left.clone();
        let admitted = move || {
            if flag.load(Ordering::SeqCst) {
                Err(Status::unauthenticated("the caller has left the cluster"))
            } else {
                Ok(())
            }
        };
        let apply = move |request| {
            // The caller leaves while its first call is applied.
            left.store(true, Ordering::SeqCst);
            slow_echo(request)
        };
        let input = futures::stream::iter([frame(1, 0), frame(2, 0), frame(3, 0)]);
        let out: Vec<_> = answers(input, admitted, apply, std::future::pending())
            .collect()
            .await;
        assert_eq!(out.len(), 2, "{out:?}");
        assert_eq!(out[0].as_ref().unwrap().id, 1);
        assert_eq!(
            out[1].as_ref().unwrap_err().code(),
            tonic::Code::Unauthenticated
        );
    }

    #[tokio::test(start_paused = true)]
    async fn when_the_node_stops_the_frame_read_is_answered_and_the_stream_ends() {
        let input = futures::stream::iter([frame(1, 20)]).chain(futures::stream::pending());
        let stop = tokio::time::sleep(Duration::from_millis(5));
        let out: Vec<_> = answers(input, admit_all, slow_echo, stop).collect().await;
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].as_ref().unwrap().id, 1);
    }
}
