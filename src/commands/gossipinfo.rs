//! `ringstore gossipinfo`: what gossip says of every member, in the layout
//! of `nodetool gossipinfo` (one block per member, `NAME:value` lines).

use std::io::Write;

use ringstore_proto::v1 as pb;

use crate::client::Connection;
use crate::display::{clock_offset, human_bytes};
use crate::failure::Outcome;

/// Prints every member the node knows, by gossip address.
pub async fn run(connection: &Connection, out: &mut impl Write) -> Outcome {
    let mut endpoints = connection
        .admin()
        .gossip_info(pb::GossipInfoRequest {})
        .await?
        .into_inner()
        .endpoints;
    endpoints.sort_by(|a, b| a.gossip_address.cmp(&b.gossip_address));
    for endpoint in &endpoints {
        write_endpoint(endpoint, out).map_err(anyhow::Error::from)?;
    }
    Ok(())
}

fn write_endpoint(e: &pb::GossipEndpoint, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(out, "/{}", e.gossip_address)?;
    writeln!(out, "  generation:{}", e.generation)?;
    writeln!(out, "  heartbeat:{}", e.version)?;
    writeln!(out, "  STATUS:{}", e.state)?;
    writeln!(out, "  LIVENESS:{}", if e.up { "UP" } else { "DOWN" })?;
    writeln!(
        out,
        "  LOAD:{} ({})",
        e.load_bytes,
        human_bytes(e.load_bytes)
    )?;
    writeln!(out, "  SCHEMA:{}", e.schema_version)?;
    writeln!(out, "  DC:{}", e.datacenter)?;
    writeln!(out, "  RACK:{}", e.rack)?;
    writeln!(out, "  RELEASE_VERSION:{}", e.software_version)?;
    writeln!(out, "  NATIVE_ADDRESS_AND_PORT:{}", e.client_address)?;
    writeln!(out, "  INTERNODE_ADDRESS_AND_PORT:{}", e.internode_address)?;
    writeln!(out, "  HOST_ID:{}", e.host_id)?;
    writeln!(
        out,
        "  CLOCK_OFFSET:{}",
        clock_offset(e.clock_offset_micros, e.clock_uncertainty_micros)
    )?;
    writeln!(out, "  TOKENS:{} <hidden>", e.token_count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_prints_as_a_nodetool_gossipinfo_block() {
        let endpoint = pb::GossipEndpoint {
            gossip_address: "127.0.0.1:7000".into(),
            host_id: "dd85529c-2d66-4f02-a2b6-a45a549ae13e".into(),
            generation: 1_796_083_522,
            version: 7,
            state: "NORMAL".into(),
            up: true,
            load_bytes: 2048,
            datacenter: "dc1".into(),
            token_count: 16,
            ..pb::GossipEndpoint::default()
        };
        let mut out = Vec::new();
        write_endpoint(&endpoint, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with("/127.0.0.1:7000\n  generation:1796083522\n  heartbeat:7\n  STATUS:NORMAL\n  LIVENESS:UP\n"),
            "{text}"
        );
        assert!(
            text.contains("  DC:dc1\n")
                && text.contains("  CLOCK_OFFSET:?\n")
                && text.ends_with("  TOKENS:16 <hidden>\n"),
            "{text}"
        );
    }
}
