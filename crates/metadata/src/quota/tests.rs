use super::*;
use crate::image::MetadataImage;

use EntityName::{Default as D, Named as N};

fn n(s: &str) -> EntityName {
    N(s.to_string())
}

fn alteration(entity: &[(&str, Option<&str>)], ops: &[(&str, Option<f64>)]) -> QuotaAlteration {
    QuotaAlteration {
        entity: entity
            .iter()
            .map(|(t, n)| (t.to_string(), n.map(str::to_string)))
            .collect(),
        ops: ops.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
    }
}

fn apply(image: &MetadataImage, records: Vec<MetadataRecord>) -> MetadataImage {
    let batch: Vec<(i64, MetadataRecord)> = records
        .into_iter()
        .enumerate()
        .map(|(i, r)| (image.offset + 1 + i as i64, r))
        .collect();
    image.apply(&batch).expect("records apply")
}

fn code(r: &QuotaAlterResult) -> i16 {
    r.as_ref().err().map_or(0, |e| e.code)
}

#[test]
fn alter_sets_changes_and_removes_through_records() {
    let image = MetadataImage::empty("c".into());
    let (results, records) = alter_client_quotas(
        &image.client_quotas,
        &[
            alteration(
                &[("user", Some("alice"))],
                &[("producer_byte_rate", Some(1024.0))],
            ),
            alteration(
                &[("user", None), ("client-id", Some("app"))],
                &[("request_percentage", Some(12.5))],
            ),
        ],
    );
    assert_eq!(results.iter().map(code).collect::<Vec<_>>(), vec![0, 0]);
    assert_eq!(records.len(), 2);
    let image = apply(&image, records);
    assert_eq!(
        image.client_quotas[&QuotaEntity::user(n("alice"))]["producer_byte_rate"],
        1024.0
    );
    assert_eq!(
        image.client_quotas[&QuotaEntity::user_client(D, n("app"))]["request_percentage"],
        12.5
    );
    // Setting the same value again, or removing a key that is not there, writes nothing.
    let (results, records) = alter_client_quotas(
        &image.client_quotas,
        &[alteration(
            &[("user", Some("alice"))],
            &[
                ("producer_byte_rate", Some(1024.0)),
                ("consumer_byte_rate", None),
            ],
        )],
    );
    assert_eq!(code(&results[0]), 0);
    assert!(records.is_empty());
    // Removing the last key drops the entity.
    let (_, records) = alter_client_quotas(
        &image.client_quotas,
        &[alteration(
            &[("user", Some("alice"))],
            &[("producer_byte_rate", None)],
        )],
    );
    let image = apply(&image, records);
    assert!(!image
        .client_quotas
        .contains_key(&QuotaEntity::user(n("alice"))));
}

#[test]
fn alter_refuses_what_kafka_refuses_with_invalid_request() {
    let quotas = ClientQuotas::new();
    let cases = [
        alteration(&[], &[("producer_byte_rate", Some(1.0))]),
        alteration(&[("user", Some("a")), ("user", Some("b"))], &[]),
        alteration(&[("group", Some("g"))], &[]),
        alteration(&[("ip", Some("1.2.3.4"))], &[]),
        alteration(&[("user", Some(""))], &[]),
        alteration(&[("user", Some("a"))], &[("no_such_key", Some(1.0))]),
        alteration(&[("user", Some("a"))], &[("producer_byte_rate", Some(0.0))]),
        alteration(
            &[("user", Some("a"))],
            &[("producer_byte_rate", Some(-1.0))],
        ),
        alteration(&[("user", Some("a"))], &[("producer_byte_rate", Some(1.5))]),
        alteration(
            &[("user", Some("a"))],
            &[("producer_byte_rate", Some(1e19))],
        ),
        alteration(
            &[("user", Some("a"))],
            &[("request_percentage", Some(f64::NAN))],
        ),
        alteration(
            &[("user", Some("a"))],
            &[("request_percentage", Some(f64::INFINITY))],
        ),
        alteration(
            &[("user", Some("a"))],
            &[
                ("producer_byte_rate", Some(1.0)),
                ("producer_byte_rate", None),
            ],
        ),
    ];
    for case in &cases {
        let (results, records) = alter_client_quotas(&quotas, std::slice::from_ref(case));
        assert_eq!(code(&results[0]), codes::INVALID_REQUEST, "{case:?}");
        assert!(records.is_empty(), "{case:?}");
    }
    // The same entity twice: the second entry fails, the first stands.
    let (results, records) = alter_client_quotas(
        &quotas,
        &[
            alteration(&[("client-id", None)], &[("consumer_byte_rate", Some(5.0))]),
            alteration(&[("client-id", None)], &[("consumer_byte_rate", Some(6.0))]),
        ],
    );
    assert_eq!(
        results.iter().map(code).collect::<Vec<_>>(),
        vec![0, codes::INVALID_REQUEST]
    );
    assert_eq!(records.len(), 1);
    // Fractional values are fine for the DOUBLE keys.
    assert!(validate_key_value("controller_mutation_rate", 0.5).is_ok());
}

