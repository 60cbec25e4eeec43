//! `ringstore batch`: mutations from a file or standard input, one per line,
//! sent as batches through the client library (its retry policy; routed by
//! each batch's first key with `--token-aware`); and [`BatchSender`], which
//! `import` shares.
//!
//! The line syntax (blank lines and lines starting with `#` are skipped):
//!
//! ```text
//! put KEY VALUE [ttl=SECONDS] [timestamp=MICROS]
//! delete KEY [timestamp=MICROS]
//! ```
//!
//! Words are separated by whitespace, so with `--hex` KEY and VALUE are hex
//! (for bytes that are not whitespace-free text).

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use clap::Args;
use ringstore_proto::v1 as pb;
use ringstore_replication::ConsistencyLevel;
use ringstore_throttle::Throttle;

use crate::cli::{parse_level, whole};
use crate::client::Connection;
use crate::commands::data::{cluster, level};
use crate::failure::{Failure, Outcome};

/// Arguments of `ringstore batch`.
#[derive(Debug, Args)]
pub struct BatchArgs {
    /// The keyspace.
    pub keyspace: String,
    /// The file of mutations; `-` (the default) reads standard input.
    #[arg(default_value = "-")]
    pub file: PathBuf,
    /// The consistency level of every mutation.
    #[arg(long, default_value = "ONE", value_parser = whole(parse_level))]
    pub consistency: ConsistencyLevel,
    /// KEY and VALUE are hex bytes.
    #[arg(long)]
    pub hex: bool,
    /// Mutations per `Batch` request (at most the node's max_batch_mutations).
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub batch_size: usize,
    /// Send each batch to a replica of its first key (the ring learned from
    /// `--host`), rather than have `--host` coordinate it.
    #[arg(long)]
    pub token_aware: bool,
}

/// Sends mutations in batches of at most `batch_size` mutations (and about
/// [`BATCH_BYTES`]), at most `rate` mutations per second (0: unlimited),
/// reporting each failed mutation by its input line on stderr.
pub struct BatchSender {
    client: ringstore_client::Client,
    keyspace: String,
    consistency: i32,
    batch_size: usize,
    pending: Vec<(u64, pb::Mutation)>,
    pending_bytes: usize,
    throttle: Throttle,
    started: tokio::time::Instant,
    /// Mutations the node applied.
    pub applied: u64,
    /// Mutations the node refused or failed.
    pub failed: u64,
}

/// Bytes of keys and values after which a batch is sent, whatever its count
/// (well under the node's max_batch_bytes of 16 MiB).
pub const BATCH_BYTES: usize = 4 << 20;

impl BatchSender {
    /// A sender to `keyspace` at `consistency`, through `--host` or, with
    /// `token_aware`, a replica of each batch's first key. Mutations keep
    /// the timestamps they have; this process stamps the others.
    pub async fn new(
        connection: &Connection,
        keyspace: &str,
        consistency: ConsistencyLevel,
        batch_size: usize,
        rate: u64,
        token_aware: bool,
    ) -> Result<BatchSender, Failure> {
        if batch_size == 0 {
            return Err(anyhow!("--batch-size must be at least 1").into());
        }
        Ok(BatchSender {
            client: cluster(connection, token_aware).await?,
            keyspace: keyspace.to_string(),
            consistency: level(consistency),
            batch_size,
            pending: Vec::new(),
            pending_bytes: 0,
            throttle: Throttle::new(rate, Duration::ZERO),
            started: tokio::time::Instant::now(),
            applied: 0,
            failed: 0,
        })
    }

    /// Queues the mutation of input line `line`; sends a batch when full.
    pub async fn push(&mut self, line: u64, mutation: pb::Mutation) -> Outcome {
        self.pending_bytes += mutation.key.len() + mutation.value.as_ref().map_or(0, Vec::len);
        self.pending.push((line, mutation));
        if self.pending.len() >= self.batch_size || self.pending_bytes >= BATCH_BYTES {
            self.flush().await?;
        }
        Ok(())
    }

    /// Sends what is queued. An error of the whole batch (an unknown
    /// keyspace, an unreachable node, after the library's retries) ends the
    /// run.
    pub async fn flush(&mut self) -> Outcome {
        if self.pending.is_empty() {
            return Ok(());
        }
        let count = self.pending.len() as u64;
        let now = self.started.elapsed();
        let ready = self.throttle.ready_at(count, now);
        tokio::time::sleep_until(self.started + ready).await;
        self.throttle.consume(count, self.started.elapsed());
        let (lines, mutations): (Vec<u64>, Vec<pb::Mutation>) = self.pending.drain(..).unzip();
        self.pending_bytes = 0;
        let response = self
            .client
            .batch(pb::BatchRequest {
                keyspace: self.keyspace.clone(),
                mutations,
                consistency: self.consistency,
            })
            .await?;
        for (line, result) in lines.iter().zip(&response.results) {
            if result.code == 0 {
                self.applied += 1;
            } else {
                self.failed += 1;
                eprintln!(
                    "line {line}: {}: {}",
                    crate::failure::code_name(tonic::Code::from(result.code)),
                    result.message
                );
            }
        }
        Ok(())
    }
}

