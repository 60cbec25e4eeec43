//! `ringstore status [KEYSPACE]`: nodes per data center, as `nodetool status`.

use std::collections::BTreeMap;
use std::io::Write;

use ringstore_proto::v1 as pb;

use crate::cli::StatusArgs;
use crate::client::Connection;
use crate::display::{clock_offset, human_bytes, percent};
use crate::failure::Outcome;

/// Prints the status table of every data center.
pub async fn run(connection: &Connection, args: &StatusArgs, out: &mut impl Write) -> Outcome {
    let response = connection
        .admin()
        .status(pb::StatusRequest {
            keyspace: args.keyspace.clone().unwrap_or_default(),
        })
        .await?
        .into_inner();
    let text = render(&response);
    out.write_all(text.as_bytes())
        .map_err(anyhow::Error::from)?;
    Ok(())
}

/// The two state letters: `U`/`D` and `N`/`J`/`L` (the web console shows
/// the same, from the same function).
pub fn letters(node: &pb::NodeStatus) -> String {
    ringstore_node::console::status_letters(node.up, &node.state)
}

/// The width of the address column: the longest address, at least "Address".
pub fn address_width(nodes: &[pb::NodeStatus]) -> usize {
    nodes
        .iter()
        .map(|n| n.client_address.len())
        .max()
        .unwrap_or(0)
        .max("Address".len())
}

/// The nodes grouped by data center, in name order.
pub fn by_datacenter(nodes: &[pb::NodeStatus]) -> BTreeMap<&str, Vec<&pb::NodeStatus>> {
    let mut groups: BTreeMap<&str, Vec<&pb::NodeStatus>> = BTreeMap::new();
    for node in nodes {
        groups
            .entry(node.datacenter.as_str())
            .or_default()
            .push(node);
    }
    groups
}

fn render(response: &pb::StatusResponse) -> String {
    let mut text = String::new();
    let owns = if response.effective {
        "Owns (effective)"
    } else {
        "Owns"
    };
    let width = address_width(&response.nodes);
    let rack_width = response
        .nodes
        .iter()
        .map(|n| n.rack.len())
        .max()
        .unwrap_or(0)
        .max("Rack".len());
    for (dc, nodes) in by_datacenter(&response.nodes) {
        let title = format!("Datacenter: {dc}");
        text += &format!("{title}\n{}\n", "=".repeat(title.len()));
        text += "Status=Up/Down\n|/ State=Normal/Leaving/Joining/Moving\n";
        text += &format!(
            "{:<2}  {:<width$}  {:<10}  {:<6}  {:<16}  {:<36}  {:<rack_width$}  {}\n",
            "--", "Address", "Load", "Tokens", owns, "Host ID", "Rack", "Clock"
        );
        for node in nodes {
            text += &format!(
                "{}  {:<width$}  {:<10}  {:<6}  {:<16}  {:<36}  {:<rack_width$}  {}\n",
                letters(node),
                node.client_address,
                human_bytes(node.load_bytes),
                node.token_count,
                percent(node.ownership),
                node.host_id,
                node.rack,
                clock_offset(node.clock_offset_micros, node.clock_uncertainty_micros)
            );
        }
        text += "\n";
    }
    text +=
        "Clock: each node's clock minus this node's, as gossip estimates it (? = not measured).\n";
    if !response.effective {
        text += "Note: Owns is primary ownership; give a keyspace to see effective ownership (with replicas).\n";
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_start_with_the_state_letters_and_the_address() {
        let node = pb::NodeStatus {
            host_id: "292a6c7f-2063-484c-b54d-9015216f1750".into(),
            client_address: "127.0.0.11:7100".into(),
            datacenter: "dc1".into(),
            rack: "rack1".into(),
            up: true,
            state: "NORMAL".into(),
            load_bytes: 404_451,
            token_count: 16,
            ownership: 0.334,
            ..Default::default()
        };
        let joining = pb::NodeStatus {
            client_address: "127.0.0.12:7100".into(),
            up: false,
            state: "JOINING".into(),
            ..node.clone()
        };
        let text = render(&pb::StatusResponse {
            nodes: vec![node, joining],
            effective: true,
            ..Default::default()
        });
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "Datacenter: dc1");
        assert_eq!(lines[1], "===============");
        assert!(
            lines[4]
                .starts_with("--  Address          Load        Tokens  Owns (effective)  Host ID"),
            "{}",
            lines[4]
        );
        assert!(
            lines[5]
                .starts_with("UN  127.0.0.11:7100  394.97 KiB  16      33.4%             292a6c7f"),
            "{}",
            lines[5]
        );
        assert!(lines[6].starts_with("DJ  127.0.0.12:7100"));
        assert!(lines[4].ends_with("  Rack   Clock"), "{}", lines[4]);
        assert!(lines[5].ends_with("  rack1  ?"), "{}", lines[5]);
    }
}
