// One BullMQ release (the `bullmq` installed next to this file, or in the folder given as the 3rd argument)
// adds and works through a small queue on one server, and prints the observable outcome as JSON.
// Usage: node interop/bullmq5/run.js PORT [QUEUE] [CLIENT_DIR]
// tests/test_bullmq5_native.py runs it against Redis and respqueue (native scripts on and off).
'use strict';
const path = require('path');
const [portArg, queueName = 'rel5', clientDir = __dirname] = process.argv.slice(2);
const { Queue, Worker } = require(require.resolve('bullmq', { paths: [path.resolve(clientDir)] }));
const version = require(require.resolve('bullmq/package.json', { paths: [path.resolve(clientDir)] })).version;

const connection = { host: '127.0.0.1', port: Number(portArg), maxRetriesPerRequest: null };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  const q = new Queue(queueName, { connection });
  await q.obliterate({ force: true }).catch(() => {});
  for (let i = 0; i < 12; i++) await q.add('plain', { i });
  await q.add('lifo', { i: 12 }, { lifo: true });
  await q.add('custom', { i: 13 }, { jobId: 'custom-13' });
  await q.add('flaky', { i: 14 }, { attempts: 2 });
  await q.add('broken', { i: 15 }, { attempts: 1 });
  await q.add('removed', { i: 16 }, { removeOnComplete: true });
  await q.addBulk(Array.from({ length: 5 }, (_, k) => ({ name: 'bulk', data: { i: 17 + k } })));
  await q.add('prio', { i: 22 }, { priority: 1 });
  await q.add('later', { i: 23 }, { delay: 1500 });
  const tries = {};
  const order = [];
  const w = new Worker(queueName, async (job) => {
    tries[job.name] = (tries[job.name] || 0) + 1;
    if (job.name === 'broken') throw new Error('broken job');
    if (job.name === 'flaky' && tries.flaky === 1) throw new Error('first try fails');
    if (job.name !== 'later') order.push(job.data.i); // (when the delayed job is promoted depends on timing)
    return job.data.i * 2;
  }, { connection, concurrency: 1, name: 'w5' });
  const end = Date.now() + 30000;
  while (Date.now() < end) {
    const c = await q.getJobCounts('completed', 'failed');
    if (c.completed === 22 && c.failed === 1) break;
    await sleep(25);
  }
  await sleep(100);
  const jobs = (await q.getJobs(['completed', 'failed'])).sort((a, b) => a.data.i - b.data.i);
  const out = {
    version,
    counts: await q.getJobCounts('wait', 'paused', 'active', 'completed', 'failed', 'delayed', 'prioritized'),
    jobs: jobs.map((j) => [j.id, j.name, j.data.i, j.returnvalue, j.attemptsMade, j.failedReason || null,
      j.processedBy || null, Boolean(j.finishedOn)]),
    order,
  };
  await w.close();
  await q.close();
  process.stdout.write(JSON.stringify(out));
}

main().then(() => process.exit(0), (e) => { process.stdout.write(JSON.stringify({ error: String(e && e.stack || e) })); process.exit(1); });
