package runnel.interop;

import static runnel.interop.Clients.OP;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;

/** KafkaConsumer group scenarios: classic (range, cooperative-sticky, static) and KIP-848. */
final class ConsumerScenarios {
    private static final Duration GROUP_WAIT = Duration.ofSeconds(45);

    private ConsumerScenarios() {}

    private static String setUp(Main.Env env, String prefix, int partitions, int perPartition) throws Exception {
        String topic = Clients.uniqueTopic(prefix);
        try (Admin admin = Clients.admin(env.bootstrap())) {
            Clients.createTopic(admin, topic, partitions, Math.min(3, env.nodes()), Map.of());
        }
        produce(env, topic, partitions, perPartition);
        return topic;
    }

    private static void produce(Main.Env env, String topic, int partitions, int perPartition) {
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(env.bootstrap(), Map.of())) {
            for (int i = 0; i < partitions * perPartition; i++) {
                p.send(new ProducerRecord<>(topic, i % partitions, ("k" + i).getBytes(StandardCharsets.UTF_8),
                    ("v" + i).getBytes(StandardCharsets.UTF_8)));
            }
            p.flush();
        }
    }

    private static Map<String, Object> classic(Class<?> assignor) {
        return Map.of("group.protocol", "classic", "partition.assignment.strategy", assignor.getName());
    }

    private static boolean pollAll(Collection<Member> members) {
        members.forEach(Member::poll);
        return false;
    }

    /** Every (partition, offset) read by the members, with how often it was read. */
    private static Map<String, Integer> reads(Collection<Member> members) {
        Map<String, Integer> out = new HashMap<>();
        for (Member m : members) {
            for (ConsumerRecord<byte[], byte[]> r : m.consumed) {
                out.merge(r.partition() + "@" + r.offset(), 1, Integer::sum);
            }
        }
        return out;
    }

    private static boolean readEverything(Collection<Member> members, int partitions, int perPartition) {
        Map<String, Integer> r = reads(members);
        for (int p = 0; p < partitions; p++) {
            for (int o = 0; o < perPartition; o++) {
                if (!r.containsKey(p + "@" + o)) {
                    return false;
                }
            }
        }
        return true;
    }

    /** No loss always; no duplicate either when every commit succeeded (each poll is committed). */
    private static void checkReads(Collection<Member> members, int partitions, int perPartition) {
        Check.that(readEverything(members, partitions, perPartition), "records lost: " + members);
        int failures = members.stream().mapToInt(m -> m.commitFailures).sum();
        List<String> dups = reads(members).entrySet().stream().filter(e -> e.getValue() > 1)
            .map(Map.Entry::getKey).sorted().collect(Collectors.toList());
        Check.that(failures > 0 || dups.isEmpty(), "read twice although every commit succeeded: " + dups);
    }

    private static void checkCommitted(Main.Env env, String group, String topic, int partitions, long offset)
            throws Exception {
        try (Admin admin = Clients.admin(env.bootstrap())) {
            Map<TopicPartition, OffsetAndMetadata> c = admin.listConsumerGroupOffsets(group)
                .partitionsToOffsetAndMetadata().get();
            for (int p = 0; p < partitions; p++) {
                OffsetAndMetadata o = c.get(new TopicPartition(topic, p));
                Check.that(o != null && o.offset() == offset, "committed offset of p" + p + ": " + o);
            }
        }
    }

    private static Set<TopicPartition> all(String topic, int partitions) {
        Set<TopicPartition> s = new HashSet<>();
        for (int p = 0; p < partitions; p++) {
            s.add(new TopicPartition(topic, p));
        }
        return s;
    }

    private static void closeAll(List<Member> members) {
        members.forEach(Member::close);
    }

    static void classicRange(Main.Env env) throws Exception {
        String topic = setUp(env, "java-range", 4, 50);
        String group = Clients.uniqueTopic("java-range-group");
        List<Member> ms = new ArrayList<>();
        try {
            Map<String, Object> cfg = new HashMap<>(classic(RangeAssignor.class));
            cfg.put("group.id", group);
            ms.add(new Member("a", env.bootstrap(), topic, cfg));
            ms.add(new Member("b", env.bootstrap(), topic, cfg));
            Check.waitFor("two members with two partitions each, everything read", GROUP_WAIT,
                () -> pollAll(ms) || ms.stream().allMatch(m -> m.owned.size() == 2) && readEverything(ms, 4, 50));
            Set<TopicPartition> a = ms.get(0).owned;
            Set<TopicPartition> b = ms.get(1).owned;
            Set<TopicPartition> union = new HashSet<>(a);
            union.addAll(b);
            Check.equal(all(topic, 4), union, "partitions owned by the group");
            Set<Set<Integer>> ranges = Set.of(a, b).stream()
                .map(s -> s.stream().map(TopicPartition::partition).collect(Collectors.toSet()))
                .collect(Collectors.toSet());
            Check.equal(Set.of(Set.of(0, 1), Set.of(2, 3)), ranges, "range assignment");
            checkReads(ms, 4, 50);
        } finally {
            closeAll(ms);
        }
        checkCommitted(env, group, topic, 4, 50);
    }

    static void classicCooperativeSticky(Main.Env env) throws Exception {
        String topic = setUp(env, "java-coop", 4, 50);
        String group = Clients.uniqueTopic("java-coop-group");
        Map<String, Object> cfg = new HashMap<>(classic(CooperativeStickyAssignor.class));
        cfg.put("group.id", group);
        List<Member> ms = new ArrayList<>();
        try {
            Member a = new Member("a", env.bootstrap(), topic, cfg);
            ms.add(a);
            Check.waitFor("a alone owns every partition and read everything", GROUP_WAIT,
                () -> pollAll(ms) || a.owned.size() == 4 && readEverything(ms, 4, 50));
            Member b = new Member("b", env.bootstrap(), topic, cfg);
            ms.add(b);
            Check.waitFor("a and b own two partitions each", GROUP_WAIT,
                () -> pollAll(ms) || a.owned.size() == 2 && b.owned.size() == 2);
            Check.equal(1, a.revocations.size(), "a's revocations (cooperative: one, of the moved partitions)");
            Check.equal(b.owned, a.revocations.get(0), "what a gave up is what b got");
            produce(env, topic, 4, 50);
            Check.waitFor("the second 200 records", GROUP_WAIT, () -> pollAll(ms) || readEverything(ms, 4, 100));
            checkReads(ms, 4, 100);
        } finally {
            closeAll(ms);
        }
        checkCommitted(env, group, topic, 4, 100);
    }

    static void classicStaticMembership(Main.Env env) throws Exception {
        String topic = setUp(env, "java-static", 2, 10);
        String group = Clients.uniqueTopic("java-static-group");
        Map<String, Object> cfg = new HashMap<>(classic(RangeAssignor.class));
        cfg.put("group.id", group);
        List<Member> ms = new ArrayList<>();
        try (Admin admin = Clients.admin(env.bootstrap())) {
            Map<String, Object> aCfg = new HashMap<>(cfg);
            aCfg.put("group.instance.id", "static-a");
            Map<String, Object> bCfg = new HashMap<>(cfg);
            bCfg.put("group.instance.id", "static-b");
            Member a = new Member("a", env.bootstrap(), topic, aCfg);
            Member b = new Member("b", env.bootstrap(), topic, bCfg);
            ms.add(a);
            ms.add(b);
            Check.waitFor("one partition each and everything read", GROUP_WAIT,
                () -> pollAll(ms) || a.owned.size() == 1 && b.owned.size() == 1 && readEverything(ms, 2, 10));
            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
            Check.equal(Set.of("static-a", "static-b"), d.members().stream().map(MemberDescription::groupInstanceId)
                .map(o -> o.orElse("<none>")).collect(Collectors.toSet()), "group.instance.ids described");
            Set<TopicPartition> aOwned = new HashSet<>(a.owned);
            int bAssignments = b.assignments.size();
            int bRevocations = b.revocations.size();

            // A static member that closes does not leave: its return within the session timeout
            // gets the same partitions back, without a rebalance of the others.
            a.close();
            ms.remove(a);
            Member a2 = new Member("a2", env.bootstrap(), topic, aCfg);
            ms.add(a2);
            Check.waitFor("the restarted static member owns its old partitions", GROUP_WAIT,
                () -> pollAll(ms) || a2.owned.equals(aOwned));
            int aPartition = aOwned.iterator().next().partition();
            try (KafkaProducer<byte[], byte[]> p = Clients.producer(env.bootstrap(), Map.of())) {
                for (int i = 0; i < 5; i++) {
                    p.send(new ProducerRecord<>(topic, aPartition, null, ("late" + i).getBytes(StandardCharsets.UTF_8)));
                }
            }
            Check.waitFor("the 5 records written after the restart", GROUP_WAIT,
                () -> pollAll(ms) || a2.consumed.size() >= 5);
            Check.equal(List.of(10L, 11L, 12L, 13L, 14L), a2.consumed.stream().map(ConsumerRecord::offset)
                .collect(Collectors.toList()), "offsets read by the restarted member (it resumes at the commit)");
            Check.equal(bAssignments, b.assignments.size(), "b's assignments across a's restart (no rebalance)");
            Check.equal(bRevocations, b.revocations.size(), "b's revocations across a's restart (no rebalance)");
            d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
            Check.equal(2, d.members().size(), "members after the restart");
        } finally {
            closeAll(ms);
        }
    }

    static void consumerProtocol(Main.Env env) throws Exception {
        String topic = setUp(env, "java-kip848", 4, 50);
        String group = Clients.uniqueTopic("java-kip848-group");
        Map<String, Object> cfg = Map.of("group.protocol", "consumer", "group.id", group);
        List<Member> ms = new ArrayList<>();
        try {
            Member a = new Member("a", env.bootstrap(), topic, cfg);
            Member b = new Member("b", env.bootstrap(), topic, cfg);
            ms.add(a);
            ms.add(b);
            Check.waitFor("two members with two partitions each, everything read", GROUP_WAIT,
                () -> pollAll(ms) || a.owned.size() == 2 && b.owned.size() == 2 && readEverything(ms, 4, 50));
            Set<TopicPartition> union = new HashSet<>(a.owned);
            union.addAll(b.owned);
            Check.equal(all(topic, 4), union, "partitions owned by the group");
            checkReads(ms, 4, 50);
            b.close();
            ms.remove(b);
            Check.waitFor("a takes over b's partitions", GROUP_WAIT, () -> pollAll(ms) || a.owned.size() == 4);
            produce(env, topic, 4, 10);
            ms.add(b); // b's reads count for the no-loss check
            Check.waitFor("the 40 records written after b left", GROUP_WAIT,
                () -> pollAll(List.of(a)) || readEverything(ms, 4, 60));
            checkReads(ms, 4, 60);
        } finally {
            closeAll(ms);
        }
        checkCommitted(env, group, topic, 4, 60);
    }

    /** Producing throughout while members join and leave; every acknowledged record is read. */
    static void rebalancesWithCommitsNoLoss(Main.Env env) throws Exception {
        int partitions = 6;
        int total = 3000;
        String topic = Clients.uniqueTopic("java-churn");
        String group = Clients.uniqueTopic("java-churn-group");
        try (Admin admin = Clients.admin(env.bootstrap())) {
            Clients.createTopic(admin, topic, partitions, Math.min(3, env.nodes()), Map.of());
        }
        Map<String, Long> acked = new ConcurrentHashMap<>();
        AtomicInteger ackCount = new AtomicInteger();
        AtomicReference<Exception> producerError = new AtomicReference<>();
        Thread producer = new Thread(() -> {
            try (KafkaProducer<byte[], byte[]> p = Clients.producer(env.bootstrap(), Map.of("linger.ms", 5))) {
                for (int i = 0; i < total; i++) {
                    p.send(new ProducerRecord<>(topic, i % partitions, null, ("v" + i).getBytes(StandardCharsets.UTF_8)),
                        (md, e) -> {
                            if (e == null) {
                                acked.put(md.partition() + "@" + md.offset(), md.offset());
                                ackCount.incrementAndGet();
                            } else {
                                producerError.compareAndSet(null, e);
                            }
                        });
                    if (i % 100 == 99) {
                        p.flush();
                    }
                }
            } catch (Exception e) {
                producerError.compareAndSet(null, e);
            }
        }, "churn-producer");
        Map<String, Object> cfg = Map.of("group.protocol", "classic", "group.id", group);
        List<Member> ms = new ArrayList<>();
        List<Member> everyone = new ArrayList<>();
        try {
            Member a = new Member("a", env.bootstrap(), topic, cfg);
            ms.add(a);
            everyone.add(a);
            producer.start();
            Check.waitFor("500 acknowledgements", GROUP_WAIT, () -> pollAll(ms) || ackCount.get() >= 500);
            Member b = new Member("b", env.bootstrap(), topic, cfg);
            ms.add(b);
            everyone.add(b);
            Check.waitFor("1500 acknowledgements", GROUP_WAIT, () -> pollAll(ms) || ackCount.get() >= 1500);
            Member c = new Member("c", env.bootstrap(), topic, cfg);
            ms.add(c);
            everyone.add(c);
            Check.waitFor("2200 acknowledgements and b owning partitions", GROUP_WAIT,
                () -> pollAll(ms) || ackCount.get() >= 2200 && !b.owned.isEmpty());
            b.close();
            ms.remove(b);
            producer.join(GROUP_WAIT.toMillis());
            Check.that(!producer.isAlive(), "the producer did not finish");
            Check.that(producerError.get() == null, "producer error: " + producerError.get());
            Check.equal(total, ackCount.get(), "acknowledged records");
            Check.waitFor("a and c own every partition and read every acknowledged record", GROUP_WAIT, () -> {
                pollAll(ms);
                Set<TopicPartition> owned = new HashSet<>(a.owned);
                owned.addAll(c.owned);
                return owned.equals(all(topic, partitions)) && reads(everyone).keySet().containsAll(acked.keySet());
            });
            Check.that(reads(everyone).keySet().containsAll(acked.keySet()), "acknowledged records lost");
        } finally {
            closeAll(ms);
        }
        checkCommitted(env, group, topic, partitions, total / partitions);
    }
}
