// BullMQ benchmark driver: runs one workload against one server and prints JSON.
//
//   node bullmq_bench.js PORT WORKLOAD [--jobs N] [--inflight 50] [--batch 1000]
//                        [--concurrency 50] [--rate 200] [--sync]
//
// Workloads:
//   add      Queue.add with --inflight calls in flight (default 50)
//   addbulk  Queue.addBulk in batches of --batch jobs (default 1000)
//   process  --jobs jobs are added first (untimed), then a Worker at --concurrency (default 50)
//            processes them; the timed part is the processing only
//   latency  a Worker at --concurrency waits on an empty queue while jobs arrive one by one at
//            --rate jobs/s; reports pickup latency (add() called -> processor starts) in ms
//
// With --sync the driver prints "MARK start" / "MARK end" around the timed part and waits for a
// line on stdin after each, so the caller can read the server's CPU time at exactly those points.
// The last line of stdout is "RESULT {json}" (client_cpu_ms: the driver's own CPU over the timed part).
//
// BULLMQ_PG=postgres://...: drive BullMQ's own PostgreSQL backend (createPostgresBackend, BullMQ 6.x,
// needs the `pg` package) at that server instead of Redis at PORT. The driver drops the `bullmq`
// schema first (untimed; the flush) and the first Queue runs the migrations (`migrate: true`).
'use strict';
const path = require('path');
const readline = require('readline');
const { performance } = require('perf_hooks');
// BULLMQ_CLIENT_DIR: a folder whose node_modules holds the bullmq release to drive (default interop/)
const clientDir = process.env.BULLMQ_CLIENT_DIR || path.join(__dirname, '..');
const bullmq = require(require.resolve('bullmq', { paths: [path.resolve(clientDir)] }));
const { Queue, Worker } = bullmq;
const pgUrl = process.env.BULLMQ_PG || '';
// the third constructor argument of Queue (fourth of Worker): undefined = the Redis backend
const backendFactory = pgUrl ? bullmq.createPostgresBackend : undefined;

function parseArgs(argv) {
  const [port, workload, ...rest] = argv;
  const opts = { port: Number(port), workload, jobs: 10000, inflight: 50, batch: 1000, concurrency: 50, rate: 200, sync: false };
  for (let i = 0; i < rest.length; i++) {
    const k = rest[i].replace(/^--/, '');
    if (k === 'sync') { opts.sync = true; continue; }
    if (!(k in opts)) throw new Error(`unknown option ${rest[i]}`);
    opts[k] = Number(rest[++i]);
  }
  if (!opts.port || !workload) throw new Error('usage: node bullmq_bench.js PORT WORKLOAD [options]');
  return opts;
}

const opts = parseArgs(process.argv.slice(2));
const connection = pgUrl
  ? { connectionString: pgUrl, migrate: true }
  : { host: '127.0.0.1', port: opts.port, maxRetriesPerRequest: null };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const opened = [];

let stdinLines = null;
// the driver's own CPU (user+system) over the timed part: reported as client_cpu_ms
let cpuAtStart = null;
let clientCpuMs = null;
async function mark(name) {
  if (name === 'end' && cpuAtStart) {
    const d = process.cpuUsage(cpuAtStart);
    clientCpuMs = (d.user + d.system) / 1000;
  }
  process.stdout.write(`MARK ${name}\n`);
  if (opts.sync) {
    if (!stdinLines) stdinLines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();
    await stdinLines.next();
  }
  if (name === 'start') cpuAtStart = process.cpuUsage();
}

async function queue(name) {
  const q = new Queue(name, { connection }, backendFactory);
  opened.push(q);
  await q.waitUntilReady();
  return q;
}

async function fill(q, n, batch = 1000, name = 'j') {
  for (let c = 0; c < n; c += batch) {
    const len = Math.min(batch, n - c);
    await q.addBulk(Array.from({ length: len }, (_, k) => ({ name, data: { i: c + k } })));
  }
}

// A worker that records every job id it runs (so duplicates and losses show up).
async function worker(name, onJob, concurrency) {
  const seen = new Map();
  let completed = 0;
  let failed = 0;
  const w = new Worker(name, async (job) => {
    seen.set(job.id, (seen.get(job.id) || 0) + 1);
    if (onJob) onJob(job);
    return job.data.i;
  }, { connection, concurrency, autorun: false }, backendFactory);
  opened.push(w);
  w.on('completed', () => { completed++; });
  w.on('failed', () => { failed++; });
  w.on('error', (e) => process.stderr.write(`worker error: ${e && e.message}\n`));
  await w.waitUntilReady();
  const state = {
    w,
    seen,
    get completed() { return completed; },
    get failed() { return failed; },
    dupes() { let d = 0; for (const v of seen.values()) if (v > 1) d += v - 1; return d; },
  };
  return state;
}

async function waitFor(pred, ms) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (pred()) return true;
    await sleep(5);
  }
  throw new Error('timed out');
}

