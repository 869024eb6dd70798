// kafkajs admin against runnel: topics, partitions, configs, offsets, records, cluster.
// kafkajs 2.2.4 negotiates CreateTopics v3, DeleteTopics v1, CreatePartitions v1, Metadata v6,
// DescribeConfigs v2, AlterConfigs v1, ListOffsets v3, DeleteRecords v1.

import assert from 'node:assert/strict';

import kafkajs from 'kafkajs';

import { FAST_GROUPS, unique, useBroker } from './harness.mjs';
import { consumeUntil, describeConfigs, expectKafkaError, offsets, topicMetadata } from './util.mjs';

// num.partitions=2 so that a topic created without numPartitions shows the broker's default,
// and DescribeConfigs can report a STATIC_BROKER_CONFIG.
const ctx = useBroker({ overrides: { 'num.partitions': '2', ...FAST_GROUPS } });

const { ConfigResourceTypes, ConfigSource, Partitioners } = kafkajs;

const producerConfig = { createPartitioner: Partitioners.DefaultPartitioner };

ctx.test('createTopics: validateOnly creates nothing; topics are created with partitions, configs and a leader', async () => {
  const admin = await ctx.admin();
  const t = unique('adm-create');

  // validateOnly: the answer is success, but the topic must not exist afterwards.
  assert.equal(
    await admin.createTopics({ validateOnly: true, waitForLeaders: false, topics: [{ topic: t, numPartitions: 3 }] }),
    true,
  );
  assert.ok(!(await admin.listTopics()).includes(t), 'validateOnly created the topic');

  assert.equal(
    await admin.createTopics({
      topics: [{ topic: t, numPartitions: 3, replicationFactor: 1, configEntries: [{ name: 'retention.ms', value: '3600000' }] }],
    }),
    true,
  );
  assert.ok((await admin.listTopics()).includes(t), 'listTopics does not show the new topic');
  const md = await topicMetadata(admin, t);
  assert.equal(md.name, t);
  assert.deepEqual(
    md.partitions.map((p) => [p.partitionId, p.partitionErrorCode, p.leader, p.replicas, p.isr]),
    [0, 1, 2].map((i) => [i, 0, 1, [1], [1]]),
  );
  const cfg = await describeConfigs(admin, ConfigResourceTypes.TOPIC, t, ['retention.ms']);
  assert.equal(cfg['retention.ms'].configValue, '3600000');

  // Without numPartitions / replicationFactor (-1): the broker's num.partitions (2) and default RF.
  const d = unique('adm-default');
  assert.equal(await admin.createTopics({ topics: [{ topic: d }] }), true);
  const dmd = await topicMetadata(admin, d);
  assert.equal(dmd.partitions.length, 2, 'num.partitions=2 is the default partition count');
  assert.deepEqual(dmd.partitions[0].replicas, [1]);
});

ctx.test('createTopics: TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS and other per-topic errors', async () => {
  const admin = await ctx.admin();
  const t = unique('adm-exists');
  assert.equal(await admin.createTopics({ topics: [{ topic: t, numPartitions: 1 }] }), true);

  // kafkajs answers `false` when every topic failed with TOPIC_ALREADY_EXISTS ...
  assert.equal(await admin.createTopics({ topics: [{ topic: t, numPartitions: 1 }] }), false);
  // ... also for validateOnly.
  assert.equal(await admin.createTopics({ validateOnly: true, waitForLeaders: false, topics: [{ topic: t, numPartitions: 1 }] }), false);

  // A mix: one error per topic, each with its own code, and the good topic still created.
  const zero = unique('adm-zero');
  const rf = unique('adm-rf');
  const badCfg = unique('adm-cfg');
  const ok = unique('adm-ok');
  const err = await expectKafkaError(
    admin.createTopics({
      waitForLeaders: false,
      topics: [
        { topic: t, numPartitions: 1 },
        { topic: zero, numPartitions: 0 },
        { topic: rf, numPartitions: 1, replicationFactor: 3 },
        { topic: badCfg, numPartitions: 1, configEntries: [{ name: 'cleanup.policy', value: 'shred' }] },
        { topic: 'bad/name', numPartitions: 1 },
        { topic: ok, numPartitions: 1 },
      ],
    }),
    'INVALID_PARTITIONS',
  );
  assert.equal(err.name, 'KafkaJSAggregateError', err.message);
  const byTopic = Object.fromEntries(err.errors.map((e) => [e.topic, e.type]));
  assert.deepEqual(byTopic, {
    [t]: 'TOPIC_ALREADY_EXISTS',
    [zero]: 'INVALID_PARTITIONS',
    [rf]: 'INVALID_REPLICATION_FACTOR',
    [badCfg]: 'INVALID_CONFIG',
    'bad/name': 'INVALID_TOPIC_EXCEPTION',
  });
  const topics = await admin.listTopics();
  assert.ok(topics.includes(ok), 'the valid topic of the batch was not created');
  for (const bad of [zero, rf, badCfg, 'bad/name']) assert.ok(!topics.includes(bad), `${bad} was created`);

  // validateOnly reports the same validation errors.
  await expectKafkaError(
    admin.createTopics({ validateOnly: true, waitForLeaders: false, topics: [{ topic: unique('adm-v0'), numPartitions: 0 }] }),
    'INVALID_PARTITIONS',
  );
});

