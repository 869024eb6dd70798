// kafkajs producer against runnel (Produce v7, InitProducerId v1): Java-compatible key
// partitioning, the codecs kafkajs ships without plugins (none, gzip), the idempotent producer,
// acks 0 / 1 / -1, record fields, LogAppendTime, auto-creation and MESSAGE_TOO_LARGE.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import kafkajs from 'kafkajs';

import { FAST_GROUPS, javaPartition, murmur2, unique, useBroker, waitUntil } from './harness.mjs';
import { assertNoDuplicates, consumeUntil, expectKafkaError, offsets, topicMetadata } from './util.mjs';

const { CompressionTypes, Partitioners } = kafkajs;

const ctx = useBroker({ overrides: FAST_GROUPS });

const producerConfig = { createPartitioner: Partitioners.DefaultPartitioner };

async function createTopic(topic, numPartitions, configEntries) {
  const admin = await ctx.admin();
  assert.equal(await admin.createTopics({ topics: [{ topic, numPartitions, configEntries }] }), true);
  return admin;
}

const readAll = (topic, n, extra = {}) =>
  consumeUntil(ctx, { topic, groupId: unique('prod-reader'), until: (r) => r.length >= n, ...extra });

ctx.test('murmur2 matches the Java client (Kafka UtilsTest vectors)', () => {
  // org.apache.kafka.common.utils.UtilsTest#testMurmur2
  const cases = [
    ['21', -973932308],
    ['foobar', -790332482],
    ['a-little-bit-long-string', -985981536],
    ['a-little-bit-longer-string', -1486304829],
    ['lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8', -58897971],
    ['abc', 479470107],
  ];
  for (const [key, want] of cases) assert.equal(murmur2(key), want, `murmur2(${key})`);
});

ctx.test('keyed records land in the Java partitioner\'s partition (murmur2) and keep their order', async () => {
  const t = unique('prod-keys');
  const P = 6;
  await createTopic(t, P);
  const producer = await ctx.producer(producerConfig);
  const keys = Array.from({ length: 60 }, (_, i) => `key-${i % 30}`); // each key twice
  const sent = keys.map((key, i) => ({ key, value: `value-${i}` }));
  const meta = await producer.send({ topic: t, messages: sent });
  const expectedPartitions = new Set(keys.map((k) => javaPartition(k, P)));
  assert.deepEqual(new Set(meta.map((m) => m.partition)), expectedPartitions);
  for (const m of meta) assert.deepEqual([m.errorCode, m.baseOffset], [0, '0'], JSON.stringify(m));
  // Buffers as keys partition the same way as strings.
  await producer.send({ topic: t, messages: [{ key: Buffer.from('key-0'), value: 'buffer-key' }] });

  const records = await readAll(t, sent.length + 1);
  assert.equal(records.length, sent.length + 1);
  assertNoDuplicates(records);
  for (const r of records) {
    assert.equal(r.partition, javaPartition(r.key, P), `key ${r.key} in partition ${r.partition}, Java puts it in ${javaPartition(r.key, P)}`);
  }
  // Per partition, offsets are dense from 0 and the values in send order.
  for (let p = 0; p < P; p++) {
    const inP = records.filter((r) => r.partition === p).sort((a, b) => a.offset - b.offset);
    assert.deepEqual(inP.map((r) => r.offset), inP.map((_, i) => i));
    const want = [...sent.filter((m) => javaPartition(m.key, P) === p).map((m) => m.value)];
    if (javaPartition('key-0', P) === p) want.push('buffer-key');
    assert.deepEqual(inP.map((r) => r.value), want, `partition ${p}`);
  }
  // Records without a key still go somewhere valid (kafkajs: round-robin / sticky).
  await producer.send({ topic: t, messages: Array.from({ length: 12 }, (_, i) => ({ value: `nokey-${i}` })) });
  const total = Object.values(await offsets(await ctx.admin(), t)).reduce((s, o) => s + o.high, 0);
  assert.equal(total, sent.length + 1 + 12);
});

