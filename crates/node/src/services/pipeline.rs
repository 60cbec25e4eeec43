//! `Client/Pipeline`: many requests on one bidirectional stream.
//!
//! Why: a unary gRPC call is an HTTP/2 stream of its own — HEADERS with
//! the path and metadata, a DATA frame, trailers, HPACK on both sides, and a
//! task per stream in hyper. On this project's 2-core machine that costs the
//! server about 32 µs and the client about 36 µs per request, twice what a
//! Redis round trip costs (see #13's notes). A pipeline pays the stream
//! once: each request is one length-prefixed message tagged with the
//! client's id, and many of them share a frame and a system call when they
//! are ready together. Cassandra's native protocol multiplexes stream ids
//! on one connection the same way.
//!
//! The stream's shape:
//! - Requests are answered as they finish, not in the order sent; the
//!   response carries the request's id. Ids are the client's business:
//!   the node does not check that they are distinct.
//! - At most [`MAX_IN_FLIGHT`] requests of one stream run at once, and at
//!   most [`MAX_IN_FLIGHT_BYTES`] of them (as encoded; a larger request
//!   runs alone). While either is reached the node reads no more of the
//!   stream, so HTTP/2's flow control holds the client back: a client that
//!   sends without reading responses, or sends many 16 MiB values, cannot
//!   grow the node's memory past that.
//! - A request's failure (a bad key, an unavailable level, a denied
//!   permission) is its response's code and message, and a compare-and-set
//!   certainly not applied says so in `cas_not_applied` (the unary status's
//!   metadata entry); the stream goes on. A message that does not decode
//!   ends the stream with the decoder's status, as it would end a unary
//!   call.
//! - When the client half-closes, the requests already read are answered,
//!   then the stream ends with OK. When it resets the stream, the requests
//!   in flight are dropped as a unary call's would be.
//! - A request may carry when the client sent it and how long it waits
//!   (`sent_at_micros`, `timeout_ms`): `answer` gets them as a
//!   [`ClientDeadline`], so a write read after it is refused as a unary
//!   call's would be ([`crate::deadline`]). Malformed, they are the
//!   request's `INVALID_ARGUMENT`.
//! - When the node stops, it reads no more requests, answers those it has,
//!   and ends the stream with OK: a server's graceful shutdown waits for
//!   its streams, and a client's pipeline would otherwise hold it forever.
//!   The client sees the stream end and opens one elsewhere.
//!
//! This module knows the wire and the flow; what each request does is the
//! `Client` service's (`client.rs`), passed in as `answer`.

use std::pin::Pin;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use prost::Message;
use ringstore_proto::v1 as pb;
use ringstore_proto::v1::pipeline_request::Request;
use ringstore_proto::v1::pipeline_response::Response as Answer;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::Status;

use crate::deadline::ClientDeadline;

/// The most requests of one stream that run at once.
pub const MAX_IN_FLIGHT: usize = 1024;

/// The most bytes of one stream's requests (as encoded) that run at once.
pub const MAX_IN_FLIGHT_BYTES: usize = 64 * 1024 * 1024;

/// [`MAX_IN_FLIGHT_BYTES`] in the budget's units (KiB).
const BUDGET_KIB: usize = MAX_IN_FLIGHT_BYTES / 1024;

/// The responses of one pipeline, as the service returns them.
pub type Responses = Pin<Box<dyn Stream<Item = Result<pb::PipelineResponse, Status>> + Send>>;

