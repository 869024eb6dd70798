//! The authorizer against Kafka's rules: examples for each rule, and property tests against a
//! naive model that scans every ACL (the index must find exactly the ACLs that apply).

use std::collections::BTreeSet;

use proptest::prelude::*;
use runnel_metadata::acl::{
    AclBinding, AclBindingFilter, AclOperation, AclPermission, AclSet, Authorizer, PatternType,
    Requester, ResourceType,
};
use uuid::Uuid;

const ALICE: Requester<'static> = Requester {
    principal: "User:alice",
    host: "10.0.0.1",
};

fn acl(
    name: &str,
    pattern: PatternType,
    principal: &str,
    op: AclOperation,
    perm: AclPermission,
) -> AclBinding {
    AclBinding {
        resource_type: ResourceType::Topic,
        resource_name: name.into(),
        pattern_type: pattern,
        principal: principal.into(),
        host: "*".into(),
        operation: op,
        permission: perm,
    }
}

fn set(acls: Vec<AclBinding>) -> AclSet {
    let mut s = AclSet::default();
    for (i, a) in acls.into_iter().enumerate() {
        assert!(s.insert(Uuid::from_u128(i as u128 + 1), a));
    }
    s
}

fn authorizer(supers: &[&str], allow_if_none: bool) -> Authorizer {
    Authorizer::new(
        supers.iter().map(|s| s.to_string()).collect(),
        allow_if_none,
    )
}

fn topic(a: &Authorizer, s: &AclSet, op: AclOperation, name: &str) -> bool {
    a.authorize(s, ALICE, op, ResourceType::Topic, name)
}

use AclOperation::*;
use AclPermission::{Allow, Deny};
use PatternType::{Literal, Prefixed};

#[test]
fn no_acls_denies_by_default_and_allows_with_allow_everyone() {
    let s = AclSet::default();
    assert!(!topic(&authorizer(&[], false), &s, Read, "t"));
    assert!(topic(&authorizer(&[], true), &s, Read, "t"));
}

#[test]
fn allow_everyone_does_not_override_a_matching_deny() {
    let s = set(vec![acl("t", Literal, "User:alice", Read, Deny)]);
    assert!(!topic(&authorizer(&[], true), &s, Read, "t"));
    // ... but another operation matched by nothing falls back to the default.
    assert!(topic(&authorizer(&[], true), &s, Write, "t"));
}

#[test]
fn super_users_pass_even_a_deny() {
    let s = set(vec![acl("t", Literal, "User:alice", All, Deny)]);
    assert!(topic(
        &authorizer(&["User:bob", "User:alice"], false),
        &s,
        Read,
        "t"
    ));
}

#[test]
fn literal_wildcard_and_prefixed_resources() {
    let a = authorizer(&[], false);
    let s = set(vec![acl("t", Literal, "User:alice", Read, Allow)]);
    assert!(topic(&a, &s, Read, "t"));
    assert!(!topic(&a, &s, Read, "t2"));
    let s = set(vec![acl("*", Literal, "User:alice", Read, Allow)]);
    assert!(topic(&a, &s, Read, "anything"));
    let s = set(vec![acl("app-", Prefixed, "User:alice", Read, Allow)]);
    assert!(topic(&a, &s, Read, "app-orders"));
    assert!(topic(&a, &s, Read, "app-"));
    assert!(!topic(&a, &s, Read, "app"));
    assert!(!topic(&a, &s, Read, "my-app-x"));
    // A PREFIXED "*" is a prefix, not a wildcard.
    let s = set(vec![acl("*", Prefixed, "User:alice", Read, Allow)]);
    assert!(!topic(&a, &s, Read, "t"));
}

#[test]
fn wildcard_principal_and_hosts() {
    let a = authorizer(&[], false);
    let s = set(vec![acl("t", Literal, "User:*", Write, Allow)]);
    assert!(topic(&a, &s, Write, "t"));
    let mut on_host = acl("t", Literal, "User:alice", Write, Allow);
    on_host.host = "10.0.0.2".into();
    let s = set(vec![on_host.clone()]);
    assert!(!topic(&a, &s, Write, "t"));
    on_host.host = "10.0.0.1".into();
    assert!(topic(&a, &set(vec![on_host]), Write, "t"));
    // Another principal type does not match User:*.
    let s = set(vec![acl("t", Literal, "Group:*", Write, Allow)]);
    assert!(!topic(&a, &s, Write, "t"));
}