for (const [codecName, codec] of [
  ['none', CompressionTypes.None],
  ['gzip', CompressionTypes.GZIP],
]) {
  ctx.test(`codec ${codecName}: keys, values, headers, timestamps and nulls survive; the batch is stored as sent`, async () => {
    const t = unique(`prod-${codecName}`);
    await createTopic(t, 1);
    const producer = await ctx.producer(producerConfig);
    const base = Date.now() - 10_000;
    // Compressible values, so a stored gzip batch is much smaller than the raw records.
    const messages = Array.from({ length: 200 }, (_, i) => ({
      key: i % 10 === 0 ? null : `k${i}`,
      value: i === 7 ? null : `${codecName}-${i}-`.padEnd(1000, 'x'),
      headers: { h: `hv${i}`, multi: ['a', 'b'] },
      timestamp: String(base + i),
    }));
    const [meta] = await producer.send({ topic: t, compression: codec, messages });
    assert.deepEqual([meta.partition, meta.errorCode, meta.baseOffset], [0, 0, '0']);

    const records = await readAll(t, messages.length);
    assert.equal(records.length, messages.length);
    records.sort((a, b) => a.offset - b.offset);
    records.forEach((r, i) => {
      assert.equal(r.offset, i);
      assert.equal(r.key, messages[i].key);
      assert.equal(r.value, messages[i].value);
      assert.deepEqual(r.headers, { h: `hv${i}`, multi: ['a', 'b'] });
      assert.equal(r.timestamp, base + i);
      assert.equal(r.batchContext.timestampType, 0, 'CreateTime');
    });

    // The producer's batch is what the broker stored: gzip on disk is far below 200 kB.
    const segment = path.join(ctx.broker.dataDir, `${t}-0`, '00000000000000000000.log');
    const size = fs.statSync(segment).size;
    if (codecName === 'gzip') assert.ok(size < 20_000, `gzip batch stored in ${size} bytes`);
    else assert.ok(size > 200_000, `uncompressed batch stored in ${size} bytes`);
  });
}

ctx.test('idempotent producer: producer id, epoch and sequences reach the log; no duplicates', async () => {
  const t = unique('prod-idem');
  await createTopic(t, 2);
  const producer = await ctx.producer({ ...producerConfig, idempotent: true, maxInFlightRequests: 1 });
  const sends = 5;
  for (let s = 0; s < sends; s++) {
    const meta = await producer.send({
      topic: t,
      acks: -1,
      messages: Array.from({ length: 10 }, (_, i) => ({ value: `s${s}-${i}`, partition: i % 2 })),
    });
    assert.deepEqual(
      meta.map((m) => [m.partition, m.errorCode, m.baseOffset]).sort(),
      [[0, 0, String(s * 5)], [1, 0, String(s * 5)]],
    );
  }
  // A second idempotent producer gets its own producer id.
  const other = await ctx.producer({ ...producerConfig, idempotent: true, maxInFlightRequests: 1 });
  await other.send({ topic: t, acks: -1, messages: [{ value: 'other', partition: 0 }] });

  const records = await readAll(t, sends * 10 + 1);
  assert.equal(records.length, sends * 10 + 1);
  assertNoDuplicates(records);
  const mine = records.filter((r) => r.value !== 'other');
  const pids = new Set(mine.map((r) => r.batchContext.producerId));
  assert.equal(pids.size, 1, `one producer id expected, got ${[...pids]}`);
  const [pid] = pids;
  assert.ok(BigInt(pid) >= 0n, `producer id ${pid}`);
  for (const r of mine) assert.ok(r.batchContext.producerEpoch >= 0, `epoch ${r.batchContext.producerEpoch}`);
  const otherRec = records.find((r) => r.value === 'other');
  assert.notEqual(otherRec.batchContext.producerId, pid, 'two idempotent producers share a producer id');
  assert.equal(otherRec.batchContext.firstSequence, 0);
  // Per partition: one batch per send, sequences 0, 5, 10, ... and the values in order.
  for (const p of [0, 1]) {
    const inP = mine.filter((r) => r.partition === p).sort((a, b) => a.offset - b.offset);
    const firstOfBatch = inP.filter((r) => r.offset === Number(r.batchContext.firstOffset));
    assert.deepEqual(firstOfBatch.map((r) => r.batchContext.firstSequence), [0, 5, 10, 15, 20]);
    assert.deepEqual(
      inP.map((r) => r.value),
      Array.from({ length: sends * 5 }, (_, j) => `s${Math.floor(j / 5)}-${(j % 5) * 2 + p}`),
    );
  }
  // A non-idempotent producer's batches carry no producer id.
  const plain = await ctx.producer(producerConfig);
  await plain.send({ topic: t, messages: [{ value: 'plain', partition: 1 }] });
  const again = await readAll(t, sends * 10 + 2);
  assert.equal(again.find((r) => r.value === 'plain').batchContext.producerId, '-1');
});

