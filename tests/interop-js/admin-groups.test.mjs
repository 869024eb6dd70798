// kafkajs admin group operations against runnel (ListGroups v2, DescribeGroups v2,
// OffsetFetch v4, OffsetCommit through setOffsets' consumer, DeleteGroups v1): listGroups,
// describeGroups, fetchOffsets, setOffsets, resetOffsets, deleteGroups.

import assert from 'node:assert/strict';

import kafkajs from 'kafkajs';

import { FAST_GROUPS, unique, useBroker, waitUntil } from './harness.mjs';
import { assertNoDuplicates, consumeUntil, errorTypes, expectKafkaError, positions, toRecord } from './util.mjs';

const { AssignerProtocol, Partitioners } = kafkajs;

const ctx = useBroker({ overrides: FAST_GROUPS });

/** A topic with 2 partitions and 5 records in each. */
async function topicWithRecords(prefix) {
  const t = unique(prefix);
  const admin = await ctx.admin();
  await admin.createTopics({ topics: [{ topic: t, numPartitions: 2 }] });
  const producer = await ctx.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  await producer.send({ topic: t, messages: Array.from({ length: 10 }, (_, i) => ({ value: `v${i}`, partition: i % 2 })) });
  return { t, admin };
}

const committed = async (admin, groupId, topic, opts = {}) =>
  Object.fromEntries((await admin.fetchOffsets({ groupId, topics: [topic], ...opts }))[0].partitions.map((p) => [p.partition, p.offset]));

ctx.test('an active group: listGroups, describeGroups (members, assignment), fetchOffsets; deleteGroups is NON_EMPTY_GROUP', async () => {
  const { t, admin } = await topicWithRecords('ag-active');
  const g = unique('ag-active-g');
  const consumer = ctx.consumer({ groupId: g, heartbeatInterval: 300, sessionTimeout: 10_000, maxWaitTimeInMs: 100 });
  const records = [];
  let joined = false;
  consumer.on(consumer.events.GROUP_JOIN, () => {
    joined = true;
  });
  await consumer.connect();
  await consumer.subscribe({ topics: [t], fromBeginning: true });
  await consumer.run({ eachMessage: async ({ partition, message }) => void records.push(toRecord(partition, message)) });
  await waitUntil(() => joined && records.length >= 10, { timeout: 20_000, desc: 'the consumer to join and read 10 records' });
  await waitUntil(async () => JSON.stringify(await committed(admin, g, t)) === JSON.stringify({ 0: '5', 1: '5' }), {
    desc: 'offsets 5/5 committed',
  });

  const { groups } = await admin.listGroups();
  assert.deepEqual(groups.find((x) => x.groupId === g), { groupId: g, protocolType: 'consumer' });

  const described = await admin.describeGroups([g]);
  assert.equal(described.groups.length, 1);
  const d = described.groups[0];
  assert.deepEqual([d.errorCode, d.groupId, d.state, d.protocolType, d.protocol], [0, g, 'Stable', 'consumer', 'RoundRobinAssigner']);
  assert.equal(d.members.length, 1);
  const [m] = d.members;
  assert.equal(m.clientId, 'interop-js-admin-groups');
  assert.match(m.clientHost, /127\.0\.0\.1/);
  assert.match(m.memberId, /^interop-js-admin-groups-/);
  const assignment = AssignerProtocol.MemberAssignment.decode(m.memberAssignment);
  assert.deepEqual(assignment.assignment, { [t]: [0, 1] });
  const metadata = AssignerProtocol.MemberMetadata.decode(m.memberMetadata);
  assert.deepEqual(metadata.topics, [t]);

  // An unknown group is described as Dead, without an error.
  const unknown = (await admin.describeGroups([unique('ag-nobody')])).groups[0];
  assert.deepEqual([unknown.errorCode, unknown.state, unknown.members], [0, 'Dead', []]);

  // A group with members cannot be deleted, and kafkajs refuses to set its offsets.
  const err = await expectKafkaError(admin.deleteGroups([g]), 'NON_EMPTY_GROUP');
  assert.equal(err.name, 'KafkaJSDeleteGroupsError');
  await assert.rejects(admin.setOffsets({ groupId: g, topic: t, partitions: [{ partition: 0, offset: '0' }] }), /no running instances, current state: Stable/);
  assert.ok((await admin.listGroups()).groups.some((x) => x.groupId === g), 'the group was deleted anyway');
});

ctx.test('an empty group: setOffsets, resetOffsets, fetchOffsets, deleteGroups, GROUP_ID_NOT_FOUND', async () => {
  const { t, admin } = await topicWithRecords('ag-empty');
  const g = unique('ag-empty-g');
  // Unknown group: no committed offsets.
  assert.deepEqual(await committed(admin, g, t), { 0: '-1', 1: '-1' });

  const read = await consumeUntil(ctx, { topic: t, groupId: g, until: (r) => r.length >= 10 });
  assertNoDuplicates(read);
  assert.deepEqual(await committed(admin, g, t), { 0: '5', 1: '5' });
  const d = (await admin.describeGroups([g])).groups[0];
  assert.deepEqual([d.state, d.members.length, d.protocolType], ['Empty', 0, 'consumer']);
  assert.ok((await admin.listGroups()).groups.some((x) => x.groupId === g), 'an empty group with offsets is still listed');

  // setOffsets (kafkajs joins the group with a consumer of its own, seeks and commits).
  await admin.setOffsets({ groupId: g, topic: t, partitions: [{ partition: 0, offset: '2' }, { partition: 1, offset: '4' }] });
  assert.deepEqual(await committed(admin, g, t), { 0: '2', 1: '4' });
  const afterSet = await consumeUntil(ctx, { topic: t, groupId: g, until: (r) => r.length >= 4 });
  assert.deepEqual(positions(afterSet).sort(), ['0/2', '0/3', '0/4', '1/4']);

  // resetOffsets to the earliest: kafkajs commits -2 (EARLIEST), which the next member of the
  // group reads back from OffsetFetch and turns into the log start offset.
  // (Each setOffsets / resetOffsets takes ~5 s: kafkajs' internal consumer has every partition
  // paused and sleeps maxWaitTimeInMs (5000) before its first FETCH event; client-side.)
  await admin.resetOffsets({ groupId: g, topic: t, earliest: true });
  assert.deepEqual(await committed(admin, g, t), { 0: '-2', 1: '-2' });
  const afterReset = await consumeUntil(ctx, { topic: t, groupId: g, until: (r) => r.length >= 10 });
  assertNoDuplicates(afterReset);
  assert.deepEqual(positions(afterReset).sort(), ['0/0', '0/1', '0/2', '0/3', '0/4', '1/0', '1/1', '1/2', '1/3', '1/4']);
  assert.deepEqual(await committed(admin, g, t), { 0: '5', 1: '5' });

  // deleteGroups: gone from listGroups, Dead, no offsets; a second delete is GROUP_ID_NOT_FOUND.
  assert.deepEqual(await admin.deleteGroups([g]), [{ groupId: g, errorCode: 0 }]);
  assert.ok(!(await admin.listGroups()).groups.some((x) => x.groupId === g), 'deleted group still listed');
  assert.equal((await admin.describeGroups([g])).groups[0].state, 'Dead');
  assert.deepEqual(await committed(admin, g, t), { 0: '-1', 1: '-1' });
  const err = await expectKafkaError(admin.deleteGroups([g]), 'GROUP_ID_NOT_FOUND');
  assert.ok(errorTypes(err).every((x) => x === 'GROUP_ID_NOT_FOUND'), JSON.stringify(errorTypes(err)));
});
