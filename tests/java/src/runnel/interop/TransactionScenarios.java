package runnel.interop;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;

/**
 * Kafka transactions with the Java client (issue 13): a committed transaction is read by a
 * read_committed consumer, an aborted one never (a read_uncommitted consumer sees it), offsets
 * sent with sendOffsetsToTransaction are committed only with their transaction, and a second
 * producer with the same transactional.id fences the first (ProducerFencedException).
 */
final class TransactionScenarios {
    private TransactionScenarios() {}

    private static KafkaProducer<byte[], byte[]> transactional(Main.Env env, String id) {
        KafkaProducer<byte[], byte[]> p = Clients.producer(env.bootstrap(),
            Map.of("transactional.id", id, "transaction.timeout.ms", 60000));
        p.initTransactions();
        return p;
    }

    private static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /** Every value of partition 0 up to the end the isolation level allows. */
    private static List<String> readAll(Main.Env env, String topic, String isolation) throws Exception {
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaConsumer<byte[], byte[]> c = Clients.consumer(env.bootstrap(),
                Map.of("isolation.level", isolation, "enable.auto.commit", false))) {
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            long end = c.endOffsets(List.of(tp)).get(tp);
            List<String> out = new ArrayList<>();
            Check.waitFor("the end of " + topic + " for " + isolation, Clients.OP, () -> {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    out.add(new String(r.value(), StandardCharsets.UTF_8));
                }
                return c.position(tp) >= end ? Boolean.TRUE : null;
            });
            return out;
        }
    }

    private static Long committed(Main.Env env, String group, TopicPartition tp) throws Exception {
        try (Admin admin = Clients.admin(env.bootstrap())) {
            OffsetAndMetadata o = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata()
                .get().get(tp);
            return o == null ? null : o.offset();
        }
    }

    static void commitAbortFence(Main.Env env) throws Exception {
        String topic = Clients.uniqueTopic("java-txn");
        try (Admin admin = Clients.admin(env.bootstrap())) {
            Clients.createTopic(admin, topic, 1, Math.min(3, env.nodes()), Map.of());
        }
        TopicPartition tp = new TopicPartition(topic, 0);
        String group = Clients.uniqueTopic("java-txn-group");
        String id = Clients.uniqueTopic("java-txn-id");
        KafkaProducer<byte[], byte[]> first = transactional(env, id);
        try (KafkaConsumer<byte[], byte[]> meta = Clients.consumer(env.bootstrap(), Map.of("group.id", group))) {
            first.beginTransaction();
            first.send(new ProducerRecord<>(topic, 0, null, bytes("c1"))).get();
            first.send(new ProducerRecord<>(topic, 0, null, bytes("c2"))).get();
            first.sendOffsetsToTransaction(Map.of(tp, new OffsetAndMetadata(5)), meta.groupMetadata());
            first.commitTransaction();

            first.beginTransaction();
            first.send(new ProducerRecord<>(topic, 0, null, bytes("aborted"))).get();
            first.sendOffsetsToTransaction(Map.of(tp, new OffsetAndMetadata(9)), meta.groupMetadata());
            first.abortTransaction();
        }
        Check.equal(List.of("c1", "c2"), readAll(env, topic, "read_committed"), "read_committed values");
        Check.equal(List.of("c1", "c2", "aborted"), readAll(env, topic, "read_uncommitted"),
            "read_uncommitted values");
        Check.equal(5L, Check.waitFor("the committed offset", Clients.OP,
            () -> committed(env, group, tp)), "the group's offset (the aborted 9 never counts)");

        // A second producer with the same id fences the first; its own transaction commits.
        first.beginTransaction();
        first.send(new ProducerRecord<>(topic, 0, null, bytes("zombie")));
        try (KafkaProducer<byte[], byte[]> second = transactional(env, id)) {
            Throwable cause = null;
            try {
                first.commitTransaction();
            } catch (Exception e) {
                cause = e instanceof ExecutionException ? e.getCause() : e;
            }
            Check.that(cause instanceof ProducerFencedException
                    || cause instanceof org.apache.kafka.common.errors.InvalidProducerEpochException,
                "fenced with ProducerFencedException, got " + cause);
            second.beginTransaction();
            second.send(new ProducerRecord<>(topic, 0, null, bytes("c3"))).get();
            second.commitTransaction();
        } finally {
            first.close(Duration.ZERO);
        }
        Check.equal(List.of("c1", "c2", "c3"), readAll(env, topic, "read_committed"),
            "read_committed values after the fencing");
    }
}
