//! `ringstore keyspace create|alter|list|drop` (alter in `alter.rs`).

use std::collections::BTreeMap;
use std::io::Write;

use anyhow::{anyhow, bail};
use ringstore_proto::v1 as pb;

use crate::cli::KeyspaceCommand;
use crate::client::Connection;
use crate::failure::Outcome;

/// Runs a keyspace subcommand.
pub async fn run(
    connection: &Connection,
    command: &KeyspaceCommand,
    out: &mut impl Write,
) -> Outcome {
    let mut schema = connection.schema();
    match command {
        KeyspaceCommand::Create {
            name,
            replication,
            if_not_exists,
            gc_grace_seconds,
            speculative_retry,
        } => {
            let replication = parse_replication(replication)?;
            schema
                .create_keyspace(pb::CreateKeyspaceRequest {
                    name: name.clone(),
                    replication: Some(replication),
                    if_not_exists: *if_not_exists,
                    gc_grace_seconds: *gc_grace_seconds,
                    speculative_retry: speculative_retry.map(|s| s.to_string()),
                })
                .await?;
        }
        KeyspaceCommand::Alter {
            name,
            replication,
            at_once,
        } => {
            return crate::commands::alter::run(connection, name, replication, *at_once, out).await;
        }
        KeyspaceCommand::List => {
            let list = schema
                .list_keyspaces(pb::ListKeyspacesRequest {})
                .await?
                .into_inner();
            let text: String = list
                .keyspaces
                .iter()
                .map(|k| {
                    let altering = match &k.pending_replication {
                        Some(pending) => format!("  (altering to {})", describe(Some(pending))),
                        None => String::new(),
                    };
                    format!(
                        "{}  {}  gc_grace_seconds={}  speculative_retry={}  {}{altering}\n",
                        k.name,
                        describe(k.replication.as_ref()),
                        k.gc_grace_seconds.unwrap_or(864_000),
                        k.speculative_retry.as_deref().unwrap_or("p99"),
                        k.id
                    )
                })
                .collect();
            out.write_all(text.as_bytes())
                .map_err(anyhow::Error::from)?;
        }
        KeyspaceCommand::Drop { name } => {
            schema
                .drop_keyspace(pb::DropKeyspaceRequest { name: name.clone() })
                .await?;
        }
    }
    Ok(())
}

/// Parses `SimpleStrategy:3` or `NetworkTopologyStrategy:dc1=3,dc2=2`.
pub fn parse_replication(text: &str) -> anyhow::Result<pb::Replication> {
    let (class, factors) = text
        .split_once(':')
        .ok_or_else(|| anyhow!("replication {text:?} must look like SimpleStrategy:3 or NetworkTopologyStrategy:dc1=3,dc2=2"))?;
    let strategy = match class {
        "SimpleStrategy" => {
            let rf: u32 = factors
                .trim()
                .parse()
                .map_err(|_| anyhow!("SimpleStrategy needs a replication factor, as SimpleStrategy:3 (got {factors:?})"))?;
            pb::replication::Strategy::Simple(pb::SimpleStrategy {
                replication_factor: rf,
            })
        }
        "NetworkTopologyStrategy" => {
            let mut rfs = BTreeMap::new();
            for pair in factors.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                let (dc, rf) = pair
                    .split_once('=')
                    .ok_or_else(|| anyhow!("{pair:?} must look like dc1=3"))?;
                let rf: u32 = rf
                    .trim()
                    .parse()
                    .map_err(|_| anyhow!("{pair:?}: {rf:?} is not a replication factor"))?;
                if rfs.insert(dc.trim().to_string(), rf).is_some() {
                    bail!("data center {dc:?} is listed twice");
                }
            }
            if rfs.is_empty() {
                bail!("NetworkTopologyStrategy needs at least one dc=rf");
            }
            pb::replication::Strategy::NetworkTopology(pb::NetworkTopologyStrategy {
                replication_factors: rfs.into_iter().collect(),
            })
        }
        other => bail!(
            "unknown replication strategy {other:?}: use SimpleStrategy or NetworkTopologyStrategy"
        ),
    };
    Ok(pb::Replication {
        strategy: Some(strategy),
    })
}

/// A keyspace's replication as `keyspace create` takes it.
pub fn describe(replication: Option<&pb::Replication>) -> String {
    match replication.and_then(|r| r.strategy.as_ref()) {
        Some(pb::replication::Strategy::Simple(s)) => {
            format!("SimpleStrategy:{}", s.replication_factor)
        }
        Some(pb::replication::Strategy::NetworkTopology(n)) => {
            let sorted: BTreeMap<_, _> = n.replication_factors.iter().collect();
            let pairs: Vec<String> = sorted.iter().map(|(dc, rf)| format!("{dc}={rf}")).collect();
            format!("NetworkTopologyStrategy:{}", pairs.join(","))
        }
        None => "?".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replication_settings_parse_or_explain_what_is_wrong() {
        let simple = parse_replication("SimpleStrategy:3").unwrap();
        assert_eq!(describe(Some(&simple)), "SimpleStrategy:3");
        let nts = parse_replication("NetworkTopologyStrategy:dc2=2,dc1=3").unwrap();
        assert_eq!(describe(Some(&nts)), "NetworkTopologyStrategy:dc1=3,dc2=2");
        for bad in [
            "Simple:3",
            "SimpleStrategy",
            "SimpleStrategy:x",
            "NetworkTopologyStrategy:dc1",
            "NetworkTopologyStrategy:dc1=1,dc1=2",
        ] {
            assert!(parse_replication(bad).is_err(), "{bad}");
        }
    }
}
