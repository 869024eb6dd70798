package runnel.interop;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;

/** Fetch from the closest replica (KIP-392) with the Java consumer. */
final class RackScenarios {
    private RackScenarios() {}

    /**
     * A consumer with {@code client.rack=<rack>} assigned partition 0 of {@code topic} reads
     * from offset 0 until it has {@code count} records and checks they are exactly
     * {@code v0 .. v<count-1>} at offsets 0 .. count-1 (what tests/interop/test_rack_fetch.py
     * produced). Which broker served them is the test's to check (the brokers' debug lines).
     */
    static void consumeWithRack(Main.Env env) throws Exception {
        String topic = env.arg("topic");
        String rack = env.arg("rack");
        int count = Integer.parseInt(env.arg("count"));
        TopicPartition tp = new TopicPartition(topic, 0);
        List<ConsumerRecord<byte[], byte[]>> got = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> c = Clients.consumer(env.bootstrap(),
                Map.of("client.rack", rack, "enable.auto.commit", "false"))) {
            c.assign(List.of(tp));
            c.seek(tp, 0);
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (got.size() < count && System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) {
                    got.add(r);
                }
            }
        }
        Check.equal(count, got.size(), "records read with client.rack=" + rack);
        for (int i = 0; i < count; i++) {
            ConsumerRecord<byte[], byte[]> r = got.get(i);
            Check.equal((long) i, r.offset(), "offset of record " + i);
            Check.equal("v" + i, new String(r.value(), StandardCharsets.UTF_8), "value at offset " + i);
        }
    }
}
