//! SASL/PLAIN (RFC 4616) as Kafka's `PlainSaslServer` checks it.

use std::collections::BTreeMap;

use super::scram::constant_time_eq;

/// Checks `[authzid] NUL authcid NUL passwd` against the JAAS users; returns the user name.
/// The error text is what the client sees, so it never names the password.
pub fn authenticate(message: &[u8], users: &BTreeMap<String, String>) -> Result<String, String> {
    let mut parts = message.split(|&b| b == 0);
    let (Some(authzid), Some(user), Some(password), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("Invalid SASL/PLAIN response: expected 3 tokens".into());
    };
    let user = std::str::from_utf8(user).map_err(|_| "Invalid username".to_string())?;
    if user.is_empty() {
        return Err("Authentication failed: username not specified".into());
    }
    if password.is_empty() {
        return Err("Authentication failed: password not specified".into());
    }
    if !authzid.is_empty() && authzid != user.as_bytes() {
        return Err("Authentication failed: Client requested an authorization id that is different from username".into());
    }
    // Compare with every user's entry shape the same way, so a missing user costs the same.
    let expected = users.get(user).map(String::as_bytes).unwrap_or_default();
    let ok = users.contains_key(user) & constant_time_eq(password, expected);
    if ok {
        Ok(user.to_string())
    } else {
        Err("Authentication failed: Invalid username or password".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn users() -> BTreeMap<String, String> {
        [("alice".to_string(), "alice-secret".to_string())].into()
    }

    #[test]
    fn accepts_the_right_password_only() {
        assert_eq!(
            authenticate(b"\0alice\0alice-secret", &users()),
            Ok("alice".into())
        );
        assert_eq!(
            authenticate(b"alice\0alice\0alice-secret", &users()),
            Ok("alice".into())
        );
        for bad in [
            &b"\0alice\0wrong"[..],
            b"\0bob\0alice-secret",
            b"bob\0alice\0alice-secret",
            b"\0alice",
            b"\0alice\0alice-secret\0x",
            b"\0\0pw",
            b"\0alice\0",
        ] {
            let err = authenticate(bad, &users()).unwrap_err();
            assert!(!err.contains("alice-secret"));
        }
    }
}