#[test]
fn implied_operations_come_from_allow_only() {
    let a = authorizer(&[], false);
    for op in [Read, Write, Delete, Alter] {
        let s = set(vec![acl("t", Literal, "User:alice", op, Allow)]);
        assert!(topic(&a, &s, Describe, "t"), "{op} implies Describe");
        assert!(!topic(&a, &s, Create, "t"));
    }
    let s = set(vec![acl("t", Literal, "User:alice", AlterConfigs, Allow)]);
    assert!(topic(&a, &s, DescribeConfigs, "t"));
    let s = set(vec![
        acl("t", Literal, "User:alice", Describe, Allow),
        acl("t", Literal, "User:alice", Read, Deny),
    ]);
    assert!(
        topic(&a, &s, Describe, "t"),
        "a DENY of Read does not deny Describe"
    );
    assert!(!topic(&a, &s, Read, "t"));
    let s = set(vec![acl("t", Literal, "User:alice", All, Allow)]);
    for op in AclOperation::supported_by(ResourceType::Topic) {
        assert!(topic(&a, &s, *op, "t"));
    }
}

#[test]
fn deny_overrides_allow_across_patterns() {
    let a = authorizer(&[], false);
    let s = set(vec![
        acl("app-", Prefixed, "User:alice", Read, Allow),
        acl("app-secret", Literal, "User:*", Read, Deny),
    ]);
    assert!(topic(&a, &s, Read, "app-orders"));
    assert!(!topic(&a, &s, Read, "app-secret"));
}

#[test]
fn authorize_by_resource_type_as_kafka() {
    let a = authorizer(&[], false);
    let who = ALICE;
    let by_type = |s: &AclSet| a.authorize_by_resource_type(s, who, Write, ResourceType::Topic);
    assert!(!by_type(&AclSet::default()));
    assert!(by_type(&set(vec![acl(
        "t",
        Literal,
        "User:alice",
        Write,
        Allow
    )])));
    assert!(!by_type(&set(vec![acl(
        "t",
        Literal,
        "User:alice",
        Read,
        Allow
    )])));
    assert!(!by_type(&set(vec![
        acl("t", Literal, "User:alice", Write, Allow),
        acl("*", Literal, "User:alice", Write, Deny),
    ])));
    assert!(!by_type(&set(vec![
        acl("app-x", Literal, "User:alice", Write, Allow),
        acl("app-", Prefixed, "User:alice", Write, Deny),
    ])));
    assert!(by_type(&set(vec![
        acl("app-x", Literal, "User:alice", Write, Allow),
        acl("other-", Prefixed, "User:alice", Write, Deny),
    ])));
    assert!(
        authorizer(&["User:alice"], false).authorize_by_resource_type(
            &AclSet::default(),
            who,
            Write,
            ResourceType::Topic
        )
    );
}

#[test]
fn authorized_operations_lists_what_is_allowed() {
    let a = authorizer(&[], false);
    let s = set(vec![acl("t", Literal, "User:alice", Read, Allow)]);
    assert_eq!(
        a.authorized_operations(&s, ALICE, ResourceType::Topic, "t"),
        vec![Read, Describe]
    );
}

#[test]
fn removing_an_acl_forgets_it_everywhere() {
    let mut s = set(vec![acl("t", Literal, "User:alice", Read, Allow)]);
    let a = authorizer(&[], false);
    assert!(s.remove(&Uuid::from_u128(1)).is_some());
    assert!(s.remove(&Uuid::from_u128(1)).is_none());
    assert!(!topic(&a, &s, Read, "t"));
    assert_eq!(s, AclSet::default());
}

// ---- properties against a model ----

