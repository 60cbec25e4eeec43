//! Golden tokens: every vector in `data/murmur3_tokens.txt` was computed by
//! Cassandra's own `org.apache.cassandra.utils.MurmurHash.hash3_x64_128`
//! (seed 0, JDK 17): lengths 1–40 with a byte >= 0x80 at every tail offset,
//! all-0xff and all-0x7f keys, random keys, and a few long ones.

use ringstore_placement::{Murmur3Partitioner, Token};

const GOLDEN: &str = include_str!("data/murmur3_tokens.txt");

fn vectors() -> Vec<(Vec<u8>, Token)> {
    GOLDEN
        .lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(|line| {
            let (key, token) = line.split_once(' ').expect("`hex_key token` lines");
            (hex::decode(key).unwrap(), token.parse().unwrap())
        })
        .collect()
}

#[test]
fn every_golden_vector_matches_cassandra() {
    let vectors = vectors();
    assert!(vectors.len() > 500, "the golden file is complete");
    for (key, expected) in &vectors {
        assert_eq!(
            Murmur3Partitioner::token(key).unwrap(),
            *expected,
            "key {}",
            hex::encode(key)
        );
    }
}

#[test]
fn golden_vectors_cover_high_tail_bytes_at_every_offset_for_lengths_1_to_40() {
    let vectors = vectors();
    for len in 1..=40usize {
        let tail_start = len - len % 16;
        for offset in 0..len % 16 {
            let covered = vectors
                .iter()
                .any(|(key, _)| key.len() == len && key[tail_start + offset] >= 0x80);
            assert!(covered, "length {len}, tail offset {offset}");
        }
    }
}
