//! Cassandra's variant of MurmurHash3 x64_128.
//!
//! Cassandra's `MurmurHash.hash3_x64_128` reads the final `len % 16` tail bytes
//! as Java `byte`s, which are signed: `(long) key.get(i) << shift` sign-extends
//! a byte >= 0x80 before shifting, so its high bits XOR into the bytes above it.
//! Reference MurmurHash3 (and the `murmur3` crate) treat bytes as unsigned. The
//! two therefore agree except when a tail byte at tail offset 0..=6 or 8..=14
//! is 0x80 or more (at offsets 7 and 15 the shift pushes the extension out of
//! the word).
//! Tokens must match Cassandra's, so this module reproduces the signed reading.

const C1: u64 = 0x87c3_7b91_1142_53d5;
const C2: u64 = 0x4cf5_ad43_2745_937f;

/// MurmurHash3 x64_128 of `key` exactly as Cassandra computes it, returning `(h1, h2)`.
pub fn cassandra_murmur3_x64_128(key: &[u8], seed: u64) -> (u64, u64) {
    let mut h1 = seed;
    let mut h2 = seed;

    let mut blocks = key.chunks_exact(16);
    for block in &mut blocks {
        let (low, high) = block.split_at(8);
        let k1 = u64::from_le_bytes(low.try_into().expect("8-byte half of a 16-byte block"));
        let k2 = u64::from_le_bytes(high.try_into().expect("8-byte half of a 16-byte block"));

        h1 ^= mix_k1(k1);
        h1 = h1.rotate_left(27).wrapping_add(h2);
        h1 = h1.wrapping_mul(5).wrapping_add(0x52dc_e729);

        h2 ^= mix_k2(k2);
        h2 = h2.rotate_left(31).wrapping_add(h1);
        h2 = h2.wrapping_mul(5).wrapping_add(0x3849_5ab5);
    }

    let tail = blocks.remainder();
    if tail.len() > 8 {
        h2 ^= mix_k2(signed_tail_word(&tail[8..]));
    }
    if !tail.is_empty() {
        h1 ^= mix_k1(signed_tail_word(&tail[..tail.len().min(8)]));
    }

    let len = key.len() as u64;
    h1 ^= len;
    h2 ^= len;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    h1 = fmix64(h1);
    h2 = fmix64(h2);
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    (h1, h2)
}

/// Up to 8 tail bytes combined as Java does: each byte sign-extended to 64 bits,
/// shifted to its little-endian position, and XORed in.
fn signed_tail_word(bytes: &[u8]) -> u64 {
    bytes.iter().enumerate().fold(0u64, |word, (i, &byte)| {
        word ^ (((byte as i8) as i64 as u64) << (8 * i))
    })
}

fn mix_k1(k1: u64) -> u64 {
    k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2)
}

fn mix_k2(k2: u64) -> u64 {
    k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1)
}

fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn reference_h1(key: &[u8]) -> u64 {
        let hash = murmur3::murmur3_x64_128(&mut std::io::Cursor::new(key), 0).unwrap();
        hash as u64
    }

    /// Whether Cassandra's signed tail reading can differ from the reference for `key`.
    fn has_sign_extending_tail(key: &[u8]) -> bool {
        let tail_start = key.len() - key.len() % 16;
        key[tail_start..]
            .iter()
            .enumerate()
            .any(|(offset, &b)| b >= 0x80 && offset != 7)
    }

    /// Clears the high bit of every tail byte whose sign extension would matter.
    fn clear_sign_extending_tail(mut key: Vec<u8>) -> Vec<u8> {
        let tail_start = key.len() - key.len() % 16;
        for (offset, byte) in key[tail_start..].iter_mut().enumerate() {
            if offset != 7 {
                *byte &= 0x7f;
            }
        }
        key
    }

    proptest! {
        #[test]
        fn agrees_with_the_murmur3_crate_when_no_tail_byte_is_sign_extended(
            key in proptest::collection::vec(any::<u8>(), 1..100).prop_map(clear_sign_extending_tail)
        ) {
            prop_assert!(!has_sign_extending_tail(&key));
            prop_assert_eq!(cassandra_murmur3_x64_128(&key, 0).0, reference_h1(&key));
        }

        #[test]
        fn ascii_keys_agree_with_the_murmur3_crate(key in "[ -~]{1,80}") {
            prop_assert_eq!(cassandra_murmur3_x64_128(key.as_bytes(), 0).0, reference_h1(key.as_bytes()));
        }
    }

    #[test]
    fn differs_from_the_murmur3_crate_for_a_high_tail_byte_before_offset_7() {
        for offset in (0..15).filter(|&o| o != 7) {
            let mut key = vec![0x41u8; offset + 1];
            key[offset] = 0x80;
            assert_ne!(
                cassandra_murmur3_x64_128(&key, 0).0,
                reference_h1(&key),
                "tail offset {offset}"
            );
        }
        let mut key = vec![0x41u8; 8];
        key[7] = 0xff;
        assert_eq!(cassandra_murmur3_x64_128(&key, 0).0, reference_h1(&key));
    }
}
