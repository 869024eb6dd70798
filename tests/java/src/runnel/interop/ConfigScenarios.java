package runnel.interop;

import java.util.List;
import java.util.Map;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConfigEntry.ConfigType;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.config.ConfigResource;

/** DescribeConfigs / IncrementalAlterConfigs parity with Kafka (KIP-569 types, documentation). */
final class ConfigScenarios {
    private ConfigScenarios() {}

    static void typesAndDocumentation(Main.Env env) throws Exception {
        String topic = Clients.uniqueTopic("java-config-types");
        try (Admin admin = Clients.admin(env.bootstrap())) {
            Clients.createTopic(admin, topic, 1, 1, Map.of());
            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            DescribeConfigsOptions withDocs = new DescribeConfigsOptions().includeDocumentation(true);
            Config cfg = admin.describeConfigs(List.of(res), withDocs).all().get().get(res);
            for (ConfigEntry e : cfg.entries()) {
                Check.that(e.type() != ConfigType.UNKNOWN, "topic config " + e.name() + " has type UNKNOWN");
                Check.that(e.documentation() != null && !e.documentation().isBlank(),
                    "topic config " + e.name() + " has no documentation");
            }
            Map<String, ConfigType> want = Map.of("retention.ms", ConfigType.LONG, "cleanup.policy", ConfigType.LIST,
                "min.cleanable.dirty.ratio", ConfigType.DOUBLE, "unclean.leader.election.enable", ConfigType.BOOLEAN,
                "compression.type", ConfigType.STRING, "max.message.bytes", ConfigType.INT);
            for (var w : want.entrySet()) {
                Check.equal(w.getValue(), cfg.get(w.getKey()).type(), "type of " + w.getKey());
            }
            Config plain = admin.describeConfigs(List.of(res)).all().get().get(res);
            Check.that(plain.get("retention.ms").documentation() == null,
                "documentation sent although include_documentation=false");

            Node node = admin.describeCluster().nodes().get().iterator().next();
            ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, String.valueOf(node.id()));
            Config b = admin.describeConfigs(List.of(broker), withDocs).all().get().get(broker);
            for (String listener : List.of("listeners", "advertised.listeners")) {
                ConfigEntry e = b.get(listener);
                Check.that(e != null, "broker configs miss " + listener);
                Check.that(e.value() != null && e.value().contains("127.0.0.1:" + node.port()),
                    listener + " = " + e.value() + " does not name the broker's address 127.0.0.1:" + node.port());
                Check.equal(ConfigType.STRING, e.type(), "type of " + listener); // STRING in Kafka 4.0
            }
            for (ConfigEntry e : b.entries()) {
                Check.that(e.type() != ConfigType.UNKNOWN, "broker config " + e.name() + " has type UNKNOWN");
                Check.that(e.documentation() != null && !e.documentation().isBlank(),
                    "broker config " + e.name() + " has no documentation");
            }
            Check.equal(ConfigType.INT, b.get("num.partitions").type(), "type of num.partitions");
            Check.equal(ConfigType.SHORT, b.get("offsets.topic.replication.factor").type(),
                "type of offsets.topic.replication.factor");
        }
    }

    static void subtractToEmptyList(Main.Env env) throws Exception {
        String topic = Clients.uniqueTopic("java-config-subtract");
        try (Admin admin = Clients.admin(env.bootstrap())) {
            Clients.createTopic(admin, topic, 1, 1, Map.of());
            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            admin.incrementalAlterConfigs(Map.of(res, List.of(new AlterConfigOp(
                new ConfigEntry("cleanup.policy", "delete"), AlterConfigOp.OpType.SUBTRACT)))).all().get();
            ConfigEntry e = admin.describeConfigs(List.of(res)).all().get().get(res).get("cleanup.policy");
            Check.equal("", e.value(), "cleanup.policy after subtracting its only element");
            Check.equal(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, e.source(), "its source");
            admin.incrementalAlterConfigs(Map.of(res, List.of(new AlterConfigOp(
                new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.APPEND)))).all().get();
            Check.equal("compact", admin.describeConfigs(List.of(res)).all().get().get(res)
                .get("cleanup.policy").value(), "cleanup.policy after appending to the empty list");
        }
    }
}
