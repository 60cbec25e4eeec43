//! `ringstore netstats`, `setstreamthroughput` and `getstreamthroughput`: a
//! node's streams and its stream throttle, as nodetool shows them.

use std::io::Write;

use ringstore_proto::v1 as pb;

use crate::cli::StreamThroughputArgs;
use crate::client::Connection;
use crate::display::{human_bytes, human_duration, percent, stream_throttle};
use crate::failure::Outcome;

/// `netstats`: prints the mode, the throttle and every stream.
pub async fn show(connection: &Connection, out: &mut impl Write) -> Outcome {
    let response = net_stats(connection).await?;
    out.write_all(render(&response).as_bytes())
        .map_err(anyhow::Error::from)?;
    Ok(())
}

/// `setstreamthroughput MIB_PER_SEC`: sets the throttle, printing nothing (as nodetool).
pub async fn set_throughput(connection: &Connection, args: &StreamThroughputArgs) -> Outcome {
    connection
        .topology()
        .set_stream_throughput(pb::SetStreamThroughputRequest {
            mib_per_sec: args.mib_per_second,
        })
        .await?;
    Ok(())
}

/// `getstreamthroughput`: prints `Current stream throughput: 24 MiB/s`.
pub async fn get_throughput(connection: &Connection, out: &mut impl Write) -> Outcome {
    let response = net_stats(connection).await?;
    writeln!(
        out,
        "Current stream throughput: {}",
        stream_throttle(response.stream_throughput_mib_per_sec)
    )
    .map_err(anyhow::Error::from)?;
    Ok(())
}

async fn net_stats(connection: &Connection) -> Result<pb::NetStatsResponse, tonic::Status> {
    Ok(connection
        .topology()
        .net_stats(pb::NetStatsRequest {})
        .await?
        .into_inner())
}

/// The `netstats` text. The node reports one progress entry per stream and
/// keyspace; entries of the same stream (operation, direction and peer) are
/// shown as one block, in the order the node lists them.
fn render(response: &pb::NetStatsResponse) -> String {
    let mut text = format!(
        "Mode: {}\nStream throughput: {}\n",
        response.mode,
        stream_throttle(response.stream_throughput_mib_per_sec)
    );
    if response.streams.is_empty() {
        text += "Not sending or receiving any streams.\n";
        return text;
    }
    let mut blocks: Vec<(String, Vec<&pb::StreamProgress>)> = Vec::new();
    for stream in &response.streams {
        let header = format!(
            "{} {} {} ({})",
            capitalized(&stream.operation),
            stream.direction,
            stream.peer_address,
            stream.peer_host_id
        );
        match blocks.iter_mut().find(|(h, _)| *h == header) {
            Some((_, entries)) => entries.push(stream),
            None => blocks.push((header, vec![stream])),
        }
    }
    for (header, entries) in blocks {
        text += &header;
        text += "\n";
        for stream in entries {
            text += &format!("    {}\n", progress_line(stream));
        }
    }
    text
}

/// `keyspace ks1: ranges 3/8, 1.50 MiB/4.00 MiB (37.5%), 512.00 KiB/s, ETA 8s, running`.
fn progress_line(stream: &pb::StreamProgress) -> String {
    format!(
        "keyspace {}: ranges {}/{}, {}/{} ({}), {}/s, ETA {}, {}",
        stream.keyspace,
        stream.ranges_done,
        stream.ranges_total,
        human_bytes(stream.bytes_done),
        human_bytes(stream.bytes_total),
        percent(done_fraction(stream)),
        // `as` saturates: a NaN or negative rate shows as 0.
        human_bytes(stream.bytes_per_second as u64),
        stream
            .eta_seconds
            .map_or_else(|| "-".to_string(), human_duration),
        stream.state
    )
}

/// How much of a stream is done, in [0, 1]. While it runs, the byte total is
/// the plan's estimate, which the bytes sent may overtake: capped at 1. With
/// no byte total the ranges tell.
fn done_fraction(stream: &pb::StreamProgress) -> f64 {
    if stream.bytes_total > 0 {
        (stream.bytes_done as f64 / stream.bytes_total as f64).min(1.0)
    } else if stream.ranges_total > 0 {
        f64::from(stream.ranges_done) / f64::from(stream.ranges_total)
    } else {
        1.0
    }
}

/// `decommission` → `Decommission`.
fn capitalized(word: &str) -> String {
    let mut chars = word.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PEER: &str = "292a6c7f-2063-484c-b54d-9015216f1750";

    fn sending(keyspace: &str) -> pb::StreamProgress {
        pb::StreamProgress {
            operation: "decommission".into(),
            direction: "sending".into(),
            peer_host_id: PEER.into(),
            peer_address: "127.0.0.12:7100".into(),
            keyspace: keyspace.into(),
            ranges_done: 3,
            ranges_total: 8,
            bytes_done: 3 << 19,
            bytes_total: 4 << 20,
            bytes_per_second: 524_288.0,
            eta_seconds: Some(5.0),
            state: "running".into(),
        }
    }

    #[test]
    fn an_idle_node_says_it_streams_nothing() {
        let text = render(&pb::NetStatsResponse {
            mode: "NORMAL".into(),
            streams: vec![],
            stream_throughput_mib_per_sec: 24,
        });
        assert_eq!(
            text,
            "Mode: NORMAL\nStream throughput: 24 MiB/s\nNot sending or receiving any streams.\n"
        );
    }

    #[test]
    fn keyspaces_of_one_stream_share_its_block() {
        let done = pb::StreamProgress {
            ranges_done: 8,
            bytes_done: 5 << 20,
            bytes_per_second: 0.0,
            eta_seconds: None,
            state: "done".into(),
            ..sending("ks2")
        };
        let other_peer = pb::StreamProgress {
            peer_address: "127.0.0.13:7100".into(),
            peer_host_id: "00000000-0000-0000-0000-000000000003".into(),
            state: "failed: connection reset".into(),
            ..sending("ks1")
        };
        let text = render(&pb::NetStatsResponse {
            mode: "LEAVING".into(),
            streams: vec![sending("ks1"), other_peer, done],
            stream_throughput_mib_per_sec: 0,
        });
        assert_eq!(
            text,
            "Mode: LEAVING\n\
             Stream throughput: unthrottled\n\
             Decommission sending 127.0.0.12:7100 (292a6c7f-2063-484c-b54d-9015216f1750)\n    \
             keyspace ks1: ranges 3/8, 1.50 MiB/4.00 MiB (37.5%), 512.00 KiB/s, ETA 5s, running\n    \
             keyspace ks2: ranges 8/8, 5.00 MiB/4.00 MiB (100.0%), 0 bytes/s, ETA -, done\n\
             Decommission sending 127.0.0.13:7100 (00000000-0000-0000-0000-000000000003)\n    \
             keyspace ks1: ranges 3/8, 1.50 MiB/4.00 MiB (37.5%), 512.00 KiB/s, ETA 5s, failed: connection reset\n"
        );
    }

    #[test]
    fn without_a_byte_total_progress_follows_the_ranges() {
        let stream = pb::StreamProgress {
            bytes_total: 0,
            ranges_done: 1,
            ranges_total: 4,
            ..sending("ks1")
        };
        assert_eq!(done_fraction(&stream), 0.25);
        let empty = pb::StreamProgress {
            bytes_total: 0,
            ranges_total: 0,
            ..sending("ks1")
        };
        assert_eq!(done_fraction(&empty), 1.0);
    }
}
