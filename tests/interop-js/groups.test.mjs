// kafkajs consumer groups against runnel (FindCoordinator v2, JoinGroup v5, SyncGroup v3,
// Heartbeat v3, LeaveGroup v3, OffsetCommit v5, OffsetFetch v4, Fetch v11): partitions split
// between members, every record read exactly once, hand-over when a member leaves or dies,
// committed offsets resumed by a restarted consumer.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

import kafkajs from 'kafkajs';

import { FAST_GROUPS, killOnExit, unique, useBroker, waitUntil } from './harness.mjs';
import { assertNoDuplicates, positions, toRecord } from './util.mjs';

const { Partitioners } = kafkajs;
const HERE = path.dirname(fileURLToPath(import.meta.url));

// A short minimum session timeout lets the crashed-member test expire a session in 3 s.
const ctx = useBroker({ overrides: { ...FAST_GROUPS, 'group.min.session.timeout.ms': '1000' } });

/** One in-process kafkajs group member that records what it reads and its latest assignment. */
class Member {
  constructor(groupId, topic, config = {}) {
    this.topic = topic;
    this.consumer = ctx.consumer({ groupId, heartbeatInterval: 300, sessionTimeout: 10_000, rebalanceTimeout: 10_000, maxWaitTimeInMs: 100, ...config });
    this.records = [];
    this.partitions = null; // latest assignment of `topic`
    this.crash = null;
    this.consumer.on(this.consumer.events.GROUP_JOIN, (e) => {
      this.partitions = [...(e.payload.memberAssignment[topic] || [])].sort();
    });
    this.consumer.on(this.consumer.events.CRASH, (e) => {
      this.crash = e.payload.error;
    });
  }

  async start(runConfig = {}) {
    await this.consumer.connect();
    await this.consumer.subscribe({ topics: [this.topic], fromBeginning: true });
    await this.consumer.run({
      ...runConfig,
      eachMessage: async ({ partition, message }) => {
        this.records.push(toRecord(partition, message));
      },
    });
    return this;
  }

  check() {
    if (this.crash) throw this.crash;
  }

  stop() {
    return this.consumer.disconnect();
  }
}

