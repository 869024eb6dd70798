package runnel.interop;

import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;

/** Controller failover as the Java AdminClient sees it (the test kills the node in between). */
final class FailoverScenarios {
    private FailoverScenarios() {}

    /** Prints "quorum-leader=<id>": the active controller, from DescribeQuorum. */
    static void printQuorumLeader(Main.Env env) throws Exception {
        try (Admin admin = Clients.admin(env.bootstrap())) {
            int leader = admin.describeMetadataQuorum().quorumInfo().get().leaderId();
            Check.that(leader >= 1 && leader <= env.nodes(), "quorum leader " + leader);
            System.out.println("quorum-leader=" + leader);
        }
    }

    /**
     * createTopics from an admin bootstrapped at the survivors must succeed within
     * {@code budget_ms} of the controller's death ({@code killed_at_ms}, epoch ms); the new
     * topic's leaders must be live nodes.
     */
    static void createTopicWithin(Main.Env env) throws Exception {
        long killedAt = Long.parseLong(env.arg("killed_at_ms"));
        long budget = Long.parseLong(env.arg("budget_ms"));
        int killed = Integer.parseInt(env.arg("killed"));
        long deadline = killedAt + budget;
        String topic = Clients.uniqueTopic("java-after-failover");
        Properties p = new Properties();
        p.put("bootstrap.servers", env.bootstrap());
        p.put("default.api.timeout.ms", String.valueOf(budget));
        p.put("request.timeout.ms", String.valueOf(Math.min(budget, 5000)));
        try (Admin admin = Admin.create(p)) {
            long left = deadline - System.currentTimeMillis();
            Check.that(left > 0, "no time left: the kill happened " + (System.currentTimeMillis() - killedAt) + " ms ago");
            admin.createTopics(List.of(new NewTopic(topic, 3, (short) 2)),
                new CreateTopicsOptions().timeoutMs((int) left)).all().get(left, TimeUnit.MILLISECONDS);
            long took = System.currentTimeMillis() - killedAt;
            Check.that(took <= budget, "createTopics succeeded " + took + " ms after the kill, budget " + budget);
            System.out.println("created " + topic + " " + took + " ms after the kill");
            // As in Kafka, the dead node stays unfenced for a broker session after the new
            // controller takes over, so it may get replicas; its leaderships move once fenced.
            Check.waitFor("leaders of " + topic + " on live nodes", Duration.ofSeconds(30), () -> {
                TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
                return d.partitions().stream().allMatch(tp -> tp.leader() != null && !tp.leader().isEmpty()
                    && tp.leader().id() != killed);
            });
            int leader = Check.waitFor("a new quorum leader", Duration.ofSeconds(10), () -> {
                int l = admin.describeMetadataQuorum().quorumInfo().get().leaderId();
                return l != killed && l > 0 ? l : null;
            });
            System.out.println("new quorum leader " + leader);
        }
    }
}
