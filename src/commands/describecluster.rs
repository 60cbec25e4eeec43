//! `ringstore describecluster`: the cluster's name, schema versions, node
//! counts, data centers, releases and keyspaces, as `nodetool describecluster`.

use std::collections::BTreeMap;
use std::io::Write;

use ringstore_proto::v1 as pb;

use crate::client::Connection;
use crate::commands::keyspace::describe;
use crate::failure::Outcome;

/// Prints the cluster as the node it asks sees it. Nodes that disagree on
/// the schema show as several schema versions (unreachable ones apart):
/// the schema has not spread yet.
pub async fn run(connection: &Connection, out: &mut impl Write) -> Outcome {
    let info = connection
        .admin()
        .info(pb::InfoRequest {})
        .await?
        .into_inner();
    let nodes = connection
        .admin()
        .status(pb::StatusRequest::default())
        .await?
        .into_inner()
        .nodes;
    let keyspaces = connection
        .schema()
        .list_keyspaces(pb::ListKeyspacesRequest {})
        .await?
        .into_inner()
        .keyspaces;
    write_description(&info.cluster_name, &nodes, &keyspaces, out).map_err(anyhow::Error::from)?;
    Ok(())
}

/// Groups nodes' addresses by `key`, sorted.
fn group_by(
    nodes: &[&pb::NodeStatus],
    key: impl Fn(&pb::NodeStatus) -> String,
) -> BTreeMap<String, Vec<String>> {
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for node in nodes {
        groups
            .entry(key(node))
            .or_default()
            .push(node.client_address.clone());
    }
    for addresses in groups.values_mut() {
        addresses.sort();
    }
    groups
}

fn write_description(
    cluster_name: &str,
    nodes: &[pb::NodeStatus],
    keyspaces: &[pb::Keyspace],
    out: &mut impl Write,
) -> std::io::Result<()> {
    let (up, down): (Vec<&pb::NodeStatus>, Vec<&pb::NodeStatus>) = nodes.iter().partition(|n| n.up);
    writeln!(out, "Cluster Information:")?;
    writeln!(out, "\tName: {cluster_name}")?;
    writeln!(out, "\tPartitioner: Murmur3Partitioner")?;
    writeln!(out, "\tSchema versions:")?;
    for (version, addresses) in group_by(&up, |n| n.schema_version.clone()) {
        writeln!(out, "\t\t{version}: [{}]", addresses.join(", "))?;
    }
    if !down.is_empty() {
        let addresses = group_by(&down, |_| String::new())
            .remove("")
            .unwrap_or_default();
        writeln!(out, "\t\tUNREACHABLE: [{}]", addresses.join(", "))?;
    }
    writeln!(out)?;
    writeln!(out, "Stats for all nodes:")?;
    let count = |state: &str| up.iter().filter(|n| n.state == state).count();
    writeln!(out, "\tLive: {}", up.len())?;
    writeln!(out, "\tJoining: {}", count("JOINING"))?;
    writeln!(out, "\tLeaving: {}", count("LEAVING"))?;
    writeln!(out, "\tUnreachable: {}", down.len())?;
    writeln!(out)?;
    writeln!(out, "Data Centers:")?;
    let mut centers: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for node in nodes {
        let (all, down) = centers.entry(&node.datacenter).or_default();
        *all += 1;
        *down += usize::from(!node.up);
    }
    for (dc, (all, down)) in centers {
        writeln!(out, "\t{dc} #Nodes: {all} #Down: {down}")?;
    }
    writeln!(out)?;
    writeln!(out, "Database versions:")?;
    let all: Vec<&pb::NodeStatus> = nodes.iter().collect();
    for (version, addresses) in group_by(&all, |n| n.software_version.clone()) {
        writeln!(out, "\t{version}: [{}]", addresses.join(", "))?;
    }
    writeln!(out)?;
    writeln!(out, "Keyspaces:")?;
    for keyspace in keyspaces {
        writeln!(
            out,
            "\t{} -> {}",
            keyspace.name,
            describe(keyspace.replication.as_ref())
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(address: &str, up: bool, schema: &str) -> pb::NodeStatus {
        pb::NodeStatus {
            client_address: address.into(),
            datacenter: "dc1".into(),
            up,
            state: "NORMAL".into(),
            schema_version: schema.into(),
            software_version: "0.1.0".into(),
            ..pb::NodeStatus::default()
        }
    }

    #[test]
    fn nodes_that_disagree_on_the_schema_show_as_several_versions() {
        let nodes = [
            node("10.0.0.2:7100", true, "b"),
            node("10.0.0.1:7100", true, "a"),
            node("10.0.0.3:7100", true, "a"),
            node("10.0.0.4:7100", false, "a"),
        ];
        let mut out = Vec::new();
        write_description("prod", &nodes, &[], &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("\tName: prod\n"), "{text}");
        assert!(
            text.contains("\t\ta: [10.0.0.1:7100, 10.0.0.3:7100]\n\t\tb: [10.0.0.2:7100]\n"),
            "{text}"
        );
        assert!(
            text.contains("\t\tUNREACHABLE: [10.0.0.4:7100]\n"),
            "{text}"
        );
        assert!(text.contains("\tLive: 3\n"), "{text}");
        assert!(text.contains("\tUnreachable: 1\n"), "{text}");
        assert!(text.contains("\tdc1 #Nodes: 4 #Down: 1\n"), "{text}");
    }
}
