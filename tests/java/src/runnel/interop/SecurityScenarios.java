package runnel.interop;

import java.io.FileInputStream;
import java.io.InputStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.GroupAuthorizationException;
import org.apache.kafka.common.errors.SaslAuthenticationException;
import org.apache.kafka.common.errors.TopicAuthorizationException;

/**
 * The Java client over TLS and SASL (issue 14). Every scenario takes {@code config=FILE}: the
 * client's own security properties (security.protocol, sasl.mechanism, sasl.jaas.config,
 * ssl.truststore.* / ssl.keystore.* as PEM), applied to the admin, producer and consumer alike.
 * tests/interop/test_java_security.py starts the brokers and makes the certificates.
 */
final class SecurityScenarios {
    private SecurityScenarios() {}

    private static Map<String, Object> security(Main.Env env) throws Exception {
        Properties p = new Properties();
        try (InputStream in = new FileInputStream(env.arg("config"))) {
            p.load(in);
        }
        Map<String, Object> m = new HashMap<>();
        p.forEach((k, v) -> m.put((String) k, v));
        m.put("bootstrap.servers", env.bootstrap());
        return m;
    }

    private static Admin admin(Map<String, Object> sec) {
        Map<String, Object> p = new HashMap<>(sec);
        p.put("client.id", "runnel-java-security-admin");
        p.put("default.api.timeout.ms", 30000);
        return Admin.create(p);
    }

    private static KafkaConsumer<byte[], byte[]> groupConsumer(Main.Env env, Map<String, Object> sec,
            String group) {
        Map<String, Object> c = new HashMap<>(sec);
        c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        return Clients.consumer(env.bootstrap(), c);
    }

    /**
     * Admin (create the topic unless {@code create=false}, describe the cluster and the topic),
     * produce three records with acks=all, consume them in a group ({@code group=}, default a
     * fresh one), commit, and read the committed offset back through the admin.
     */
    static void roundTrip(Main.Env env) throws Exception {
        Map<String, Object> sec = security(env);
        String topic = env.arg("topic");
        String group = env.args().getOrDefault("group", "sec-" + UUID.randomUUID());
        try (Admin admin = admin(sec)) {
            if (!"false".equals(env.args().get("create"))) {
                admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all()
                    .get(Clients.OP.toMillis(), TimeUnit.MILLISECONDS);
            }
            Check.that(!admin.describeCluster().nodes().get().isEmpty(), "describeCluster lists nodes");
            Check.waitFor("leader of " + topic, Clients.OP, () -> {
                var d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
                return d.partitions().get(0).leader() != null;
            });

            Map<String, Object> prod = new HashMap<>(sec);
            prod.put(ProducerConfig.ACKS_CONFIG, "all");
            try (KafkaProducer<byte[], byte[]> producer = Clients.producer(env.bootstrap(), prod)) {
                for (int i = 0; i < 3; i++) {
                    producer.send(new ProducerRecord<>(topic, ("v" + i).getBytes())).get(30, TimeUnit.SECONDS);
                }
            }

            List<String> got = new ArrayList<>();
            try (KafkaConsumer<byte[], byte[]> consumer = groupConsumer(env, sec, group)) {
                consumer.subscribe(List.of(topic));
                long deadline = System.nanoTime() + Clients.OP.toNanos();
                while (got.size() < 3 && System.nanoTime() < deadline) {
                    for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                        got.add(new String(r.value()));
                    }
                }
                consumer.commitSync(Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(3)));
            }
            Check.equal(List.of("v0", "v1", "v2"), got, "records read in the group");
            var committed = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            Check.equal(3L, committed.get(new TopicPartition(topic, 0)).offset(), "committed offset");
            var end = admin.listOffsets(Map.of(new TopicPartition(topic, 0), OffsetSpec.latest())).all().get();
            Check.equal(3L, end.get(new TopicPartition(topic, 0)).offset(), "end offset");
        }
    }

    /** Wrong credentials: the admin and the producer fail with SaslAuthenticationException. */
    static void authenticationFails(Main.Env env) throws Exception {
        Map<String, Object> sec = security(env);
        try (Admin admin = admin(sec)) {
            SaslAuthenticationException e = Check.failsWith(SaslAuthenticationException.class,
                "describeCluster with a wrong password", () -> admin.describeCluster().nodes().get());
            Check.that(!e.getMessage().contains("wrong-password"), "the password is not echoed: " + e);
        }
        Map<String, Object> prod = new HashMap<>(sec);
        prod.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 20000);
        try (KafkaProducer<byte[], byte[]> producer = Clients.producer(env.bootstrap(), prod)) {
            try {
                producer.send(new ProducerRecord<>("any-topic", "x".getBytes())).get(30, TimeUnit.SECONDS);
                throw new Check.Failure("a send with a wrong password succeeded");
            } catch (java.util.concurrent.ExecutionException ex) {
                Check.that(ex.getCause() instanceof SaslAuthenticationException, "producer error: " + ex.getCause());
            } catch (SaslAuthenticationException ex) {
                // KafkaProducer.send throws it directly when metadata cannot be fetched.
            }
        }
    }

    /**
     * A principal without ACLs: Produce and CreateTopics are TOPIC_AUTHORIZATION_FAILED, and
     * listTopics hides the topic.
     */
    static void denied(Main.Env env) throws Exception {
        Map<String, Object> sec = security(env);
        String topic = env.arg("topic");
        Map<String, Object> prod = new HashMap<>(sec);
        prod.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 20000);
        try (KafkaProducer<byte[], byte[]> producer = Clients.producer(env.bootstrap(), prod)) {
            try {
                producer.send(new ProducerRecord<>(topic, "x".getBytes())).get(30, TimeUnit.SECONDS);
                throw new Check.Failure("a send without Write on " + topic + " succeeded");
            } catch (java.util.concurrent.ExecutionException ex) {
                Check.that(ex.getCause() instanceof TopicAuthorizationException, "producer error: " + ex.getCause());
            }
        }
        try (Admin admin = admin(sec)) {
            Check.failsWith(TopicAuthorizationException.class, "createTopics without Create",
                () -> admin.createTopics(List.of(new NewTopic(topic + "-new", 1, (short) 1))).all().get());
            Set<String> listed = admin.listTopics().names().get();
            Check.that(!listed.contains(topic), "listTopics hides " + topic + ": " + listed);
        }
    }

    /**
     * A principal that may use the topic but not the group: a commit in the group is
     * GROUP_AUTHORIZATION_FAILED (the Java consumer looks the topic up first, so the topic must be
     * allowed for the group's error to be the one that answers).
     */
    static void groupDenied(Main.Env env) throws Exception {
        Map<String, Object> sec = security(env);
        String topic = env.arg("topic");
        try (KafkaConsumer<byte[], byte[]> consumer = groupConsumer(env, sec, env.arg("group"))) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(List.of(tp));
            try {
                consumer.commitSync(Map.of(tp, new OffsetAndMetadata(0)), Clients.OP);
                throw new Check.Failure("a commit without Read on the group succeeded");
            } catch (GroupAuthorizationException expected) {
                Check.that(expected.getMessage().contains(env.arg("group")), "names the group: " + expected);
            }
        }
    }
}
