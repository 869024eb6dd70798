//! Which broker properties may be changed at runtime (AlterConfigs / IncrementalAlterConfigs
//! on a BROKER resource), as Kafka decides it in `DynamicBrokerConfig.validateConfigs`.
//!
//! Kafka's dynamic broker properties are the union of the `reconfigurableConfigs` of its
//! reconfigurable components (`DynamicBrokerConfig.AllDynamicConfigs`): the topic-config
//! synonyms (`DynamicLogConfig`, checked by the topic table, not here), the log cleaner's, the
//! thread pools', the listeners' (SSL and SASL settings), the socket server's connection
//! limits, the producer-state and remote-log ones, and `metric.reporters`. This module lists
//! the non-topic ones with their `ConfigDef` types; a value is checked against its type, as
//! Kafka's `validateConfigTypes` does. Runnel stores them (DescribeConfigs shows them as
//! dynamic) though no Runnel component reconfigures from most of them: the point is that a
//! client setting one (librdkafka's admin test sets `sasl.kerberos.min.time.before.relogin`)
//! gets Kafka's answer.
//!
//! Refusals, with Kafka's messages (INVALID_REQUEST, as Kafka turns the `ConfigException` into
//! `InvalidRequestException`): a property that is not dynamic ("Cannot update these configs
//! dynamically"); an SSL keystore/truststore property without a `listener.name.<l>.` prefix;
//! a per-broker property (listener, SSL and SASL ones) on the cluster-wide default resource "".

use crate::errors::ApiError;
use crate::topic_config::{parse_value, ConfigType, TopicConfigDef, Validator};

/// A dynamic broker property: Kafka's name and `ConfigDef` type. `per_broker`: Kafka's
/// `PerBrokerConfigs` (may only be set for one broker id, never as the cluster default).
struct DynamicProperty {
    name: &'static str,
    ty: ConfigType,
    validator: Validator,
    per_broker: bool,
}

const fn cluster(name: &'static str, ty: ConfigType, validator: Validator) -> DynamicProperty {
    DynamicProperty {
        name,
        ty,
        validator,
        per_broker: false,
    }
}

const fn broker(name: &'static str, ty: ConfigType, validator: Validator) -> DynamicProperty {
    DynamicProperty {
        name,
        ty,
        validator,
        per_broker: true,
    }
}

use ConfigType::{Boolean, Double, Int, List, Long, String as Str};
use Validator::{AtLeast, Between, None as Any, OneOf};

/// Kafka's `ConfigDef.Type.SHORT` (the table has no SHORT type).
const SHORT: Validator = Between(-32_768, 32_767);

/// `SslConfigs.RECONFIGURABLE_CONFIGS`: dynamic only per listener (`listener.name.<l>.<key>`).
const SSL_PER_LISTENER: [&str; 10] = [
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.truststore.certificates",
];

