package runnel.interop;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DescribeReplicaLogDirsResult.ReplicaLogDirInfo;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionReplica;
import org.apache.kafka.common.errors.LogDirNotFoundException;

/** A broker with two log.dirs (JBOD): the AdminClient's describeLogDirs, alterReplicaLogDirs
 * and describeReplicaLogDirs, as kafka-reassign-partitions.sh uses them to move a replica. */
final class LogDirScenarios {
    private LogDirScenarios() {}

    static void alterReplicaLogDirs(Main.Env env) throws Exception {
        String topic = Clients.uniqueTopic("java-alter-log-dirs");
        try (Admin admin = Clients.admin(env.bootstrap())) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
            Clients.createTopicWaitLeaders(admin, topic, 1);
            try (KafkaProducer<byte[], byte[]> producer = Clients.producer(env.bootstrap(), Map.of())) {
                for (int i = 0; i < 500; i++) {
                    byte[] value = ("record-" + i).getBytes(StandardCharsets.UTF_8);
                    producer.send(new ProducerRecord<>(topic, 0, null, value)).get();
                }
            }
            int broker = admin.describeCluster().nodes().get().stream().map(Node::id).findFirst().orElseThrow();
            Map<String, LogDirDescription> dirs = admin.describeLogDirs(List.of(broker)).allDescriptions().get().get(broker);
            Check.equal(2, dirs.size(), "log dirs of broker " + broker);
            TopicPartition tp = new TopicPartition(topic, 0);
            String current = dirs.entrySet().stream()
                .filter(e -> e.getValue().replicaInfos().containsKey(tp))
                .map(Map.Entry::getKey).findFirst().orElseThrow();
            Set<String> others = dirs.keySet().stream().filter(d -> !d.equals(current)).collect(Collectors.toSet());
            String target = others.iterator().next();
            TopicPartitionReplica replica = new TopicPartitionReplica(topic, 0, broker);

            Check.failsWith(LogDirNotFoundException.class, "a move to a dir the broker does not have",
                () -> admin.alterReplicaLogDirs(Map.of(replica, target + "-nope")).all().get());
            admin.alterReplicaLogDirs(Map.of(replica, target)).all().get();
            ReplicaLogDirInfo moved = Check.waitFor("the replica in " + target, Clients.OP, () -> {
                ReplicaLogDirInfo info = admin.describeReplicaLogDirs(List.of(replica)).all().get().get(replica);
                return target.equals(info.getCurrentReplicaLogDir()) && info.getFutureReplicaLogDir() == null
                    ? info : null;
            });
            Check.equal(target, moved.getCurrentReplicaLogDir(), "current dir after the move");
            List<ConsumerRecord<byte[], byte[]>> records = Clients.readAll(env.bootstrap(), topic, 1).get(0);
            Check.equal(500, records.size(), "records after the move");
            for (int i = 0; i < records.size(); i++) {
                Check.equal("record-" + i, new String(records.get(i).value(), StandardCharsets.UTF_8), "record " + i);
            }
            admin.deleteTopics(List.of(topic)).all().get();
        }
    }
}
