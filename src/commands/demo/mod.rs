//! `ringstore demo`: a local cluster on loopback in one command.
//!
//! Starts `--nodes` nodes in this process on consecutive loopback addresses
//! (127.0.0.11, .12, … with the default ports), one rack each (up to three),
//! waits until they form one ring, creates the keyspace `demo` replicated to
//! every rack, prints how to connect, and stops them all on ctrl-c.
//! `--tls` and `--auth` secure it ([`security`]).
//!
//! What the user sees comes first: one line before the nodes start (naming
//! the log file), then the nodes and the commands to try once the cluster
//! is up. The nodes' log lines go to `DATA_DIR/demo.log`; only warnings and
//! errors reach the terminal, and only after those lines
//! ([`crate::logging::init_demo`]). Without `--tls` the first node is also
//! reachable at the CLI's default address ([`forward`]), so the commands to
//! try need no `--host`.

mod forward;
mod security;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use anyhow::{Context, bail};
use ringstore_node::{NodeConfig, RunningNode};
use ringstore_proto::v1 as pb;

use crate::cli::{DemoArgs, LogFormat};
use crate::failure::Outcome;
use forward::Forward;
use security::Security;

/// Runs the demo cluster until ctrl-c.
pub async fn run(args: &DemoArgs, log_format: LogFormat) -> Outcome {
    if !(1..=50).contains(&args.nodes) {
        return Err(anyhow::anyhow!("--nodes must be 1 to 50, not {}", args.nodes).into());
    }
    let temporary = match &args.data_dir {
        Some(_) => None,
        None => Some(tempfile::tempdir().context("creating a temporary data directory")?),
    };
    let root = args.data_dir.clone().unwrap_or_else(|| {
        temporary
            .as_ref()
            .expect("created above")
            .path()
            .to_path_buf()
    });
    std::fs::create_dir_all(&root)
        .with_context(|| format!("creating the data directory {}", root.display()))?;
    let log = root.join("demo.log");
    let terminal = crate::logging::init_demo(log_format, &log)
        .with_context(|| format!("opening the log file {}", log.display()))?;
    println!(
        "ringstore demo: starting {} node{} on loopback, cluster \"demo\", data in {}",
        args.nodes,
        if args.nodes == 1 { "" } else { "s" },
        root.display()
    );
    println!(
        "The nodes' logs go to {} (warnings also show here once the cluster is up).",
        log.display()
    );
    let ips: Vec<Ipv4Addr> = (0..args.nodes)
        .map(|i| address(args.first_address, i))
        .collect::<anyhow::Result<_>>()?;
    let ip_addrs: Vec<IpAddr> = ips.iter().copied().map(IpAddr::from).collect();
    let mut security = Security::new(args.tls, args.auth, &root, &ip_addrs)?;
    let configs: Vec<NodeConfig> = ips
        .iter()
        .enumerate()
        .map(|(i, &ip)| {
            let mut config = config(args, &root, i, ip);
            security.apply(&mut config, ip.into(), args.nodes);
            config
        })
        .collect();

    let mut nodes = Vec::new();
    for config in &configs {
        let node = ringstore_node::start(config.clone())
            .await
            .with_context(|| format!("starting the node on {}", config.listen_address))?;
        nodes.push(node);
    }
    wait_until_one_ring(&nodes).await?;

    let first = configs[0].listen_address;
    let last = configs[configs.len() - 1].listen_address;
    security.set_password(first).await?;
    let racks = args.nodes.min(3) as u32;
    let replication = format!("NetworkTopologyStrategy:dc1={racks}");
    let connection = security.connect(first).await?;
    connection
        .schema()
        .create_keyspace(pb::CreateKeyspaceRequest {
            name: "demo".into(),
            replication: Some(crate::commands::keyspace::parse_replication(&replication)?),
            if_not_exists: true,
            gc_grace_seconds: None,
            speculative_retry: None,
        })
        .await?;

    // The CLI's default address, passed through to the first node, so the
    // commands to try need no --host (not over TLS: see `forward`).
    let door = if args.tls {
        None
    } else {
        match Forward::start(args.cli_address, first).await {
            Ok(door) => Some(door),
            Err(error) => {
                println!(
                    "Note: cannot listen on {} for the CLI's default --host ({error}); \
                     the commands below name a node instead.",
                    args.cli_address
                );
                None
            }
        }
    };
    // With the door open the CLI needs no flags; otherwise each command
    // names a node (the last one for the read, to show any node serves it).
    let (on_first, on_last) = match door {
        Some(_) => (security.cli_flags(None), security.cli_flags(None)),
        None => (
            security.cli_flags(Some(first)),
            security.cli_flags(Some(last)),
        ),
    };

    println!("The cluster is up:");
    for (i, config) in configs.iter().enumerate() {
        println!(
            "  node {}  client {}  internode {}  gossip {}  {}",
            i + 1,
            config.listen_address,
            config.internode_address,
            config.gossip_address,
            config.rack
        );
    }
    if door.is_some() {
        println!(
            "  {} passes through to node 1 (the CLI's default --host)",
            args.cli_address
        );
    }
    for line in security.describe() {
        println!("{line}");
    }
    println!("Keyspace \"demo\" ({replication}) is ready. Try:");
    println!("  ringstore{on_first} status demo");
    println!("  ringstore{on_first} put demo hello world --consistency QUORUM");
    println!("  ringstore{on_last} get demo hello --consistency QUORUM");
    println!("  ringstore{on_first} getendpoints demo hello");
    println!("  ringstore{on_first} stress write -n 100000 --keyspace demo --consistency QUORUM");
    println!("  ringstore{on_first} repair demo");
    if let Some(url) = console_url(&configs[0]) {
        println!(
            "  open {url} in a browser: the web console (every node serves one on its HTTP port)"
        );
    }
    if args.tls {
        println!("A client without the certificates is refused: ringstore --host {first} status");
    }
    let held = terminal.open();
    if held > 0 {
        let why = if args.tls {
            ""
        } else {
            " (on loopback without --tls each node warns that it has no cluster secret)"
        };
        println!(
            "{held} warning{} while starting, in {} only{why}",
            if held == 1 { "" } else { "s" },
            log.display()
        );
    }
    println!("Press ctrl-c to stop.");

    let _ = tokio::signal::ctrl_c().await;
    terminal.close();
    println!("stopping… (the nodes' last lines go to {})", log.display());
    drop(door);
    for node in nodes {
        node.shutdown().await.context("stopping a node")?;
    }
    Ok(())
}

