package runnel.interop;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.Future;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.TimestampType;

/** KafkaProducer with the Java defaults (idempotent, acks=all) and exact round trips. */
final class ProducerScenarios {
    private static final int PARTITIONS = 3;
    private static final int RECORDS = 300;

    private ProducerScenarios() {}

    static void roundTripEveryCompression(Main.Env env) throws Exception {
        String only = env.args().get("compression");
        for (String compression : List.of("none", "gzip", "snappy", "lz4", "zstd")) {
            if (only == null || only.equals(compression)) {
                roundTrip(env, compression);
            }
        }
    }

    /** One record as sent, to compare with what a consumer reads. */
    private record Sent(byte[] key, byte[] value, List<Header> headers, long timestamp) {}

    private static void roundTrip(Main.Env env, String compression) throws Exception {
        String topic = Clients.uniqueTopic("java-produce-" + compression);
        try (Admin admin = Clients.admin(env.bootstrap())) {
            Clients.createTopic(admin, topic, PARTITIONS, Math.min(3, env.nodes()), Map.of());
        }
        Random random = new Random(compression.hashCode());
        long base = System.currentTimeMillis() - 3_600_000;
        Map<Integer, List<Sent>> sent = new HashMap<>();
        Map<Integer, List<Future<RecordMetadata>>> acks = new HashMap<>();
        // Only the codec and a linger (so batches hold many records) differ from the defaults.
        try (KafkaProducer<byte[], byte[]> producer = Clients.producer(env.bootstrap(),
                Map.of("compression.type", compression, "linger.ms", 20))) {
            for (int i = 0; i < RECORDS; i++) {
                int partition = i % PARTITIONS;
                byte[] key = i % 7 == 0 ? null : ("key-" + i).getBytes(StandardCharsets.UTF_8);
                byte[] value = i % 11 == 0 ? null : new byte[(i * 37) % 700];
                if (value != null) {
                    random.nextBytes(value);
                }
                List<Header> headers = new ArrayList<>();
                for (int h = 0; h < i % 3; h++) {
                    headers.add(new RecordHeader("h" + h, h == 1 ? null : ("hv" + i).getBytes(StandardCharsets.UTF_8)));
                }
                long ts = base + i * 13L;
                sent.computeIfAbsent(partition, p -> new ArrayList<>()).add(new Sent(key, value, headers, ts));
                acks.computeIfAbsent(partition, p -> new ArrayList<>())
                    .add(producer.send(new ProducerRecord<>(topic, partition, ts, key, value, headers)));
            }
            producer.flush();
        }
        for (var e : acks.entrySet()) {
            for (int i = 0; i < e.getValue().size(); i++) {
                RecordMetadata md = e.getValue().get(i).get();
                Check.equal((long) i, md.offset(), compression + ": offset acked for record " + i + " of p" + e.getKey());
            }
        }
        Map<Integer, List<ConsumerRecord<byte[], byte[]>>> read = Clients.readAll(env.bootstrap(), topic, PARTITIONS);
        for (int p = 0; p < PARTITIONS; p++) {
            List<Sent> want = sent.get(p);
            List<ConsumerRecord<byte[], byte[]>> got = read.get(p);
            Check.equal(want.size(), got.size(), compression + ": records read from p" + p);
            for (int i = 0; i < want.size(); i++) {
                compare(compression + " p" + p + " #" + i, want.get(i), got.get(i), i);
            }
        }
    }

    private static void compare(String where, Sent want, ConsumerRecord<byte[], byte[]> got, long offset) {
        Check.equal(offset, got.offset(), where + " offset");
        Check.that(Arrays.equals(want.key(), got.key()), where + ": key differs");
        Check.that(Arrays.equals(want.value(), got.value()), where + ": value differs");
        Check.equal(want.timestamp(), got.timestamp(), where + " timestamp");
        Check.equal(TimestampType.CREATE_TIME, got.timestampType(), where + " timestamp type");
        Header[] headers = got.headers().toArray();
        Check.equal(want.headers().size(), headers.length, where + " header count");
        for (int h = 0; h < headers.length; h++) {
            Check.equal(want.headers().get(h).key(), headers[h].key(), where + " header key " + h);
            Check.that(Arrays.equals(want.headers().get(h).value(), headers[h].value()),
                where + ": value of header " + headers[h].key() + " differs");
        }
    }
}
