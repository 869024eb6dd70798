package runnel.interop;

import java.time.Duration;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;

/**
 * Exactly-once consume-transform-produce (issue 13) with the Java client, the reference for
 * Kafka Streams' and Flink's sinks: a read_committed consumer of {@code input}, a
 * transactional producer writing each record to {@code output} and committing the consumer's
 * positions with sendOffsetsToTransaction, one transaction per poll (max.poll.records 100).
 * Any error closes both and starts again with the same transactional.id (initTransactions
 * fences and aborts the previous incarnation; the group's committed offsets say where to
 * resume), as an application does. The test kills brokers meanwhile; the loop ends once the
 * group's committed offsets reach the end of every input partition. It prints
 * "progress=<records in committed transactions>" after every commit, for the test to time
 * its kills, and "restarts=<n>" at the end. The test checks the output.
 *
 * <p>With {@code stall_at=N} the loop, once N records are committed, begins one more
 * transaction, sends that poll's records, flushes them (they are in the output partitions,
 * uncommitted), prints "open-txn records=<n>" and then waits forever with the transaction open,
 * for the test to kill -9 this process mid-transaction and start another instance with the same
 * transactional.id. With {@code resume_file=F} as well it waits only until F exists (the test
 * has meanwhile started the other instance), then tries to commit that transaction as a
 * zombie would: the commit must fail with ProducerFencedException (or
 * InvalidProducerEpochException), which prints "zombie fenced: <exception>" and ends the
 * scenario. With {@code stall_after_offsets=true} the stall comes after
 * sendOffsetsToTransaction (the group coordinator holds the offsets pending), and on resume the
 * loop commits that transaction, prints "resumed commit ok" and ends: the next instance starts
 * from the offsets that commit made the group's.
 * {@code txn_timeout_ms} sets transaction.timeout.ms (default 30000),
 * {@code max_poll_interval_ms} the consumer's max.poll.interval.ms (default 300000).
 */
final class ExactlyOnceScenarios {
    private ExactlyOnceScenarios() {}

