//! `ringstore plan join|decommission|removenode|alter`: what a topology change would
//! stream and how ownership would shift, computed by the node from its ring
//! and its data sizes. Nothing changes.

use std::collections::BTreeMap;
use std::io::Write;

use ringstore_proto::v1 as pb;

use crate::cli::PlanCommand;
use crate::client::Connection;
use crate::display::{human_bytes, human_duration, percent, stream_throttle};
use crate::failure::Outcome;

/// The moving ranges listed before the rest is only counted: with vnodes a
/// plan can move thousands, and the totals below the table sum all of them.
const MAX_RANGE_ROWS: usize = 50;

/// Shown for the node that a `plan join` imagines: it has no host id or address yet.
const NEW_NODE: &str = "(new node)";

/// Asks the node for the plan and prints it.
pub async fn run(connection: &Connection, command: &PlanCommand, out: &mut impl Write) -> Outcome {
    use pb::plan_request::Change;
    let change = match command {
        PlanCommand::Join {
            dc,
            rack,
            num_tokens,
        } => Change::Join(pb::PlanJoin {
            datacenter: dc.clone(),
            rack: rack.clone(),
            num_tokens: num_tokens.map_or(0, |n| n.get()),
        }),
        PlanCommand::Decommission(node) => Change::Decommission(node.host_id.to_string()),
        PlanCommand::Removenode(node) => Change::Removenode(node.host_id.to_string()),
        PlanCommand::Alter {
            keyspace,
            replication,
        } => Change::Alter(pb::PlanAlter {
            keyspace: keyspace.clone(),
            replication: Some(crate::commands::keyspace::parse_replication(replication)?),
        }),
    };
    let response = connection
        .topology()
        .plan(pb::PlanRequest {
            change: Some(change),
        })
        .await?
        .into_inner();
    out.write_all(render(&response).as_bytes())
        .map_err(anyhow::Error::from)?;
    Ok(())
}

/// The plan: its description, the moving ranges, the totals and the ownership
/// before and after, per keyspace.
fn render(plan: &pb::PlanResponse) -> String {
    let mut text = format!("{}\n\n", plan.description);
    text += &ranges_table(&plan.ranges);
    text += "\n";
    let time = if plan.stream_throughput_mib_per_sec == 0 && plan.estimated_seconds <= 0.0 {
        "-".to_string()
    } else {
        human_duration(plan.estimated_seconds)
    };
    let throttle = match plan.stream_throughput_mib_per_sec {
        0 => "(no throttle)".to_string(),
        mib => format!("at {}", stream_throttle(mib)),
    };
    text += &format!(
        "Estimated data to stream: {}\n\
         Estimated time: {time} {throttle}\n\
         Replica data moved: {}\n\
         Primary ranges moved: {}\n",
        human_bytes(plan.estimated_bytes),
        percent(plan.replica_fraction_moved),
        percent(plan.primary_fraction_moved)
    );
    text += &ownership_tables(&plan.ownership);
    text
}

/// The first [`MAX_RANGE_ROWS`] moving ranges, then how many more.
fn ranges_table(ranges: &[pb::PlannedRange]) -> String {
    if ranges.is_empty() {
        return "No ranges move.\n".to_string();
    }
    let shown = &ranges[..ranges.len().min(MAX_RANGE_ROWS)];
    let rows: Vec<[String; 4]> = shown
        .iter()
        .map(|r| {
            [
                r.keyspace.clone(),
                format!("({}, {}]", r.start_token, r.end_token),
                format!("{} -> {}", host_or_new(&r.source), host_or_new(&r.target)),
                human_bytes(r.estimated_bytes),
            ]
        })
        .collect();
    let mut text = table(["Keyspace", "Range", "Source -> Target", "Size"], &rows);
    if ranges.len() > shown.len() {
        text += &format!("... and {} more ranges\n", ranges.len() - shown.len());
    }
    text
}

/// One table per keyspace, in name order; its nodes in the order the node gave.
fn ownership_tables(ownership: &[pb::PlannedOwnership]) -> String {
    let mut by_keyspace: BTreeMap<&str, Vec<&pb::PlannedOwnership>> = BTreeMap::new();
    for entry in ownership {
        by_keyspace
            .entry(entry.keyspace.as_str())
            .or_default()
            .push(entry);
    }
    let mut text = String::new();
    for (keyspace, entries) in by_keyspace {
        let rows: Vec<[String; 4]> = entries
            .iter()
            .map(|o| {
                [
                    if o.address.is_empty() {
                        "-"
                    } else {
                        &o.address
                    }
                    .to_string(),
                    host_or_new(&o.host_id).to_string(),
                    percent(o.before),
                    percent(o.after),
                ]
            })
            .collect();
        text += &format!("\nOwnership (effective) of keyspace {keyspace}:\n");
        text += &table(["Address", "Host ID", "Before", "After"], &rows);
    }
    text
}