/// The non-topic dynamic broker properties (Kafka 3.9 `DynamicBrokerConfig.AllDynamicConfigs`
/// minus the topic-config synonyms and `SSL_PER_LISTENER`).
const DYNAMIC_PROPERTIES: &[DynamicProperty] = &[
    // LogCleaner.ReconfigurableConfigs (message.max.bytes is a topic synonym).
    cluster("log.cleaner.threads", Int, AtLeast(0)),
    cluster("log.cleaner.dedupe.buffer.size", Long, Any),
    cluster("log.cleaner.io.buffer.load.factor", Double, Any),
    cluster("log.cleaner.io.buffer.size", Int, AtLeast(0)),
    cluster("log.cleaner.io.max.bytes.per.second", Double, Any),
    cluster("log.cleaner.backoff.ms", Long, AtLeast(0)),
    // DynamicThreadPool.ReconfigurableConfigs.
    cluster("num.io.threads", Int, AtLeast(1)),
    cluster("num.replica.fetchers", Int, Any),
    cluster("num.recovery.threads.per.data.dir", Int, AtLeast(1)),
    cluster("background.threads", Int, AtLeast(1)),
    cluster("metric.reporters", List, Any),
    // DynamicListenerConfig.ReconfigurableConfigs: listeners, SSL, SASL.
    broker("advertised.listeners", Str, Any),
    broker("listeners", Str, Any),
    broker("listener.security.protocol.map", Str, Any),
    broker("principal.builder.class", Str, Any),
    broker("ssl.protocol", Str, Any),
    broker("ssl.provider", Str, Any),
    broker("ssl.cipher.suites", List, Any),
    broker("ssl.enabled.protocols", List, Any),
    broker("ssl.keymanager.algorithm", Str, Any),
    broker("ssl.trustmanager.algorithm", Str, Any),
    broker("ssl.endpoint.identification.algorithm", Str, Any),
    broker("ssl.secure.random.implementation", Str, Any),
    broker(
        "ssl.client.auth",
        Str,
        OneOf(&["required", "requested", "none"]),
    ),
    broker("ssl.engine.factory.class", Str, Any),
    broker("sasl.mechanism.inter.broker.protocol", Str, Any),
    broker("sasl.jaas.config", Str, Any),
    broker("sasl.enabled.mechanisms", List, Any),
    broker("sasl.kerberos.service.name", Str, Any),
    broker("sasl.kerberos.kinit.cmd", Str, Any),
    broker("sasl.kerberos.ticket.renew.window.factor", Double, Any),
    broker("sasl.kerberos.ticket.renew.jitter", Double, Any),
    broker("sasl.kerberos.min.time.before.relogin", Long, Any),
    broker("sasl.kerberos.principal.to.local.rules", List, Any),
    broker("sasl.login.refresh.window.factor", Double, Any),
    broker("sasl.login.refresh.window.jitter", Double, Any),
    broker("sasl.login.refresh.min.period.seconds", Int, SHORT),
    broker("sasl.login.refresh.buffer.seconds", Int, SHORT),
    // Kafka's ClusterLevelListenerConfigs: listener configs that are cluster-wide too.
    cluster("max.connections", Int, AtLeast(0)),
    cluster("max.connection.creation.rate", Int, AtLeast(0)),
    cluster("num.network.threads", Int, AtLeast(1)),
    // SocketServer.ReconfigurableConfigs.
    cluster("max.connections.per.ip", Int, AtLeast(0)),
    cluster("max.connections.per.ip.overrides", Str, Any),
    // DynamicProducerStateManagerConfig.
    cluster("producer.id.expiration.ms", Int, AtLeast(1)),
    cluster("transaction.partition.verification.enable", Boolean, Any),
    // DynamicRemoteLogConfig.ReconfigurableConfigs.
    cluster(
        "remote.log.index.file.cache.total.size.bytes",
        Long,
        AtLeast(1),
    ),
    cluster("remote.fetch.max.wait.ms", Int, AtLeast(1)),
    cluster(
        "remote.log.manager.copy.max.bytes.per.second",
        Long,
        AtLeast(1),
    ),
    cluster(
        "remote.log.manager.fetch.max.bytes.per.second",
        Long,
        AtLeast(1),
    ),
    cluster("remote.list.offsets.request.timeout.ms", Long, AtLeast(1)),
];

fn property(name: &str) -> Option<&'static DynamicProperty> {
    DYNAMIC_PROPERTIES.iter().find(|p| p.name == name)
}

/// `listener.name.<listener>.<config>` -> `<config>` (Kafka's `ListenerConfigRegex`).
fn listener_base(key: &str) -> Option<&str> {
    let rest = key.strip_prefix("listener.name.")?;
    let (listener, base) = rest.split_once('.')?;
    (!listener.is_empty() && !base.is_empty()).then_some(base)
}

/// Whether `key` is a dynamic broker property that is not a topic-config synonym (those the
/// topic table decides).
pub fn is_dynamic_broker_property(key: &str) -> bool {
    property(key).is_some() || listener_base(key).is_some()
}

