//! Framing (spec K.1): `int32 size` + request header + body, and the reverse for responses.
//!
//! Pure functions over buffers so that framing is testable without sockets. The header
//! versions come from kafka-protocol (`HeaderVersion`), which knows that flexible requests use
//! header v2 and that ApiVersions responses always use header v0.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};

use crate::error::{ClientError, Result};

/// Appends one complete frame (size prefix, header, body) for `req` at `version` to `buf`.
pub fn encode_request<R: Request>(
    req: &R,
    version: i16,
    correlation_id: i32,
    client_id: &str,
    buf: &mut BytesMut,
) -> Result<()> {
    let mut header = RequestHeader::default();
    header.request_api_key = R::KEY;
    header.request_api_version = version;
    header.correlation_id = correlation_id;
    header.client_id = Some(StrBytes::from_string(client_id.to_owned()));
    let header_version = R::header_version(version);

    let size = header
        .compute_size(header_version)
        .and_then(|h| Ok(h + req.compute_size(version)?))
        .map_err(|e| ClientError::protocol("encoding request", e))?;
    let size = i32::try_from(size)
        .map_err(|_| ClientError::Protocol(format!("request of {size} bytes is too large")))?;
    buf.reserve(4 + size as usize);
    buf.put_i32(size);
    header
        .encode(buf, header_version)
        .map_err(|e| ClientError::protocol("encoding request header", e))?;
    req.encode(buf, version)
        .map_err(|e| ClientError::protocol("encoding request body", e))?;
    Ok(())
}

/// Appends one complete frame for a request that kafka-protocol does not model (Runnel's own
/// APIs): request header v1 (api key, version, correlation id, `int16`-length client id) and
/// then `body` verbatim. Header v1 keeps the frame readable by any Kafka header decoder, so a
/// broker that does not know the key can still parse the header and reject it cleanly.
pub fn encode_raw_request(
    api_key: i16,
    version: i16,
    correlation_id: i32,
    client_id: &str,
    body: &[u8],
    buf: &mut BytesMut,
) -> Result<()> {
    let client_id_len = i16::try_from(client_id.len())
        .map_err(|_| ClientError::InvalidArgument("client id longer than 32767 bytes".into()))?;
    let size = 2 + 2 + 4 + 2 + client_id.len() + body.len();
    let size = i32::try_from(size)
        .map_err(|_| ClientError::Protocol(format!("request of {size} bytes is too large")))?;
    buf.reserve(4 + size as usize);
    buf.put_i32(size);
    buf.put_i16(api_key);
    buf.put_i16(version);
    buf.put_i32(correlation_id);
    buf.put_i16(client_id_len);
    buf.put_slice(client_id.as_bytes());
    buf.put_slice(body);
    Ok(())
}

/// Strips response header v0 (just the correlation id) from a raw response frame body and
/// returns what follows, for the raw APIs of [`encode_raw_request`].
pub fn strip_response_header_v0(mut frame: Bytes) -> Result<Bytes> {
    if frame.len() < 4 {
        return Err(ClientError::Protocol(
            "response shorter than its header".into(),
        ));
    }
    frame.advance(4);
    Ok(frame)
}

/// Reads the correlation id of a response frame body (without the size prefix); it is the
/// first field of every response header version.
pub fn peek_correlation_id(frame: &[u8]) -> Option<i32> {
    let bytes: [u8; 4] = frame.get(0..4)?.try_into().ok()?;
    Some(i32::from_be_bytes(bytes))
}

/// Decodes a response frame body (size prefix already stripped) for request type `R` at
/// `version`, returning the correlation id and the response.
pub fn decode_response<R: Request>(mut frame: Bytes, version: i16) -> Result<(i32, R::Response)> {
    let header_version = <R::Response as HeaderVersion>::header_version(version);
    let header = ResponseHeader::decode(&mut frame, header_version)
        .map_err(|e| ClientError::protocol("decoding response header", e))?;
    let body = <R::Response as Decodable>::decode(&mut frame, version).map_err(|e| {
        ClientError::protocol(
            &format!("decoding response to api {} v{version}", R::KEY),
            e,
        )
    })?;
    Ok((header.correlation_id, body))
}

