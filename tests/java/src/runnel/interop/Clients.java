package runnel.interop;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/** Client factories with the Java defaults (only bootstrap and serdes set) and small helpers. */
final class Clients {
    static final Duration OP = Duration.ofSeconds(30);

    private Clients() {}

    static String uniqueTopic(String prefix) {
        return prefix + "-" + UUID.randomUUID().toString().substring(0, 8);
    }

    static Admin admin(String bootstrap) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", "runnel-java-admin");
        return Admin.create(p);
    }

    static KafkaProducer<byte[], byte[]> producer(String bootstrap, Map<String, Object> extra) {
        Map<String, Object> p = new HashMap<>();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
        p.putAll(extra);
        return new KafkaProducer<>(p);
    }

    static KafkaConsumer<byte[], byte[]> consumer(String bootstrap, Map<String, Object> extra) {
        Map<String, Object> p = new HashMap<>();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.putAll(extra);
        return new KafkaConsumer<>(p);
    }

    /** Creates the topic and waits until every partition has a leader. */
    static TopicDescription createTopic(Admin admin, String topic, int partitions, int replicationFactor,
            Map<String, String> configs) throws Exception {
        NewTopic t = new NewTopic(topic, partitions, (short) replicationFactor).configs(configs);
        admin.createTopics(List.of(t)).all().get(OP.toMillis(), TimeUnit.MILLISECONDS);
        return createTopicWaitLeaders(admin, topic, partitions);
    }

    /** Waits until the topic has {@code partitions} partitions, each with a leader. */
    static TopicDescription createTopicWaitLeaders(Admin admin, String topic, int partitions) throws Exception {
        return Check.waitFor("leaders for every partition of " + topic, OP, () -> {
            TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            boolean ready = d.partitions().size() == partitions
                && d.partitions().stream().allMatch(p -> p.leader() != null && !p.leader().isEmpty());
            return ready ? d : null;
        });
    }

    /** Every record of the topic's partitions from the beginning up to the current end offsets. */
    static Map<Integer, List<ConsumerRecord<byte[], byte[]>>> readAll(String bootstrap, String topic, int partitions)
            throws InterruptedException {
        Map<Integer, List<ConsumerRecord<byte[], byte[]>>> out = new HashMap<>();
        try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap, Map.of())) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int p = 0; p < partitions; p++) {
                tps.add(new TopicPartition(topic, p));
                out.put(p, new ArrayList<>());
            }
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps, OP);
            Check.waitFor("reading " + topic + " to " + end, OP, () -> {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    out.get(r.partition()).add(r);
                }
                return tps.stream().allMatch(tp -> c.position(tp) >= end.get(tp));
            });
        }
        return out;
    }
}
