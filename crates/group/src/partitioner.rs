//! Which `__consumer_offsets` partition (and so which coordinator) owns a group (spec H.1).
//! Must match Kafka bit for bit: clients and other brokers compute the same function.

/// Java's `String.hashCode`: `h = 31*h + c` over UTF-16 code units, wrapping.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// `Utils.abs(hashCode(group)) % partitions`, where Kafka's `Utils.abs` maps `i32::MIN` to 0
/// (not to itself, as `Math.abs` would). Returns 0 for a non-positive partition count instead
/// of dividing by zero.
pub fn partition_for_group(group_id: &str, partitions: i32) -> i32 {
    if partitions <= 0 {
        return 0;
    }
    let h = java_string_hash(group_id);
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    abs % partitions
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn java_hash_vectors() {
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        // "ab" = 97*31 + 98
        assert_eq!(java_string_hash("ab"), 3105);
        // Computed independently (h = 31*h + c over UTF-16, wrapping): Java gives the same.
        assert_eq!(java_string_hash("my-group"), -1_906_497_762);
        // The classic Java example whose hashCode is Integer.MIN_VALUE.
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        // A character outside the BMP hashes as its two UTF-16 surrogates.
        assert_eq!(java_string_hash("\u{1F600}"), 0xD83D * 31 + 0xDE00);
    }

    #[test]
    fn partition_vectors() {
        assert_eq!(partition_for_group("", 50), 0);
        assert_eq!(partition_for_group("a", 50), 97 % 50);
        assert_eq!(partition_for_group("my-group", 50), 12);
        assert_eq!(partition_for_group("polygenelubricants", 50), 0);
        assert_eq!(partition_for_group("x", 0), 0);
        assert_eq!(partition_for_group("x", -3), 0);
    }

    proptest! {
        #[test]
        fn partition_in_range(s in ".*", n in 1i32..200) {
            let p = partition_for_group(&s, n);
            prop_assert!((0..n).contains(&p));
        }
    }
}