function percentile(sorted, p) {
  if (!sorted.length) return null;
  const idx = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[idx];
}

const workloads = {
  async add() {
    const q = await queue('bench_add');
    await q.add('warm', { i: -1 }); // first EVAL of the script on this connection: not timed
    const n = opts.jobs;
    let next = 0;
    async function lane() {
      for (;;) {
        const i = next++;
        if (i >= n) return;
        await q.add('j', { i });
      }
    }
    await mark('start');
    const t0 = performance.now();
    await Promise.all(Array.from({ length: opts.inflight }, lane));
    const ms = performance.now() - t0;
    await mark('end');
    const wait = await q.getWaitingCount();
    return { jobs: n, ms, ok: wait === n + 1, wait: wait - 1 };
  },

  async addbulk() {
    const q = await queue('bench_bulk');
    await q.addBulk([{ name: 'warm', data: { i: -1 } }]);
    const n = opts.jobs;
    await mark('start');
    const t0 = performance.now();
    await fill(q, n, opts.batch);
    const ms = performance.now() - t0;
    await mark('end');
    const wait = await q.getWaitingCount();
    return { jobs: n, ms, ok: wait === n + 1, wait: wait - 1 };
  },

  async process() {
    const q = await queue('bench_proc');
    const n = opts.jobs;
    await fill(q, n);
    const st = await worker('bench_proc', null, opts.concurrency);
    await mark('start');
    const t0 = performance.now();
    st.w.run().catch((e) => process.stderr.write(`run: ${e && e.message}\n`));
    await waitFor(() => st.completed + st.failed >= n, 600000);
    const ms = performance.now() - t0;
    await mark('end');
    await st.w.close();
    const counts = await q.getJobCounts('wait', 'active', 'completed', 'failed', 'delayed');
    const dupes = st.dupes();
    const lost = n - st.seen.size;
    return { jobs: n, ms, completed: st.completed, failed: st.failed, dupes, lost, counts, ok: dupes === 0 && lost === 0 && counts.completed === n };
  },

  async latency() {
    const q = await queue('bench_lat');
    const n = opts.jobs;
    const lat = [];
    const st = await worker('bench_lat', (job) => { lat.push(performance.now() - job.data.t); }, opts.concurrency);
    st.w.run().catch((e) => process.stderr.write(`run: ${e && e.message}\n`));
    await q.add('warm', { i: -1, t: performance.now() });
    await waitFor(() => st.completed >= 1, 30000);
    lat.length = 0;
    await sleep(200);
    const interval = 1000 / opts.rate;
    const pending = [];
    await mark('start');
    const t0 = performance.now();
    for (let i = 0; i < n; i++) {
      const due = t0 + i * interval;
      const now = performance.now();
      if (due > now) await sleep(due - now);
      pending.push(q.add('j', { i, t: performance.now() }));
    }
    await Promise.all(pending);
    await waitFor(() => st.completed >= n + 1, 120000);
    const ms = performance.now() - t0;
    await mark('end');
    await st.w.close();
    const sorted = lat.slice().sort((a, b) => a - b);
    const dupes = st.dupes();
    return {
      jobs: n, ms, completed: st.completed - 1, dupes,
      p50: percentile(sorted, 50), p90: percentile(sorted, 90), p99: percentile(sorted, 99), max: sorted[sorted.length - 1],
      samples: lat.map((x) => Math.round(x * 1000) / 1000),
      ok: dupes === 0 && lat.length === n,
    };
  },
};

// The PostgreSQL flush: drop the backend's schema (the next waitUntilReady migrates it afresh).
async function dropPgSchema() {
  const { Client } = require(require.resolve('pg', { paths: [path.resolve(clientDir), __dirname] }));
  const c = new Client({ connectionString: pgUrl });
  await c.connect();
  try {
    await c.query('DROP SCHEMA IF EXISTS bullmq CASCADE');
  } finally {
    await c.end();
  }
}

async function main() {
  const fn = workloads[opts.workload];
  if (!fn) throw new Error(`unknown workload ${opts.workload}; one of ${Object.keys(workloads).join(', ')}`);
  if (pgUrl && !bullmq.createPostgresBackend) throw new Error(`bullmq in ${clientDir} has no PostgreSQL backend`);
  if (pgUrl) await dropPgSchema();
  const out = await fn();
  out.workload = opts.workload;
  out.jobs_per_s = out.jobs / (out.ms / 1000);
  if (clientCpuMs !== null) out.client_cpu_ms = clientCpuMs;
  return out;
}

main()
  .then(async (out) => {
    for (const o of opened.reverse()) await o.close().catch(() => {});
    process.stdout.write(`RESULT ${JSON.stringify(out)}\n`);
    process.exit(0);
  })
  .catch((e) => {
    process.stdout.write(`RESULT ${JSON.stringify({ error: String(e && e.stack || e) })}\n`);
    process.exit(1);
  });
