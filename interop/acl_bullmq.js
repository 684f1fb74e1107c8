// BullMQ (Queue + Worker over ioredis) authenticated as an ACL user; prints what it saw as JSON.
// Usage: node acl_bullmq.js PORT USERNAME PASSWORD
'use strict';
const { Queue, Worker } = require('bullmq');

const [port, username, password] = [Number(process.argv[2]), process.argv[3], process.argv[4]];
const connection = { host: '127.0.0.1', port, username, password, maxRetriesPerRequest: null };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  const q = new Queue('acl_q', { connection });
  const added = await q.addBulk(Array.from({ length: 10 }, (_, i) => ({ name: 'bulk', data: { i } })));
  for (let i = 10; i < 15; i++) await q.add('single', { i }, { attempts: 2, backoff: { type: 'fixed', delay: 10 } });
  const done = [];
  const tries = {};
  const w = new Worker('acl_q', async (job) => {
    tries[job.data.i] = (tries[job.data.i] || 0) + 1;
    if (job.data.i === 12 && tries[12] === 1) throw new Error('first try fails');
    return job.data.i * 2;
  }, { connection, concurrency: 3 });
  w.on('completed', (job, rv) => done.push([job.data.i, rv, job.attemptsMade]));
  const end = Date.now() + 20000;
  while (done.length < 15 && Date.now() < end) await sleep(20);
  await sleep(100);
  const counts = await q.getJobCounts('wait', 'active', 'completed', 'failed', 'delayed');
  await w.close();
  await q.close();
  process.stdout.write(JSON.stringify({ ids: added.map((j) => j.id), done: done.sort((a, b) => a[0] - b[0]), counts }));
}

main().catch((e) => { console.error(e); process.exit(1); });
