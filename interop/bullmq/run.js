// BullMQ scenarios: each drives one server and prints its observable outcome as JSON.
// Usage: node run.js SCENARIO PORT [ioredis|node-redis]
//    or: node run.js - [ioredis|node-redis]   then "SCENARIO PORT PORT..." as one line on stdin: the
//        scenario against each port in turn (what one run opened is closed before the next), one JSON
//        document per line.
// The pytest side (tests/test_bullmq_interop.py) runs every scenario against a real redis-server and
// against respqueue and compares the two outputs: one process per scenario for both servers, started
// ahead of use with "-", so that loading the clients overlaps the scenario before it.
'use strict';
const { Queue, Worker, QueueEvents, FlowProducer, UnrecoverableError, Job } = require('bullmq');
const IORedis = require('ioredis');

let [scenarioName, portArg, clientKind = 'ioredis'] = process.argv.slice(2);
let port = Number(portArg);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let opened = [];

async function connection() {
  if (clientKind === 'node-redis') {
    const { createClient } = require('redis');
    const c = createClient({ socket: { host: '127.0.0.1', port } });
    c.on('error', () => {});
    await c.connect();
    opened.push(c);
    return c;
  }
  return { host: '127.0.0.1', port, maxRetriesPerRequest: null };
}

async function track(obj) {
  opened.push(obj);
  return obj;
}

async function waitFor(pred, ms = 15000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await pred()) return true;
    await sleep(20);
  }
  throw new Error('timed out waiting');
}

const scenarios = {
  async add_process() {
    const q = await track(new Queue('s_add', { connection: await connection() }));
    await q.obliterate({ force: true }).catch(() => {});
    const bulk = await q.addBulk(Array.from({ length: 10 }, (_, i) => ({ name: 'bulk', data: { i } })));
    for (let i = 10; i < 20; i++) await q.add('single', { i });
    const done = [];
    const w = await track(new Worker('s_add', async (job) => job.data.i * 2, { connection: await connection(), concurrency: 5 }));
    w.on('completed', (job, rv) => done.push([job.name, job.data.i, rv, job.attemptsMade]));
    await waitFor(() => done.length === 20);
    await sleep(100);
    const counts = await q.getJobCounts('wait', 'active', 'completed', 'failed', 'delayed');
    const first = await q.getJob(bulk[0].id);
    return {
      done: done.sort((a, b) => a[1] - b[1]),
      counts,
      first: { name: first.name, data: first.data, rv: first.returnvalue, state: await first.getState() },
      ids: bulk.map((j) => j.id),
    };
  },

  async retries_backoff() {
    const q = await track(new Queue('s_retry', { connection: await connection() }));
    await q.obliterate({ force: true }).catch(() => {});
    const tries = {};
    const w = await track(new Worker('s_retry', async (job) => {
      tries[job.name] = (tries[job.name] || 0) + 1;
      if (job.name === 'unrecoverable') throw new UnrecoverableError('stop now');
      if (job.name === 'always') throw new Error('always fails');
      if (tries[job.name] < 3) throw new Error(`fail ${tries[job.name]}`);
      return 'ok';
    }, { connection: await connection(), concurrency: 4, settings: { backoffStrategy: (n) => n * 10 } }));
    const failed = [];
    w.on('failed', (job, err) => failed.push([job.name, err.message, job.attemptsMade]));
    await q.add('fixed', {}, { attempts: 3, backoff: { type: 'fixed', delay: 50 } });
    await q.add('exponential', {}, { attempts: 3, backoff: { type: 'exponential', delay: 20 } });
    await q.add('custom', {}, { attempts: 3, backoff: { type: 'custom' } });
    await q.add('unrecoverable', {}, { attempts: 5 });
    await q.add('always', {}, { attempts: 2 });
    await waitFor(async () => (await q.getCompletedCount()) === 3 && (await q.getFailedCount()) === 2);
    const jobs = await q.getJobs(['completed', 'failed']);
    return {
      tries,
      failed: failed.sort(),
      final: jobs.map((j) => [j.name, j.attemptsMade, j.failedReason || null, j.returnvalue || null]).sort(),
    };
  },

  async delayed_priority() {
    const q = await track(new Queue('s_delay', { connection: await connection() }));
    await q.obliterate({ force: true }).catch(() => {});
    const order = [];
    const lateDue = Date.now() + 300;
    await q.add('late', {}, { delay: 300 });
    const d2 = await q.add('promoted', {}, { delay: 60000 });
    const d3 = await q.add('changed', {}, { delay: 60000 });
    for (const p of [5, 1, 3]) await q.add(`p${p}`, {}, { priority: p });
    const cp = await q.add('p9', {}, { priority: 9 });
    await cp.changePriority({ priority: 2 });
    await q.add('lifo-a', {}, { lifo: true });
    const states = [await d2.getState(), await q.getDelayedCount(), await q.getPrioritizedCount?.() ?? null];
    // 'late' falls due before the worker starts, so its first fetch promotes it (right after lifo-a): falling
    // due while the worker ran, its place in the order depended on the machine's load ('changed' below falls
    // due while the worker waits)
    await sleep(Math.max(0, lateDue + 20 - Date.now()));
    const w = await track(new Worker('s_delay', async (job) => { order.push(job.name); }, { connection: await connection(), concurrency: 1 }));
    await waitFor(() => order.length >= 6);
    await d2.promote();
    await d3.changeDelay(50);
    await waitFor(() => order.length === 8);
    return { order, states };
  },

  async events() {
    const q = await track(new Queue('s_events', { connection: await connection() }));
    await q.obliterate({ force: true }).catch(() => {});
    const qe = await track(new QueueEvents('s_events', { connection: await connection() }));
    await qe.waitUntilReady();
    await sleep(300); // let the first XREAD BLOCK reach the server before anything is added
    const seen = [];
    for (const ev of ['waiting', 'active', 'completed', 'failed', 'progress', 'delayed', 'removed']) {
      qe.on(ev, (args) => seen.push([ev, args.jobId]));
    }
    const w = await track(new Worker('s_events', async (job) => {
      await job.updateProgress(50);
      await job.log('half way');
      if (job.name === 'bad') throw new Error('bad job');
      return { ok: true };
    }, { connection: await connection() }));
    const j1 = await q.add('good', {});
    const rv = await j1.waitUntilFinished(qe);
    const j2 = await q.add('bad', {});
    await waitFor(() => seen.some(([e, id]) => e === 'failed' && id === j2.id));
    const j3 = await q.add('later', {}, { delay: 60000 });
    await j3.remove();
    await waitFor(() => seen.some(([e, id]) => e === 'removed' && id === j3.id));
    const logs = await q.getJobLogs(j1.id);
    const counts = {};
    for (const [e, id] of seen) counts[`${e}:${id}`] = (counts[`${e}:${id}`] || 0) + 1;
    return { rv, counts, logs, progress: (await q.getJob(j1.id)).progress };
  },

  async flows() {
    const fp = await track(new FlowProducer({ connection: await connection() }));
    const q = await track(new Queue('s_flow', { connection: await connection() }));
    await q.obliterate({ force: true }).catch(() => {});
    const tree = await fp.add({
      name: 'parent', queueName: 's_flow', data: {},
      children: [
        { name: 'c1', queueName: 's_flow', data: { v: 1 } },
        { name: 'c2', queueName: 's_flow', data: { v: 2 }, children: [{ name: 'gc', queueName: 's_flow', data: { v: 3 } }] },
      ],
    });
    const order = [];
    const w = await track(new Worker('s_flow', async (job) => {
      order.push(job.name);
      if (job.name === 'parent') {
        const vals = await job.getChildrenValues();
        return Object.values(vals).sort();
      }
      return job.data.v * 10;
    }, { connection: await connection(), concurrency: 1 }));
    await waitFor(async () => (await tree.job.getState()) === 'completed');
    const parent = await q.getJob(tree.job.id);
    return { order, rv: parent.returnvalue, parentState: await parent.getState() };
  },

  async pause_resume() {
    const q = await track(new Queue('s_pause', { connection: await connection() }));
    await q.obliterate({ force: true }).catch(() => {});
    await q.pause();
    const done = [];
    const w = await track(new Worker('s_pause', async (job) => { done.push(job.data.i); }, { connection: await connection() }));
    for (let i = 0; i < 5; i++) await q.add('j', { i });
    await sleep(300);
    const whilePaused = [done.length, await q.isPaused(), await q.getWaitingCount()];
    await q.resume();
    await waitFor(() => done.length === 5);
    return { whilePaused, done: done.sort() };
  },

  async getters_clean() {
    const q = await track(new Queue('s_get', { connection: await connection() }));
    await q.obliterate({ force: true }).catch(() => {});
    for (let i = 0; i < 6; i++) await q.add(`j${i}`, { i }, { removeOnComplete: i === 5 });
    const w = await track(new Worker('s_get', async (job) => {
      if (job.data.i % 3 === 0) throw new Error('nope');
      return job.data.i;
    }, { connection: await connection(), name: 'getter-worker' }));
    await waitFor(async () => (await q.getCompletedCount()) + (await q.getFailedCount()) >= 5);
    await sleep(100);
    const workers = await q.getWorkers();
    const completed = await q.getJobs(['completed'], 0, 10, true);
    const failed = await q.getFailed();
    const counts = await q.getJobCounts();
    const cleaned = await q.clean(0, 100, 'failed');
    await q.drain();
    const after = await q.getJobCounts('completed', 'failed', 'wait');
    return {
      nworkers: workers.length,
      completed: completed.map((j) => j.name).sort(),
      failed: failed.map((j) => j.name).sort(),
      counts, cleaned: cleaned.length, after,
    };
  },
};

