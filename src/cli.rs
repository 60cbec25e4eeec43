//! The command line: every subcommand and its arguments (clap derive).

use clap::{Args, Parser, Subcommand};

/// ringstore: a Dynamo/Cassandra-style replicated key-value store.
#[derive(Debug, Parser)]
#[command(name = "ringstore", version, about, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the Murmur3 token of each key, one per line, in input order
    /// (the same tokens Cassandra's Murmur3Partitioner gives).
    Token(TokenArgs),
}

/// Arguments of `ringstore token`.
#[derive(Debug, Args)]
pub struct TokenArgs {
    /// Read each KEY as hex bytes (for keys that are not UTF-8).
    #[arg(long)]
    pub hex: bool,

    /// The keys (non-empty). Put `--` before keys that begin with `-`.
    #[arg(value_name = "KEY", required = true)]
    pub keys: Vec<String>,
}