fn sample_quotas() -> ClientQuotas {
    let mut q = ClientQuotas::new();
    let set = |q: &mut ClientQuotas, e: QuotaEntity| replay(q, &e, "producer_byte_rate", Some(1.0));
    set(&mut q, QuotaEntity::user(n("alice")));
    set(&mut q, QuotaEntity::user(D));
    set(&mut q, QuotaEntity::client(n("app")));
    set(&mut q, QuotaEntity::client(D));
    set(&mut q, QuotaEntity::user_client(n("alice"), n("app")));
    set(&mut q, QuotaEntity::user_client(D, D));
    q
}

fn describe(
    components: &[(&str, i8, Option<&str>)],
    strict: bool,
) -> Result<Vec<QuotaEntity>, i16> {
    let components: Vec<FilterComponent> = components
        .iter()
        .map(|(t, m, s)| FilterComponent {
            entity_type: t.to_string(),
            match_type: *m,
            matched: s.map(str::to_string),
        })
        .collect();
    let quotas = sample_quotas();
    describe_client_quotas(&quotas, &components, strict)
        .map(|v| v.into_iter().map(|(e, _)| e.clone()).collect())
        .map_err(|e| e.code)
}

#[test]
fn describe_filters_as_kafka() {
    // No components, not strict: everything.
    assert_eq!(describe(&[], false).unwrap().len(), 6);
    // Strict with no components: nothing has zero parts.
    assert!(describe(&[], true).unwrap().is_empty());
    // Exact user, not strict: the user and the user+client entity.
    assert_eq!(
        describe(&[("user", 0, Some("alice"))], false).unwrap(),
        vec![
            QuotaEntity::user(n("alice")),
            QuotaEntity::user_client(n("alice"), n("app")),
        ]
    );
    // Exact user, strict: only the user entity.
    assert_eq!(
        describe(&[("user", 0, Some("alice"))], true).unwrap(),
        vec![QuotaEntity::user(n("alice"))]
    );
    // Default user, strict.
    assert_eq!(
        describe(&[("user", 1, None)], true).unwrap(),
        vec![QuotaEntity::user(D)]
    );
    // Any specified client id (Kafka's MATCH_TYPE_SPECIFIED includes the default).
    assert_eq!(
        describe(&[("client-id", 2, None)], true).unwrap(),
        vec![QuotaEntity::client(D), QuotaEntity::client(n("app"))]
    );
    // Errors.
    assert_eq!(
        describe(&[("", 0, Some("x"))], false),
        Err(codes::INVALID_REQUEST)
    );
    assert_eq!(
        describe(&[("user", 0, None)], false),
        Err(codes::INVALID_REQUEST)
    );
    assert_eq!(
        describe(&[("user", 1, Some("x"))], false),
        Err(codes::INVALID_REQUEST)
    );
    assert_eq!(
        describe(&[("user", 2, Some("x"))], false),
        Err(codes::INVALID_REQUEST)
    );
    assert_eq!(
        describe(&[("user", 9, None)], false),
        Err(codes::INVALID_REQUEST)
    );
    assert_eq!(
        describe(&[("user", 1, None), ("user", 2, None)], false),
        Err(codes::INVALID_REQUEST)
    );
    assert_eq!(
        describe(&[("ip", 1, None), ("user", 2, None)], false),
        Err(codes::INVALID_REQUEST)
    );
    assert_eq!(describe(&[("group", 1, None)], false), Err(35));
}

