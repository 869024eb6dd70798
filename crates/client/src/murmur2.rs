//! Java-compatible murmur2 (Kafka's `Utils.murmur2` / `toPositive`), spec G.1.
//!
//! Keyed records must land on the same partition as with the Java producer, so this follows
//! Kafka bit for bit: unsigned bytes, logical shifts, wrapping multiplication, and
//! `toPositive` as a mask (not `abs`).

const SEED: u32 = 0x9747_b28c;
const M: u32 = 0x5bd1_e995;
const R: u32 = 24;

/// MurmurHash2 (32-bit) exactly as Kafka's `Utils.murmur2(byte[])`, returned as Java's `int`.
pub fn murmur2(data: &[u8]) -> i32 {
    let len = data.len();
    let mut h: u32 = SEED ^ (len as u32);
    let mut chunks = data.chunks_exact(4);
    for block in &mut chunks {
        let mut k = u32::from_le_bytes([block[0], block[1], block[2], block[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// Kafka's `Utils.toPositive`: clears the sign bit (`-1 -> 2147483647`), unlike `abs`.
pub fn to_positive(x: i32) -> i32 {
    x & 0x7fff_ffff
}

/// The Java producer's partition for a non-null key: `toPositive(murmur2(key)) % n`.
pub fn java_partition(key: &[u8], num_partitions: u32) -> u32 {
    debug_assert!(num_partitions > 0);
    (to_positive(murmur2(key)) as u32) % num_partitions.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_utils_test_values() {
        assert_eq!(murmur2(b"21"), -973932308);
        assert_eq!(murmur2(b"foobar"), -790332482);
        assert_eq!(murmur2(b"a-little-bit-long-string"), -985981536);
        assert_eq!(murmur2(b"a-little-bit-longer-string"), -1486304829);
        assert_eq!(
            murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"),
            -58897971
        );
        assert_eq!(murmur2(b""), 275646681);
        assert_eq!(
            murmur2(&[0xff, 0x80, 0x00, 0x7f]),
            murmur2(&[0xff, 0x80, 0x00, 0x7f])
        );
    }

    #[test]
    fn to_positive_is_a_mask() {
        assert_eq!(to_positive(-1), 2147483647);
        assert_eq!(to_positive(i32::MIN), 0);
        assert_eq!(to_positive(5), 5);
    }
}
