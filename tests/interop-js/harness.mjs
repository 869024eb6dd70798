// Start and stop a real `runnel broker` process for one test file; wait on conditions; kafkajs
// clients that are cleaned up after each test; failure reports with the broker's log tail.
//
// No sleeps-and-hope: every wait is a poll loop with a deadline that fails loudly, and the
// broker is signalled by its own pid only (SIGTERM, then SIGKILL after a deadline).

import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import kafkajs from 'kafkajs';

const { Kafka, logLevel } = kafkajs;

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const REPO = path.resolve(HERE, '..', '..');
const targetDir = (() => {
  const t = process.env.CARGO_TARGET_DIR || path.join(REPO, 'target');
  return path.isAbsolute(t) ? t : path.join(REPO, t);
})();
export const RUNNEL_BIN = process.env.RUNNEL_BIN || path.join(targetDir, 'debug', 'runnel');
export const KCAT = process.env.KCAT || 'kcat';

const START_TIMEOUT_MS = Number(process.env.RUNNEL_START_TIMEOUT || 30) * 1000;
const STOP_TIMEOUT_MS = Number(process.env.RUNNEL_STOP_TIMEOUT || 15) * 1000;
/** Per-test timeout (ms) unless a test asks for another. */
export const TEST_TIMEOUT_MS = 45_000;
/** The broker override for tests that use consumer groups: no 3 s wait for more members. */
export const FAST_GROUPS = { 'group.initial.rebalance.delay.ms': '0' };

