//! `ringstore decommission`, `removenode` and `cleanup`: the topology changes
//! an operator starts on one node. Each call blocks until the node is done and
//! then prints what it did.

use std::io::Write;

use ringstore_proto::v1 as pb;

use crate::cli::{CleanupArgs, HostIdArg};
use crate::client::Connection;
use crate::display::human_bytes;
use crate::failure::Outcome;

/// `decommission`: streams the node's data away and prints the summary.
pub async fn decommission(connection: &Connection, out: &mut impl Write) -> Outcome {
    let response = connection
        .topology()
        .decommission(pb::DecommissionRequest {})
        .await?
        .into_inner();
    writeln!(out, "{}", decommission_summary(&response)).map_err(anyhow::Error::from)?;
    Ok(())
}

/// `removenode HOST_ID`: restores the dead node's replicas and prints the summary.
pub async fn removenode(
    connection: &Connection,
    args: &HostIdArg,
    out: &mut impl Write,
) -> Outcome {
    let response = connection
        .topology()
        .remove_node(pb::RemoveNodeRequest {
            host_id: args.host_id.to_string(),
        })
        .await?
        .into_inner();
    writeln!(
        out,
        "{}",
        removenode_summary(&args.host_id.to_string(), &response)
    )
    .map_err(anyhow::Error::from)?;
    Ok(())
}

/// `cleanup [KEYSPACE]`: prints one line per keyspace cleaned.
pub async fn cleanup(connection: &Connection, args: &CleanupArgs, out: &mut impl Write) -> Outcome {
    let response = connection
        .topology()
        .cleanup(pb::CleanupRequest {
            keyspace: args.keyspace.clone().unwrap_or_default(),
        })
        .await?
        .into_inner();
    out.write_all(render_cleanup(&response).as_bytes())
        .map_err(anyhow::Error::from)?;
    Ok(())
}

/// `decommissioned: 48 ranges, 1.20 GiB streamed, 12 hints handed off`.
fn decommission_summary(response: &pb::DecommissionResponse) -> String {
    format!(
        "decommissioned: {} ranges, {} streamed, {} hints handed off",
        response.ranges_streamed,
        human_bytes(response.bytes_streamed),
        response.hints_handed_off
    )
}

/// `removed node <host id>: 48 ranges, 1.20 GiB streamed`.
fn removenode_summary(host_id: &str, response: &pb::RemoveNodeResponse) -> String {
    format!(
        "removed node {host_id}: {} ranges, {} streamed",
        response.ranges_streamed,
        human_bytes(response.bytes_streamed)
    )
}

/// `ks1: removed 120 keys (11.72 KiB), kept 880 keys`, a line per keyspace.
fn render_cleanup(response: &pb::CleanupResponse) -> String {
    response
        .keyspaces
        .iter()
        .map(|k| {
            format!(
                "{}: removed {} keys ({}), kept {} keys\n",
                k.keyspace,
                k.keys_removed,
                human_bytes(k.bytes_removed),
                k.keys_kept
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_count_ranges_and_show_sizes_like_status() {
        let decommissioned = decommission_summary(&pb::DecommissionResponse {
            ranges_streamed: 48,
            bytes_streamed: 404_451,
            hints_handed_off: 12,
        });
        assert_eq!(
            decommissioned,
            "decommissioned: 48 ranges, 394.97 KiB streamed, 12 hints handed off"
        );
        let removed = removenode_summary(
            "292a6c7f-2063-484c-b54d-9015216f1750",
            &pb::RemoveNodeResponse {
                ranges_streamed: 3,
                bytes_streamed: 3 << 30,
            },
        );
        assert_eq!(
            removed,
            "removed node 292a6c7f-2063-484c-b54d-9015216f1750: 3 ranges, 3.00 GiB streamed"
        );
    }

    #[test]
    fn cleanup_prints_a_line_per_keyspace() {
        let text = render_cleanup(&pb::CleanupResponse {
            keyspaces: vec![
                pb::CleanupKeyspace {
                    keyspace: "ks1".into(),
                    keys_removed: 120,
                    bytes_removed: 12_000,
                    keys_kept: 880,
                },
                pb::CleanupKeyspace {
                    keyspace: "ks2".into(),
                    keys_kept: 7,
                    ..Default::default()
                },
            ],
        });
        assert_eq!(
            text,
            "ks1: removed 120 keys (11.72 KiB), kept 880 keys\n\
             ks2: removed 0 keys (0 bytes), kept 7 keys\n"
        );
    }
}
