// Small helpers around kafkajs shared by the test files.

import assert from 'node:assert/strict';

import { waitUntil } from './harness.mjs';

/** The Kafka error type names (e.g. 'TOPIC_ALREADY_EXISTS') found in a kafkajs error, however wrapped. */
export function errorTypes(err) {
  const types = [];
  const seen = new Set();
  const walk = (e) => {
    if (!e || typeof e !== 'object' || seen.has(e)) return;
    seen.add(e);
    if (typeof e.type === 'string') types.push(e.type);
    walk(e.originalError);
    walk(e.cause);
    walk(e.error);
    for (const x of e.errors || []) walk(x);
    for (const x of e.partitions || []) walk(x);
    for (const x of e.groups || []) walk(x);
  };
  walk(err);
  return types;
}

/** Assert that `promise` rejects with a kafkajs error carrying the Kafka error `type`; returns it. */
export async function expectKafkaError(promise, type, what = 'the call') {
  let result;
  try {
    result = await promise;
  } catch (err) {
    const types = errorTypes(err);
    assert.ok(types.includes(type), `${what}: expected ${type}, got ${err.name}: ${err.message} (types: ${JSON.stringify(types)})`);
    return err;
  }
  assert.fail(`${what}: expected ${type}, but it succeeded: ${JSON.stringify(result)}`);
}

/** Topic metadata from admin.fetchTopicMetadata, as { name, partitions sorted by id }. */
export async function topicMetadata(admin, topic) {
  const { topics } = await admin.fetchTopicMetadata({ topics: [topic] });
  assert.equal(topics.length, 1);
  const t = topics[0];
  return { ...t, partitions: [...t.partitions].sort((a, b) => a.partitionId - b.partitionId) };
}

/** fetchTopicOffsets as { partition: { low, high } } with numbers. */
export async function offsets(admin, topic) {
  const res = {};
  for (const { partition, low, high } of await admin.fetchTopicOffsets(topic)) {
    res[partition] = { low: Number(low), high: Number(high) };
  }
  return res;
}

/** Config entries of one resource from admin.describeConfigs, by name. */
export async function describeConfigs(admin, type, name, configNames) {
  const { resources } = await admin.describeConfigs({ resources: [{ type, name, configNames }], includeSynonyms: false });
  assert.equal(resources.length, 1);
  assert.equal(resources[0].errorCode, 0, `describeConfigs ${name}: error ${resources[0].errorCode}`);
  return Object.fromEntries(resources[0].configEntries.map((e) => [e.configName, e]));
}

/**
 * Read records from `topic` with a kafkajs consumer in group `groupId` until `until(records)` is
 * true or `timeout` ms pass; returns the records ({ partition, offset, key, value, headers,
 * timestamp, batchContext }), offsets and partitions as numbers, key/value as strings.
 * The consumer is disconnected before returning.
 */
export async function consumeUntil(ctx, { topic, groupId, until, timeout = 20_000, fromBeginning = true, config = {}, runConfig = {} }) {
  const consumer = ctx.consumer({ groupId, maxWaitTimeInMs: 100, heartbeatInterval: 500, sessionTimeout: 10_000, ...config });
  const records = [];
  let crash = null;
  consumer.on(consumer.events.CRASH, (e) => {
    crash = e.payload.error;
  });
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning });
  await consumer.run({
    ...runConfig,
    eachMessage: async ({ partition, message }) => {
      records.push(toRecord(partition, message));
    },
  });
  try {
    await waitUntil(
      () => {
        if (crash) throw crash;
        return until(records);
      },
      { timeout, desc: `records from ${topic} (have ${records.length})` },
    );
  } finally {
    await consumer.disconnect();
  }
  if (crash) throw crash;
  return records;
}

export function toRecord(partition, message) {
  return {
    partition,
    offset: Number(message.offset),
    key: message.key === null ? null : message.key.toString(),
    value: message.value === null ? null : message.value.toString(),
    headers: Object.fromEntries(Object.entries(message.headers || {}).map(([k, v]) => [k, Array.isArray(v) ? v.map(String) : String(v)])),
    timestamp: Number(message.timestamp),
    batchContext: message.batchContext,
  };
}

/** "partition/offset" strings, for exact-once checks. */
export const positions = (records) => records.map((r) => `${r.partition}/${r.offset}`);

/** Assert no record position appears twice. */
export function assertNoDuplicates(records, what = 'records') {
  const seen = new Map();
  const dups = [];
  for (const p of positions(records)) {
    if (seen.has(p)) dups.push(p);
    seen.set(p, true);
  }
  assert.deepEqual(dups, [], `${what}: read more than once: ${dups.slice(0, 10).join(', ')}`);
}
