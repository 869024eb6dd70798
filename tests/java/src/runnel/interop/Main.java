package runnel.interop;

import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;

/**
 * Java-client scenarios against a running Runnel cluster, one per run:
 * {@code java runnel.interop.Main <scenario> <bootstrap> <nodes> [key=value...]}.
 * Exit 0 and "PASS <scenario>" when every check held; exit 1 with the failed check otherwise.
 * tests/interop/test_java_client.py starts the brokers and runs each scenario on 1 and 3 nodes.
 */
public final class Main {
    /** What a scenario gets: where the cluster is, how many nodes it has, extra arguments. */
    record Env(String bootstrap, int nodes, Map<String, String> args) {
        String arg(String key) {
            String v = args.get(key);
            if (v == null) {
                throw new IllegalArgumentException("missing argument " + key + "=...");
            }
            return v;
        }
    }

    interface Scenario {
        void run(Env env) throws Exception;
    }

    private static final Map<String, Scenario> SCENARIOS = new TreeMap<>();

    static {
        SCENARIOS.put("admin-cluster", AdminScenarios::describeCluster);
        SCENARIOS.put("admin-topics", AdminScenarios::topics);
        SCENARIOS.put("admin-configs", AdminScenarios::configs);
        SCENARIOS.put("admin-create-partitions", AdminScenarios::createPartitions);
        SCENARIOS.put("admin-offsets", AdminScenarios::offsetsAndDeleteRecords);
        SCENARIOS.put("admin-groups", AdminScenarios::consumerGroups);
        SCENARIOS.put("admin-elect-leaders", AdminScenarios::electLeaders);
        SCENARIOS.put("admin-reassign", AdminScenarios::reassignPartitions);
        SCENARIOS.put("admin-log-dirs", AdminScenarios::pagedDescribeAndLogDirs);
        SCENARIOS.put("admin-alter-log-dirs", LogDirScenarios::alterReplicaLogDirs);
        SCENARIOS.put("quorum-leader", FailoverScenarios::printQuorumLeader);
        SCENARIOS.put("create-topic-within", FailoverScenarios::createTopicWithin);
        SCENARIOS.put("config-types", ConfigScenarios::typesAndDocumentation);
        SCENARIOS.put("config-subtract-to-empty", ConfigScenarios::subtractToEmptyList);
        SCENARIOS.put("produce-compression", ProducerScenarios::roundTripEveryCompression);
        SCENARIOS.put("consumer-classic-range", ConsumerScenarios::classicRange);
        SCENARIOS.put("consumer-classic-cooperative", ConsumerScenarios::classicCooperativeSticky);
        SCENARIOS.put("consumer-classic-static", ConsumerScenarios::classicStaticMembership);
        SCENARIOS.put("consumer-protocol-consumer", ConsumerScenarios::consumerProtocol);
        SCENARIOS.put("consumer-rebalance-no-loss", ConsumerScenarios::rebalancesWithCommitsNoLoss);
        SCENARIOS.put("consumer-protocol-coordinator-kill", GroupFailoverScenarios::consumerProtocolCoordinatorKill);
        SCENARIOS.put("consumer-rack-fetch", RackScenarios::consumeWithRack);
        SCENARIOS.put("txn-commit-abort-fence", TransactionScenarios::commitAbortFence);
        SCENARIOS.put("txn-eos-loop", ExactlyOnceScenarios::consumeTransformProduce);
        SCENARIOS.put("txn-perf", ExactlyOnceScenarios::producerThroughput);
        SCENARIOS.put("security-round-trip", SecurityScenarios::roundTrip);
        SCENARIOS.put("security-auth-fails", SecurityScenarios::authenticationFails);
        SCENARIOS.put("security-denied", SecurityScenarios::denied);
        SCENARIOS.put("security-group-denied", SecurityScenarios::groupDenied);
    }

    private Main() {}

    public static void main(String[] argv) {
        if (argv.length < 3 || !SCENARIOS.containsKey(argv[0])) {
            System.err.println("usage: Main <scenario> <bootstrap> <nodes> [key=value...]; scenarios: "
                + SCENARIOS.keySet());
            System.exit(2);
        }
        Map<String, String> args = new HashMap<>();
        for (int i = 3; i < argv.length; i++) {
            String[] kv = argv[i].split("=", 2);
            args.put(kv[0], kv.length > 1 ? kv[1] : "");
        }
        Env env = new Env(argv[1], Integer.parseInt(argv[2]), args);
        try {
            SCENARIOS.get(argv[0]).run(env);
        } catch (Check.Failure f) {
            System.err.println("FAIL " + argv[0] + ": " + f.getMessage());
            f.printStackTrace();
            System.exit(1);
        } catch (Throwable t) {
            System.err.println("FAIL " + argv[0] + ": " + t);
            t.printStackTrace();
            System.exit(1);
        }
        System.out.println("PASS " + argv[0]);
        System.exit(0);
    }
}