fn arb_acl() -> impl Strategy<Value = AclBinding> {
    let names = prop::sample::select(vec!["*", "a", "ab", "abc", "b", "ba"]);
    let principals = prop::sample::select(vec!["User:alice", "User:*", "User:bob"]);
    let hosts = prop::sample::select(vec!["*", "10.0.0.1", "10.0.0.2"]);
    let ops = prop::sample::select(vec![
        All,
        Read,
        Write,
        Describe,
        Alter,
        DescribeConfigs,
        AlterConfigs,
    ]);
    let pts = prop::sample::select(vec![Literal, Prefixed]);
    let perms = prop::sample::select(vec![Allow, Deny]);
    let types = prop::sample::select(vec![ResourceType::Topic, ResourceType::Group]);
    (names, principals, hosts, ops, pts, perms, types).prop_map(|(n, p, h, o, pt, pe, rt)| {
        AclBinding {
            resource_type: rt,
            resource_name: n.into(),
            pattern_type: pt,
            principal: p.into(),
            host: h.into(),
            operation: o,
            permission: pe,
        }
    })
}

/// The rule written the slow, obvious way: scan every ACL.
fn model(
    acls: &[AclBinding],
    allow_if_none: bool,
    op: AclOperation,
    rt: ResourceType,
    name: &str,
) -> bool {
    let applies = |a: &&AclBinding| {
        a.resource_type == rt
            && match a.pattern_type {
                Literal => a.resource_name == name || a.resource_name == "*",
                Prefixed => name.starts_with(&a.resource_name),
                _ => false,
            }
            && (a.principal == ALICE.principal || a.principal == "User:*")
            && (a.host == "*" || a.host == ALICE.host)
    };
    let relevant: Vec<&AclBinding> = acls.iter().filter(applies).collect();
    if relevant
        .iter()
        .any(|a| a.permission == Deny && (a.operation == op || a.operation == All))
    {
        return false;
    }
    let implies = |acl_op: AclOperation| {
        acl_op == All
            || acl_op == op
            || (op == Describe && [Read, Write, Delete, Alter].contains(&acl_op))
            || (op == DescribeConfigs && acl_op == AlterConfigs)
    };
    relevant
        .iter()
        .any(|a| a.permission == Allow && implies(a.operation))
        || allow_if_none
}

proptest! {
    #[test]
    fn authorize_matches_the_model(
        acls in prop::collection::vec(arb_acl(), 0..12),
        allow_if_none in any::<bool>(),
        op in prop::sample::select(vec![Read, Write, Describe, Alter, DescribeConfigs, AlterConfigs, Create]),
        name in prop::sample::select(vec!["a", "ab", "abc", "abd", "b", "c", "*"]),
        rt in prop::sample::select(vec![ResourceType::Topic, ResourceType::Group]),
    ) {
        let s = set(acls.clone());
        let a = authorizer(&[], allow_if_none);
        prop_assert_eq!(a.authorize(&s, ALICE, op, rt, name), model(&acls, allow_if_none, op, rt, name));
    }

    #[test]
    fn a_matching_deny_always_wins(
        acls in prop::collection::vec(arb_acl(), 0..12),
        allow_if_none in any::<bool>(),
        deny_all in any::<bool>(),
    ) {
        let mut acls = acls;
        acls.push(acl("ab", Prefixed, "User:*", if deny_all { All } else { Read }, Deny));
        let s = set(acls);
        prop_assert!(!authorizer(&[], allow_if_none).authorize(&s, ALICE, Read, ResourceType::Topic, "abc"));
        prop_assert!(authorizer(&["User:alice"], false).authorize(&s, ALICE, Read, ResourceType::Topic, "abc"));
    }

    #[test]
    fn prefixed_covers_exactly_the_names_with_the_prefix(
        prefix in "[a-c]{1,3}",
        name in "[a-c]{0,5}",
    ) {
        let s = set(vec![acl(&prefix, Prefixed, "User:alice", Read, Allow)]);
        let a = authorizer(&[], false);
        prop_assert_eq!(topic(&a, &s, Read, &name), name.starts_with(&prefix));
    }

    #[test]
    fn filters_select_what_they_name(acls in prop::collection::vec(arb_acl(), 0..12)) {
        let s = set(acls.clone());
        prop_assert_eq!(s.matching(&AclBindingFilter::any()).count(), acls.len());
        let deny = AclBindingFilter { permission: Deny, ..AclBindingFilter::any() };
        let denies: BTreeSet<_> = s.matching(&deny).map(|(id, _)| *id).collect();
        prop_assert_eq!(denies.len(), acls.iter().filter(|a| a.permission == Deny).count());
    }
}
