package runnel.interop;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;

/**
 * One group member: a subscribed KafkaConsumer polled by the scenario's thread, which commits
 * synchronously after every non-empty poll and before giving partitions up, and records what it
 * read and every rebalance callback (assigned, revoked, lost).
 */
final class Member implements ConsumerRebalanceListener, AutoCloseable {
    final String name;
    final KafkaConsumer<byte[], byte[]> consumer;
    final List<ConsumerRecord<byte[], byte[]>> consumed = new ArrayList<>();
    final Set<TopicPartition> owned = new HashSet<>();
    final List<Set<TopicPartition>> revocations = new ArrayList<>();
    final List<Set<TopicPartition>> assignments = new ArrayList<>();
    final List<Set<TopicPartition>> losses = new ArrayList<>();
    int commitFailures;
    private boolean closed;

    Member(String name, String bootstrap, String topic, Map<String, Object> config) {
        this.name = name;
        Map<String, Object> c = new HashMap<>(config);
        c.put("enable.auto.commit", "false");
        c.put("client.id", name);
        this.consumer = Clients.consumer(bootstrap, c);
        consumer.subscribe(List.of(topic), this);
    }

    void poll() {
        if (closed) {
            return;
        }
        var records = consumer.poll(Duration.ofMillis(100));
        records.forEach(consumed::add);
        if (!records.isEmpty()) {
            commit();
        }
    }

    private void commit() {
        try {
            consumer.commitSync();
        } catch (KafkaException e) { // a rebalance in progress: what was read may be read again
            commitFailures++;
        }
    }

    @Override
    public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
        if (!partitions.isEmpty()) {
            commit();
            revocations.add(new HashSet<>(partitions));
        }
        owned.removeAll(partitions);
    }

    @Override
    public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
        if (!partitions.isEmpty()) {
            assignments.add(new HashSet<>(partitions));
        }
        owned.addAll(partitions);
    }

    @Override
    public void onPartitionsLost(Collection<TopicPartition> partitions) {
        if (!partitions.isEmpty()) {
            losses.add(new HashSet<>(partitions));
        }
        owned.removeAll(partitions);
    }

    @Override
    public void close() {
        if (!closed) {
            closed = true;
            consumer.close(Duration.ofSeconds(10));
        }
    }

    @Override
    public String toString() {
        return name + "{owned=" + owned + ", consumed=" + consumed.size() + ", revocations=" + revocations
            + ", commitFailures=" + commitFailures + "}";
    }
}
