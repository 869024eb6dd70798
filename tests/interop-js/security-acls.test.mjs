// kafkajs and ACLs (issue 14): a SASL PLAIN user without ACLs is denied with
// TOPIC_AUTHORIZATION_FAILED (produce), then, with the topic allowed by
// `runnel acls --add --producer`, GROUP_AUTHORIZATION_FAILED (joining the group), and may do
// everything after `--consumer --group`. The PLAINTEXT listener's ANONYMOUS is the super user
// that administers.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

import kafkajs from 'kafkajs';

import { FAST_GROUPS, RUNNEL_BIN, unique, useBroker, waitUntil } from './harness.mjs';
import { clientConfig, makeCerts, secureOverrides } from './fixtures/security.mjs';
import { errorTypes, expectKafkaError } from './util.mjs';

const { logLevel } = kafkajs;
const run = promisify(execFile);
const certs = makeCerts();
const ctx = useBroker({
  overrides: secureOverrides(certs, {
    ...FAST_GROUPS,
    'authorizer.class.name': 'org.apache.kafka.metadata.authorizer.StandardAuthorizer',
    'super.users': 'User:ANONYMOUS',
  }),
});

const runnel = (...args) => run(RUNNEL_BIN, [...args.slice(0, 1), '--bootstrap-server', ctx.broker.bootstrap, ...args.slice(1)]);

/** Joins `groupId` and reads `topic`; resolves with the records or rejects with the crash. */
async function consumeAll(kafka, topic, groupId, count) {
  const consumer = kafka.consumer({ groupId, maxWaitTimeInMs: 100, heartbeatInterval: 500, sessionTimeout: 10_000, retry: { retries: 0 } });
  ctx.clients.push(consumer);
  let crash = null;
  consumer.on(consumer.events.CRASH, (e) => {
    crash = e.payload.error;
  });
  const got = [];
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  await consumer.run({ eachMessage: async ({ message }) => got.push(message.value.toString()) });
  try {
    await waitUntil(() => crash || got.length >= count, { timeout: 30_000, desc: `${count} records in ${groupId}` });
  } finally {
    await consumer.disconnect();
  }
  if (crash) throw crash;
  return got;
}

ctx.test('denied without ACLs, group denied with only --producer, allowed after --consumer', async () => {
  const topic = unique('js-acl');
  const groupId = unique('js-acl-g');
  await runnel('topics', '--create', '--topic', topic, '--partitions', '1', '--replication-factor', '1');
  // Debug entries too: kafkajs reports a refused FindCoordinator as
  // KafkaJSGroupCoordinatorNotFound, the broker's error code is only in its log.
  const entries = [];
  const kafka = ctx.kafka({
    ...clientConfig(ctx.broker, certs, 'sasl_plaintext-plain'),
    retry: { retries: 0 },
    logLevel: logLevel.DEBUG,
    logCreator: () => ({ log }) => entries.push(log),
  });
  const producer = kafka.producer();
  ctx.clients.push(producer);
  await producer.connect();
  await expectKafkaError(producer.send({ topic, messages: [{ value: 'x' }] }), 'TOPIC_AUTHORIZATION_FAILED', 'produce without ACLs');

  await runnel('acls', '--add', '--allow-principal', 'User:alice', '--producer', '--topic', topic);
  await waitUntil(
    async () => {
      await producer.send({ topic, acks: -1, messages: ['v0', 'v1'].map((value) => ({ value })) });
      return true;
    },
    { timeout: 20_000, desc: 'produce allowed after runnel acls --add --producer' },
  );
  let groupError;
  try {
    await consumeAll(kafka, topic, groupId, 2);
  } catch (err) {
    groupError = err;
  }
  assert.ok(groupError, 'a consumer without Read on the group was not refused');
  const refusals = entries.filter((l) => l.groupId === groupId && l.error && l.error.type === 'GROUP_AUTHORIZATION_FAILED');
  assert.ok(
    errorTypes(groupError).includes('GROUP_AUTHORIZATION_FAILED') || (groupError.name === 'KafkaJSGroupCoordinatorNotFound' && refusals.length > 0),
    `${groupError.name}: ${groupError.message}`,
  );

  await runnel('acls', '--add', '--allow-principal', 'User:alice', '--consumer', '--topic', topic, '--group', groupId);
  assert.deepEqual(await consumeAll(kafka, topic, groupId, 2), ['v0', 'v1']);
});
