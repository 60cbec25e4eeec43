//! `ringstore keyspace alter NAME --replication ...`: changes a keyspace's
//! replication and waits while the node moves its data (a bar of the bytes
//! the nodes have received for it), then prints what moved. With `--async`
//! it returns once the new placement is announced. If the connection drops,
//! the alter goes on in the node; asking again resumes or confirms it.

use std::io::{IsTerminal, Write};
use std::time::Duration;

use anyhow::anyhow;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use ringstore_proto::v1 as pb;

use crate::client::Connection;
use crate::commands::keyspace::{describe, parse_replication};
use crate::display::human_bytes;
use crate::failure::Outcome;

/// How often the bar asks every node for its streams.
const POLL_INTERVAL: Duration = Duration::from_millis(500);

/// Alters keyspace `name` to `replication` and reports it.
pub async fn run(
    connection: &Connection,
    name: &str,
    replication: &str,
    at_once: bool,
    out: &mut impl Write,
) -> Outcome {
    let request = pb::AlterKeyspaceRequest {
        name: name.to_string(),
        replication: Some(parse_replication(replication)?),
        return_at_once: at_once,
    };
    let text = if at_once {
        let response = connection
            .schema()
            .alter_keyspace(request)
            .await?
            .into_inner();
        let keyspace = response
            .keyspace
            .ok_or_else(|| anyhow!("the node answered without the keyspace"))?;
        match keyspace.pending_replication {
            Some(pending) => format!(
                "keyspace {name} is moving to {} in the background: `ringstore netstats` on each \
                 node shows the streams, `ringstore keyspace list` the pending replication until \
                 it is done\n",
                describe(Some(&pending))
            ),
            None => format!(
                "keyspace {name} already has {}\n",
                describe(keyspace.replication.as_ref())
            ),
        }
    } else {
        summary(name, &with_progress(connection, request).await?)
    };
    out.write_all(text.as_bytes())
        .map_err(anyhow::Error::from)?;
    Ok(())
}

/// Runs the alter, showing the bytes received for it across the nodes.
async fn with_progress(
    connection: &Connection,
    request: pb::AlterKeyspaceRequest,
) -> Result<pb::AlterKeyspaceResponse, crate::failure::Failure> {
    let keyspace = request.name.clone();
    let nodes = every_node(connection).await;
    let baseline = alter_bytes(&nodes, &keyspace).await;
    let bar = progress_bar();
    let mut schema = connection.schema();
    let alter = schema.alter_keyspace(request);
    tokio::pin!(alter);
    let mut ticker = tokio::time::interval(POLL_INTERVAL);
    let response = loop {
        tokio::select! {
            response = &mut alter => break response,
            _ = ticker.tick() => {
                let (done, total) = alter_bytes(&nodes, &keyspace).await;
                bar.set_length(total.saturating_sub(baseline.1).max(1));
                bar.set_position(done.saturating_sub(baseline.0));
            }
        }
    };
    bar.finish_and_clear();
    Ok(response?.into_inner())
}

/// Connections to every node the asked one knows (those that answer).
async fn every_node(connection: &Connection) -> Vec<Connection> {
    let status = connection
        .admin()
        .status(pb::StatusRequest::default())
        .await;
    let Ok(status) = status else {
        return Vec::new();
    };
    let mut nodes = Vec::new();
    for node in status.into_inner().nodes.iter().filter(|n| n.up) {
        if let Ok(node) = connection.to_node(&node.client_address).await {
            nodes.push(node);
        }
    }
    nodes
}

/// The bytes received and expected for alters of `keyspace`, summed over
/// `nodes`' `netstats` (streams of earlier alters included: the caller
/// subtracts what it saw before it began).
async fn alter_bytes(nodes: &[Connection], keyspace: &str) -> (u64, u64) {
    let mut sums = (0, 0);
    for node in nodes {
        let Ok(stats) = node.topology().net_stats(pb::NetStatsRequest {}).await else {
            continue;
        };
        for stream in stats.into_inner().streams.iter().filter(|s| {
            s.operation == "alter" && s.direction == "receiving" && s.keyspace == keyspace
        }) {
            sums.0 += stream.bytes_done;
            sums.1 += stream.bytes_total.max(stream.bytes_done);
        }
    }
    sums
}

fn progress_bar() -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let style = ProgressStyle::with_template(
        "[{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} streamed  {msg}",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()).with_style(style)
}

/// The lines printed when an alter is done.
fn summary(name: &str, response: &pb::AlterKeyspaceResponse) -> String {
    let replication = describe(
        response
            .keyspace
            .as_ref()
            .and_then(|k| k.replication.as_ref()),
    );
    format!(
        "keyspace {name} now has {replication}: {} ranges streamed ({}), {} keys removed \
         from the nodes that no longer replicate them\n",
        response.ranges_streamed,
        human_bytes(response.bytes_streamed),
        response.keys_removed
    )
}