/// Decides one non-synonym property set on a BROKER resource: `per_broker` is true for a
/// broker id, false for the cluster-wide default "". `Err` carries Kafka's code and message.
pub fn validate_dynamic_broker_property(
    key: &str,
    value: &str,
    per_broker: bool,
) -> Result<(), ApiError> {
    let base = listener_base(key);
    let def = property(base.unwrap_or(key));
    if base.is_none() && def.is_none() {
        if SSL_PER_LISTENER.contains(&key) {
            return Err(ApiError::invalid_request(format!(
                "These security configs can be dynamically updated only per-listener using \
                 the listener prefix: Set({key})"
            )));
        }
        return Err(ApiError::invalid_request(format!(
            "Cannot update these configs dynamically: Set({key})"
        )));
    }
    if let Some(d) = def {
        let typed = TopicConfigDef {
            name: d.name,
            ty: d.ty,
            default: "",
            synonyms: &[],
            validator: d.validator,
        };
        parse_value(&typed, value)
            .map_err(|e| ApiError::invalid_config(e.message.replacen(d.name, key, 1)))?;
    }
    let cluster_level_listener_config =
        base.is_some_and(|b| property(b).is_some_and(|d| !d.per_broker));
    let needs_broker_id = match base {
        Some(_) => !cluster_level_listener_config,
        None => def.is_some_and(|d| d.per_broker),
    };
    if needs_broker_id && !per_broker {
        return Err(ApiError::invalid_request(format!(
            "Cannot update these configs at default cluster level, broker id must be \
             specified: Set({key})"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codes;

    fn code(r: Result<(), ApiError>) -> i16 {
        r.err().map_or(codes::NONE, |e| e.code)
    }

    /// Caught: librdkafka's 0081_admin sets `sasl.kerberos.min.time.before.relogin` on a
    /// broker and Runnel refused it as "not dynamic" (only topic synonyms were accepted).
    #[test]
    fn kafkas_per_broker_dynamic_properties_are_accepted_for_a_broker() {
        for p in DYNAMIC_PROPERTIES {
            let value = match p.ty {
                Boolean => "true",
                Int | Long => "5",
                Double => "0.5",
                _ if p.name == "ssl.client.auth" => "required",
                _ => "x",
            };
            assert_eq!(
                code(validate_dynamic_broker_property(p.name, value, true)),
                codes::NONE,
                "{}",
                p.name
            );
        }
        assert!(validate_dynamic_broker_property(
            "sasl.kerberos.min.time.before.relogin",
            "58000",
            true
        )
        .is_ok());
    }

    #[test]
    fn static_properties_are_refused_with_kafkas_message() {
        let e = validate_dynamic_broker_property("log.dirs", "/x", true).unwrap_err();
        assert_eq!(e.code, codes::INVALID_REQUEST);
        assert_eq!(
            e.message,
            "Cannot update these configs dynamically: Set(log.dirs)"
        );
        for key in [
            "node.id",
            "process.roles",
            "broker.id",
            "controller.quorum.voters",
        ] {
            assert_eq!(
                code(validate_dynamic_broker_property(key, "1", true)),
                codes::INVALID_REQUEST
            );
        }
    }

    #[test]
    fn per_broker_properties_are_refused_at_cluster_level() {
        let e =
            validate_dynamic_broker_property("sasl.kerberos.min.time.before.relogin", "1", false)
                .unwrap_err();
        assert_eq!(e.code, codes::INVALID_REQUEST);
        assert!(e
            .message
            .starts_with("Cannot update these configs at default cluster level"));
        assert!(validate_dynamic_broker_property("max.connections", "10", false).is_ok());
        assert!(validate_dynamic_broker_property("log.cleaner.threads", "2", false).is_ok());
        assert!(validate_dynamic_broker_property(
            "listener.name.plain.max.connections",
            "10",
            false
        )
        .is_ok());
        assert_eq!(
            code(validate_dynamic_broker_property(
                "listener.name.plain.ssl.keystore.location",
                "/k",
                false
            )),
            codes::INVALID_REQUEST
        );
    }

    #[test]
    fn ssl_stores_only_per_listener() {
        let e = validate_dynamic_broker_property("ssl.keystore.location", "/k", true).unwrap_err();
        assert_eq!(e.code, codes::INVALID_REQUEST);
        assert!(e.message.contains("only per-listener"), "{}", e.message);
        assert!(validate_dynamic_broker_property(
            "listener.name.external.ssl.keystore.location",
            "/k",
            true
        )
        .is_ok());
    }

    #[test]
    fn values_are_checked_against_the_type() {
        let e =
            validate_dynamic_broker_property("sasl.kerberos.min.time.before.relogin", "soon", true)
                .unwrap_err();
        assert_eq!(e.code, codes::INVALID_CONFIG);
        assert!(
            e.message.contains("sasl.kerberos.min.time.before.relogin"),
            "{}",
            e.message
        );
        assert_eq!(
            code(validate_dynamic_broker_property(
                "sasl.login.refresh.buffer.seconds",
                "40000",
                true
            )),
            codes::INVALID_CONFIG
        );
        assert_eq!(
            code(validate_dynamic_broker_property(
                "listener.name.l.num.network.threads",
                "0",
                true
            )),
            codes::INVALID_CONFIG
        );
    }
}