/// One mutation of the `batch` syntax; an error naming what is wrong.
pub fn parse_mutation(text: &str, hex: bool) -> anyhow::Result<pb::Mutation> {
    let mut words = text.split_whitespace();
    let op = words.next().context("an empty line")?;
    let bytes = |word: Option<&str>, what: &str| -> anyhow::Result<Vec<u8>> {
        let word = word.with_context(|| format!("{op} needs a {what}"))?;
        if hex {
            hex::decode(word).with_context(|| format!("{what} {word:?} is not valid hex"))
        } else {
            Ok(word.as_bytes().to_vec())
        }
    };
    let key = bytes(words.next(), "key")?;
    if key.is_empty() {
        bail!("the key is empty");
    }
    let mut mutation = match op {
        "put" => pb::Mutation {
            key,
            value: Some(bytes(words.next(), "value")?),
            ..pb::Mutation::default()
        },
        "delete" => pb::Mutation {
            key,
            ..pb::Mutation::default()
        },
        other => bail!("unknown operation {other:?}: use put or delete"),
    };
    for option in words {
        let (name, value) = option.split_once('=').with_context(|| {
            format!("{option:?} is not NAME=VALUE (ttl=SECONDS, timestamp=MICROS)")
        })?;
        match name {
            "ttl" if op == "put" => {
                let ttl = value
                    .parse::<u32>()
                    .with_context(|| format!("ttl {value:?} is not a number of seconds"))?;
                mutation.ttl_seconds = Some(ttl);
            }
            "timestamp" => {
                let micros = value
                    .parse::<i64>()
                    .with_context(|| format!("timestamp {value:?} is not microseconds"))?;
                mutation.timestamp_micros = Some(micros);
            }
            other => bail!("unknown option {other:?} for {op}"),
        }
    }
    Ok(mutation)
}

/// Opens `path` for reading lines; `-` is standard input.
pub fn open_lines(path: &Path) -> Result<Box<dyn BufRead>, Failure> {
    if path == Path::new("-") {
        return Ok(Box::new(std::io::stdin().lock()));
    }
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    Ok(Box::new(std::io::BufReader::new(file)))
}

/// `batch`: sends every mutation; prints what was applied. Lines that do not
/// parse and mutations that fail are reported by line number on stderr, and
/// make the exit status 2.
pub async fn run(connection: &Connection, args: &BatchArgs, out: &mut impl Write) -> Outcome {
    let mut sender = BatchSender::new(
        connection,
        &args.keyspace,
        args.consistency,
        args.batch_size,
        0,
        args.token_aware,
    )
    .await?;
    let mut malformed = 0u64;
    for (index, line) in open_lines(&args.file)?.lines().enumerate() {
        let number = index as u64 + 1;
        let line = line.with_context(|| format!("reading line {number}"))?;
        let text = line.trim();
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        match parse_mutation(text, args.hex) {
            Ok(mutation) => sender.push(number, mutation).await?,
            Err(reason) => {
                malformed += 1;
                eprintln!("line {number}: {reason:#}");
            }
        }
    }
    sender.flush().await?;
    writeln!(out, "{} mutations applied", sender.applied).map_err(anyhow::Error::from)?;
    finish(malformed, sender.failed)
}

/// The run's outcome: an error counting malformed lines and failed mutations.
pub fn finish(malformed: u64, failed: u64) -> Outcome {
    if malformed == 0 && failed == 0 {
        return Ok(());
    }
    Err(anyhow!(
        "{malformed} malformed lines and {failed} failed mutations (listed above by line number)"
    )
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn puts_and_deletes_parse_with_their_options() {
        let put = parse_mutation("put k v ttl=60 timestamp=5", false).unwrap();
        assert_eq!(put.key, b"k");
        assert_eq!(put.value.as_deref(), Some(&b"v"[..]));
        assert_eq!((put.ttl_seconds, put.timestamp_micros), (Some(60), Some(5)));
        let delete = parse_mutation("delete 6b", true).unwrap();
        assert_eq!((delete.key, delete.value), (b"k".to_vec(), None));
    }

    #[test]
    fn malformed_mutations_say_what_is_wrong() {
        let cases = [
            ("get k", "unknown operation"),
            ("put k", "needs a value"),
            ("delete", "needs a key"),
            ("put k v ttl=x", "not a number"),
            ("delete k ttl=3", "unknown option"),
            ("put k v 7", "not NAME=VALUE"),
        ];
        for (line, expected) in cases {
            let error = format!("{:#}", parse_mutation(line, false).unwrap_err());
            assert!(error.contains(expected), "{line}: {error}");
        }
        assert!(format!("{:#}", parse_mutation("put zz 00", true).unwrap_err()).contains("hex"));
    }
}
