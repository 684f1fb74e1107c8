// BullMQ workloads for the job-history tests (tests/test_history_capture.py): each runs real Queues and
// Workers against one server and prints, as JSON, the job ids and what BullMQ itself reports, so the
// test can compare the history tables in <dir>/respqueue.db with it.
// Usage: node history_workload.js SCENARIO PORT [QUEUE]
'use strict';
const path = require('path');
const { spawn } = require('child_process');
const { Queue, Worker } = require('bullmq');
const IORedis = require('ioredis');

const [scenarioName, portArg, queueArg] = process.argv.slice(2);
const port = Number(portArg);
const connection = { host: '127.0.0.1', port, maxRetriesPerRequest: null };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const opened = [];
const track = (o) => { opened.push(o); return o; };

async function waitFor(pred, ms = 20000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await pred()) return true;
    await sleep(20);
  }
  throw new Error('timed out waiting');
}

function jobView(j) {
  return {
    id: j.id, name: j.name, attemptsMade: j.attemptsMade, failedReason: j.failedReason || null,
    returnvalue: j.returnvalue === undefined ? null : j.returnvalue, timestamp: j.timestamp,
    processedOn: j.processedOn || null, finishedOn: j.finishedOn || null,
  };
}

const scenarios = {
  // completions, failures with retries (backoff and immediate), delays, progress, removeOnComplete/Fail
  async lifecycle() {
    const name = queueArg || 'hist';
    const q = track(new Queue(name, { connection }));
    const ids = {};
    const add = async (n, data, opts) => { ids[n] = (await q.add(n, data, opts)).id; };
    await add('ok', { v: 1 });
    await add('progress', { v: 2 });
    await add('flaky-backoff', { v: 3 }, { attempts: 3, backoff: { type: 'fixed', delay: 50 } });
    await add('flaky-now', { v: 4 }, { attempts: 2 });
    await add('doomed', { v: 5 }, { attempts: 2 });
    await add('delayed', { v: 6 }, { delay: 300 });
    await add('gone-ok', { v: 7 }, { removeOnComplete: true });
    await add('gone-fail', { v: 8 }, { removeOnFail: true });
    const tries = {};
    const finished = {};
    const w = track(new Worker(name, async (job) => {
      tries[job.name] = (tries[job.name] || 0) + 1;
      const t = tries[job.name];
      await sleep(5);
      if (job.name === 'progress') { await job.updateProgress(50); return 'p'; }
      if (job.name === 'flaky-backoff' && t < 3) throw new Error(`backoff fail ${t}`);
      if (job.name === 'flaky-now' && t < 2) throw new Error(`now fail ${t}`);
      if (job.name === 'doomed') throw new Error(`doomed ${t}`);
      if (job.name === 'gone-fail') throw new Error('gone fail');
      return { name: job.name, t };
    }, { connection, concurrency: 1, name: 'w-hist' }));
    w.on('error', () => {});
    w.on('completed', (j) => { finished[j.name] = jobView(j); });
    w.on('failed', (j) => { if (j.attemptsMade >= (j.opts.attempts || 1)) finished[j.name] = jobView(j); });
    await waitFor(() => Object.keys(finished).length === Object.keys(ids).length);
    await sleep(100);
    return { ids, finished, tries };
  },

  // many jobs through a queue whose events stream is trimmed to a handful of entries
  async trimmed() {
    const name = queueArg || 'hist-trim';
    const q = track(new Queue(name, { connection, streams: { events: { maxLen: 5 } } }));
    const n = 150;
    const jobs = await q.addBulk(Array.from({ length: n }, (_, i) => ({ name: 't', data: { i }, opts: { removeOnComplete: true } })));
    let done = 0;
    const w = track(new Worker(name, async (job) => job.data.i * 2, { connection, concurrency: 4 }));
    w.on('error', () => {});
    w.on('completed', () => { done += 1; });
    await waitFor(() => done === n);
    await sleep(100);
    const r = track(new IORedis(connection));
    return { ids: jobs.map((j) => j.id), xlen: await r.xlen(`bull:${name}:events`) };
  },

  // a job whose worker dies (SIGKILL) while it runs: stalled, then completed by another worker
  async stalled() {
    const name = queueArg || 'hist-stall';
    const q = track(new Queue(name, { connection }));
    const job = await q.add('victim', { x: 1 }, { attempts: 3 });
    const child = spawn(process.execPath, [path.join(__dirname, 'stall_worker.js'), String(port), 'ioredis', name],
      { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    const exited = new Promise((r) => child.on('exit', () => r()));
    await waitFor(() => out.includes('taken') || out.includes('error'), 15000);
    child.kill('SIGKILL');
    await exited;
    const w = track(new Worker(name, async () => 'recovered',
      { connection, stalledInterval: 300, lockDuration: 1000, maxStalledCount: 2, name: 'rescuer' }));
    w.on('error', () => {});
    await waitFor(async () => (await job.getState()) === 'completed', 15000);
    const j = await q.getJob(job.id);
    return { ids: { victim: job.id }, finished: { victim: jobView(j) } };
  },

  // throughput: add N jobs (addBulk), then time a worker at concurrency 50 through them
  async process() {
    const name = queueArg || 'hist-bench';
    const n = Number(process.env.JOBS || 5000);
    const q = track(new Queue(name, { connection }));
    for (let i = 0; i < n; i += 1000) {
      await q.addBulk(Array.from({ length: Math.min(1000, n - i) }, (_, k) => ({ name: 'b', data: { i: i + k } })));
    }
    let done = 0;
    const t0 = Date.now();
    const w = track(new Worker(name, async (job) => job.data.i, { connection, concurrency: 50 }));
    w.on('error', () => {});
    w.on('completed', () => { done += 1; });
    await waitFor(() => done === n, 600000);
    const secs = (Date.now() - t0) / 1000;
    return { jobs: n, seconds: secs, rate: n / secs };
  },
};

async function main() {
  const fn = scenarios[scenarioName];
  if (!fn) throw new Error(`unknown scenario ${scenarioName}`);
  process.stdout.write(JSON.stringify(await fn()));
}

main()
  .catch((e) => {
    process.stdout.write(JSON.stringify({ error: String(e && e.stack || e) }));
    process.exitCode = 1;
  })
  .finally(async () => {
    for (const o of opened.reverse()) {
      try { if (o.close) await o.close(); else await o.quit(); } catch (e) { /* ignore */ }
    }
    setTimeout(() => process.exit(process.exitCode || 0), 100).unref();
  });