    static void consumeTransformProduce(Main.Env env) throws Exception {
        String input = env.arg("input");
        String output = env.arg("output");
        String group = env.arg("group");
        String id = env.arg("id");
        long pauseMs = Long.parseLong(env.args().getOrDefault("pause_ms", "0"));
        long stallAt = Long.parseLong(env.args().getOrDefault("stall_at", "-1"));
        int txnTimeoutMs = Integer.parseInt(env.args().getOrDefault("txn_timeout_ms", "30000"));
        int maxPollMs = Integer.parseInt(env.args().getOrDefault("max_poll_interval_ms", "300000"));
        String resumeFile = env.args().get("resume_file");
        boolean stallAfterOffsets = Boolean.parseBoolean(env.args().getOrDefault("stall_after_offsets", "false"));
        long deadline = System.currentTimeMillis() + Long.parseLong(env.args().getOrDefault("budget_ms", "240000"));
        long progress = 0;
        int restarts = 0;
        while (true) {
            Check.that(System.currentTimeMillis() < deadline, "the loop did not finish in time; progress " + progress
                + ", restarts " + restarts);
            KafkaProducer<byte[], byte[]> producer = null;
            KafkaConsumer<byte[], byte[]> consumer = null;
            try {
                producer = Clients.producer(env.bootstrap(), Map.of(
                    "transactional.id", id,
                    "transaction.timeout.ms", txnTimeoutMs,
                    "request.timeout.ms", 10000,
                    "delivery.timeout.ms", 30000,
                    "max.block.ms", 30000));
                producer.initTransactions();
                consumer = Clients.consumer(env.bootstrap(), Map.of(
                    "group.id", group,
                    "isolation.level", "read_committed",
                    "enable.auto.commit", false,
                    "max.poll.records", 100,
                    "max.poll.interval.ms", maxPollMs,
                    "request.timeout.ms", 10000,
                    "default.api.timeout.ms", 30000));
                consumer.subscribe(List.of(input));
                while (true) {
                    ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(300));
                    if (records.isEmpty()) {
                        if (allConsumed(consumer, input)) {
                            System.out.println("restarts=" + restarts);
                            System.out.flush();
                            return;
                        }
                        continue;
                    }
                    producer.beginTransaction();
                    for (ConsumerRecord<byte[], byte[]> r : records) {
                        producer.send(new ProducerRecord<>(output, r.key(), r.value()));
                    }
                    boolean stall = stallAt >= 0 && progress >= stallAt;
                    if (stall && !stallAfterOffsets) {
                        producer.flush();
                        System.out.println("open-txn records=" + records.count());
                        System.out.flush();
                        if (resumeFile == null) {
                            Thread.sleep(Long.MAX_VALUE);
                        }
                        while (!java.nio.file.Files.exists(java.nio.file.Path.of(resumeFile))) {
                            Check.that(System.currentTimeMillis() < deadline, "never resumed");
                            Thread.sleep(50);
                        }
                        try {
                            producer.commitTransaction();
                        } catch (ProducerFencedException | InvalidProducerEpochException e) {
                            System.out.println("zombie fenced: " + e.getClass().getSimpleName());
                            System.out.flush();
                            return;
                        }
                        Check.that(false, "a zombie committed its transaction after a new instance started");
                    }
                    Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                    for (TopicPartition tp : records.partitions()) {
                        List<ConsumerRecord<byte[], byte[]>> rs = records.records(tp);
                        offsets.put(tp, new OffsetAndMetadata(rs.get(rs.size() - 1).offset() + 1));
                    }
                    producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                    if (stall && stallAfterOffsets) {
                        producer.flush();
                        System.out.println("open-txn records=" + records.count());
                        System.out.flush();
                        Check.that(resumeFile != null, "stall_after_offsets needs resume_file");
                        while (!java.nio.file.Files.exists(java.nio.file.Path.of(resumeFile))) {
                            Check.that(System.currentTimeMillis() < deadline, "never resumed");
                            Thread.sleep(50);
                        }
                        producer.commitTransaction();
                        progress += records.count();
                        System.out.println("progress=" + progress);
                        System.out.println("resumed commit ok");
                        System.out.flush();
                        return;
                    }
                    producer.commitTransaction();
                    progress += records.count();
                    System.out.println("progress=" + progress);
                    System.out.flush();
                    if (pauseMs > 0) {
                        Thread.sleep(pauseMs);
                    }
                }
            } catch (KafkaException e) {
                restarts++;
                System.out.println("restart after " + e);
                System.out.flush();
            } finally {
                if (producer != null) {
                    producer.close(Duration.ofSeconds(5));
                }
                if (consumer != null) {
                    consumer.close(Duration.ofSeconds(5));
                }
            }
            Thread.sleep(200);
        }
    }

    /**
     * scripts/bench's transactional run (issue 13): one producer writes {@code size}-byte
     * records to {@code topic} for {@code seconds}, idempotent ({@code mode=idempotent}) or
     * transactional committing every {@code commit_ms} ({@code mode=transactional}); prints
     * "records_per_sec=<n>" counting only acknowledged (committed) records.
     */
    static void producerThroughput(Main.Env env) throws Exception {
        String topic = env.arg("topic");
        boolean txn = env.arg("mode").equals("transactional");
        int size = Integer.parseInt(env.args().getOrDefault("size", "1024"));
        long seconds = Long.parseLong(env.args().getOrDefault("seconds", "10"));
        long commitMs = Long.parseLong(env.args().getOrDefault("commit_ms", "100"));
        Map<String, Object> conf = new HashMap<>(Map.of(
            "enable.idempotence", true, "acks", "all", "linger.ms", 5, "batch.size", 65536));
        if (txn) {
            conf.put("transactional.id", Clients.uniqueTopic("bench-txn"));
        }
        byte[] value = new byte[size];
        java.util.concurrent.atomic.AtomicLong acked = new java.util.concurrent.atomic.AtomicLong();
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(env.bootstrap(), conf)) {
            if (txn) {
                p.initTransactions();
            }
            long start = System.nanoTime();
            long end = start + seconds * 1_000_000_000L;
            long done = 0;
            while (System.nanoTime() < end) {
                long batchEnd = Math.min(end, System.nanoTime() + commitMs * 1_000_000L);
                if (txn) {
                    p.beginTransaction();
                }
                long sent = 0;
                while (System.nanoTime() < batchEnd) {
                    p.send(new ProducerRecord<>(topic, null, value), (m, e) -> {
                        if (e == null && !txn) {
                            acked.incrementAndGet();
                        }
                    });
                    sent++;
                }
                if (txn) {
                    p.commitTransaction();
                    done += sent;
                }
            }
            p.flush();
            double secs = (System.nanoTime() - start) / 1e9;
            long records = txn ? done : acked.get();
            System.out.printf("records_per_sec=%.0f records=%d seconds=%.2f%n", records / secs, records, secs);
        }
    }

    /** Whether the group's committed offsets (stable: no pending transaction) reach the end of
     * every partition of {@code topic}. */
    private static boolean allConsumed(KafkaConsumer<byte[], byte[]> consumer, String topic) {
        List<PartitionInfo> infos = consumer.partitionsFor(topic);
        Set<TopicPartition> tps = new HashSet<>();
        for (PartitionInfo p : infos) {
            tps.add(new TopicPartition(topic, p.partition()));
        }
        Map<TopicPartition, Long> end = consumer.endOffsets(tps);
        Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(tps);
        for (TopicPartition tp : tps) {
            OffsetAndMetadata c = committed.get(tp);
            if (c == null || c.offset() < end.get(tp)) {
                return false;
            }
        }
        return true;
    }
}
