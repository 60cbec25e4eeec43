//! `ringstore getendpoints KEYSPACE KEY`: a key's replicas, one per line.

use std::io::Write;

use ringstore_proto::v1 as pb;

use crate::cli::KeyArgs;
use crate::client::Connection;
use crate::commands::data::key_bytes;
use crate::failure::Outcome;

/// Prints the replicas' client addresses in placement order.
pub async fn run(connection: &Connection, args: &KeyArgs, out: &mut impl Write) -> Outcome {
    let key = key_bytes(&args.key, args.hex)?;
    let response = connection
        .admin()
        .get_endpoints(pb::GetEndpointsRequest {
            keyspace: args.keyspace.clone(),
            key,
        })
        .await?
        .into_inner();
    let text: String = response
        .endpoints
        .iter()
        .map(|e| format!("{e}\n"))
        .collect();
    out.write_all(text.as_bytes())
        .map_err(anyhow::Error::from)?;
    Ok(())
}
