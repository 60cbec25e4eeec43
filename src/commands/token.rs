//! `ringstore token [--hex] KEY...`: the token of each key.

use std::io::Write;

use anyhow::{Context, Result, bail};
use ringstore_placement::{Murmur3Partitioner, Token};

use crate::cli::TokenArgs;

/// Prints one token per key, in input order. Every key is checked before
/// anything is printed, so a bad key produces no partial output.
pub fn run(args: &TokenArgs, out: &mut impl Write) -> Result<()> {
    let tokens = args
        .keys
        .iter()
        .enumerate()
        .map(|(i, key)| token_of(i + 1, key, args.hex))
        .collect::<Result<Vec<Token>>>()?;
    for token in tokens {
        writeln!(out, "{token}")?;
    }
    Ok(())
}

/// The token of the `ordinal`-th key, decoding it from hex when asked.
fn token_of(ordinal: usize, key: &str, hex: bool) -> Result<Token> {
    let bytes = if hex {
        hex::decode(key).with_context(|| format!("key {ordinal} ({key:?}) is not valid hex"))?
    } else {
        key.as_bytes().to_vec()
    };
    if bytes.is_empty() {
        bail!("key {ordinal} is empty: a key must have at least one byte");
    }
    Murmur3Partitioner::token(&bytes).with_context(|| format!("key {ordinal}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_with(keys: &[&str], hex: bool) -> Result<String> {
        let args = TokenArgs {
            hex,
            keys: keys.iter().map(|k| k.to_string()).collect(),
        };
        let mut out = Vec::new();
        run(&args, &mut out)?;
        Ok(String::from_utf8(out).unwrap())
    }

    #[test]
    fn prints_tokens_in_input_order() {
        assert_eq!(
            run_with(&["hello", "a"], false).unwrap(),
            "-3758069500696749310\n-8839064797231613815\n"
        );
        assert_eq!(run_with(&["80"], true).unwrap(), "-5284281814142962636\n");
    }

    #[test]
    fn bad_hex_and_empty_keys_are_errors_naming_the_key() {
        let error = run_with(&["61", "zz"], true).unwrap_err();
        assert!(
            format!("{error:#}").contains("key 2 (\"zz\") is not valid hex"),
            "{error:#}"
        );
        let error = run_with(&["a", ""], false).unwrap_err();
        assert!(format!("{error:#}").contains("key 2 is empty"), "{error:#}");
    }
}
