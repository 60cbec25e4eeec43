//! `ringstore describering KEYSPACE`: every range with its replicas, as `nodetool describering`.

use std::io::Write;

use ringstore_proto::v1 as pb;

use crate::cli::KeyspaceArg;
use crate::client::Connection;
use crate::failure::Outcome;

/// Prints one `TokenRange(...)` line per range.
pub async fn run(connection: &Connection, args: &KeyspaceArg, out: &mut impl Write) -> Outcome {
    let response = connection
        .admin()
        .describe_ring(pb::DescribeRingRequest {
            keyspace: args.keyspace.clone(),
        })
        .await?
        .into_inner();
    let mut text = format!("Schema Version:{}\nTokenRange: \n", response.schema_version);
    for range in &response.ranges {
        let details: Vec<String> = range
            .endpoint_details
            .iter()
            .map(|d| {
                format!(
                    "EndpointDetails(host:{}, datacenter:{}, rack:{})",
                    d.host, d.datacenter, d.rack
                )
            })
            .collect();
        text += &format!(
            "\tTokenRange(start_token:{}, end_token:{}, endpoints:[{}], rpc_endpoints:[{}], endpoint_details:[{}])\n",
            range.start_token,
            range.end_token,
            range.endpoints.join(", "),
            range.rpc_endpoints.join(", "),
            details.join(", ")
        );
    }
    out.write_all(text.as_bytes())
        .map_err(anyhow::Error::from)?;
    Ok(())
}
