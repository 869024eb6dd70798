package runnel.interop;

import static runnel.interop.Clients.OP;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.ListConsumerGroupsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ConsumerGroupState;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.ElectionNotNeededException;
import org.apache.kafka.common.errors.GroupNotEmptyException;
import org.apache.kafka.common.errors.InvalidConfigurationException;
import org.apache.kafka.common.errors.InvalidPartitionsException;
import org.apache.kafka.common.errors.InvalidReplicaAssignmentException;
import org.apache.kafka.common.errors.InvalidTopicException;
import org.apache.kafka.common.errors.NoReassignmentInProgressException;
import org.apache.kafka.common.errors.OffsetOutOfRangeException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;

/** AdminClient scenarios: each checks real outcomes of one family of admin calls. */
final class AdminScenarios {
    private AdminScenarios() {}

    private static int rf(Main.Env env) {
        return Math.min(3, env.nodes());
    }

    static void describeCluster(Main.Env env) throws Exception {
        try (Admin admin = Clients.admin(env.bootstrap())) {
            DescribeClusterResult c = admin.describeCluster();
            String clusterId = c.clusterId().get();
            Check.that(clusterId != null && !clusterId.isEmpty(), "cluster id is empty");
            Collection<Node> nodes = Check.waitFor(env.nodes() + " live brokers", OP, () -> {
                Collection<Node> n = admin.describeCluster().nodes().get();
                return n.size() == env.nodes() ? n : null;
            });
            Set<Integer> ids = nodes.stream().map(Node::id).collect(Collectors.toSet());
            Set<Integer> want = new HashSet<>();
            for (int i = 1; i <= env.nodes(); i++) {
                want.add(i);
            }
            Check.equal(want, ids, "broker ids");
            for (Node n : nodes) {
                Check.equal("127.0.0.1", n.host(), "host of broker " + n.id());
                Check.that(n.port() > 0, "port of broker " + n.id() + " is " + n.port());
            }
            Node controller = admin.describeCluster().controller().get();
            Check.that(controller != null && ids.contains(controller.id()),
                "controller " + controller + " is not one of the brokers " + ids);
            Check.equal(clusterId, admin.describeCluster().clusterId().get(), "cluster id on a second call");
        }
    }

    static void topics(Main.Env env) throws Exception {
        String topic = Clients.uniqueTopic("java-topics");
        try (Admin admin = Clients.admin(env.bootstrap())) {
            NewTopic nt = new NewTopic(topic, 3, (short) rf(env)).configs(Map.of("retention.ms", "3600000"));
            admin.createTopics(List.of(nt), new CreateTopicsOptions().validateOnly(true)).all().get();
            Check.that(!admin.listTopics().names().get().contains(topic), "validateOnly created the topic");

            CreateTopicsResult created = admin.createTopics(List.of(nt));
            created.all().get();
            Check.equal(3, created.numPartitions(topic).get(), "numPartitions in the CreateTopics answer");
            Check.equal(rf(env), created.replicationFactor(topic).get(), "replicationFactor in the answer");
            Check.equal("3600000", created.config(topic).get().get("retention.ms").value(),
                "retention.ms echoed by CreateTopics");
            Check.that(!created.topicId(topic).get().equals(org.apache.kafka.common.Uuid.ZERO_UUID),
                "CreateTopics returned the zero topic id");

            Check.that(admin.listTopics().names().get().contains(topic), "listTopics misses " + topic);
            TopicDescription d = Clients.createTopicWaitLeaders(admin, topic, 3);
            Check.equal(created.topicId(topic).get(), d.topicId(), "topic id of describeTopics");
            for (TopicPartitionInfo p : d.partitions()) {
                Check.equal(rf(env), p.replicas().size(), "replicas of partition " + p.partition());
                Check.that(p.replicas().contains(p.leader()), "leader outside the replicas: " + p);
            }

            Check.failsWith(TopicExistsException.class, "creating " + topic + " twice",
                () -> admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get());
            Check.failsWith(InvalidTopicException.class, "creating a topic named 'bad/name'",
                () -> admin.createTopics(List.of(new NewTopic("bad/name", 1, (short) 1))).all().get());

            admin.deleteTopics(List.of(topic)).all().get();
            Check.waitFor(topic + " gone from listTopics", OP,
                () -> !admin.listTopics().names().get().contains(topic));
            Check.failsWith(UnknownTopicOrPartitionException.class, "describing a deleted topic",
                () -> admin.describeTopics(List.of(topic)).allTopicNames().get());
            Check.failsWith(UnknownTopicOrPartitionException.class, "deleting it again",
                () -> admin.deleteTopics(List.of(topic)).all().get());
        }
    }