ctx.test('listTopics and fetchTopicMetadata: all topics, one topic, unknown topic', async () => {
  const admin = await ctx.admin();
  const names = [unique('adm-list'), unique('adm-list')];
  await admin.createTopics({ topics: names.map((topic, i) => ({ topic, numPartitions: i + 1 })) });
  const listed = await admin.listTopics();
  for (const n of names) assert.ok(listed.includes(n), `${n} missing from listTopics`);
  assert.ok(!listed.some((n) => n.startsWith('__')), `internal topics listed: ${listed}`);

  const { topics } = await admin.fetchTopicMetadata({ topics: names });
  assert.deepEqual(
    topics.map((t) => [t.name, t.partitions.length]).sort(),
    names.map((n, i) => [n, i + 1]).sort(),
  );
  // No topics = all topics.
  const all = await admin.fetchTopicMetadata();
  for (const n of names) assert.ok(all.topics.some((t) => t.name === n));

  // The admin client never auto-creates: an unknown topic is an error, and stays unknown.
  const missing = unique('adm-missing');
  await expectKafkaError(admin.fetchTopicMetadata({ topics: [missing] }), 'UNKNOWN_TOPIC_OR_PARTITION');
  assert.ok(!(await admin.listTopics()).includes(missing), 'fetchTopicMetadata auto-created a topic');
});

ctx.test('createPartitions: validateOnly, grow, INVALID_PARTITIONS when shrinking, unknown topic', async () => {
  const admin = await ctx.admin();
  const t = unique('adm-parts');
  await admin.createTopics({ topics: [{ topic: t, numPartitions: 2 }] });

  await admin.createPartitions({ validateOnly: true, topicPartitions: [{ topic: t, count: 5 }] });
  assert.equal((await topicMetadata(admin, t)).partitions.length, 2, 'validateOnly added partitions');

  await admin.createPartitions({ topicPartitions: [{ topic: t, count: 5 }] });
  const md = await topicMetadata(admin, t);
  assert.deepEqual(
    md.partitions.map((p) => [p.partitionId, p.leader]),
    [0, 1, 2, 3, 4].map((i) => [i, 1]),
  );

  // The new partitions take records.
  const producer = await ctx.producer(producerConfig);
  const [meta] = await producer.send({ topic: t, messages: [{ value: 'p4', partition: 4 }] });
  assert.deepEqual([meta.partition, meta.errorCode, meta.baseOffset], [4, 0, '0']);

  await expectKafkaError(admin.createPartitions({ topicPartitions: [{ topic: t, count: 3 }] }), 'INVALID_PARTITIONS', 'shrink');
  await expectKafkaError(admin.createPartitions({ topicPartitions: [{ topic: t, count: 5 }] }), 'INVALID_PARTITIONS', 'same count');
  await expectKafkaError(
    admin.createPartitions({ topicPartitions: [{ topic: unique('adm-nope'), count: 3 }] }),
    'UNKNOWN_TOPIC_OR_PARTITION',
    'unknown topic',
  );
  assert.equal((await topicMetadata(admin, t)).partitions.length, 5);
});

ctx.test('deleteTopics: the topic and its records are gone; an unknown topic is UNKNOWN_TOPIC_OR_PARTITION', async () => {
  const admin = await ctx.admin();
  const t = unique('adm-del');
  await admin.createTopics({ topics: [{ topic: t, numPartitions: 2 }] });
  const producer = await ctx.producer(producerConfig);
  await producer.send({ topic: t, messages: [{ value: 'a', partition: 0 }, { value: 'b', partition: 1 }] });

  await admin.deleteTopics({ topics: [t] });
  assert.ok(!(await admin.listTopics()).includes(t), 'deleted topic still listed');
  await expectKafkaError(admin.fetchTopicMetadata({ topics: [t] }), 'UNKNOWN_TOPIC_OR_PARTITION');

  // Recreated under the same name it starts empty.
  await admin.createTopics({ topics: [{ topic: t, numPartitions: 1 }] });
  assert.deepEqual(await offsets(admin, t), { 0: { low: 0, high: 0 } });

  const limited = ctx.kafka({ retry: { retries: 1, initialRetryTime: 50 } }).admin();
  ctx.clients.push(limited);
  await limited.connect();
  await expectKafkaError(limited.deleteTopics({ topics: [unique('adm-never')] }), 'UNKNOWN_TOPIC_OR_PARTITION');
});

