// kafkajs and kcat (librdkafka) on the same broker: records produced by one are read by the
// other (keys, values, headers, partitions, codecs none and gzip), the two clients' murmur2
// partitioners agree, and a group's committed offsets are honoured across the two clients.

import assert from 'node:assert/strict';

import kafkajs from 'kafkajs';

import { FAST_GROUPS, javaPartition, kcat, kcatErrors, unique, useBroker } from './harness.mjs';
import { assertNoDuplicates, consumeUntil, positions } from './util.mjs';

const { CompressionTypes, Partitioners } = kafkajs;

const ctx = useBroker({ overrides: FAST_GROUPS });

async function createTopic(topic, numPartitions) {
  const admin = await ctx.admin();
  assert.equal(await admin.createTopics({ topics: [{ topic, numPartitions }] }), true);
  return admin;
}

/** kcat -C from the beginning to the end; one parsed object per record, sorted by partition/offset. */
async function kcatConsume(topic, extra = []) {
  const { stdout, stderr } = await kcat(['-b', ctx.broker.bootstrap, '-C', '-t', topic, '-o', 'beginning', '-e', '-q', '-f', '%p|%o|%k|%s|%h\\n', ...extra]);
  assert.deepEqual(kcatErrors(stderr), [], 'kcat consumer logged errors');
  return parseKcat(stdout);
}

function parseKcat(stdout) {
  return stdout
    .toString()
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [p, o, key, value, headers] = line.split('|');
      return { partition: Number(p), offset: Number(o), key, value, headers };
    })
    .sort((a, b) => a.partition - b.partition || a.offset - b.offset);
}

for (const [codecName, codec] of [
  ['none', CompressionTypes.None],
  ['gzip', CompressionTypes.GZIP],
]) {
  ctx.test(`kafkajs -> kcat (${codecName}): keyed records with headers, in Java's partitions`, async () => {
    const t = unique(`x-js2kcat-${codecName}`);
    const P = 3;
    await createTopic(t, P);
    const producer = await ctx.producer({ createPartitioner: Partitioners.DefaultPartitioner });
    const messages = Array.from({ length: 30 }, (_, i) => ({ key: `key${i}`, value: `value${i}`, headers: { src: 'kafkajs', n: String(i) } }));
    await producer.send({ topic: t, compression: codec, messages });

    const got = await kcatConsume(t);
    assert.equal(got.length, messages.length);
    for (const r of got) {
      const i = Number(r.key.slice(3));
      assert.equal(r.value, `value${i}`);
      assert.equal(r.headers, `src=kafkajs,n=${i}`);
      assert.equal(r.partition, javaPartition(r.key, P), `kcat sees ${r.key} in partition ${r.partition}`);
    }
    // Offsets per partition are dense, in send order.
    for (let p = 0; p < P; p++) {
      const inP = got.filter((r) => r.partition === p);
      assert.deepEqual(inP.map((r) => r.offset), inP.map((_, i) => i));
      assert.deepEqual(inP.map((r) => r.key), messages.map((m) => m.key).filter((k) => javaPartition(k, P) === p));
    }
  });

  ctx.test(`kcat -> kafkajs (${codecName}): keys, values and headers; librdkafka's murmur2 agrees with Java's`, async () => {
    const t = unique(`x-kcat2js-${codecName}`);
    const P = 4;
    await createTopic(t, P);
    const lines = Array.from({ length: 40 }, (_, i) => `user-${i}:payload ${i}`).join('\n');
    const { stderr } = await kcat(
      ['-b', ctx.broker.bootstrap, '-P', '-t', t, '-K:', '-z', codecName, '-H', 'src=kcat', '-X', 'topic.partitioner=murmur2_random'],
      { input: `${lines}\n` },
    );
    assert.deepEqual(kcatErrors(stderr), [], 'kcat producer logged errors');

    const records = await consumeUntil(ctx, { topic: t, groupId: unique('x-reader'), until: (r) => r.length >= 40 });
    assert.equal(records.length, 40);
    assertNoDuplicates(records);
    for (const r of records) {
      const i = Number(r.key.slice(5));
      assert.equal(r.value, `payload ${i}`);
      assert.deepEqual(r.headers, { src: 'kcat' });
      assert.equal(r.partition, javaPartition(r.key, P), `${r.key}: librdkafka murmur2_random and Java's partitioner disagree`);
    }
    // An explicit partition and a null value (tombstone, kcat -Z with an empty value).
    await kcat(['-b', ctx.broker.bootstrap, '-P', '-t', t, '-p', '2', '-K:', '-Z', '-z', codecName], { input: 'gone:\n' });
    const more = await consumeUntil(ctx, { topic: t, groupId: unique('x-reader'), until: (r) => r.length >= 41 });
    const tomb = more.find((r) => r.key === 'gone');
    assert.ok(tomb, 'tombstone not read');
    assert.deepEqual([tomb.partition, tomb.value], [2, null]);
  });
}

ctx.test('group offsets committed by kafkajs are honoured by kcat -G, and the other way round', async () => {
  const t = unique('x-offsets');
  await createTopic(t, 2);
  const g = unique('x-g');
  const producer = await ctx.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  const send = (tag, n) =>
    producer.send({ topic: t, messages: Array.from({ length: n }, (_, i) => ({ key: `${tag}${i}`, value: `${tag}${i}`, partition: i % 2 })) });
  const kcatGroup = async () => {
    const { stdout, stderr } = await kcat(
      ['-b', ctx.broker.bootstrap, '-G', g, '-e', '-q', '-f', '%p|%o|%k|%s|%h\\n', '-X', 'auto.offset.reset=earliest', t],
      { timeout: 30_000 },
    );
    assert.deepEqual(kcatErrors(stderr), [], 'kcat group consumer logged errors');
    return parseKcat(stdout);
  };

  // kafkajs reads (and commits) the first 10.
  await send('a', 10);
  const first = await consumeUntil(ctx, { topic: t, groupId: g, until: (r) => r.length >= 10 });
  assert.equal(first.length, 10);
  // kcat in the same group starts at kafkajs' committed offsets: only the next 6.
  await send('b', 6);
  const second = await kcatGroup();
  assert.deepEqual(second.map((r) => r.key).sort(), ['b0', 'b1', 'b2', 'b3', 'b4', 'b5']);
  assert.deepEqual(positions(second).sort(), ['0/5', '0/6', '0/7', '1/5', '1/6', '1/7']);
  // kafkajs resumes where kcat committed.
  await send('c', 4);
  const third = await consumeUntil(ctx, { topic: t, groupId: g, until: (r) => r.length >= 4 });
  assert.deepEqual(positions(third).sort(), ['0/8', '0/9', '1/8', '1/9']);
});