    /**
     * describeTopics paged by DescribeTopicPartitions (the 3.9 client pages with the cursor when
     * the broker advertises API 75) and describeLogDirs: every replica is in a broker's one log
     * dir, the written partition has bytes, and the dir reports its filesystem's size.
     */
    static void pagedDescribeAndLogDirs(Main.Env env) throws Exception {
        String topic = Clients.uniqueTopic("java-log-dirs");
        try (Admin admin = Clients.admin(env.bootstrap())) {
            admin.createTopics(List.of(new NewTopic(topic, 5, (short) rf(env)))).all().get();
            Clients.createTopicWaitLeaders(admin, topic, 5);
            TopicDescription paged = admin.describeTopics(List.of(topic),
                new DescribeTopicsOptions().partitionSizeLimitPerResponse(2)).allTopicNames().get().get(topic);
            List<Integer> indexes = paged.partitions().stream().map(TopicPartitionInfo::partition).toList();
            Check.equal(List.of(0, 1, 2, 3, 4), indexes, "partitions of a describeTopics paged by 2");

            try (KafkaProducer<byte[], byte[]> producer = Clients.producer(env.bootstrap(), Map.of())) {
                byte[] value = new byte[1000];
                for (int i = 0; i < 20; i++) {
                    producer.send(new ProducerRecord<>(topic, 0, null, value)).get();
                }
            }
            List<Integer> brokers = admin.describeCluster().nodes().get().stream().map(Node::id).toList();
            Map<Integer, Map<String, LogDirDescription>> dirs = admin.describeLogDirs(brokers).allDescriptions().get();
            int replicas = 0;
            for (Map.Entry<Integer, Map<String, LogDirDescription>> broker : dirs.entrySet()) {
                Check.equal(1, broker.getValue().size(), "log dirs of broker " + broker.getKey());
                LogDirDescription dir = broker.getValue().values().iterator().next();
                Check.that(dir.error() == null, "log dir error on broker " + broker.getKey() + ": " + dir.error());
                Check.that(dir.totalBytes().orElse(0) > 0 && dir.usableBytes().orElse(-1) >= 0,
                    "filesystem size of broker " + broker.getKey() + "'s dir: " + dir);
                for (Map.Entry<TopicPartition, ReplicaInfo> r : dir.replicaInfos().entrySet()) {
                    if (!r.getKey().topic().equals(topic)) {
                        continue;
                    }
                    replicas++;
                    if (r.getKey().partition() == 0) {
                        Check.that(r.getValue().size() >= 20_000, "size of " + r.getKey() + " on broker "
                            + broker.getKey() + ": " + r.getValue().size());
                    }
                }
            }
            Check.equal(5 * rf(env), replicas, "replicas of " + topic + " in the brokers' log dirs");
            admin.deleteTopics(List.of(topic)).all().get();
        }
    }

