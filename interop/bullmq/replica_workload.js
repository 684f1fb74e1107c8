// A BullMQ workload for tests/test_replication_job_rows.py: add, process, retry (with backoff), delay,
// priorities, and jobs left waiting / delayed / failed / completed, on one server (the master).
// Usage: node replica_workload.js PORT [JOBS]
'use strict';
const { Queue, Worker } = require('bullmq');

const port = Number(process.argv[2]);
const jobs = Number(process.argv[3] || 300);
const connection = { host: '127.0.0.1', port, maxRetriesPerRequest: null };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  const q = new Queue('rw', { connection });
  const idle = new Queue('idle', { connection }); // no worker: its jobs stay waiting, delayed, prioritized
  await idle.addBulk(Array.from({ length: 50 }, (_, i) => ({ name: 'w', data: { i } })));
  await idle.add('later', { x: 1 }, { delay: 600000 });
  await idle.add('prio', { x: 2 }, { priority: 3 });
  let done = 0;
  const seen = new Set();
  const worker = new Worker(
    'rw',
    async (job) => {
      if (job.data.i % 7 === 0 && job.attemptsMade === 0) throw new Error('retry me');
      if (job.data.i % 11 === 0) throw new Error('fails for good');
      return { ok: job.data.i };
    },
    { connection, concurrency: 10 },
  );
  worker.on('completed', (job) => { seen.add(job.id); done += 1; });
  worker.on('failed', (job) => { if (job && job.attemptsMade >= job.opts.attempts) { seen.add(job.id); done += 1; } });
  for (let i = 1; i <= jobs; i++) {
    const opts = { attempts: 2, backoff: { type: 'fixed', delay: 50 } };
    if (i % 5 === 0) opts.delay = 30 + (i % 3) * 20;
    if (i % 9 === 0) opts.priority = 1 + (i % 4);
    if (i % 13 === 0) opts.removeOnComplete = true;
    await q.add('j', { i }, opts);
  }
  const end = Date.now() + 60000;
  while (done < jobs && Date.now() < end) await sleep(50);
  await worker.close();
  await q.add('after', { i: -1 }, { delay: 600000 });
  await q.close();
  await idle.close();
  console.log(JSON.stringify({ done, jobs }));
  if (done < jobs) process.exit(1);
}

main().catch((e) => { console.error(e); process.exit(1); });