fn key_of(user: &str, client: &str) -> SensorKey {
    SensorKey {
        user: user.into(),
        client_id: client.into(),
    }
}

#[test]
fn precedence_follows_kafkas_eight_levels() {
    // Each level set with its own value; removing levels from the top must reveal the next.
    let levels = [
        QuotaEntity::user_client(n("u"), n("c")),
        QuotaEntity::user_client(n("u"), D),
        QuotaEntity::user(n("u")),
        QuotaEntity::user_client(D, n("c")),
        QuotaEntity::user_client(D, D),
        QuotaEntity::user(D),
        QuotaEntity::client(n("c")),
        QuotaEntity::client(D),
    ];
    let sensors = [
        key_of("u", "c"),
        key_of("u", "c"),
        key_of("u", ""),
        key_of("u", "c"),
        key_of("u", "c"),
        key_of("u", ""),
        key_of("", "c"),
        key_of("", "c"),
    ];
    let mut q = ClientQuotas::new();
    for (i, e) in levels.iter().enumerate() {
        replay(&mut q, e, "producer_byte_rate", Some((i + 1) as f64));
    }
    for i in 0..levels.len() {
        assert_eq!(
            applicable_quota(&q, "u", "c", "producer_byte_rate"),
            Some(((i + 1) as f64, sensors[i].clone())),
            "level {}",
            i + 1
        );
        replay(&mut q, &levels[i], "producer_byte_rate", None);
    }
    assert_eq!(applicable_quota(&q, "u", "c", "producer_byte_rate"), None);
}

#[test]
fn precedence_is_per_key_and_an_empty_client_id_sees_only_user_levels() {
    let mut q = ClientQuotas::new();
    replay(
        &mut q,
        &QuotaEntity::user(n("u")),
        "consumer_byte_rate",
        Some(7.0),
    );
    replay(
        &mut q,
        &QuotaEntity::client(D),
        "producer_byte_rate",
        Some(9.0),
    );
    assert_eq!(
        applicable_quota(&q, "u", "c", "producer_byte_rate"),
        Some((9.0, key_of("", "c")))
    );
    assert_eq!(
        applicable_quota(&q, "u", "c", "consumer_byte_rate"),
        Some((7.0, key_of("u", "")))
    );
    assert_eq!(applicable_quota(&q, "u", "", "producer_byte_rate"), None);
    assert_eq!(
        applicable_quota(&q, "other", "c", "consumer_byte_rate"),
        None
    );
}

#[test]
fn quota_records_round_trip_through_the_envelope() {
    let record = MetadataRecord::ClientQuota {
        entity: QuotaEntity::user_client(D, n("app")),
        key: "producer_byte_rate".into(),
        value: Some(QuotaValue(1048576.0)),
    };
    let json = serde_json::to_string(&record).unwrap();
    let back: MetadataRecord = serde_json::from_str(&json).unwrap();
    assert_eq!(back, record);
    assert_eq!(record.api_key(), 14);
}

#[test]
fn alterations_carry_nan_between_nodes() {
    let a = alteration(
        &[("user", None)],
        &[("request_percentage", Some(f64::NAN)), ("x", None)],
    );
    let json = serde_json::to_string(&a).unwrap();
    let back: QuotaAlteration = serde_json::from_str(&json).unwrap();
    assert!(back.ops[0].1.unwrap().is_nan());
    assert_eq!(back.ops[1], ("x".to_string(), None));
}