ctx.test('describeConfigs and alterConfigs: topic values and sources, validateOnly, INVALID_CONFIG, broker configs', async () => {
  const admin = await ctx.admin();
  const t = unique('adm-cfg');
  await admin.createTopics({ topics: [{ topic: t, numPartitions: 1, configEntries: [{ name: 'retention.ms', value: '3600000' }] }] });
  const TOPIC = ConfigResourceTypes.TOPIC;

  let cfg = await describeConfigs(admin, TOPIC, t, ['retention.ms', 'cleanup.policy', 'max.message.bytes']);
  assert.deepEqual(Object.keys(cfg).sort(), ['cleanup.policy', 'max.message.bytes', 'retention.ms']);
  assert.equal(cfg['retention.ms'].configValue, '3600000');
  assert.equal(cfg['retention.ms'].configSource, ConfigSource.TOPIC_CONFIG);
  assert.equal(cfg['retention.ms'].isDefault, false);
  assert.equal(cfg['cleanup.policy'].configValue, 'delete');
  assert.equal(cfg['cleanup.policy'].configSource, ConfigSource.DEFAULT_CONFIG);
  assert.equal(cfg['cleanup.policy'].isDefault, true);
  assert.equal(cfg['max.message.bytes'].configValue, '1048588');

  // All configs when no names are given.
  const all = await describeConfigs(admin, TOPIC, t);
  for (const name of ['retention.ms', 'cleanup.policy', 'segment.bytes', 'min.insync.replicas']) {
    assert.ok(name in all, `${name} missing from a full describeConfigs`);
  }

  // validateOnly changes nothing.
  await admin.alterConfigs({ validateOnly: true, resources: [{ type: TOPIC, name: t, configEntries: [{ name: 'retention.ms', value: '1000' }] }] });
  cfg = await describeConfigs(admin, TOPIC, t, ['retention.ms']);
  assert.equal(cfg['retention.ms'].configValue, '3600000', 'validateOnly altered the config');

  // AlterConfigs (not incremental) replaces the whole topic config set.
  await admin.alterConfigs({
    resources: [{ type: TOPIC, name: t, configEntries: [{ name: 'cleanup.policy', value: 'compact' }, { name: 'segment.ms', value: '600000' }] }],
  });
  cfg = await describeConfigs(admin, TOPIC, t, ['retention.ms', 'cleanup.policy', 'segment.ms']);
  assert.equal(cfg['cleanup.policy'].configValue, 'compact');
  assert.equal(cfg['cleanup.policy'].configSource, ConfigSource.TOPIC_CONFIG);
  assert.equal(cfg['segment.ms'].configValue, '600000');
  assert.equal(cfg['retention.ms'].configSource, ConfigSource.DEFAULT_CONFIG, 'AlterConfigs must replace, not merge');

  await expectKafkaError(
    admin.alterConfigs({ resources: [{ type: TOPIC, name: t, configEntries: [{ name: 'retention.ms', value: 'soon' }] }] }),
    'INVALID_CONFIG',
  );
  await expectKafkaError(
    admin.describeConfigs({ resources: [{ type: TOPIC, name: unique('adm-nocfg') }] }),
    'UNKNOWN_TOPIC_OR_PARTITION',
  );

  // Broker configs: the --override is a STATIC_BROKER_CONFIG, an untouched one a DEFAULT_CONFIG.
  const broker = await describeConfigs(admin, ConfigResourceTypes.BROKER, '1', ['num.partitions', 'auto.create.topics.enable']);
  assert.equal(broker['num.partitions'].configValue, '2');
  assert.equal(broker['num.partitions'].configSource, ConfigSource.STATIC_BROKER_CONFIG);
  assert.equal(broker['auto.create.topics.enable'].configValue, 'true');
  assert.equal(broker['auto.create.topics.enable'].configSource, ConfigSource.DEFAULT_CONFIG);
});

ctx.test('fetchTopicOffsets: low and high watermarks per partition', async () => {
  const admin = await ctx.admin();
  const t = unique('adm-offs');
  await admin.createTopics({ topics: [{ topic: t, numPartitions: 3 }] });
  assert.deepEqual(await offsets(admin, t), { 0: { low: 0, high: 0 }, 1: { low: 0, high: 0 }, 2: { low: 0, high: 0 } });
  const producer = await ctx.producer(producerConfig);
  await producer.send({ topic: t, messages: Array.from({ length: 10 }, (_, i) => ({ value: `a${i}`, partition: 0 })) });
  await producer.send({ topic: t, messages: Array.from({ length: 3 }, (_, i) => ({ value: `b${i}`, partition: 1 })) });
  assert.deepEqual(await offsets(admin, t), { 0: { low: 0, high: 10 }, 1: { low: 0, high: 3 }, 2: { low: 0, high: 0 } });
  const raw = await admin.fetchTopicOffsets(t);
  assert.equal(typeof raw[0].offset, 'string');
  assert.equal(raw.find((p) => p.partition === 0).offset, '10');
});

