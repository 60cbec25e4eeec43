//! `ringstore tpstats`, `proxyhistograms` and `tablestats`: the node's work
//! per stage and its latencies, in nodetool's layouts.

use std::io::Write;

use ringstore_proto::v1 as pb;

use crate::cli::TablestatsArgs;
use crate::client::Connection;
use crate::display::human_bytes;
use crate::failure::Outcome;

/// Prints work per stage and drops, as `nodetool tpstats`.
pub async fn tpstats(connection: &Connection, out: &mut impl Write) -> Outcome {
    let stats = connection
        .admin()
        .tp_stats(pb::TpStatsRequest {})
        .await?
        .into_inner();
    write!(out, "{}", tpstats_text(&stats)).map_err(anyhow::Error::from)?;
    Ok(())
}

fn tpstats_text(stats: &pb::TpStatsResponse) -> String {
    let mut text = format!(
        "{:<30}{:>10}{:>10}{:>15}{:>10}{:>18}\n",
        "Pool Name", "Active", "Pending", "Completed", "Blocked", "All time blocked"
    );
    for s in &stats.stages {
        text += &format!(
            "{:<30}{:>10}{:>10}{:>15}{:>10}{:>18}\n",
            s.name, s.active, s.pending, s.completed, 0, 0
        );
    }
    text += &format!("\n{:<20}{:>10}\n", "Message type", "Dropped");
    for d in &stats.dropped {
        text += &format!("{:<20}{:>10}\n", d.message_type, d.dropped);
    }
    text
}

/// Prints the coordinator's latency percentiles, as `nodetool proxyhistograms`.
pub async fn proxyhistograms(connection: &Connection, out: &mut impl Write) -> Outcome {
    let histograms = connection
        .admin()
        .proxy_histograms(pb::ProxyHistogramsRequest {})
        .await?
        .into_inner();
    let read = histograms.read.unwrap_or_default();
    let write = histograms.write.unwrap_or_default();
    let mut text = String::from("proxy histograms\n");
    text += &format!(
        "{:<10}{:>19}{:>19}\n{:<10}{:>19}{:>19}\n",
        "Percentile", "Read Latency", "Write Latency", "", "(micros)", "(micros)"
    );
    let rows = [
        ("50%", read.p50_micros, write.p50_micros),
        ("75%", read.p75_micros, write.p75_micros),
        ("95%", read.p95_micros, write.p95_micros),
        ("98%", read.p98_micros, write.p98_micros),
        ("99%", read.p99_micros, write.p99_micros),
        ("Min", read.min_micros, write.min_micros),
        ("Max", read.max_micros, write.max_micros),
    ];
    for (name, read, write) in rows {
        text += &format!("{name:<10}{read:>19.2}{write:>19.2}\n");
    }
    write!(out, "{text}").map_err(anyhow::Error::from)?;
    Ok(())
}

/// Prints each keyspace's numbers on this node, as `nodetool tablestats`
/// (a ringstore keyspace is one table).
pub async fn tablestats(
    connection: &Connection,
    args: &TablestatsArgs,
    out: &mut impl Write,
) -> Outcome {
    let stats = connection
        .admin()
        .table_stats(pb::TableStatsRequest {
            keyspace: args.keyspace.clone().unwrap_or_default(),
        })
        .await?
        .into_inner();
    let mut text = format!("Total number of tables: {}\n", stats.keyspaces.len());
    text += "----------------\n";
    for k in &stats.keyspaces {
        let reads = k.reads.unwrap_or_default();
        let writes = k.writes.unwrap_or_default();
        text += &format!("Keyspace : {}\n", k.name);
        text += &format!("\tRead Count: {}\n", reads.count);
        text += &format!("\tRead Latency: {} ms\n", mean_ms(&reads));
        text += &format!("\tWrite Count: {}\n", writes.count);
        text += &format!("\tWrite Latency: {} ms\n", mean_ms(&writes));
        text += "\tPending Flushes: 0\n";
        text += &format!("\t\tTable: {}\n", k.name);
        text += &format!(
            "\t\tSpace used (live): {} ({})\n",
            k.bytes,
            human_bytes(k.bytes)
        );
        text += &format!("\t\tNumber of partitions: {}\n", k.keys);
        text += &format!("\t\tTombstones: {}\n", k.tombstones);
        text += &format!("\t\tLocal read count: {}\n", reads.count);
        text += &format!("\t\tLocal read latency: {} ms\n", mean_ms(&reads));
        text += &format!("\t\tLocal write count: {}\n", writes.count);
        text += &format!("\t\tLocal write latency: {} ms\n", mean_ms(&writes));
        text += "\n----------------\n";
    }
    write!(out, "{text}").map_err(anyhow::Error::from)?;
    Ok(())
}

/// A mean latency in milliseconds with three decimals, `NaN` without
/// samples (as nodetool prints it).
fn mean_ms(p: &pb::LatencyPercentiles) -> String {
    if p.count == 0 {
        return "NaN".into();
    }
    format!("{:.3}", p.mean_micros / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tpstats_columns_line_up_as_nodetools() {
        let text = tpstats_text(&pb::TpStatsResponse {
            stages: vec![pb::StageStats {
                name: "ClientRequest".into(),
                active: 1,
                pending: 0,
                completed: 250,
            }],
            dropped: vec![pb::DroppedMessages {
                message_type: "HINT".into(),
                dropped: 3,
            }],
        });
        assert_eq!(
            text,
            "Pool Name                         Active   Pending      Completed   Blocked  All time blocked\n\
             ClientRequest                          1         0            250         0                 0\n\
             \n\
             Message type           Dropped\n\
             HINT                         3\n"
        );
    }
}
