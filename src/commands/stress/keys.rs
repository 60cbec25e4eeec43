//! Which key each stress operation uses: `--distribution`.
//!
//! Keys are `key0` to `key{N-1}` (`--key-count N`), numbered by rank:
//! - `uniform`: every key equally likely (the default).
//! - `zipf:S`: key `i` (rank `i + 1`) with probability proportional to
//!   `1 / (i + 1)^S`, S > 0 — the skew of real traffic (YCSB's default is
//!   0.99; `zipf:1.2` puts about a fifth of all operations on `key0` with
//!   100,000 keys). Sampled by `rand_distr::Zipf` (rejection-inversion,
//!   constant time per draw).
//! - `hotspot:P`: `key0` with probability P (0 < P ≤ 1), otherwise a
//!   uniform key: one hot key in an otherwise even load.
//!
//! Each worker's generator is seeded by its index, so runs are repeatable.

use std::fmt;
use std::str::FromStr;

use anyhow::{Context, bail};
use rand::{Rng, RngExt};
use rand_distr::{Distribution, Zipf};

/// How keys are chosen. See the module docs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum KeyDistribution {
    /// Every key equally likely.
    Uniform,
    /// Zipf with this exponent (finite, above 0).
    Zipf(f64),
    /// `key0` with this probability (above 0, at most 1), else uniform.
    Hotspot(f64),
}

impl fmt::Display for KeyDistribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyDistribution::Uniform => f.write_str("uniform"),
            KeyDistribution::Zipf(s) => write!(f, "zipf:{s}"),
            KeyDistribution::Hotspot(p) => write!(f, "hotspot:{p}"),
        }
    }
}

impl FromStr for KeyDistribution {
    type Err = anyhow::Error;

    /// `uniform`, `zipf:S` or `hotspot:P`.
    fn from_str(text: &str) -> anyhow::Result<KeyDistribution> {
        let text = text.trim();
        let usage =
            "use uniform, zipf:S (S > 0, as zipf:1.2) or hotspot:P (0 < P <= 1, as hotspot:0.5)";
        let (name, parameter) = text.split_once(':').unwrap_or((text, ""));
        let number = || {
            parameter
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
        };
        match name {
            "uniform" if parameter.is_empty() => Ok(KeyDistribution::Uniform),
            "zipf" => match number() {
                Some(s) if s > 0.0 => Ok(KeyDistribution::Zipf(s)),
                _ => bail!("{text:?}: the zipf exponent must be a number above 0; {usage}"),
            },
            "hotspot" => match number() {
                Some(p) if p > 0.0 && p <= 1.0 => Ok(KeyDistribution::Hotspot(p)),
                _ => bail!(
                    "{text:?}: the hotspot probability must be above 0 and at most 1; {usage}"
                ),
            },
            _ => bail!("unknown key distribution {text:?}; {usage}"),
        }
    }
}

/// Draws key numbers in `0..key_count` from a [`KeyDistribution`].
#[derive(Clone, Debug)]
pub struct KeyChooser {
    key_count: u64,
    kind: Chooser,
}

#[derive(Clone, Debug)]
enum Chooser {
    Uniform,
    Zipf(Zipf<f64>),
    Hotspot(f64),
}

impl KeyChooser {
    /// A chooser over `key_count` keys (at least 1).
    pub fn new(distribution: KeyDistribution, key_count: u64) -> anyhow::Result<KeyChooser> {
        let kind = match distribution {
            KeyDistribution::Uniform => Chooser::Uniform,
            KeyDistribution::Zipf(s) => {
                Chooser::Zipf(Zipf::new(key_count as f64, s).with_context(|| format!("zipf:{s}"))?)
            }
            KeyDistribution::Hotspot(p) => Chooser::Hotspot(p),
        };
        Ok(KeyChooser { key_count, kind })
    }

    /// The next key number.
    pub fn next(&self, rng: &mut impl Rng) -> u64 {
        match &self.kind {
            Chooser::Uniform => rng.random_range(0..self.key_count),
            // Zipf draws ranks 1..=key_count as floats.
            Chooser::Zipf(zipf) => (zipf.sample(rng) as u64).clamp(1, self.key_count) - 1,
            Chooser::Hotspot(p) if rng.random::<f64>() < *p => 0,
            Chooser::Hotspot(_) => rng.random_range(0..self.key_count),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn counts(distribution: &str, key_count: u64, draws: usize) -> Vec<u64> {
        let chooser = KeyChooser::new(distribution.parse().unwrap(), key_count).unwrap();
        let mut rng = StdRng::seed_from_u64(7);
        let mut counts = vec![0; key_count as usize];
        for _ in 0..draws {
            counts[chooser.next(&mut rng) as usize] += 1;
        }
        counts
    }

    #[test]
    fn distributions_parse_and_bad_ones_say_what_is_expected() {
        let parse = |text: &str| text.parse::<KeyDistribution>().unwrap();
        assert_eq!(parse("uniform"), KeyDistribution::Uniform);
        assert_eq!(parse("zipf:1.2"), KeyDistribution::Zipf(1.2));
        assert_eq!(parse("hotspot:0.5"), KeyDistribution::Hotspot(0.5));
        assert_eq!(parse("hotspot:1"), KeyDistribution::Hotspot(1.0));
        for bad in [
            "",
            "zipf",
            "zipf:",
            "zipf:abc",
            "zipf:0",
            "zipf:-1",
            "zipf:inf",
            "zipf:NaN",
            "hotspot:0",
            "hotspot:1.5",
            "hotspot:x",
            "uniform:3",
            "normal",
            "pareto:2",
        ] {
            let error = format!("{:#}", bad.parse::<KeyDistribution>().unwrap_err());
            assert!(
                error.contains("zipf:S") && error.contains(bad),
                "{bad}: {error}"
            );
        }
    }

    #[test]
    fn zipf_puts_the_most_operations_on_the_first_keys_in_rank_order() {
        let counts = counts("zipf:1.2", 1000, 100_000);
        assert!(counts[0] > counts[1] && counts[1] > counts[2] && counts[2] > counts[9]);
        // Rank 1 over rank 2 is 2^1.2 ≈ 2.3.
        let ratio = counts[0] as f64 / counts[1] as f64;
        assert!((2.0..2.6).contains(&ratio), "{ratio}");
        assert!(counts[1..].iter().all(|&c| c < counts[0]));
    }

    #[test]
    fn uniform_spreads_evenly_and_hotspot_sends_its_share_to_key0() {
        let uniform = counts("uniform", 10, 100_000);
        assert!(
            uniform.iter().all(|&c| (9_000..11_000).contains(&c)),
            "{uniform:?}"
        );
        let hot = counts("hotspot:0.5", 10, 100_000);
        // Half the operations, plus key0's uniform share of the other half.
        assert!((53_000..57_000).contains(&hot[0]), "{hot:?}");
        assert!(
            hot[1..].iter().all(|&c| (4_000..6_000).contains(&c)),
            "{hot:?}"
        );
    }

    #[test]
    fn one_key_is_always_key0() {
        for distribution in ["uniform", "zipf:2", "hotspot:0.1"] {
            assert_eq!(counts(distribution, 1, 100), [100], "{distribution}");
        }
    }
}
