//! The authorizer's broker properties, with Kafka's names and defaults.

use std::collections::BTreeSet;

use super::authorizer::Authorizer;

/// Kafka's KRaft authorizer (`authorizer.class.name`).
pub const STANDARD_AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";
/// The ZooKeeper-era authorizer's name, accepted for configs written for it: same semantics.
pub const LEGACY_AUTHORIZER: &str = "kafka.security.authorizer.AclAuthorizer";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorizerConfig {
    /// `authorizer.class.name`: empty (Kafka's default) = no authorization at all.
    pub class_name: String,
    /// `super.users`: principals separated by `;` (e.g. `User:admin;User:broker`).
    pub super_users: String,
    /// `allow.everyone.if.no.acl.found` (default false).
    pub allow_everyone_if_no_acl_found: bool,
}

impl AuthorizerConfig {
    /// The authorizer these properties enable (`None`: authorization is off); an unknown
    /// class name is a configuration error, since ignoring it would leave a broker the
    /// operator meant to protect open.
    pub fn build(&self) -> Result<Option<Authorizer>, String> {
        match self.class_name.trim() {
            "" => Ok(None),
            STANDARD_AUTHORIZER | LEGACY_AUTHORIZER => Ok(Some(Authorizer::new(
                parse_super_users(&self.super_users),
                self.allow_everyone_if_no_acl_found,
            ))),
            other => Err(format!(
                "authorizer.class.name={other} is not supported (use {STANDARD_AUTHORIZER})"
            )),
        }
    }
}

/// `super.users` as Kafka splits it: on `;`, trimmed, empty items dropped.
pub fn parse_super_users(value: &str) -> BTreeSet<String> {
    value
        .split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(class: &str, supers: &str) -> AuthorizerConfig {
        AuthorizerConfig {
            class_name: class.into(),
            super_users: supers.into(),
            allow_everyone_if_no_acl_found: false,
        }
    }

    #[test]
    fn empty_class_is_no_authorizer_and_kafkas_names_are_accepted() {
        assert_eq!(config("", "").build(), Ok(None));
        assert!(config(STANDARD_AUTHORIZER, "").build().unwrap().is_some());
        assert!(config(LEGACY_AUTHORIZER, "").build().unwrap().is_some());
        assert!(config("com.example.Mine", "").build().is_err());
    }

    #[test]
    fn super_users_split_on_semicolons() {
        let users = parse_super_users(" User:admin ;User:broker;; ");
        assert_eq!(
            users.into_iter().collect::<Vec<_>>(),
            vec!["User:admin".to_string(), "User:broker".to_string()]
        );
    }
}
