//! `ringstore put`, `get` and `delete`, through the client library: the
//! `--host` node coordinates (the library's `SeedsOnly` routing), or with
//! `--token-aware` a replica of the key.

use std::io::{Read, Write};

use anyhow::{Context, anyhow};
use ringstore_client::{Client, Routing};
use ringstore_proto::v1 as pb;

use ringstore_replication::ConsistencyLevel;

use crate::cli::{PutArgs, ReadArgs};
use crate::client::Connection;
use crate::failure::{Failure, Outcome};

/// A key from the command line: UTF-8 text, or hex with `--hex`.
pub fn key_bytes(key: &str, hex: bool) -> Result<Vec<u8>, Failure> {
    let bytes = if hex {
        hex::decode(key).with_context(|| format!("key {key:?} is not valid hex"))?
    } else {
        key.as_bytes().to_vec()
    };
    if bytes.is_empty() {
        return Err(anyhow!("the key must not be empty").into());
    }
    Ok(bytes)
}

/// The client library on `connection`'s node: `--host` coordinates, or
/// with `--token-aware` a replica does (of the key, or of the range read);
/// shared by every command that reads or writes data. Writes without a
/// timestamp are stamped by this process ([`cluster_stamping`]).
pub async fn cluster(connection: &Connection, token_aware: bool) -> Result<Client, Failure> {
    cluster_stamping(connection, token_aware, true).await
}

/// As [`cluster`]; `client_timestamps` says whether this process stamps
/// writes that have no timestamp (strictly increasing, from its clock) or
/// leaves that to the coordinator. Stamped here, a write this process makes
/// after one that timed out always wins over it, however late a paused
/// coordinator applies the first.
pub async fn cluster_stamping(
    connection: &Connection,
    token_aware: bool,
    client_timestamps: bool,
) -> Result<Client, Failure> {
    let routing = if token_aware {
        Routing::TokenAware
    } else {
        Routing::SeedsOnly
    };
    connection.cluster(routing, client_timestamps).await
}

/// A consistency level's wire form.
pub fn level(consistency: ConsistencyLevel) -> i32 {
    ringstore_client::level_to_pb(consistency) as i32
}

/// A value from the command line: UTF-8 text, or hex with `hex`; `-` reads
/// it from standard input.
pub fn value_bytes(value: &str, hex: bool) -> Result<Vec<u8>, Failure> {
    if value == "-" {
        let mut stdin = Vec::new();
        std::io::stdin()
            .read_to_end(&mut stdin)
            .context("reading the value from standard input")?;
        if hex {
            return Ok(hex::decode(String::from_utf8_lossy(&stdin).trim())
                .context("the value on standard input is not valid hex")?);
        }
        return Ok(stdin);
    }
    literal_bytes(value, hex)
}

/// A value given on the command line as is (text, or hex with `hex`).
pub fn literal_bytes(value: &str, hex: bool) -> Result<Vec<u8>, Failure> {
    if hex {
        return Ok(hex::decode(value).with_context(|| format!("value {value:?} is not valid hex"))?);
    }
    Ok(value.as_bytes().to_vec())
}

/// Prints `value` and a newline, as hex with `hex`.
pub fn print_value(out: &mut impl Write, value: &[u8], hex: bool) -> Outcome {
    let write = if hex {
        writeln!(out, "{}", hex::encode(value))
    } else {
        out.write_all(value).and_then(|()| writeln!(out))
    };
    write.map_err(anyhow::Error::from)?;
    Ok(())
}

/// `put`: writes the value.
pub async fn put(connection: &Connection, args: &PutArgs) -> Outcome {
    let key = key_bytes(&args.key, args.hex)?;
    let value = value_bytes(&args.value, args.hex)?;
    cluster_stamping(connection, args.token_aware, !args.server_timestamp)
        .await?
        .put(pb::PutRequest {
            keyspace: args.keyspace.clone(),
            key,
            value,
            consistency: level(args.consistency),
            timestamp_micros: args.timestamp,
            ttl_seconds: args.ttl,
        })
        .await?;
    Ok(())
}

/// `get`: prints the value and a newline; [`Failure::NotFound`] if none.
pub async fn get(connection: &Connection, args: &ReadArgs, out: &mut impl Write) -> Outcome {
    let key = key_bytes(&args.key, args.hex)?;
    let response = cluster(connection, args.token_aware)
        .await?
        .get(pb::GetRequest {
            keyspace: args.keyspace.clone(),
            key,
            consistency: level(args.consistency),
        })
        .await?;
    if !response.found {
        return Err(Failure::NotFound);
    }
    print_value(out, &response.value, args.hex)
}

/// `delete`: writes a tombstone.
pub async fn delete(connection: &Connection, args: &ReadArgs) -> Outcome {
    let key = key_bytes(&args.key, args.hex)?;
    cluster(connection, args.token_aware)
        .await?
        .delete(pb::DeleteRequest {
            keyspace: args.keyspace.clone(),
            key,
            consistency: level(args.consistency),
            timestamp_micros: None,
        })
        .await?;
    Ok(())
}