/// The web console of the node `config` describes, on its HTTP port (none
/// when that port is off).
fn console_url(config: &NodeConfig) -> Option<String> {
    let scheme = if config.metrics_security.tls {
        "https"
    } else {
        "http"
    };
    let address = config.metrics_bind_address()?;
    Some(format!("{scheme}://{address}/"))
}

/// The loopback address of node `i` (from 0).
fn address(first: Ipv4Addr, i: usize) -> anyhow::Result<Ipv4Addr> {
    let ip = u32::from(first)
        .checked_add(u32::try_from(i)?)
        .map(Ipv4Addr::from)
        .context("address overflow")?;
    if !ip.is_loopback() {
        bail!("{ip} is not a loopback address: the demo runs on 127.0.0.0/8 only");
    }
    Ok(ip)
}

/// The (unsecured) configuration of node `i` (from 0), at `ip`.
fn config(args: &DemoArgs, root: &std::path::Path, i: usize, ip: Ipv4Addr) -> NodeConfig {
    NodeConfig {
        cluster_name: "demo".into(),
        data_dir: root.join(format!("node{}", i + 1)),
        listen_address: SocketAddr::from((ip, 7100)),
        internode_address: SocketAddr::from((ip, 7101)),
        gossip_address: SocketAddr::from((ip, 7000)),
        seeds: vec![SocketAddr::from((args.first_address, 7000))],
        rack: format!("rack{}", i % 3 + 1),
        ring_delay_ms: 1000,
        storage: ringstore_node::config::StorageConfig {
            cache_capacity_mb: 64,
            ..Default::default()
        },
        ..NodeConfig::default()
    }
}

/// Waits until every node sees every node up, `Normal`, on one ring.
async fn wait_until_one_ring(nodes: &[RunningNode]) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let views: Vec<_> = nodes.iter().map(|n| n.context.view()).collect();
        let settled = views.iter().all(|v| {
            v.members.len() == nodes.len()
                && v.up_members().count() == nodes.len()
                && v.members
                    .values()
                    .all(|m| m.metadata.state == ringstore_node::membership::NodeState::Normal)
                && v.ring.checksum() == views[0].ring.checksum()
        });
        if settled {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            bail!("the demo nodes did not form one ring within 2 minutes");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
