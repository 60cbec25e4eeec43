//! `ringstore toppartitions`: the keys a node served most over a while, in
//! `nodetool toppartitions`' layout.

use std::io::Write;

use ringstore_proto::v1 as pb;

use crate::cli::{SampledOperation, TopPartitionsArgs};
use crate::client::Connection;
use crate::failure::Outcome;

/// Asks the node to sample for `--duration` and prints what it saw.
pub async fn run(
    connection: &Connection,
    args: &TopPartitionsArgs,
    out: &mut impl Write,
) -> Outcome {
    let duration_ms = u64::try_from(args.duration.as_millis()).unwrap_or(u64::MAX);
    let operations = args
        .samplers
        .iter()
        .map(|o| match o {
            SampledOperation::Writes => pb::SampledOperation::Writes.into(),
            SampledOperation::Reads => pb::SampledOperation::Reads.into(),
        })
        .collect();
    let answer = connection
        .admin()
        .top_partitions(pb::TopPartitionsRequest {
            keyspace: args.keyspace.clone(),
            duration_ms,
            capacity: args.capacity,
            top: args.top,
            operations,
        })
        .await?
        .into_inner();
    write!(out, "{}", report_text(&answer)).map_err(anyhow::Error::from)?;
    Ok(())
}

/// One block per sampled operation: what was sampled, then the keys.
fn report_text(answer: &pb::TopPartitionsResponse) -> String {
    let mut text = String::new();
    for sample in &answer.samples {
        let name = match pb::SampledOperation::try_from(sample.operation) {
            Ok(pb::SampledOperation::Reads) => "READS",
            Ok(pb::SampledOperation::Writes) => "WRITES",
            _ => "UNKNOWN",
        };
        text += &format!("{name} Sampler:\n");
        text += &format!(
            "  Sampled: {} operations ({} capacity)\n",
            sample.sampled, sample.capacity
        );
        text += &format!("  Top {} partitions:\n", sample.partitions.len());
        if sample.partitions.is_empty() {
            text += "\tNothing recorded during sampling period...\n";
            continue;
        }
        let keys: Vec<String> = sample.partitions.iter().map(|p| key_text(&p.key)).collect();
        let width = keys
            .iter()
            .map(|k| k.chars().count())
            .max()
            .unwrap_or(0)
            .max(9);
        text += &format!("\t{:<width$}{:>12}{:>12}\n", "Partition", "Count", "+/-");
        for (key, partition) in keys.iter().zip(&sample.partitions) {
            text += &format!(
                "\t{key:<width$}{:>12}{:>12}\n",
                partition.count, partition.error
            );
        }
    }
    text
}

/// A key as text when it is printable UTF-8, else `0x` and its hex.
fn key_text(key: &[u8]) -> String {
    match std::str::from_utf8(key) {
        Ok(text) if !text.chars().any(char::is_control) => text.to_string(),
        _ => format!("0x{}", hex::encode(key)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_lists_each_sampler_in_nodetools_layout() {
        let answer = pb::TopPartitionsResponse {
            samples: vec![
                pb::PartitionSample {
                    operation: pb::SampledOperation::Writes.into(),
                    sampled: 12,
                    capacity: 256,
                    partitions: vec![
                        pb::HotPartition {
                            key: b"hot".to_vec(),
                            count: 9,
                            error: 0,
                        },
                        pb::HotPartition {
                            key: vec![0, 255],
                            count: 3,
                            error: 1,
                        },
                    ],
                },
                pb::PartitionSample {
                    operation: pb::SampledOperation::Reads.into(),
                    sampled: 0,
                    capacity: 256,
                    partitions: vec![],
                },
            ],
        };
        let expected = "WRITES Sampler:\n  Sampled: 12 operations (256 capacity)\n  \
                        Top 2 partitions:\n\tPartition       Count         +/-\n\
                        \thot                 9           0\n\
                        \t0x00ff              3           1\n\
                        READS Sampler:\n  Sampled: 0 operations (256 capacity)\n  \
                        Top 0 partitions:\n\tNothing recorded during sampling period...\n";
        assert_eq!(report_text(&answer), expected);
    }
}
