//! Kafka prints topic ids as `Uuid.toString()`: URL-safe base64 of the 16 bytes, no padding.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// URL-safe, unpadded base64 (22 characters for a UUID).
pub fn base64url(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..chars {
            let idx = (n >> (18 - 6 * i)) & 0x3f;
            out.push(char::from(ALPHABET[idx as usize]));
        }
    }
    out
}

/// A topic id the way kafka-topics prints it.
pub fn topic_id_string(bytes: &[u8; 16]) -> String {
    base64url(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_java_uuid_to_string() {
        // Kafka's Uuid.ZERO_UUID prints as AAAAAAAAAAAAAAAAAAAAAA.
        assert_eq!(topic_id_string(&[0; 16]), "AAAAAAAAAAAAAAAAAAAAAA");
        assert_eq!(base64url(b"\xfb\xff"), "-_8");
        assert_eq!(base64url(b"foobar"), "Zm9vYmFy");
        assert_eq!(topic_id_string(&[0xff; 16]).len(), 22);
    }
}