const LISTEN_RE = /listening on (127\.0\.0\.1):(\d+)/;
// eslint-disable-next-line no-control-regex
const ANSI_RE = /\x1b\[[0-9;]*[A-Za-z]/g;

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export class WaitTimeout extends Error {}

/**
 * Poll `predicate()` (sync or async) until it returns a truthy value, which is returned, or
 * `timeout` ms pass. A throwing predicate counts as "not yet"; the last error is reported.
 */
export async function waitUntil(predicate, { timeout = 10_000, interval = 50, desc = 'condition' } = {}) {
  const deadline = Date.now() + timeout;
  let lastErr;
  let lastVal;
  for (;;) {
    try {
      lastVal = await predicate();
      if (lastVal) return lastVal;
    } catch (err) {
      lastErr = err;
    }
    if (Date.now() >= deadline) {
      const detail = lastErr ? `; last error: ${lastErr.stack || lastErr}` : `; last value: ${JSON.stringify(lastVal)}`;
      throw new WaitTimeout(`timed out after ${timeout} ms waiting for ${desc}${detail}`);
    }
    await sleep(interval);
  }
}

/** A topic / group name unique to this run. */
export function unique(prefix = 't') {
  return `${prefix.replace(/[^a-zA-Z0-9._-]/g, '-').slice(0, 100)}-${randomBytes(4).toString('hex')}`;
}

// Every process a test file starts (brokers, kcat, child group members), so that none is left
// behind when the file exits without its `after` hook or is stopped by a signal (the test
// runner's timeout, Ctrl-C): each is killed by its own pid.
const children = new Set();
export function killOnExit(proc) {
  children.add(proc);
  proc.once('exit', () => children.delete(proc));
  return proc;
}
function killChildren() {
  for (const proc of children) {
    try {
      process.kill(proc.pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
  children.clear();
}
process.on('exit', killChildren);
for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP']) {
  process.once(sig, () => {
    killChildren();
    process.exit(128 + os.constants.signals[sig]);
  });
}

/** One `runnel broker` process on 127.0.0.1 with an ephemeral port and its own data dir. */
export class Broker {
  constructor({ overrides = {}, name = 'broker' } = {}) {
    this.overrides = overrides;
    this.name = name;
    this.root = fs.mkdtempSync(path.join(process.env.RUNNEL_JS_TMPDIR || os.tmpdir(), `runnel-js-${name}-`));
    this.dataDir = path.join(this.root, 'data');
    this.logPath = path.join(this.root, 'broker.log');
    this.proc = null;
    this.exit = null; // { code, signal } once the process has exited
    this.expectedDown = true;
    this.host = null;
    this.port = null;
  }

  command() {
    const args = ['broker', '--node-id', '1', '--listen', '127.0.0.1:0', '--data-dir', this.dataDir];
    for (const [k, v] of Object.entries(this.overrides)) args.push('--override', `${k}=${v}`);
    return args;
  }

  async start(timeout = START_TIMEOUT_MS) {
    if (this.alive()) throw new Error(`${this.name} already running (pid ${this.proc.pid})`);
    try {
      fs.accessSync(RUNNEL_BIN, fs.constants.X_OK);
    } catch {
      throw new Error(`RUNNEL_BIN=${RUNNEL_BIN} is not an executable; build it first (cargo build) or set RUNNEL_BIN`);
    }
    fs.mkdirSync(this.dataDir, { recursive: true });
    const args = this.command();
    fs.appendFileSync(this.logPath, `===== start: ${RUNNEL_BIN} ${args.join(' ')}\n`);
    this.logOffset = fs.statSync(this.logPath).size;
    const fd = fs.openSync(this.logPath, 'a');
    try {
      this.proc = spawn(RUNNEL_BIN, args, {
        stdio: ['ignore', fd, fd],
        env: { ...process.env, RUST_BACKTRACE: process.env.RUST_BACKTRACE || '1', RUST_LOG: process.env.RUST_LOG || 'info', NO_COLOR: '1' },
      });
    } finally {
      fs.closeSync(fd);
    }
    this.exit = null;
    this.expectedDown = false;
    this.exited = new Promise((resolve) => {
      this.proc.once('exit', (code, signal) => {
        this.exit = { code, signal };
        resolve(this.exit);
      });
      this.proc.once('error', (err) => {
        this.exit = { code: null, signal: null, error: err };
        resolve(this.exit);
      });
    });
    killOnExit(this.proc);
    const deadline = Date.now() + timeout;
    for (;;) {
      const m = LISTEN_RE.exec(this.logSinceStart());
      if (m && Number(m[2]) !== 0) {
        this.host = m[1];
        this.port = Number(m[2]);
        return this;
      }
      if (this.exit) {
        this.expectedDown = true;
        throw new Error(`${this.name} exited (${JSON.stringify(this.exit)}) before printing 'listening on 127.0.0.1:PORT'\n--- log ---\n${this.logTail()}`);
      }
      if (Date.now() >= deadline) {
        await this.signalAndWait('SIGKILL', 5000);
        this.expectedDown = true;
        throw new Error(`${this.name} did not print 'listening on 127.0.0.1:PORT' within ${timeout} ms\n--- log ---\n${this.logTail()}`);
      }
      await sleep(20);
    }
  }

  /** SIGTERM, then SIGKILL after `timeout` ms. Returns { exit, graceful }. */
  async stop(timeout = STOP_TIMEOUT_MS) {
    this.expectedDown = true;
    if (!this.proc || this.exit) return { exit: this.exit, graceful: true };
    const graceful = await this.signalAndWait('SIGTERM', timeout);
    if (!graceful) await this.signalAndWait('SIGKILL', 10_000);
    return { exit: this.exit, graceful };
  }

  async signalAndWait(sig, timeout) {
    if (this.exit) return true;
    try {
      process.kill(this.proc.pid, sig);
    } catch {
      /* already gone */
    }
    let timer;
    const timedOut = new Promise((r) => {
      timer = setTimeout(() => r(false), timeout);
    });
    const ok = await Promise.race([this.exited.then(() => true), timedOut]);
    clearTimeout(timer);
    return ok;
  }

  alive() {
    return this.proc !== null && this.exit === null;
  }

  get bootstrap() {
    if (this.port === null) throw new Error(`${this.name} is not running`);
    return `${this.host}:${this.port}`;
  }

  logSinceStart() {
    try {
      const fd = fs.openSync(this.logPath, 'r');
      try {
        const size = fs.fstatSync(fd).size;
        const buf = Buffer.alloc(Math.max(0, size - this.logOffset));
        fs.readSync(fd, buf, 0, buf.length, this.logOffset);
        return buf.toString('utf8').replace(ANSI_RE, '');
      } finally {
        fs.closeSync(fd);
      }
    } catch {
      return '';
    }
  }

  /** The last `lines` lines of the log, runs of lines that differ only in numbers collapsed. */
  logTail(lines = 60) {
    let text;
    try {
      text = fs.readFileSync(this.logPath, 'utf8').replace(ANSI_RE, '');
    } catch {
      return '(no log)';
    }
    const out = [];
    let run = 0;
    let prevShape = null;
    const flush = () => {
      if (run > 2) out.push(`    ... ${run - 2} similar lines ...`);
      if (run > 1) out.push(last);
    };
    let last = null;
    for (const line of text.split('\n')) {
      const shape = line.replace(/\d+/g, '#');
      if (shape === prevShape) {
        run += 1;
        last = line;
        continue;
      }
      flush();
      out.push(line);
      prevShape = shape;
      last = line;
      run = 1;
    }
    flush();
    return out.slice(-lines - 1).join('\n');
  }

  describe() {
    const state = this.alive() ? `pid ${this.proc.pid} alive` : `exited ${JSON.stringify(this.exit)}`;
    return `${this.name} [${state}] port=${this.port} data=${this.dataDir} log=${this.logPath}`;
  }

  /** Remove the temp dir (data and log); kept when `keep` (a test failed) for inspection. */
  cleanup(keep) {
    if (!keep) fs.rmSync(this.root, { recursive: true, force: true });
  }
}

/**
 * The harness of one test file: one broker (started in `before`, stopped in `after`), kafkajs
 * clients made through it and disconnected after each test, and `ctx.test(name, fn)` which
 * fails a test whose broker died and adds the broker's log tail and kafkajs' warnings to any
 * failure.
 *
 *   const ctx = useBroker({ overrides: FAST_GROUPS });
 *   ctx.test('name', async () => { const admin = await ctx.admin(); ... });
 */
export function useBroker({ overrides = {}, name } = {}) {
  const file = path.basename(process.argv[1] || 'test', '.mjs').replace(/\.test$/, '');
  const ctx = {
    broker: null,
    clients: [],
    logs: [], // recent kafkajs log entries (warn and above), for failure reports
    failed: false,
  };

  before(async () => {
    ctx.broker = new Broker({ overrides, name: name || file });
    await ctx.broker.start();
  });

  after(async () => {
    await disconnectAll(ctx);
    if (ctx.broker) {
      const { graceful } = await ctx.broker.stop();
      if (!graceful) console.error(`# ${ctx.broker.name} ignored SIGTERM and was killed`);
      if (ctx.failed) console.error(`# kept broker data and log of failed tests: ${ctx.broker.root}`);
      ctx.broker.cleanup(ctx.failed);
    }
  });

  const logCreator = () => ({ namespace, level, label, log }) => {
    if (level > logLevel.WARN) return;
    const { message, timestamp, ...extra } = log;
    ctx.logs.push(`${timestamp} ${label} [${namespace}] ${message} ${JSON.stringify(extra)}`);
    if (ctx.logs.length > 40) ctx.logs.shift();
  };

  /** A kafkajs client on this file's broker. */
  ctx.kafka = (config = {}) =>
    new Kafka({
      clientId: `interop-js-${file}`,
      brokers: [ctx.broker.bootstrap],
      connectionTimeout: 3000,
      requestTimeout: 15_000,
      retry: { initialRetryTime: 100, maxRetryTime: 2000, retries: 6 },
      logLevel: logLevel.WARN,
      logCreator,
      ...config,
    });

  const track = (client) => {
    ctx.clients.push(client);
    return client;
  };
  /** Connected admin / producer; unconnected consumer (subscribe first). All auto-disconnected. */
  ctx.admin = async (config) => {
    const a = track(ctx.kafka().admin(config));
    await a.connect();
    return a;
  };
  ctx.producer = async (config) => {
    const p = track(ctx.kafka().producer(config));
    await p.connect();
    return p;
  };
  ctx.consumer = (config) => track(ctx.kafka().consumer(config));

  ctx.test = (testName, opts, fn) => {
    if (typeof opts === 'function') [opts, fn] = [{}, opts];
    return test(testName, { timeout: TEST_TIMEOUT_MS, ...opts }, async (t) => {
      ctx.logs.length = 0;
      let error;
      try {
        // A broker that died in an earlier test must not fail every later one: restart it.
        if (ctx.broker && !ctx.broker.alive()) await ctx.broker.start();
        await fn(t);
      } catch (err) {
        error = err;
      }
      try {
        await disconnectAll(ctx);
      } catch (err) {
        error = error || err;
      }
      const b = ctx.broker;
      if (!error && b && !b.alive() && !b.expectedDown) {
        error = new Error(`broker died during the test: ${b.describe()}`);
      }
      if (error) {
        ctx.failed = true;
        const parts = [];
        if (b) parts.push(`--- runnel log: ${b.describe()} ---\n${b.logTail(80)}`);
        if (ctx.logs.length) parts.push(`--- kafkajs warnings/errors ---\n${ctx.logs.join('\n')}`);
        if (!(error instanceof Error)) error = new Error(String(error));
        if (parts.length) {
          // Reporters print the error's stack (computed when it was thrown) where there is one.
          const extra = `\n${parts.join('\n')}`;
          if (typeof error.stack === 'string') error.stack += extra;
          else error.message += extra;
        }
        throw error;
      }
    });
  };

  return ctx;
}

async function disconnectAll(ctx) {
  const clients = ctx.clients.splice(0);
  const results = await Promise.allSettled(clients.map((c) => withTimeout(c.disconnect(), 15_000, 'client.disconnect()')));
  const failed = results.find((r) => r.status === 'rejected');
  if (failed) throw failed.reason;
}

/** `promise`, or a rejection after `ms` with a message naming `what`. */
export function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// ---- kcat ---------------------------------------------------------------------------------------

/**
 * Run kcat with `args` (and `input` on stdin); resolves { code, stdout: Buffer, stderr: string }.
 * Rejects when it exits non-zero (unless `check` is false) or runs past `timeout` ms (killed).
 */
export function kcat(args, { input, timeout = 20_000, check = true } = {}) {
  return new Promise((resolve, reject) => {
    const proc = killOnExit(spawn(KCAT, args, { stdio: ['pipe', 'pipe', 'pipe'] }));
    const out = [];
    const err = [];
    proc.stdout.on('data', (d) => out.push(d));
    proc.stderr.on('data', (d) => err.push(d));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      proc.kill('SIGKILL');
    }, timeout);
    proc.on('error', (e) => {
      clearTimeout(timer);
      reject(new Error(`cannot run ${KCAT}: ${e.message} (scripts/test installs kcat with apt-get)`));
    });
    proc.on('close', (code) => {
      clearTimeout(timer);
      const res = { code, stdout: Buffer.concat(out), stderr: Buffer.concat(err).toString() };
      if (timedOut) reject(new Error(`kcat ${args.join(' ')} ran past ${timeout} ms\nstderr: ${res.stderr.slice(-4000)}`));
      else if (check && code !== 0) reject(new Error(`kcat ${args.join(' ')} exited ${code}\nstderr: ${res.stderr.slice(-4000)}`));
      else resolve(res);
    });
    proc.stdin.on('error', () => {}); // kcat may exit before reading all of stdin
    proc.stdin.end(input ?? '');
  });
}

/** librdkafka's error lines ("%3|...") in kcat's stderr. */
export function kcatErrors(stderr) {
  return stderr.split('\n').filter((l) => /^%[0-3]\|/.test(l));
}

// ---- Java's murmur2 partitioner (org.apache.kafka.common.utils.Utils.murmur2) -------------------

/** Java's `Utils.murmur2(bytes)` as a signed 32-bit int. */
export function murmur2(data) {
  const buf = Buffer.isBuffer(data) ? data : Buffer.from(data);
  const length = buf.length;
  const seed = 0x9747b28c;
  const m = 0x5bd1e995;
  const r = 24;
  let h = (seed ^ length) | 0;
  const length4 = length >> 2;
  for (let i = 0; i < length4; i++) {
    const i4 = i * 4;
    let k = (buf[i4] & 0xff) + ((buf[i4 + 1] & 0xff) << 8) + ((buf[i4 + 2] & 0xff) << 16) + ((buf[i4 + 3] & 0xff) << 24);
    k = Math.imul(k, m);
    k ^= k >>> r;
    k = Math.imul(k, m);
    h = Math.imul(h, m);
    h ^= k;
  }
  const rest = length % 4;
  const base = length & ~3;
  if (rest === 3) h ^= (buf[base + 2] & 0xff) << 16;
  if (rest >= 2) h ^= (buf[base + 1] & 0xff) << 8;
  if (rest >= 1) {
    h ^= buf[base] & 0xff;
    h = Math.imul(h, m);
  }
  h ^= h >>> 13;
  h = Math.imul(h, m);
  h ^= h >>> 15;
  return h | 0;
}

/** Java's DefaultPartitioner for a keyed record: `toPositive(murmur2(key)) % numPartitions`. */
export function javaPartition(key, numPartitions) {
  return (murmur2(key) & 0x7fffffff) % numPartitions;
}
