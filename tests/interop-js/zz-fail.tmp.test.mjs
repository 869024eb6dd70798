import assert from 'node:assert/strict';
import { useBroker } from './harness.mjs';
const ctx = useBroker({});
ctx.test('deliberate failure (temporary)', async () => { const a = await ctx.admin(); assert.deepEqual(await a.listTopics(), ['nope']); });