    /**
     * The topic's configs once {@code key} reads {@code expected}, or the last answer after 15 s.
     * An alter is answered when the controller commits it; the broker the admin asks next
     * (the least loaded one) may not have applied that commit yet, as in Kafka, so a
     * read-after-write on a cluster waits for the change to reach that broker.
     */
    private static Config describeUntil(Admin admin, ConfigResource res, String key, String expected)
            throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
        while (true) {
            Config cfg = admin.describeConfigs(List.of(res)).all().get().get(res);
            ConfigEntry entry = cfg.get(key);
            if ((entry != null && expected.equals(entry.value())) || System.nanoTime() > deadline) {
                return cfg;
            }
            Thread.sleep(50);
        }
    }

    static void configs(Main.Env env) throws Exception {
        String topic = Clients.uniqueTopic("java-configs");
        try (Admin admin = Clients.admin(env.bootstrap())) {
            Clients.createTopic(admin, topic, 1, rf(env), Map.of("retention.ms", "3600000"));
            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Config cfg = admin.describeConfigs(List.of(res)).all().get().get(res);
            ConfigEntry retention = cfg.get("retention.ms");
            Check.equal("3600000", retention.value(), "retention.ms");
            Check.equal(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, retention.source(), "retention.ms source");
            ConfigEntry segment = cfg.get("segment.bytes");
            Check.equal("1073741824", segment.value(), "segment.bytes default");
            Check.equal(ConfigEntry.ConfigSource.DEFAULT_CONFIG, segment.source(), "segment.bytes source");
            Check.that(segment.isDefault(), "segment.bytes is not reported as default");

            admin.incrementalAlterConfigs(Map.of(res, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.APPEND))))
                .all().get();
            cfg = describeUntil(admin, res, "retention.ms", "7200000");
            Check.equal("7200000", cfg.get("retention.ms").value(), "retention.ms after SET");
            Check.equal("delete,compact", cfg.get("cleanup.policy").value(), "cleanup.policy after APPEND");

            admin.incrementalAlterConfigs(Map.of(res, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", null), AlterConfigOp.OpType.DELETE))))
                .all().get();
            cfg = describeUntil(admin, res, "retention.ms", "604800000");
            Check.equal("604800000", cfg.get("retention.ms").value(), "retention.ms after DELETE");
            Check.equal(ConfigEntry.ConfigSource.DEFAULT_CONFIG, cfg.get("retention.ms").source(),
                "retention.ms source after DELETE");

            Check.failsWith(InvalidConfigurationException.class, "retention.ms=abc",
                () -> admin.incrementalAlterConfigs(Map.of(res, List.of(new AlterConfigOp(
                    new ConfigEntry("retention.ms", "abc"), AlterConfigOp.OpType.SET)))).all().get());
            ConfigResource missing = new ConfigResource(ConfigResource.Type.TOPIC, topic + "-missing");
            Check.failsWith(UnknownTopicOrPartitionException.class, "describeConfigs of a missing topic",
                () -> admin.describeConfigs(List.of(missing)).all().get());

            // The legacy AlterConfigs replaces the whole override set.
            @SuppressWarnings("deprecation")
            var legacy = admin.alterConfigs(Map.of(res, new Config(List.of(new ConfigEntry("segment.ms", "3600000")))));
            legacy.all().get();
            cfg = describeUntil(admin, res, "segment.ms", "3600000");
            Check.equal("3600000", cfg.get("segment.ms").value(), "segment.ms after AlterConfigs");
            Check.equal("delete", cfg.get("cleanup.policy").value(), "cleanup.policy reset by AlterConfigs");

            Node node = admin.describeCluster().nodes().get().iterator().next();
            ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, String.valueOf(node.id()));
            Config bcfg = admin.describeConfigs(List.of(broker)).all().get().get(broker);
            Check.equal(String.valueOf(node.id()), bcfg.get("node.id").value(), "node.id of broker " + node.id());
            Check.that(bcfg.get("log.retention.hours") != null, "broker configs miss log.retention.hours");
        }
    }

    static void createPartitions(Main.Env env) throws Exception {
        String topic = Clients.uniqueTopic("java-partitions");
        try (Admin admin = Clients.admin(env.bootstrap())) {
            Clients.createTopic(admin, topic, 1, rf(env), Map.of());
            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(3))).all().get();
            TopicDescription d = Clients.createTopicWaitLeaders(admin, topic, 3);
            Check.equal(3, d.partitions().size(), "partitions after increaseTo(3)");
            Check.failsWith(InvalidPartitionsException.class, "increaseTo(2) below the current count",
                () -> admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(2))).all().get());
            try (KafkaProducer<byte[], byte[]> p = Clients.producer(env.bootstrap(), Map.of())) {
                long offset = p.send(new ProducerRecord<>(topic, 2, null, "v".getBytes(StandardCharsets.UTF_8)))
                    .get().offset();
                Check.equal(0L, offset, "first offset in the new partition 2");
            }
        }
    }

    static void offsetsAndDeleteRecords(Main.Env env) throws Exception {
        String topic = Clients.uniqueTopic("java-offsets");
        TopicPartition tp = new TopicPartition(topic, 0);
        long base = System.currentTimeMillis() - 60_000;
        try (Admin admin = Clients.admin(env.bootstrap())) {
            Clients.createTopic(admin, topic, 1, rf(env), Map.of());
            try (KafkaProducer<byte[], byte[]> p = Clients.producer(env.bootstrap(), Map.of())) {
                for (int i = 0; i < 10; i++) {
                    p.send(new ProducerRecord<>(topic, 0, base + i * 1000L, null,
                        ("v" + i).getBytes(StandardCharsets.UTF_8))).get();
                }
            }
            Check.equal(0L, offset(admin, tp, OffsetSpec.earliest()).offset(), "earliest");
            Check.equal(10L, offset(admin, tp, OffsetSpec.latest()).offset(), "latest");
            Check.equal(4L, offset(admin, tp, OffsetSpec.forTimestamp(base + 3500)).offset(),
                "first offset with timestamp >= base+3500");
            ListOffsetsResultInfo max = offset(admin, tp, OffsetSpec.maxTimestamp());
            Check.equal(9L, max.offset(), "offset of the max timestamp");
            Check.equal(base + 9000, max.timestamp(), "max timestamp");
            Check.equal(-1L, offset(admin, tp, OffsetSpec.forTimestamp(base + 60_000)).offset(),
                "offset for a timestamp after every record");

            long low = admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(4))).lowWatermarks().get(tp)
                .get().lowWatermark();
            Check.equal(4L, low, "low watermark after deleteRecords(4)");
            Check.equal(4L, offset(admin, tp, OffsetSpec.earliest()).offset(), "earliest after deleteRecords");
            List<ConsumerRecord<byte[], byte[]>> left = Clients.readAll(env.bootstrap(), topic, 1).get(0);
            Check.equal(6, left.size(), "records left");
            Check.equal(4L, left.get(0).offset(), "first offset left");
            Check.failsWith(OffsetOutOfRangeException.class, "deleteRecords beyond the high watermark",
                () -> admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(100))).all().get());
        }
    }

    private static ListOffsetsResultInfo offset(Admin admin, TopicPartition tp, OffsetSpec spec) throws Exception {
        return admin.listOffsets(Map.of(tp, spec)).partitionResult(tp).get();
    }

    static void consumerGroups(Main.Env env) throws Exception {
        String topic = Clients.uniqueTopic("java-groups");
        String group = Clients.uniqueTopic("java-group");
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);
        try (Admin admin = Clients.admin(env.bootstrap())) {
            Clients.createTopic(admin, topic, 2, rf(env), Map.of());
            try (KafkaProducer<byte[], byte[]> p = Clients.producer(env.bootstrap(), Map.of())) {
                for (int i = 0; i < 10; i++) {
                    p.send(new ProducerRecord<>(topic, i % 2, null, ("v" + i).getBytes(StandardCharsets.UTF_8)));
                }
                p.flush();
            }
            try (KafkaConsumer<byte[], byte[]> c = Clients.consumer(env.bootstrap(),
                    Map.of("group.id", group, "enable.auto.commit", "false"))) {
                c.subscribe(List.of(topic));
                List<ConsumerRecord<byte[], byte[]>> got = new ArrayList<>();
                Check.waitFor("10 records through group " + group, OP, () -> {
                    c.poll(java.time.Duration.ofMillis(200)).forEach(got::add);
                    return got.size() >= 10;
                });
                c.commitSync();
                ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
                Check.equal(ConsumerGroupState.STABLE, d.state(), "state with a member");
                Check.equal(1, d.members().size(), "members");
                Check.equal(Set.of(p0, p1), d.members().iterator().next().assignment().topicPartitions(),
                    "the member's assignment");
                Check.equal("range", d.partitionAssignor(), "assignor (the Java default picks range)");
                Check.that(d.coordinator() != null && d.coordinator().id() >= 1, "coordinator " + d.coordinator());
                Collection<ConsumerGroupListing> listed = admin.listConsumerGroups().all().get();
                Check.that(listed.stream().anyMatch(l -> l.groupId().equals(group)), "listConsumerGroups misses it");
                Check.that(listed(admin, ConsumerGroupState.STABLE).contains(group), "not listed as Stable");
                Check.that(!listed(admin, ConsumerGroupState.EMPTY).contains(group), "listed as Empty while it has a member");
                Map<TopicPartition, OffsetAndMetadata> offsets = committed(admin, group);
                Check.equal(5L, offsets.get(p0).offset(), "committed offset of p0");
                Check.equal(5L, offsets.get(p1).offset(), "committed offset of p1");
                Check.failsWith(GroupNotEmptyException.class, "deleting a group with a member",
                    () -> admin.deleteConsumerGroups(List.of(group)).all().get());
            }
            Check.waitFor(group + " empty after close", OP, () -> admin.describeConsumerGroups(List.of(group))
                .all().get().get(group).state() == ConsumerGroupState.EMPTY);
            Check.that(listed(admin, ConsumerGroupState.EMPTY).contains(group), "not listed as Empty after close");
            admin.alterConsumerGroupOffsets(group, Map.of(p0, new OffsetAndMetadata(1))).all().get();
            Check.equal(1L, committed(admin, group).get(p0).offset(), "p0 after alterConsumerGroupOffsets");
            admin.deleteConsumerGroupOffsets(group, Set.of(p1)).all().get();
            Check.that(!committed(admin, group).containsKey(p1), "p1 still committed after deleteConsumerGroupOffsets");
            admin.deleteConsumerGroups(List.of(group)).all().get();
            Check.that(admin.listConsumerGroups().all().get().stream().noneMatch(l -> l.groupId().equals(group)),
                "listConsumerGroups still lists the deleted group");
            Check.that(committed(admin, group).isEmpty(), "offsets left after deleteConsumerGroups");
        }
    }

    /** The groups ListGroups returns with a state filter (v4+). */
    private static Set<String> listed(Admin admin, ConsumerGroupState state) throws Exception {
        return admin.listConsumerGroups(new ListConsumerGroupsOptions().inStates(Set.of(state))).all().get().stream()
            .map(ConsumerGroupListing::groupId).collect(Collectors.toSet());
    }

    private static Map<TopicPartition, OffsetAndMetadata> committed(Admin admin, String group) throws Exception {
        return admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
    }

    static void electLeaders(Main.Env env) throws Exception {
        String topic = Clients.uniqueTopic("java-elect");
        try (Admin admin = Clients.admin(env.bootstrap())) {
            Clients.createTopic(admin, topic, 2, rf(env), Map.of());
            Set<TopicPartition> tps = Set.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1));
            Map<TopicPartition, Optional<Throwable>> r = admin.electLeaders(ElectionType.PREFERRED, tps)
                .partitions().get();
            Check.equal(tps, r.keySet(), "partitions answered");
            for (var e : r.entrySet()) {
                Check.that(e.getValue().isPresent() && e.getValue().get() instanceof ElectionNotNeededException,
                    e.getKey() + ": the preferred leader already leads, expected ElectionNotNeeded, got "
                        + e.getValue());
            }
            TopicPartition missing = new TopicPartition(topic, 7);
            Optional<Throwable> m = admin.electLeaders(ElectionType.PREFERRED, Set.of(missing)).partitions().get()
                .get(missing);
            Check.that(m.isPresent() && m.get() instanceof UnknownTopicOrPartitionException,
                "electing a missing partition: " + m);
            TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            for (TopicPartitionInfo p : d.partitions()) {
                Check.equal(p.replicas().get(0), p.leader(), "leader of " + p.partition() + " is the preferred one");
            }
        }
    }

    static void reassignPartitions(Main.Env env) throws Exception {
        String topic = Clients.uniqueTopic("java-reassign");
        TopicPartition tp = new TopicPartition(topic, 0);
        try (Admin admin = Clients.admin(env.bootstrap())) {
            List<Integer> from = env.nodes() >= 3 ? List.of(1, 2) : List.of(1);
            List<Integer> to = env.nodes() >= 3 ? List.of(2, 3) : List.of(1);
            admin.createTopics(List.of(new NewTopic(topic, Map.of(0, from)))).all().get();
            Clients.createTopicWaitLeaders(admin, topic, 1);
            try (KafkaProducer<byte[], byte[]> p = Clients.producer(env.bootstrap(), Map.of())) {
                p.send(new ProducerRecord<>(topic, 0, null, "before".getBytes(StandardCharsets.UTF_8))).get();
            }
            Check.failsWith(NoReassignmentInProgressException.class, "cancelling when nothing moves",
                () -> admin.alterPartitionReassignments(Map.of(tp, Optional.empty())).all().get());
            Check.failsWith(InvalidReplicaAssignmentException.class, "moving onto broker 99",
                () -> admin.alterPartitionReassignments(Map.of(tp,
                    Optional.of(new NewPartitionReassignment(List.of(99))))).all().get());
            admin.alterPartitionReassignments(Map.of(tp, Optional.of(new NewPartitionReassignment(to)))).all()
                .get(OP.toMillis(), TimeUnit.MILLISECONDS);
            Check.waitFor("replicas " + to + " and no reassignment listed", OP, () -> {
                TopicPartitionInfo p = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic)
                    .partitions().get(0);
                List<Integer> replicas = p.replicas().stream().map(Node::id).collect(Collectors.toList());
                return replicas.equals(to) && p.isr().size() == to.size()
                    && admin.listPartitionReassignments().reassignments().get().isEmpty();
            });
            try (KafkaProducer<byte[], byte[]> p = Clients.producer(env.bootstrap(), Map.of())) {
                Check.equal(1L, p.send(new ProducerRecord<>(topic, 0, null,
                    "after".getBytes(StandardCharsets.UTF_8))).get().offset(), "offset written after the move");
            }
            List<ConsumerRecord<byte[], byte[]>> all = Clients.readAll(env.bootstrap(), topic, 1).get(0);
            Check.equal(List.of("before", "after"), all.stream()
                .map(r -> new String(r.value(), StandardCharsets.UTF_8)).collect(Collectors.toList()),
                "records after the move");
        }
    }
}