// One run against `port`: its JSON written, then everything it opened closed. False after an error.
async function runOnce(name, end) {
  opened = [];
  Object.assign(scenarios, require('./scenarios_more')({ connection, track, waitFor, sleep, port, clientKind }));
  let ok = true;
  try {
    const fn = scenarios[name];
    if (!fn) throw new Error(`unknown scenario ${name}`);
    const result = await fn();
    process.stdout.write(JSON.stringify(result) + end);
  } catch (e) {
    process.stdout.write(JSON.stringify({ error: String(e && e.stack || e) }) + end);
    process.exitCode = 1;
    ok = false;
  } finally {
    for (const o of opened.reverse()) {
      try {
        if (typeof o.close === 'function') await o.close();
        else if (typeof o.quit === 'function') await o.quit();
      } catch (e) { /* ignore */ }
    }
  }
  return ok;
}

async function main() {
  if (scenarioName !== '-') {
    await runOnce(scenarioName, '');
    return;
  }
  clientKind = portArg || 'ioredis';
  if (clientKind === 'node-redis') require('redis');
  let line = '';
  for await (const chunk of process.stdin) {
    line += chunk;
    if (line.includes('\n')) break;
  }
  const [name, ...ports] = line.trim().split(/\s+/);
  for (const p of ports) {
    port = Number(p);
    if (!(await runOnce(name, '\n'))) break;
  }
}

main().finally(() => {
  setTimeout(() => process.exit(process.exitCode || 0), 100).unref();
});
