// kafkajs transactions against runnel (issue 13; InitProducerId v1 with a transactional id,
// AddPartitionsToTxn v1, AddOffsetsToTxn v1, TxnOffsetCommit v2, EndTxn v1, Fetch v11 with
// isolation_level): a committed transaction is read by a read_committed consumer (kafkajs'
// default), an aborted one only by a read_uncommitted one, an open one by neither until it
// commits, and sendOffsets commits the group's offsets with the transaction only.

import assert from 'node:assert/strict';

import { FAST_GROUPS, unique, useBroker, waitUntil } from './harness.mjs';
import { consumeUntil } from './util.mjs';

const ctx = useBroker({ overrides: FAST_GROUPS });

async function createTopic(topic, numPartitions = 1) {
  const admin = await ctx.admin();
  assert.equal(await admin.createTopics({ topics: [{ topic, numPartitions }] }), true);
  return admin;
}

const transactional = () =>
  ctx.producer({ transactionalId: unique('js-txn'), idempotent: true, maxInFlightRequests: 1, transactionTimeout: 60_000 });

const values = (records) => records.map((r) => r.value);

/** Every value of `topic` up to a record whose value is `last`, read_committed or not. */
const readTo = (topic, last, readUncommitted = false) =>
  consumeUntil(ctx, {
    topic,
    groupId: unique('js-txn-reader'),
    until: (r) => r.some((x) => x.value === last),
    config: { readUncommitted },
  });

ctx.test('a committed transaction is read, an aborted one only by read_uncommitted', async () => {
  const t = unique('js-txn-commit');
  await createTopic(t);
  const producer = await transactional();
  const committed = await producer.transaction();
  await committed.send({ topic: t, messages: [{ value: 'c1' }, { value: 'c2' }] });
  await committed.commit();
  const aborted = await producer.transaction();
  await aborted.send({ topic: t, messages: [{ value: 'aborted' }] });
  await aborted.abort();
  const after = await producer.transaction();
  await after.send({ topic: t, messages: [{ value: 'c3' }] });
  await after.commit();

  assert.deepEqual(values(await readTo(t, 'c3')), ['c1', 'c2', 'c3']);
  assert.deepEqual(values(await readTo(t, 'c3', true)), ['c1', 'c2', 'aborted', 'c3']);
});

ctx.test('an open transaction is invisible to read_committed until it commits', async () => {
  const t = unique('js-txn-open');
  await createTopic(t);
  const producer = await transactional();
  const open = await producer.transaction();
  await open.send({ topic: t, messages: [{ value: 'pending' }] });
  // read_uncommitted sees it at once; read_committed's end (the LSO) stays before it.
  assert.deepEqual(values(await readTo(t, 'pending', true)), ['pending']);
  const reader = ctx.consumer({ groupId: unique('js-txn-rc'), maxWaitTimeInMs: 100 });
  const seen = [];
  let fetches = 0;
  reader.on(reader.events.FETCH, () => {
    fetches += 1;
  });
  await reader.connect();
  await reader.subscribe({ topics: [t], fromBeginning: true });
  await reader.run({ eachMessage: async ({ message }) => seen.push(message.value.toString()) });
  // Several fetches answered while the transaction is open: none may return its record.
  await waitUntil(() => fetches >= 5, { timeout: 15_000, desc: 'five fetches' });
  assert.deepEqual(seen, [], 'nothing before the commit');
  await open.commit();
  await waitUntil(() => seen.length === 1, { timeout: 15_000, desc: 'the committed record' });
  assert.deepEqual(seen, ['pending']);
  await reader.disconnect();
});

ctx.test('sendOffsets commits the group offsets with the transaction, never with an abort', async () => {
  const t = unique('js-txn-offsets');
  const admin = await createTopic(t);
  const group = unique('js-txn-group');
  const producer = await transactional();
  const committed = async () => {
    const [topic] = await admin.fetchOffsets({ groupId: group, topics: [t] });
    return topic.partitions.find((p) => p.partition === 0).offset;
  };

  const first = await producer.transaction();
  await first.send({ topic: t, messages: [{ value: 'out-1' }] });
  await first.sendOffsets({ consumerGroupId: group, topics: [{ topic: t, partitions: [{ partition: 0, offset: '5' }] }] });
  await first.commit();
  await waitUntil(async () => (await committed()) === '5', { timeout: 15_000, desc: 'offset 5 committed' });

  const second = await producer.transaction();
  await second.send({ topic: t, messages: [{ value: 'out-2' }] });
  await second.sendOffsets({ consumerGroupId: group, topics: [{ topic: t, partitions: [{ partition: 0, offset: '9' }] }] });
  await second.abort();
  // A later committed transaction's marker is written after the abort's: once its record is
  // readable, the abort is complete and the offset must still be 5.
  const third = await producer.transaction();
  await third.send({ topic: t, messages: [{ value: 'out-3' }] });
  await third.commit();
  assert.deepEqual(values(await readTo(t, 'out-3')), ['out-1', 'out-3']);
  assert.equal(await committed(), '5', 'the aborted offset 9 never counts');
});