/// Splits the body of a response frame from its header (for callers that must inspect the
/// raw body first, like ApiVersions' error-code peek).
pub fn skip_response_header<R: Request>(frame: &mut Bytes, version: i16) -> Result<i32> {
    let header_version = <R::Response as HeaderVersion>::header_version(version);
    let header = ResponseHeader::decode(frame, header_version)
        .map_err(|e| ClientError::protocol("decoding response header", e))?;
    Ok(header.correlation_id)
}

/// Reads the `int16` at the start of a body (the top-level error code of ApiVersions).
pub fn peek_i16(body: &Bytes) -> Option<i16> {
    (body.len() >= 2).then(|| (&body[..2]).get_i16())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{
        ApiKey, ApiVersionsRequest, ApiVersionsResponse, MetadataRequest,
    };
    use kafka_protocol::protocol::decode_request_header_from_buffer;

    #[test]
    fn request_frame_round_trips_through_header_decoder() {
        for version in [1i16, 9, 12] {
            let mut req = MetadataRequest::default();
            req.topics = None;
            let mut buf = BytesMut::new();
            encode_request(&req, version, 42, "runnel-test", &mut buf).unwrap();
            let mut frame = buf.freeze();
            let size = frame.get_i32() as usize;
            assert_eq!(size, frame.len());
            let header = decode_request_header_from_buffer(&mut frame).unwrap();
            assert_eq!(header.request_api_key, ApiKey::Metadata as i16);
            assert_eq!(header.request_api_version, version);
            assert_eq!(header.correlation_id, 42);
            assert_eq!(header.client_id.as_deref(), Some("runnel-test"));
            let decoded = MetadataRequest::decode(&mut frame, version).unwrap();
            assert_eq!(decoded, req);
            assert!(frame.is_empty());
        }
    }

    #[test]
    fn flexible_request_uses_header_v2() {
        let mut req = ApiVersionsRequest::default();
        req.client_software_name = StrBytes::from_static_str("runnel");
        req.client_software_version = StrBytes::from_static_str("0.1.0");
        let mut v3 = BytesMut::new();
        encode_request(&req, 3, 1, "c", &mut v3).unwrap();
        // Header v2 = v1 + one tagged-field byte (0); client_id stays a non-compact string.
        assert_eq!(&v3[4..16], &[0, 18, 0, 3, 0, 0, 0, 1, 0, 1, b'c', 0]);
    }

    #[test]
    fn api_versions_response_header_is_always_v0() {
        let mut resp = ApiVersionsResponse::default();
        resp.error_code = 0;
        let mut buf = BytesMut::new();
        buf.put_i32(7); // correlation id, no tagged fields even at v3
        resp.encode(&mut buf, 3).unwrap();
        let (corr, decoded) = decode_response::<ApiVersionsRequest>(buf.freeze(), 3).unwrap();
        assert_eq!(corr, 7);
        assert_eq!(decoded, resp);
    }

    #[test]
    fn raw_request_has_header_v1_and_verbatim_body() {
        let mut buf = BytesMut::new();
        encode_raw_request(32000, 0, 9, "cli", br#"{"what":"tree"}"#, &mut buf).unwrap();
        let mut frame = buf.freeze();
        let size = frame.get_i32() as usize;
        assert_eq!(size, frame.len());
        let mut header_bytes = frame.clone();
        let header = RequestHeader::decode(&mut header_bytes, 1).unwrap();
        assert_eq!(header.request_api_key, 32000);
        assert_eq!(header.request_api_version, 0);
        assert_eq!(header.correlation_id, 9);
        assert_eq!(header.client_id.as_deref(), Some("cli"));
        assert_eq!(&header_bytes[..], br#"{"what":"tree"}"#);
        assert_eq!(&frame[..10], &[0x7d, 0x00, 0, 0, 0, 0, 0, 9, 0, 3]);
    }

    #[test]
    fn raw_response_header_is_stripped() {
        let body = strip_response_header_v0(Bytes::from_static(b"\0\0\0\x07{}")).unwrap();
        assert_eq!(&body[..], b"{}");
        assert!(strip_response_header_v0(Bytes::from_static(b"\0\0")).is_err());
    }

    #[test]
    fn correlation_id_peek() {
        assert_eq!(peek_correlation_id(&[0, 0, 1, 0, 9]), Some(256));
        assert_eq!(peek_correlation_id(&[0, 0]), None);
    }
}