/** A kafkajs member in a child process (fixtures/member.mjs), to be killed with SIGKILL. */
class ChildMember {
  constructor(groupId, topic, sessionTimeoutMs) {
    this.records = [];
    this.partitions = null;
    this.committed = {};
    this.crash = null;
    this.stderr = '';
    this.exited = false;
    this.proc = killOnExit(
      spawn(process.execPath, [path.join(HERE, 'fixtures', 'member.mjs'), ctx.broker.bootstrap, groupId, topic, String(sessionTimeoutMs)], {
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    );
    this.proc.on('exit', () => {
      this.exited = true;
    });
    this.proc.stderr.on('data', (d) => {
      this.stderr += d;
    });
    readline.createInterface({ input: this.proc.stdout }).on('line', (line) => {
      const ev = JSON.parse(line);
      if (ev.event === 'join') this.partitions = [...ev.partitions].sort();
      else if (ev.event === 'record') this.records.push({ partition: ev.partition, offset: ev.offset });
      else if (ev.event === 'commit') for (const { partition, offset } of ev.partitions) this.committed[partition] = offset;
      else if (ev.event === 'crash') this.crash = new Error(`child member crashed: ${ev.error}`);
    });
  }

  check() {
    if (this.crash) throw this.crash;
    if (this.exited && !this.killed) throw new Error(`child member exited early; stderr: ${this.stderr.slice(-2000)}`);
  }

  kill() {
    this.killed = true;
    if (!this.exited) this.proc.kill('SIGKILL');
  }
}

async function createTopic(topic, numPartitions) {
  const admin = await ctx.admin();
  assert.equal(await admin.createTopics({ topics: [{ topic, numPartitions }] }), true);
  return admin;
}

/** Produce `perPartition` records to each partition; returns the expected "p/o" positions. */
async function produce(topic, numPartitions, perPartition, tag) {
  const producer = await ctx.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  const messages = [];
  for (let i = 0; i < perPartition; i++) {
    for (let p = 0; p < numPartitions; p++) messages.push({ key: `${tag}-${p}-${i}`, value: `${tag}-${p}-${i}`, partition: p });
  }
  await producer.send({ topic, messages });
  await producer.disconnect();
}

const range = (from, to) => Array.from({ length: to - from }, (_, i) => from + i);
const expectedPositions = (numPartitions, from, to) => range(0, numPartitions).flatMap((p) => range(from, to).map((o) => `${p}/${o}`));

/** The members' assignments are disjoint and cover partitions 0..n-1, with the given sizes. */
function splitIs(members, n, sizes) {
  for (const m of members) m.check();
  const parts = members.map((m) => m.partitions);
  if (parts.some((p) => p === null)) return false;
  if (JSON.stringify(parts.map((p) => p.length)) !== JSON.stringify(sizes)) return false;
  return JSON.stringify(parts.flat().sort()) === JSON.stringify(range(0, n));
}

function assertOwnPartitions(member, name) {
  const foreign = member.records.filter((r) => !member.partitions.includes(r.partition));
  assert.deepEqual(foreign.map((r) => `${r.partition}/${r.offset}`), [], `${name} read partitions it does not own (${member.partitions})`);
}

ctx.test('two members share a 4-partition topic 2+2 and together read every record exactly once', async () => {
  const t = unique('grp-split');
  await createTopic(t, 4);
  const g = unique('g-split');
  const a = await new Member(g, t).start();
  await waitUntil(() => splitIs([a], 4, [4]), { timeout: 15_000, desc: 'the first member to own all 4 partitions' });
  const b = await new Member(g, t).start();
  await waitUntil(() => splitIs([a, b], 4, [2, 2]), { timeout: 20_000, desc: 'a 2+2 split between the two members' });

  await produce(t, 4, 100, 'split');
  const total = () => a.records.length + b.records.length;
  await waitUntil(() => splitIs([a, b], 4, [2, 2]) && total() >= 400, { timeout: 20_000, desc: `400 records (have ${total()})` });
  const all = [...a.records, ...b.records];
  assertNoDuplicates(all);
  assert.deepEqual(positions(all).sort(), expectedPositions(4, 0, 100).sort());
  assertOwnPartitions(a, 'member a');
  assertOwnPartitions(b, 'member b');
  assert.ok(a.records.length === 200 && b.records.length === 200, `split of records: ${a.records.length} + ${b.records.length}`);
});

ctx.test('a member that leaves (disconnect) hands its partitions over at once; nothing is read twice', async () => {
  const t = unique('grp-leave');
  const admin = await createTopic(t, 4);
  const g = unique('g-leave');
  const a = await new Member(g, t).start();
  await waitUntil(() => splitIs([a], 4, [4]), { timeout: 15_000, desc: 'the first member to own all 4 partitions' });
  const b = await new Member(g, t).start();
  await waitUntil(() => splitIs([a, b], 4, [2, 2]), { timeout: 20_000, desc: 'a 2+2 split' });

  await produce(t, 4, 50, 'before');
  await waitUntil(() => a.records.length + b.records.length >= 200, { timeout: 20_000, desc: '200 records read by the two members' });
  const bOwned = b.partitions;
  const bRead = b.records.length;
  assert.equal(bRead, 100);

  const left = Date.now();
  await b.stop(); // commits, then LeaveGroup
  await waitUntil(() => splitIs([a], 4, [4]), { timeout: 15_000, desc: 'the remaining member to own all 4 partitions' });
  const handover = Date.now() - left;
  // LeaveGroup must end the generation at once, not after b's 10 s session timeout.
  assert.ok(handover < 6000, `hand-over took ${handover} ms after LeaveGroup`);
  const committed = await admin.fetchOffsets({ groupId: g, topics: [t] });
  assert.deepEqual(committed[0].partitions.map((p) => [p.partition, p.offset]).sort(), range(0, 4).map((p) => [p, '50']));

  await produce(t, 4, 50, 'after');
  await waitUntil(() => a.records.length + bRead >= 400, { timeout: 20_000, desc: `400 records (a has ${a.records.length})` });
  const all = [...a.records, ...b.records];
  assertNoDuplicates(all);
  assert.deepEqual(positions(all).sort(), expectedPositions(4, 0, 100).sort());
  // a picked up b's partitions at b's committed offset 50.
  for (const p of bOwned) {
    const fromB = a.records.filter((r) => r.partition === p).map((r) => r.offset);
    assert.deepEqual(fromB, range(50, 100), `partition ${p} taken over from b`);
  }
});

ctx.test('a member killed with SIGKILL is expired after its session timeout and its partitions move', async () => {
  const t = unique('grp-crash');
  await createTopic(t, 4);
  const g = unique('g-crash');
  const a = await new Member(g, t).start();
  await waitUntil(() => splitIs([a], 4, [4]), { timeout: 15_000, desc: 'the first member to own all 4 partitions' });
  const child = new ChildMember(g, t, 3000);
  try {
    await waitUntil(() => splitIs([a, child], 4, [2, 2]), { timeout: 20_000, desc: 'a 2+2 split with the child member' });
    const childOwned = child.partitions;
    await produce(t, 4, 50, 'before');
    // Kill only after the child read and committed all of its partitions' records.
    await waitUntil(
      () => {
        child.check();
        return a.records.length >= 100 && childOwned.every((p) => child.committed[p] === 50);
      },
      { timeout: 20_000, desc: `both members to read 100 records and the child to commit 50 on ${childOwned} (child committed ${JSON.stringify(child.committed)})` },
    );
    assert.equal(child.records.length, 100);

    const killed = Date.now();
    child.kill();
    await waitUntil(() => splitIs([a], 4, [4]), { timeout: 20_000, desc: 'the survivor to own all 4 partitions after the session timeout' });
    const handover = Date.now() - killed;
    assert.ok(handover >= 1500, `partitions moved ${handover} ms after the kill, before a 3 s session could expire`);

    await produce(t, 4, 50, 'after');
    await waitUntil(() => a.records.length >= 300, { timeout: 20_000, desc: `the survivor to read 300 records (has ${a.records.length})` });
    const all = [...a.records, ...child.records];
    assertNoDuplicates(all);
    assert.deepEqual(positions(all).sort(), expectedPositions(4, 0, 100).sort());
  } finally {
    child.kill();
  }
});

ctx.test('committed offsets are resumed by a restarted consumer; commitOffsets moves them', async () => {
  const t = unique('grp-resume');
  const admin = await createTopic(t, 2);
  const g = unique('g-resume');
  await produce(t, 2, 50, 'first');

  const first = await new Member(g, t).start();
  await waitUntil(() => (first.check(), first.records.length >= 100), { timeout: 20_000, desc: '100 records' });
  await first.stop();
  assertNoDuplicates(first.records);
  const fetched = async () =>
    Object.fromEntries((await admin.fetchOffsets({ groupId: g, topics: [t] }))[0].partitions.map((p) => [p.partition, Number(p.offset)]));
  assert.deepEqual(await fetched(), { 0: 50, 1: 50 });

  await produce(t, 2, 20, 'second');
  // A new client (new connection, new member id) in the same group: only the 40 new records.
  const second = await new Member(g, t).start();
  await waitUntil(() => (second.check(), second.records.length >= 40), { timeout: 20_000, desc: '40 new records' });
  await second.stop();
  assertNoDuplicates(second.records);
  assert.deepEqual(positions(second.records).sort(), expectedPositions(2, 50, 70).sort(), 'restarted consumer did not resume at the committed offsets');
  assert.deepEqual(await fetched(), { 0: 70, 1: 70 });

  // Manual commit with autoCommit off: move partition 0 back to 55 (with metadata).
  const manual = new Member(g, t);
  await manual.start({ autoCommit: false });
  await waitUntil(() => splitIs([manual], 2, [2]), { timeout: 15_000, desc: 'the manual member to own both partitions' });
  await manual.consumer.commitOffsets([{ topic: t, partition: 0, offset: '55', metadata: 'rewind' }]);
  await manual.stop();
  const withMeta = (await admin.fetchOffsets({ groupId: g, topics: [t] }))[0].partitions.find((p) => p.partition === 0);
  assert.deepEqual([withMeta.offset, withMeta.metadata], ['55', 'rewind']);

  const third = await new Member(g, t).start();
  await waitUntil(() => (third.check(), third.records.length >= 15), { timeout: 20_000, desc: '15 records from offset 55' });
  await third.stop();
  assertNoDuplicates(third.records);
  assert.deepEqual(positions(third.records).sort(), range(55, 70).map((o) => `0/${o}`).sort());
});