/// Columns padded to their widest cell, two spaces apart; the last unpadded.
fn table<const N: usize>(header: [&str; N], rows: &[[String; N]]) -> String {
    let mut widths = header.map(str::len);
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; N]| -> String {
        let mut line = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == N {
                line += cell;
            } else {
                line += &format!("{cell:<width$}  ", width = widths[i]);
            }
        }
        line + "\n"
    };
    let mut text = line(header);
    for row in rows {
        text += &line(row.each_ref().map(String::as_str));
    }
    text
}

fn host_or_new(host_id: &str) -> &str {
    if host_id.is_empty() {
        NEW_NODE
    } else {
        host_id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "00000000-0000-0000-0000-00000000000a";
    const B: &str = "00000000-0000-0000-0000-00000000000b";

    fn range(keyspace: &str, start: i64, end: i64) -> pb::PlannedRange {
        pb::PlannedRange {
            keyspace: keyspace.into(),
            start_token: start,
            end_token: end,
            source: A.into(),
            target: B.into(),
            estimated_bytes: 1 << 20,
        }
    }

    fn plan() -> pb::PlanResponse {
        pb::PlanResponse {
            description: format!("decommission {A} (127.0.0.11:7100)"),
            ranges: vec![range("ks1", -100, 0), range("kv", 0, 5000)],
            estimated_bytes: 48 << 20,
            estimated_seconds: 2.0,
            stream_throughput_mib_per_sec: 24,
            ownership: vec![
                pb::PlannedOwnership {
                    host_id: A.into(),
                    address: "127.0.0.11:7100".into(),
                    keyspace: "ks1".into(),
                    before: 0.5,
                    after: 0.0,
                },
                pb::PlannedOwnership {
                    host_id: B.into(),
                    address: "127.0.0.12:7100".into(),
                    keyspace: "ks1".into(),
                    before: 0.5,
                    after: 1.0,
                },
            ],
            replica_fraction_moved: 0.5,
            primary_fraction_moved: 0.25,
        }
    }

    #[test]
    fn a_plan_lists_ranges_then_totals_then_ownership() {
        let text = render(&plan());
        let expected = format!(
            "decommission {A} (127.0.0.11:7100)\n\
             \n\
             Keyspace  Range      Source -> Target                                                              Size\n\
             ks1       (-100, 0]  {A} -> {B}  1.00 MiB\n\
             kv        (0, 5000]  {A} -> {B}  1.00 MiB\n\
             \n\
             Estimated data to stream: 48.00 MiB\n\
             Estimated time: 2s at 24 MiB/s\n\
             Replica data moved: 50.0%\n\
             Primary ranges moved: 25.0%\n\
             \n\
             Ownership (effective) of keyspace ks1:\n\
             Address          Host ID                               Before  After\n\
             127.0.0.11:7100  {A}  50.0%   0.0%\n\
             127.0.0.12:7100  {B}  50.0%   100.0%\n"
        );
        assert_eq!(text, expected, "\n{text}");
    }

    #[test]
    fn ranges_past_fifty_are_counted_not_listed() {
        let plan = pb::PlanResponse {
            ranges: (0..57).map(|i| range("ks1", i, i + 1)).collect(),
            ..plan()
        };
        let text = render(&plan);
        assert_eq!(text.matches(&format!("{A} -> {B}")).count(), MAX_RANGE_ROWS);
        assert!(text.contains("(49, 50]"));
        assert!(!text.contains("(50, 51]"));
        assert!(text.contains("\n... and 7 more ranges\n"), "{text}");
    }

    #[test]
    fn an_unthrottled_plan_says_so_and_a_joining_node_reads_new() {
        let plan = pb::PlanResponse {
            description: "join dc1/rack2 with 16 tokens".into(),
            ranges: vec![pb::PlannedRange {
                target: String::new(),
                ..range("ks1", 0, 10)
            }],
            estimated_seconds: 0.0,
            stream_throughput_mib_per_sec: 0,
            ownership: vec![pb::PlannedOwnership {
                keyspace: "ks1".into(),
                after: 0.25,
                ..Default::default()
            }],
            ..plan()
        };
        let text = render(&plan);
        assert!(text.contains(&format!("{A} -> (new node)")), "{text}");
        assert!(text.contains("Estimated time: - (no throttle)\n"), "{text}");
        assert!(
            text.contains("\n-        (new node)  0.0%    25.0%\n"),
            "{text}"
        );
    }

    #[test]
    fn a_plan_moving_nothing_says_so() {
        let plan = pb::PlanResponse {
            ranges: vec![],
            ..plan()
        };
        assert!(render(&plan).contains("\n\nNo ranges move.\n\n"));
    }
}
