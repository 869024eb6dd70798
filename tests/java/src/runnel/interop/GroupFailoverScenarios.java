package runnel.interop;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.TopicPartition;

/**
 * Durable KIP-848 groups (issue 12) with the Java KafkaConsumer ({@code group.protocol=consumer}):
 * the test kills the group coordinator with kill -9 while two members are stable, and the group
 * must carry on as if nothing happened: no rebalance callback, the same partitions, every record
 * read exactly once. tests/interop/test_kip848_failover.py drives it:
 *
 * <ol>
 * <li>the members join, own two of the four partitions each and read everything up to the end
 * offsets of the start; the scenario prints "stable" (the test then finds and kills the
 * coordinator and produces more);</li>
 * <li>once {@code resume_file} exists, they read everything up to the end offsets of then and
 * the scenario prints "caught-up" (the test then checks that the group is on another
 * coordinator);</li>
 * <li>they keep polling until {@code check_file} exists and at least 100 polls (10 s, a few
 * heartbeat intervals on the new coordinator) were made, and the checks run.</li>
 * </ol>
 */
final class GroupFailoverScenarios {
    private static final Duration WAIT = Duration.ofSeconds(60);

    private GroupFailoverScenarios() {}

    /** What a member had when the group was stable: its partitions and callback counts. */
    private record Snapshot(Set<TopicPartition> owned, int assignments, int revocations, int losses) {
        static Snapshot of(Member m) {
            return new Snapshot(new HashSet<>(m.owned), m.assignments.size(), m.revocations.size(),
                m.losses.size());
        }
    }

    static void consumerProtocolCoordinatorKill(Main.Env env) throws Exception {
        String topic = env.arg("topic");
        int partitions = Integer.parseInt(env.arg("partitions"));
        Path resume = Path.of(env.arg("resume_file"));
        Path check = Path.of(env.arg("check_file"));
        Map<String, Object> cfg = Map.of("group.protocol", "consumer", "group.id", env.arg("group"));
        List<TopicPartition> tps = new ArrayList<>();
        for (int p = 0; p < partitions; p++) {
            tps.add(new TopicPartition(topic, p));
        }
        List<Member> ms = new ArrayList<>();
        try {
            Member a = new Member("a", env.bootstrap(), topic, cfg);
            ms.add(a);
            Member b = new Member("b", env.bootstrap(), topic, cfg);
            ms.add(b);
            Map<TopicPartition, Long> first = endOffsets(ms, tps);
            Check.waitFor("two members with " + partitions / 2 + " partitions each, everything read", WAIT, () -> {
                ms.forEach(Member::poll);
                return a.owned.size() == partitions / 2 && b.owned.size() == partitions / 2
                    && readUpTo(ms, first);
            });
            List<Snapshot> before = ms.stream().map(Snapshot::of).collect(Collectors.toList());
            System.out.println("stable " + before);
            System.out.flush();

            Check.waitFor("the resume file " + resume, WAIT, () -> {
                ms.forEach(Member::poll);
                return Files.exists(resume);
            });
            Map<TopicPartition, Long> end = endOffsets(ms, tps);
            Check.waitFor("every record up to " + end, WAIT, () -> {
                ms.forEach(Member::poll);
                return readUpTo(ms, end);
            });
            System.out.println("caught-up " + end);
            System.out.flush();
            int[] polls = {0};
            Check.waitFor("the check file " + check + " and 100 polls", WAIT, () -> {
                ms.forEach(Member::poll);
                return ++polls[0] >= 100 && Files.exists(check);
            });

            List<Snapshot> after = ms.stream().map(Snapshot::of).collect(Collectors.toList());
            Check.equal(before, after, "partitions and rebalance callbacks (before -> after the kill)");
            Map<String, Integer> reads = reads(ms);
            List<String> twice = reads.entrySet().stream().filter(e -> e.getValue() > 1)
                .map(Map.Entry::getKey).sorted().collect(Collectors.toList());
            Check.that(twice.isEmpty(), "read more than once: " + twice);
            Check.that(readUpTo(ms, end), "records lost: " + ms);
            Check.equal(end.values().stream().mapToLong(Long::longValue).sum(), (long) reads.size(),
                "records read");
            System.out.println("read " + reads.size() + " records once each, commit failures "
                + ms.stream().mapToInt(m -> m.commitFailures).sum());
        } finally {
            ms.forEach(Member::close);
        }
    }

    /**
     * The end offsets, asked until an answer comes: right after the kill the consumer may still
     * ask the dead leader and fail with a DisconnectException instead of retrying. The members
     * keep polling meanwhile (their heartbeats go out from poll).
     */
    private static Map<TopicPartition, Long> endOffsets(List<Member> ms, List<TopicPartition> tps)
            throws InterruptedException {
        return Check.waitFor("the end offsets of " + tps, WAIT, () -> {
            ms.forEach(Member::poll);
            return ms.get(0).consumer.endOffsets(tps, Duration.ofSeconds(5));
        });
    }

    /** Every (partition, offset) the members read, with how often. */
    private static Map<String, Integer> reads(List<Member> ms) {
        Map<String, Integer> out = new HashMap<>();
        for (Member m : ms) {
            for (ConsumerRecord<byte[], byte[]> r : m.consumed) {
                out.merge(r.partition() + "@" + r.offset(), 1, Integer::sum);
            }
        }
        return out;
    }

    private static boolean readUpTo(List<Member> ms, Map<TopicPartition, Long> end) {
        Map<String, Integer> r = reads(ms);
        return end.entrySet().stream().allMatch(e -> {
            for (long o = 0; o < e.getValue(); o++) {
                if (!r.containsKey(e.getKey().partition() + "@" + o)) {
                    return false;
                }
            }
            return true;
        });
    }
}
