// kafkajs over every secured listener kind (issue 14): SASL_SSL with SCRAM-SHA-512,
// SASL_PLAINTEXT with PLAIN, and SSL with a client certificate (mTLS): admin (create a topic,
// metadata, a group's committed offsets), produce with acks=-1, consume in a group. A wrong
// password is kafkajs' KafkaJSSASLAuthenticationError. Certificates: fixtures/security.mjs.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

import { FAST_GROUPS, RUNNEL_BIN, unique, useBroker, waitUntil } from './harness.mjs';
import { clientConfig, makeCerts, MODES, secureOverrides } from './fixtures/security.mjs';

const run = promisify(execFile);
const certs = makeCerts();
const ctx = useBroker({ overrides: secureOverrides(certs, FAST_GROUPS) });

// The SCRAM user bob, made once through the PLAINTEXT listener (credentials are metadata,
// KIP-554) when the first test needs it (the broker is started by the harness' hook).
let bob = null;
function ensureBob() {
  bob ||= run(RUNNEL_BIN, ['configs', '--bootstrap-server', ctx.broker.bootstrap, '--entity-type', 'users', '--entity-name', 'bob', '--alter', '--add-config', 'SCRAM-SHA-512=[iterations=8192,password=bob-secret]']);
  return bob;
}

/** A kafkajs client of `mode`. */
async function secured(mode, opts) {
  await ensureBob();
  return ctx.kafka(clientConfig(ctx.broker, certs, mode, opts));
}

for (const mode of MODES) {
  ctx.test(`${mode}: admin, produce with acks=-1, consume in a group and commit`, async () => {
    const kafka = await secured(mode);
    const admin = kafka.admin();
    ctx.clients.push(admin);
    await admin.connect();
    const topic = unique(`js-${mode}`);
    assert.equal(await admin.createTopics({ topics: [{ topic, numPartitions: 1, replicationFactor: 1 }] }), true);
    const { topics } = await admin.fetchTopicMetadata({ topics: [topic] });
    assert.equal(topics[0].partitions.length, 1);

    const producer = kafka.producer();
    ctx.clients.push(producer);
    await producer.connect();
    await producer.send({ topic, acks: -1, messages: ['v0', 'v1', 'v2'].map((value) => ({ value })) });

    const groupId = unique('js-sec-g');
    const consumer = kafka.consumer({ groupId, maxWaitTimeInMs: 100, heartbeatInterval: 500, sessionTimeout: 10_000 });
    ctx.clients.push(consumer);
    let crash = null;
    consumer.on(consumer.events.CRASH, (e) => {
      crash = e.payload.error;
    });
    const got = [];
    await consumer.connect();
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await consumer.run({ eachMessage: async ({ message }) => got.push(message.value.toString()) });
    await waitUntil(
      () => {
        if (crash) throw crash;
        return got.length >= 3;
      },
      { timeout: 30_000, desc: `three records in group ${groupId} (have ${got.length})` },
    );
    assert.deepEqual(got, ['v0', 'v1', 'v2']);
    // eachMessage commits as it goes (autoCommit); the committed offset reaches 3.
    await waitUntil(
      async () => {
        const [t] = await admin.fetchOffsets({ groupId, topics: [topic] });
        return t.partitions[0].offset === '3';
      },
      { timeout: 20_000, desc: 'committed offset 3' },
    );
    await consumer.disconnect();
  });
}

for (const mode of MODES.slice(0, 2)) {
  ctx.test(`${mode}: a wrong password is KafkaJSSASLAuthenticationError`, async () => {
    await ensureBob();
    const admin = ctx.kafka({ ...clientConfig(ctx.broker, certs, mode, { password: 'wrong-password' }), retry: { retries: 0 } }).admin();
    ctx.clients.push(admin);
    await assert.rejects(admin.connect(), (err) => {
      assert.equal(err.name, 'KafkaJSSASLAuthenticationError', `${err.name}: ${err.message}`);
      assert.ok(!err.message.includes('wrong-password'), err.message);
      return true;
    });
  });
}
