// BullMQ over TLS: a Queue and a Worker with ioredis TLS connections process jobs (one failing once, one
// delayed); prints what BullMQ reports as JSON.
// Usage: node tls_bullmq.js PORT CA_FILE CERT_FILE KEY_FILE
'use strict';
const fs = require('fs');
const { Queue, Worker, QueueEvents } = require('bullmq');
const IORedis = require('ioredis');

const [port, ca, cert, key] = process.argv.slice(2);
const connection = {
  host: '127.0.0.1', port: Number(port), maxRetriesPerRequest: null,
  tls: { ca: fs.readFileSync(ca), cert: fs.readFileSync(cert), key: fs.readFileSync(key), servername: 'localhost' },
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  const q = new Queue('tlsq', { connection });
  await q.obliterate({ force: true });
  const events = new QueueEvents('tlsq', { connection });
  await events.waitUntilReady();
  const completedEvents = [];
  events.on('completed', ({ jobId }) => completedEvents.push(jobId));
  const seen = new Set();
  const worker = new Worker('tlsq', async (job) => {
    if (job.data.n === 3 && !seen.has(job.id)) {
      seen.add(job.id);
      throw new Error('first try fails');
    }
    await job.updateProgress(50);
    return job.data.n * 2;
  }, { connection, concurrency: 4 });
  const jobs = [];
  for (let n = 0; n < 20; n++) {
    jobs.push(await q.add('double', { n }, { attempts: 2, delay: n === 7 ? 300 : 0 }));
  }
  const end = Date.now() + 30000;
  while (Date.now() < end && (await q.getCompletedCount()) < 20) await sleep(50);
  while (Date.now() < end && completedEvents.length < 20) await sleep(50);
  const done = await q.getJobs(['completed'], 0, -1, true);
  const out = {
    completed: await q.getCompletedCount(),
    failed: await q.getFailedCount(),
    results: done.map((j) => [j.data.n, j.returnvalue, j.attemptsMade]).sort((a, b) => a[0] - b[0]),
    events: completedEvents.length,
  };
  const r = new IORedis(connection);
  out.info = (await r.info('memory')).includes('maxmemory_policy:noeviction');
  r.disconnect();
  await worker.close();
  await events.close();
  await q.close();
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