ctx.test('fetchTopicOffsetsByTimestamp: first offset at or after a timestamp', async () => {
  const admin = await ctx.admin();
  const t = unique('adm-ts');
  await admin.createTopics({ topics: [{ topic: t, numPartitions: 2 }] });
  const producer = await ctx.producer(producerConfig);
  const base = Date.now() - 60_000;
  // Partition 0: ts base, base+1000, ..., base+9000 in one batch; partition 1: one batch per record.
  await producer.send({ topic: t, messages: Array.from({ length: 10 }, (_, i) => ({ value: `v${i}`, partition: 0, timestamp: String(base + i * 1000) })) });
  for (let i = 0; i < 5; i++) {
    await producer.send({ topic: t, messages: [{ value: `w${i}`, partition: 1, timestamp: String(base + i * 2000) }] });
  }
  const at = async (ts) =>
    Object.fromEntries((await admin.fetchTopicOffsetsByTimestamp(t, ts)).map((p) => [p.partition, Number(p.offset)]));

  assert.deepEqual(await at(base - 1), { 0: 0, 1: 0 });
  assert.deepEqual(await at(base), { 0: 0, 1: 0 });
  assert.deepEqual(await at(base + 3500), { 0: 4, 1: 2 });
  assert.deepEqual(await at(base + 4000), { 0: 4, 1: 2 });
  assert.deepEqual(await at(base + 8001), { 0: 9, 1: 5 }); // partition 1: none at or after -> kafkajs shows the high watermark
  assert.deepEqual(await at(base + 600_000), { 0: 10, 1: 5 });
});

ctx.test('deleteTopicRecords: log start offset moves, consumers start there; OFFSET_OUT_OF_RANGE past the end', async () => {
  const admin = await ctx.admin();
  const t = unique('adm-delrec');
  await admin.createTopics({ topics: [{ topic: t, numPartitions: 2 }] });
  const producer = await ctx.producer(producerConfig);
  await producer.send({ topic: t, messages: Array.from({ length: 10 }, (_, i) => ({ value: `v${i}`, partition: 0 })) });
  await producer.send({ topic: t, messages: Array.from({ length: 4 }, (_, i) => ({ value: `w${i}`, partition: 1 })) });

  // kafkajs' deleteTopicRecords finds leaders in the admin's metadata cache, which holds only
  // topics the admin already looked at (else: KafkaJSBrokerNotFound, without asking the broker).
  assert.deepEqual(await offsets(admin, t), { 0: { low: 0, high: 10 }, 1: { low: 0, high: 4 } });
  await admin.deleteTopicRecords({ topic: t, partitions: [{ partition: 0, offset: '6' }] });
  assert.deepEqual(await offsets(admin, t), { 0: { low: 6, high: 10 }, 1: { low: 0, high: 4 } });
  // -1: everything up to the high watermark.
  await admin.deleteTopicRecords({ topic: t, partitions: [{ partition: 1, offset: '-1' }] });
  assert.deepEqual(await offsets(admin, t), { 0: { low: 6, high: 10 }, 1: { low: 4, high: 4 } });

  // A consumer from the beginning starts at the new log start offset.
  const records = await consumeUntil(ctx, { topic: t, groupId: unique('adm-delrec-g'), until: (r) => r.length >= 4 });
  assert.deepEqual(records.map((r) => [r.partition, r.offset, r.value]), [6, 7, 8, 9].map((o) => [0, o, `v${o}`]));

  await expectKafkaError(admin.deleteTopicRecords({ topic: t, partitions: [{ partition: 0, offset: '11' }] }), 'OFFSET_OUT_OF_RANGE');
  assert.deepEqual(await offsets(admin, t), { 0: { low: 6, high: 10 }, 1: { low: 4, high: 4 } });
});

ctx.test('describeCluster: this broker, controller and a cluster id', async () => {
  const admin = await ctx.admin();
  const { brokers, controller, clusterId } = await admin.describeCluster();
  assert.deepEqual(brokers, [{ nodeId: 1, host: '127.0.0.1', port: ctx.broker.port }]);
  assert.equal(controller, 1);
  assert.equal(typeof clusterId, 'string');
  assert.match(clusterId, /^\S{8,}$/);
});
