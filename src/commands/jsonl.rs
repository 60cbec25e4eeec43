//! The line format of `export` and `import`: one JSON object per row.
//!
//! ```text
//! {"key":"aGVsbG8=","value":"d29ybGQ=","timestamp_micros":1764576000000000,"expires_at_micros":1764579600000000}
//! ```
//!
//! `key` and `value` are standard base64 (with padding); `export --hex`
//! writes `key_hex` and `value_hex` instead, and `import` reads either.
//! `timestamp_micros` is the write's timestamp and `expires_at_micros`
//! (absent: never expires) the absolute moment the value expires, both in
//! microseconds since the Unix epoch, so an imported cell is the exported
//! one: same timestamp (a re-import is idempotent under last-write-wins) and
//! same expiry.

use anyhow::{Context, bail};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ringstore_proto::v1 as pb;
use serde::{Deserialize, Serialize};

/// How `export` encodes keys and values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// Standard base64, padded: `key`, `value`.
    Base64,
    /// Lowercase hex: `key_hex`, `value_hex`.
    Hex,
}

/// One line, as serde sees it.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    key_hex: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    value_hex: Option<String>,
    timestamp_micros: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_at_micros: Option<i64>,
}

/// A row as `import` writes it back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The key (not empty).
    pub key: Vec<u8>,
    /// The value.
    pub value: Vec<u8>,
    /// The write's timestamp, µs since the epoch.
    pub timestamp_micros: i64,
    /// When the value expires, µs since the epoch.
    pub expires_at_micros: Option<i64>,
}

impl Record {
    /// The batch mutation that writes the record back as it was.
    pub fn into_mutation(self) -> pb::Mutation {
        pb::Mutation {
            key: self.key,
            value: Some(self.value),
            timestamp_micros: Some(self.timestamp_micros),
            ttl_seconds: None,
            expires_at_micros: self.expires_at_micros,
        }
    }
}

/// The line (without its newline) of a scanned row.
pub fn encode(row: &pb::ScanRow, encoding: Encoding) -> String {
    let mut line = Line {
        timestamp_micros: row.timestamp_micros,
        expires_at_micros: row.expires_at_micros,
        ..Line::default()
    };
    match encoding {
        Encoding::Base64 => {
            line.key = Some(STANDARD.encode(&row.key));
            line.value = Some(STANDARD.encode(&row.value));
        }
        Encoding::Hex => {
            line.key_hex = Some(hex::encode(&row.key));
            line.value_hex = Some(hex::encode(&row.value));
        }
    }
    serde_json::to_string(&line).expect("a line of strings and integers serializes")
}

/// The record of a line; an error saying what is wrong with it.
pub fn decode(text: &str) -> anyhow::Result<Record> {
    let line: Line = serde_json::from_str(text).context("not a JSON row")?;
    let field = |base64: Option<String>, hex: Option<String>, name: &str| match (base64, hex) {
        (Some(text), None) => STANDARD
            .decode(text.as_bytes())
            .with_context(|| format!("{name} is not valid base64")),
        (None, Some(text)) => {
            hex::decode(text.as_bytes()).with_context(|| format!("{name}_hex is not valid hex"))
        }
        (None, None) => bail!("{name} is missing (as {name} or {name}_hex)"),
        (Some(_), Some(_)) => bail!("give {name} or {name}_hex, not both"),
    };
    let key = field(line.key, line.key_hex, "key")?;
    if key.is_empty() {
        bail!("the key is empty");
    }
    let value = field(line.value, line.value_hex, "value")?;
    Ok(Record {
        key,
        value,
        timestamp_micros: line.timestamp_micros,
        expires_at_micros: line.expires_at_micros,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(expires: Option<i64>) -> pb::ScanRow {
        pb::ScanRow {
            key: b"k\x00\xff".to_vec(),
            value: b"v a l".to_vec(),
            token: 7,
            timestamp_micros: 1_764_576_000_000_000,
            expires_at_micros: expires,
        }
    }

    #[test]
    fn rows_round_trip_in_both_encodings() {
        for encoding in [Encoding::Base64, Encoding::Hex] {
            for expires in [None, Some(1_764_579_600_000_000)] {
                let line = encode(&row(expires), encoding);
                let record = decode(&line).unwrap();
                assert_eq!(record.key, row(expires).key);
                assert_eq!(record.value, row(expires).value);
                assert_eq!(record.timestamp_micros, 1_764_576_000_000_000);
                assert_eq!(record.expires_at_micros, expires);
            }
        }
        assert_eq!(
            encode(&row(None), Encoding::Base64),
            r#"{"key":"awD/","value":"diBhIGw=","timestamp_micros":1764576000000000}"#
        );
    }

    #[test]
    fn malformed_lines_say_what_is_wrong() {
        let cases = [
            ("not json", "not a JSON row"),
            (r#"{"key":"a2V5","timestamp_micros":1}"#, "value is missing"),
            (
                r#"{"key":"!!","value":"","timestamp_micros":1}"#,
                "key is not valid base64",
            ),
            (
                r#"{"key":"","value":"","timestamp_micros":1}"#,
                "the key is empty",
            ),
            (
                r#"{"key_hex":"zz","value":"","timestamp_micros":1}"#,
                "not valid hex",
            ),
            (
                r#"{"key":"a2V5","value":"","timestamp_micros":"x"}"#,
                "not a JSON row",
            ),
            (r#"{"key":"a2V5","value":""}"#, "timestamp_micros"),
            (
                r#"{"key":"a2V5","value":"","timestamp_micros":1,"ttl":3}"#,
                "unknown field",
            ),
        ];
        for (line, expected) in cases {
            let error = format!("{:#}", decode(line).unwrap_err());
            assert!(error.contains(expected), "{line}: {error}");
        }
    }
}
