//! Kafka prints topic ids as `Uuid.toString()`: URL-safe base64 of the 16 bytes, no padding;
//! its JSON writes `bytes` fields as standard padded base64.

const URL_SAFE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const STANDARD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Base64 with `alphabet`, padded with `=` to a multiple of 4 when `pad`.
fn base64(bytes: &[u8], alphabet: &[u8; 64], pad: bool) -> String {
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
            out.push(char::from(alphabet[idx as usize]));
        }
        if pad {
            out.extend(std::iter::repeat_n('=', 4 - chars));
        }
    }
    out
}

/// URL-safe, unpadded base64 (22 characters for a UUID).
pub fn base64url(bytes: &[u8]) -> String {
    base64(bytes, URL_SAFE, false)
}

/// Standard padded base64, as Jackson writes a `bytes` field of Kafka's JSON
/// (`Base64Variants.MIME_NO_LINEFEEDS`).
pub fn base64_standard(bytes: &[u8]) -> String {
    base64(bytes, STANDARD, true)
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

    #[test]
    fn standard_base64_is_padded() {
        assert_eq!(base64_standard(b""), "");
        assert_eq!(base64_standard(b"f"), "Zg==");
        assert_eq!(base64_standard(b"fo"), "Zm8=");
        assert_eq!(base64_standard(b"foo"), "Zm9v");
        assert_eq!(base64_standard(b"\xfb\xff"), "+/8=");
    }
}
