// Volume correctness run: a BullMQ Worker processes N jobs (default 100,000); none may be lost
// and none may run twice.
//
//   node hundred_k.js PORT [N] [--concurrency 50] [--batch 1000] [--workers 1]
//
// The Worker(s) start first on an empty queue; a producer then adds the N jobs with addBulk in
// batches while they are being processed, so the run exercises adds, the marker wake-ups of
// blocked workers, fetch-next on completion and draining. Every processor call is recorded by
// job id and by job data (the index i), then checked against the queue's own counts:
//   lost    jobs added but never processed
//   dupes   extra processor calls (a job run more than once, e.g. after a false stall)
// Prints one JSON line: {"jobs", "processed", "unique", "lost", "dupes", "failed", "counts", "ok", ...}.
'use strict';
const path = require('path');
const { performance } = require('perf_hooks');
const { Queue, Worker } = require(path.join(__dirname, '..', 'node_modules', 'bullmq'));

const args = process.argv.slice(2);
const port = Number(args[0]);
const n = Number(args[1] && !args[1].startsWith('--') ? args[1] : 100000);
const opt = (name, dflt) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : dflt;
};
const concurrency = opt('concurrency', 50);
const batch = opt('batch', 1000);
const nWorkers = opt('workers', 1);
const connection = { host: '127.0.0.1', port, maxRetriesPerRequest: null };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const QUEUE = 'hundred_k';

async function main() {
  const q = new Queue(QUEUE, { connection });
  await q.obliterate({ force: true }).catch(() => {});
  const byId = new Map(); // job id -> processor calls
  const byIndex = new Uint8Array(n); // data.i -> processor calls (saturating)
  let processed = 0;
  let completed = 0;
  let failed = 0;
  let badIndex = 0;
  const errors = [];
  const workers = [];
  for (let k = 0; k < nWorkers; k++) {
    const w = new Worker(QUEUE, async (job) => {
      processed++;
      byId.set(job.id, (byId.get(job.id) || 0) + 1);
      const i = job.data.i;
      if (Number.isInteger(i) && i >= 0 && i < n) {
        if (byIndex[i] < 255) byIndex[i]++;
      } else badIndex++;
      return i;
    }, { connection, concurrency });
    w.on('completed', () => { completed++; });
    w.on('failed', (job, err) => { failed++; if (errors.length < 5) errors.push(String(err && err.message)); });
    w.on('error', (e) => { if (errors.length < 5) errors.push(`worker error: ${e && e.message}`); });
    await w.waitUntilReady();
    workers.push(w);
  }

  const t0 = performance.now();
  const ids = new Set();
  for (let c = 0; c < n; c += batch) {
    const len = Math.min(batch, n - c);
    const jobs = await q.addBulk(Array.from({ length: len }, (_, k) => ({ name: 'v', data: { i: c + k } })));
    for (const j of jobs) ids.add(j.id);
  }
  const addMs = performance.now() - t0;

  // Wait until every job has completed or failed, or nothing has moved for 60 s.
  let last = -1;
  let lastChange = Date.now();
  while (completed + failed < n) {
    if (completed + failed !== last) { last = completed + failed; lastChange = Date.now(); }
    if (Date.now() - lastChange > 60000) { errors.push(`stuck at ${last} of ${n}`); break; }
    await sleep(20);
  }
  const totalMs = performance.now() - t0;
  // Give a late duplicate (a stalled job moved back to wait) a chance to show up.
  await sleep(500);
  for (const w of workers) await w.close();
  const counts = await q.getJobCounts('wait', 'active', 'completed', 'failed', 'delayed', 'prioritized', 'paused');
  await q.close();

  let missingIndex = 0;
  let dupIndex = 0;
  for (let i = 0; i < n; i++) {
    if (byIndex[i] === 0) missingIndex++;
    else if (byIndex[i] > 1) dupIndex += byIndex[i] - 1;
  }
  let dupes = 0;
  for (const v of byId.values()) if (v > 1) dupes += v - 1;
  let unknownIds = 0;
  for (const id of byId.keys()) if (!ids.has(id)) unknownIds++;
  const lost = n - byId.size + unknownIds;
  const ok = ids.size === n && lost === 0 && dupes === 0 && missingIndex === 0 && dupIndex === 0 && badIndex === 0
    && failed === 0 && completed === n && counts.completed === n
    && counts.wait + counts.active + counts.failed + counts.delayed + counts.prioritized + counts.paused === 0;
  return {
    jobs: n, added_ids: ids.size, processed, unique: byId.size, completed, failed, lost, dupes,
    missing_index: missingIndex, dup_index: dupIndex, bad_index: badIndex, unknown_ids: unknownIds,
    counts, add_ms: Math.round(addMs), total_ms: Math.round(totalMs),
    jobs_per_s: Math.round(n / (totalMs / 1000)), errors, ok,
  };
}

main()
  .then((out) => { process.stdout.write(`${JSON.stringify(out)}\n`); process.exit(0); })
  .catch((e) => { process.stdout.write(`${JSON.stringify({ ok: false, error: String(e && e.stack || e) })}\n`); process.exit(1); });
