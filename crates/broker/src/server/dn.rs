//! The subject DN of a client certificate, formatted as Java's `X500Principal.getName()`
//! (RFC 2253), which is what `ssl.principal.mapping.rules` maps (`DEFAULT` makes it the
//! principal name itself: `User:CN=client,O=example`).
//!
//! A minimal DER reader for the one path it needs (Certificate -> tbsCertificate -> subject):
//! any malformed input gives `None` (the connection then stays anonymous), never a panic.

/// One DER element: (tag, contents, rest of the input).
fn element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;

/// The subject of a DER certificate, RFC 2253.
pub fn subject_dn(cert: &[u8]) -> Option<String> {
    let (tag, cert, _) = element(cert)?;
    (tag == SEQUENCE).then_some(())?;
    let (tag, tbs, _) = element(cert)?;
    (tag == SEQUENCE).then_some(())?;
    let mut rest = tbs;
    let (tag, _, after) = element(rest)?;
    if tag == 0xa0 {
        rest = after; // explicit version
    }
    // serial, signature algorithm, issuer, validity; then the subject.
    for _ in 0..4 {
        rest = element(rest)?.2;
    }
    let (tag, name, _) = element(rest)?;
    (tag == SEQUENCE).then_some(())?;
    format_name(name)
}

fn format_name(mut name: &[u8]) -> Option<String> {
    let mut rdns = Vec::new();
    while !name.is_empty() {
        let (tag, mut set, rest) = element(name)?;
        (tag == SET).then_some(())?;
        let mut parts = Vec::new();
        while !set.is_empty() {
            let (tag, atv, more) = element(set)?;
            (tag == SEQUENCE).then_some(())?;
            let (tag, oid, value) = element(atv)?;
            (tag == 0x06).then_some(())?;
            parts.push(attribute(oid, value)?);
            set = more;
        }
        rdns.push(parts.join("+"));
        name = rest;
    }
    rdns.reverse();
    Some(rdns.join(","))
}

fn attribute(oid: &[u8], value_der: &[u8]) -> Option<String> {
    let dotted = oid_string(oid)?;
    let keyword = match dotted.as_str() {
        "2.5.4.3" => Some("CN"),
        "2.5.4.6" => Some("C"),
        "2.5.4.7" => Some("L"),
        "2.5.4.8" => Some("ST"),
        "2.5.4.9" => Some("STREET"),
        "2.5.4.10" => Some("O"),
        "2.5.4.11" => Some("OU"),
        "0.9.2342.19200300.100.1.25" => Some("DC"),
        "0.9.2342.19200300.100.1.1" => Some("UID"),
        _ => None,
    };
    let (tag, value, _) = element(value_der)?;
    let text = match tag {
        0x0c | 0x13 | 0x16 | 0x14 => std::str::from_utf8(value).ok().map(str::to_string),
        _ => None,
    };
    match (keyword, text) {
        (Some(k), Some(t)) => Some(format!("{k}={}", escape(&t))),
        // RFC 2253: an unknown type (or a non-string value) is the OID and the DER in hex.
        _ => Some(format!("{dotted}=#{}", hex(value_der))),
    }
}

fn oid_string(oid: &[u8]) -> Option<String> {
    let (&first, rest) = oid.split_first()?;
    let mut arcs = vec![u64::from(first / 40), u64::from(first % 40)];
    let mut acc: u64 = 0;
    for &b in rest {
        acc = acc.checked_mul(128)? | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            arcs.push(acc);
            acc = 0;
        }
    }
    Some(
        arcs.iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join("."),
    )
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// RFC 2253 section 2.4 escaping.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn der(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        if body.len() < 0x80 {
            out.push(body.len() as u8);
        } else {
            out.push(0x82);
            out.extend_from_slice(&(body.len() as u16).to_be_bytes());
        }
        out.extend_from_slice(body);
        out
    }

    fn rdn(oid: &[u8], tag: u8, value: &str) -> Vec<u8> {
        let atv = [der(0x06, oid), der(tag, value.as_bytes())].concat();
        der(SET, &der(SEQUENCE, &atv))
    }

    fn cert_with_subject(subject: &[u8]) -> Vec<u8> {
        let tbs = [
            der(0xa0, &der(0x02, &[2])),
            der(0x02, &[1]),
            der(SEQUENCE, &[]),
            der(SEQUENCE, &[]),
            der(SEQUENCE, &[]),
            subject.to_vec(),
            der(SEQUENCE, &[0; 200]),
        ]
        .concat();
        der(
            SEQUENCE,
            &[der(SEQUENCE, &tbs), der(SEQUENCE, &[])].concat(),
        )
    }

    #[test]
    fn formats_the_subject_as_rfc_2253_in_reverse_order() {
        let subject = der(
            SEQUENCE,
            &[
                rdn(&[0x55, 4, 6], 0x13, "US"),
                rdn(&[0x55, 4, 10], 0x0c, "Acme, Inc"),
                rdn(&[0x55, 4, 3], 0x0c, "alice"),
            ]
            .concat(),
        );
        assert_eq!(
            subject_dn(&cert_with_subject(&subject)).as_deref(),
            Some("CN=alice,O=Acme\\, Inc,C=US")
        );
    }

    #[test]
    fn unknown_attributes_are_hex_and_garbage_is_none() {
        let subject = der(SEQUENCE, &rdn(&[0x2a, 3], 0x0c, "x"));
        assert_eq!(
            subject_dn(&cert_with_subject(&subject)).as_deref(),
            Some("1.2.3=#0c0178")
        );
        assert_eq!(subject_dn(&[]), None);
        assert_eq!(subject_dn(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]), None);
        let cert = cert_with_subject(&subject);
        for cut in 0..cert.len() {
            let _ = subject_dn(&cert[..cut]);
        }
    }
}