ctx.test('acks 0, 1 and -1: every record is stored once; acks=0 gets no response', async () => {
  const t = unique('prod-acks');
  const admin = await createTopic(t, 1);
  const producer = await ctx.producer(producerConfig);
  const batch = (acks) => Array.from({ length: 20 }, (_, i) => ({ key: `acks${acks}`, value: `acks${acks}-${i}`, partition: 0 }));

  const m1 = await producer.send({ topic: t, acks: 1, messages: batch(1) });
  assert.deepEqual(m1.map((m) => [m.partition, m.errorCode, m.baseOffset]), [[0, 0, '0']]);
  const m0 = await producer.send({ topic: t, acks: 0, messages: batch(0) });
  assert.deepEqual(m0, [], 'acks=0 must not produce a response');
  await waitUntil(async () => (await offsets(admin, t))[0].high === 40, { desc: 'the acks=0 batch to be appended' });
  const mAll = await producer.send({ topic: t, acks: -1, timeout: 5000, messages: batch(-1) });
  assert.deepEqual(mAll.map((m) => [m.partition, m.errorCode, m.baseOffset]), [[0, 0, '40']]);
  // Several acks=0 requests in a row, then one acked: the connection stays in step.
  for (let i = 0; i < 5; i++) await producer.send({ topic: t, acks: 0, messages: [{ value: `burst-${i}`, partition: 0 }] });
  const mLast = await producer.send({ topic: t, acks: 1, messages: [{ value: 'last', partition: 0 }] });
  assert.deepEqual(mLast.map((m) => m.baseOffset), ['65']);
  const stray = ctx.logs.filter((l) => /Response without match/.test(l));
  assert.deepEqual(stray, [], 'the broker answered an acks=0 request');

  const records = await readAll(t, 66);
  assert.equal(records.length, 66);
  assertNoDuplicates(records);
  const values = records.sort((a, b) => a.offset - b.offset).map((r) => r.value);
  assert.deepEqual(values, [
    ...batch(1).map((m) => m.value),
    ...batch(0).map((m) => m.value),
    ...batch(-1).map((m) => m.value),
    ...[0, 1, 2, 3, 4].map((i) => `burst-${i}`),
    'last',
  ]);
});

ctx.test('LogAppendTime topic: the broker stamps the batch and reports logAppendTime', async () => {
  const t = unique('prod-lat');
  await createTopic(t, 1, [{ name: 'message.timestamp.type', value: 'LogAppendTime' }]);
  const producer = await ctx.producer(producerConfig);
  const before = Date.now();
  const [meta] = await producer.send({ topic: t, messages: [{ value: 'a', timestamp: '1000' }, { value: 'b', timestamp: '2000' }] });
  const afterSend = Date.now();
  const lat = Number(meta.logAppendTime);
  assert.ok(lat >= before - 1000 && lat <= afterSend + 1000, `logAppendTime ${meta.logAppendTime} not near now (${before})`);
  const records = await readAll(t, 2);
  for (const r of records) {
    assert.equal(r.batchContext.timestampType, 1, 'LogAppendTime');
    assert.equal(r.timestamp, lat, 'record timestamp is the log append time');
  }
});

ctx.test('unknown topic is auto-created by the producer; MESSAGE_TOO_LARGE is reported', async () => {
  const t = unique('prod-auto');
  const producer = await ctx.producer(producerConfig);
  const [meta] = await producer.send({ topic: t, messages: [{ value: 'first' }] });
  assert.deepEqual([meta.errorCode, meta.baseOffset], [0, '0']);
  const admin = await ctx.admin();
  assert.equal((await topicMetadata(admin, t)).partitions.length, 1);

  const tooBig = 'x'.repeat(1_100_000); // > message.max.bytes (1048588)
  await expectKafkaError(producer.send({ topic: t, messages: [{ value: tooBig }] }), 'MESSAGE_TOO_LARGE');
  assert.deepEqual(await offsets(admin, t), { 0: { low: 0, high: 1 } });
});