/// Answers every request of `input` with `answer`, up to [`MAX_IN_FLIGHT`]
/// at once, each response as soon as it is ready, until `input` ends or
/// `stop` resolves.
pub fn responses<S, F, Fut>(
    input: S,
    answer: F,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Responses
where
    S: Stream<Item = Result<pb::PipelineRequest, Status>> + Send + 'static,
    F: Fn(Request, Option<ClientDeadline>) -> Fut + Send + 'static,
    Fut: Future<Output = Result<Answer, Status>> + Send + 'static,
{
    let budget = Arc::new(Semaphore::new(BUDGET_KIB));
    let admitted = input
        .take_until(stop)
        .then(move |item| within_budget(item, budget.clone()));
    let answered = admitted.map(move |item| {
        let started = item.map(|(message, room)| {
            let deadline = ClientDeadline::from_fields(message.sent_at_micros, message.timeout_ms);
            let pending = match (message.request, deadline) {
                (None, _) => Err(Status::invalid_argument(
                    "a pipelined request must hold a put, get, delete, batch or noop",
                )),
                (Some(_), Err(error)) => Err(Status::from(error)),
                (Some(request), Ok(deadline)) => Ok(answer(request, deadline)),
            };
            (message.id, pending, room)
        });
        async move {
            let (id, pending, _room) = started?;
            let result = match pending {
                Ok(pending) => pending.await,
                Err(status) => Err(status),
            };
            Ok(response(id, result))
        }
    });
    Box::pin(answered.buffer_unordered(MAX_IN_FLIGHT))
}

/// `item` once the stream's budget has room for it (the permit holds the
/// room until the request is answered).
async fn within_budget(
    item: Result<pb::PipelineRequest, Status>,
    budget: Arc<Semaphore>,
) -> Result<(pb::PipelineRequest, OwnedSemaphorePermit), Status> {
    let message = item?;
    let kib = message.encoded_len().div_ceil(1024).clamp(1, BUDGET_KIB);
    let room = budget
        .acquire_many_owned(u32::try_from(kib).unwrap_or(u32::MAX))
        .await
        .map_err(|_| Status::internal("the pipeline's budget was closed"))?;
    Ok((message, room))
}

/// The response to request `id`.
fn response(id: u64, result: Result<Answer, Status>) -> pb::PipelineResponse {
    match result {
        Ok(answer) => pb::PipelineResponse {
            id,
            code: 0,
            message: String::new(),
            response: Some(answer),
            cas_not_applied: false,
        },
        Err(status) => pb::PipelineResponse {
            id,
            code: status.code() as i32,
            message: status.message().to_string(),
            response: None,
            cas_not_applied: status
                .metadata()
                .get(crate::error::cas::NOT_APPLIED_HEADER)
                .is_some_and(|value| value == crate::error::cas::NOT_APPLIED_VALUE),
        },
    }
}

/// The unary RPC a pipelined request stands for (its gRPC path, whose
/// permission it needs) and the keyspace it names.
pub fn stands_for(request: &Request) -> (&'static str, &str) {
    match request {
        Request::Put(r) => ("/ringstore.v1.Client/Put", &r.keyspace),
        Request::Get(r) => ("/ringstore.v1.Client/Get", &r.keyspace),
        Request::Delete(r) => ("/ringstore.v1.Client/Delete", &r.keyspace),
        Request::Batch(r) => ("/ringstore.v1.Client/Batch", &r.keyspace),
        Request::Noop(_) => ("/ringstore.v1.Client/Noop", ""),
        Request::PutIf(r) => ("/ringstore.v1.Client/PutIf", &r.keyspace),
        Request::DeleteIf(r) => ("/ringstore.v1.Client/DeleteIf", &r.keyspace),
        Request::GetSerial(r) => ("/ringstore.v1.Client/GetSerial", &r.keyspace),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    fn get(id: u64, key: &str) -> Result<pb::PipelineRequest, Status> {
        Ok(pb::PipelineRequest {
            id,
            request: Some(Request::Get(pb::GetRequest {
                keyspace: "ks".into(),
                key: key.as_bytes().to_vec(),
                consistency: 0,
            })),
            ..Default::default()
        })
    }

    /// Answers a get after as many milliseconds as its key says, with the
    /// key as the value; "fail" fails.
    async fn slow_echo(request: Request, _: Option<ClientDeadline>) -> Result<Answer, Status> {
        let Request::Get(get) = request else {
            return Err(Status::unimplemented("only gets here"));
        };
        let key = String::from_utf8(get.key.clone()).unwrap();
        if key == "fail" {
            return Err(Status::unavailable("1 replica required, 0 alive"));
        }
        tokio::time::sleep(Duration::from_millis(key.parse().unwrap())).await;
        Ok(Answer::Get(pb::GetResponse {
            found: true,
            value: get.key,
            timestamp_micros: 1,
        }))
    }

    #[tokio::test(start_paused = true)]
    async fn responses_come_as_requests_finish_each_with_its_id_and_failures_do_not_end_the_stream()
    {
        let input =
            futures::stream::iter([get(7, "30"), get(8, "10"), get(9, "fail"), get(10, "20")]);
        let out: Vec<_> = responses(input, slow_echo, std::future::pending())
            .collect()
            .await;
        let ids: Vec<u64> = out.iter().map(|r| r.as_ref().unwrap().id).collect();
        assert_eq!(ids, [9, 8, 10, 7]);
        let failed = out[0].as_ref().unwrap();
        assert_eq!(failed.code, tonic::Code::Unavailable as i32);
        assert!(failed.message.contains("0 alive"), "{failed:?}");
        assert!(failed.response.is_none());
        let Some(Answer::Get(value)) = &out[3].as_ref().unwrap().response else {
            panic!("{out:?}");
        };
        assert_eq!(value.value, b"30");
    }

    #[tokio::test(start_paused = true)]
    async fn an_empty_request_is_refused_alone_and_a_broken_stream_ends_with_its_status() {
        let input = futures::stream::iter([
            Ok(pb::PipelineRequest {
                id: 1,
                request: None,
                ..Default::default()
            }),
            get(2, "5"),
        ]);
        let out: Vec<_> = responses(input, slow_echo, std::future::pending())
            .collect()
            .await;
        assert_eq!(out.len(), 2);
        let empty = out[0].as_ref().unwrap();
        assert_eq!(
            (empty.id, empty.code),
            (1, tonic::Code::InvalidArgument as i32)
        );
        assert_eq!(out[1].as_ref().unwrap().code, 0);

        let broken = futures::stream::iter([get(1, "5"), Err(Status::internal("bad frame"))]);
        let out: Vec<_> = responses(broken, slow_echo, std::future::pending())
            .collect()
            .await;
        assert!(
            out.iter()
                .any(|r| r.as_ref().is_err_and(|s| s.message() == "bad frame"))
        );
    }

    /// Streams `input` through [`responses`], each request answered by
    /// `answer`: how many responses came out, and the most requests that
    /// ran at once.
    async fn count_at_once<S, F, Fut>(input: S, answer: F) -> (usize, usize)
    where
        S: Stream<Item = Result<pb::PipelineRequest, Status>> + Send + 'static,
        F: Fn(Request, Option<ClientDeadline>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Answer, Status>> + Send + 'static,
    {
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let answer = Arc::new(answer);
        let counted = {
            let (running, most) = (running.clone(), most.clone());
            move |request: Request, deadline| {
                let (running, most, answer) = (running.clone(), most.clone(), answer.clone());
                async move {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    let answered = answer(request, deadline).await;
                    running.fetch_sub(1, Ordering::SeqCst);
                    answered
                }
            }
        };
        let out: Vec<_> = responses(input, counted, std::future::pending())
            .collect()
            .await;
        (out.len(), most.load(Ordering::SeqCst))
    }

    #[tokio::test(start_paused = true)]
    async fn no_more_than_max_in_flight_requests_run_at_once() {
        let total = MAX_IN_FLIGHT as u64 * 3;
        let input = futures::stream::iter((0..total).map(|id| get(id, "1")));
        let (answered, most) = count_at_once(input, slow_echo).await;
        assert_eq!(answered as u64, total);
        assert_eq!(most, MAX_IN_FLIGHT);
    }

    #[tokio::test(start_paused = true)]
    async fn no_more_than_max_in_flight_bytes_of_requests_run_at_once() {
        let big = |id: u64| {
            Ok(pb::PipelineRequest {
                id,
                request: Some(Request::Put(pb::PutRequest {
                    keyspace: "ks".into(),
                    key: b"k".to_vec(),
                    value: vec![7; 1024 * 1024],
                    ..Default::default()
                })),
                ..Default::default()
            })
        };
        let input = futures::stream::iter((0..200).map(big));
        let (answered, most) = count_at_once(input, |_: Request, _| async {
            tokio::time::sleep(Duration::from_millis(1)).await;
            Ok(Answer::Noop(pb::NoopResponse {}))
        })
        .await;
        assert_eq!(answered, 200);
        // Each request is a little over 1 MiB (1,025 KiB): 63 fit in 64 MiB.
        assert_eq!(most, 63);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_s_send_time_and_timeout_reach_the_answer_and_bad_ones_are_refused() {
        let timed = |id: u64, sent_at: i64| {
            let mut request = get(id, "1")?;
            request.sent_at_micros = Some(sent_at);
            request.timeout_ms = Some(1500);
            Ok(request)
        };
        let input = futures::stream::iter([timed(1, 7_000_000), timed(2, -3), get(3, "1")]);
        let seen = |_: Request, deadline: Option<ClientDeadline>| async move {
            let expires = deadline.map_or(0, |d| d.expires_at().0);
            Ok(Answer::Get(pb::GetResponse {
                found: deadline.is_some(),
                value: Vec::new(),
                timestamp_micros: expires,
            }))
        };
        let mut out: Vec<pb::PipelineResponse> = responses(input, seen, std::future::pending())
            .map(Result::unwrap)
            .collect()
            .await;
        out.sort_by_key(|r| r.id);
        let expiry = |r: &pb::PipelineResponse| match &r.response {
            Some(Answer::Get(get)) => Some((get.found, get.timestamp_micros)),
            _ => None,
        };
        assert_eq!(expiry(&out[0]), Some((true, 8_500_000)));
        assert_eq!(out[1].code, tonic::Code::InvalidArgument as i32);
        assert!(
            out[1].message.contains("sent_at_micros"),
            "{}",
            out[1].message
        );
        assert_eq!(expiry(&out[2]), Some((false, 0)));
    }

    #[tokio::test(start_paused = true)]
    async fn when_the_node_stops_the_requests_read_are_answered_and_the_stream_ends() {
        // A client that keeps the stream open: two requests, then nothing.
        let input =
            futures::stream::iter([get(1, "50"), get(2, "10")]).chain(futures::stream::pending());
        let stop = tokio::time::sleep(Duration::from_millis(5));
        let out: Vec<_> = responses(input, slow_echo, stop).collect().await;
        let ids: Vec<u64> = out.iter().map(|r| r.as_ref().unwrap().id).collect();
        assert_eq!(ids, [2, 1]);
    }

    #[test]
    fn each_request_stands_for_its_unary_rpc_on_its_keyspace() {
        let put = Request::Put(pb::PutRequest {
            keyspace: "orders".into(),
            ..Default::default()
        });
        assert_eq!(stands_for(&put), ("/ringstore.v1.Client/Put", "orders"));
        let noop = Request::Noop(pb::NoopRequest {});
        assert_eq!(stands_for(&noop).0, "/ringstore.v1.Client/Noop");
    }
}
