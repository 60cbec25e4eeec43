//! `ringstore ring`: every token with its owner, per data center, as `nodetool ring`.

use std::io::Write;

use ringstore_proto::v1 as pb;

use crate::client::Connection;
use crate::commands::status::{address_width, by_datacenter};
use crate::display::human_bytes;
use crate::failure::Outcome;

/// Prints one row per token.
pub async fn run(connection: &Connection, out: &mut impl Write) -> Outcome {
    let response = connection
        .admin()
        .ring(pb::RingRequest {})
        .await?
        .into_inner();
    let mut text = String::new();
    let width = address_width(&response.nodes);
    for (dc, nodes) in by_datacenter(&response.nodes) {
        let mut rows: Vec<(i64, &pb::NodeStatus)> = nodes
            .iter()
            .flat_map(|n| n.tokens.iter().map(move |&t| (t, *n)))
            .collect();
        rows.sort_by_key(|(t, _)| *t);
        text += &format!("\nDatacenter: {dc}\n==========\n");
        text += &format!(
            "{:<width$}  {:<8}  {:<6}  {:<7}  {:<10}  {:<8}  {}\n",
            "Address", "Rack", "Status", "State", "Load", "Owns", "Token"
        );
        if let Some((last, _)) = rows.last() {
            text += &format!(
                "{:<width$}  {:>w2$}{last}\n",
                "",
                "",
                w2 = 8 + 2 + 6 + 2 + 7 + 2 + 10 + 2 + 8 + 2
            );
        }
        for (token, node) in rows {
            let owns = node.ownership / node.token_count.max(1) as f64;
            text += &format!(
                "{:<width$}  {:<8}  {:<6}  {:<7}  {:<10}  {:<8}  {}\n",
                node.client_address,
                node.rack,
                if node.up { "Up" } else { "Down" },
                title_case(&node.state),
                human_bytes(node.load_bytes),
                format!("{:.2}%", owns * 100.0),
                token
            );
        }
    }
    out.write_all(text.as_bytes())
        .map_err(anyhow::Error::from)?;
    Ok(())
}

fn title_case(state: &str) -> String {
    let lower = state.to_lowercase();
    let mut chars = lower.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}
