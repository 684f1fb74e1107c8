// Bull Board (the web UI BullMQ users run) over a few BullMQ queues on one Redis-protocol server.
// Usage: node bullboard/server.js REDIS_PORT HTTP_PORT [--seed]
//   --seed  first empties the board's queues and fills them with jobs in every state (see seed()),
//           then serves. Without it, it serves whatever the server holds.
// The UI is at http://127.0.0.1:HTTP_PORT/ui (e.g. /ui/queue/emails?status=failed), its JSON API
// under /ui/api. When it listens it prints one JSON line: {"listening": HTTP_PORT, "seeded": ...}.
// tests/test_bullboard.py runs it over respqueue and over a real redis-server and compares the API.
'use strict';
const express = require('express');
const { createBullBoard } = require('@bull-board/api');
const { BullMQAdapter } = require('@bull-board/api/bullMQAdapter');
const { ExpressAdapter } = require('@bull-board/express');
const { Queue, Worker, FlowProducer } = require('bullmq');

const QUEUES = ['emails', 'reports', 'newsletters'];

const args = process.argv.slice(2);
const seedMode = args.includes('--seed');
const [redisPort, httpPort] = args.filter((a) => !a.startsWith('--')).map(Number);
if (!redisPort || !Number.isInteger(httpPort)) {
  console.error('usage: node bullboard/server.js REDIS_PORT HTTP_PORT [--seed]');
  process.exit(2);
}
const connection = { host: '127.0.0.1', port: redisPort, maxRetriesPerRequest: null };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitFor(pred, what, ms = 30000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await pred()) return;
    await sleep(20);
  }
  throw new Error(`timed out waiting for ${what}`);
}

// Runs a worker (concurrency 1, so the order is the same on every server) until `n` jobs finished.
async function drain(name, n, processor) {
  const q = new Queue(name, { connection });
  const w = new Worker(name, processor, { connection, concurrency: 1, name: 'seeder' });
  await waitFor(async () => {
    const c = await q.getJobCounts('completed', 'failed');
    return c.completed + c.failed >= n;
  }, `${n} finished jobs in ${name}`);
  await w.close();
  await q.close();
}

// Jobs in every state Bull Board shows: completed (with a return value, logs and progress), failed
// (reason and stack trace, after retries), active, waiting, prioritized, delayed, waiting-children,
// and a paused queue with waiting jobs. Only the order of operations matters, and it is fixed, so
// the job ids BullMQ hands out are the same on every server.
async function seed(queues) {
  for (const q of Object.values(queues)) await q.obliterate({ force: true });
  const { emails, reports, newsletters } = queues;

  await emails.addBulk([
    { name: 'welcome', data: { to: 'ada@example.com' } },
    { name: 'welcome', data: { to: 'bob@example.com', fail: true }, opts: { attempts: 2 } },
    { name: 'receipt', data: { to: 'cy@example.com', order: 1001 } },
    { name: 'receipt', data: { to: 'dee@example.com', order: 1002 } },
    { name: 'welcome', data: { to: 'eve@example.com', fail: true } },
    { name: 'receipt', data: { to: 'fay@example.com', order: 1003 } },
  ]);
  // Each job takes over a millisecond, so no two finish in the same one: the completed and failed
  // sets are ordered by finish time, and ties would be ordered by id, differently from run to run.
  await drain('emails', 6, async (job) => {
    await sleep(2);
    await job.log(`sending ${job.name} to ${job.data.to}`);
    if (job.data.fail) throw new Error(`SMTP 550 mailbox unavailable: ${job.data.to}`);
    await job.updateProgress(100);
    return { delivered: true, to: job.data.to, messageId: `msg-${job.id}` };
  });

  const builds = [];
  for (let i = 1; i <= 23; i++) builds.push({ name: 'build', data: { report: `r${i}`, pages: i * 3 } });
  for (let i = 1; i <= 3; i++) builds.push({ name: 'build', data: { report: `bad${i}`, pages: -1 } });
  await reports.addBulk(builds);
  await drain('reports', 26, async (job) => {
    await sleep(2);
    if (job.data.pages < 0) throw new RangeError(`report ${job.data.report}: negative page count`);
    return { pages: job.data.pages, bytes: job.data.pages * 1024 };
  });
  const flows = new FlowProducer({ connection });
  await flows.add({
    name: 'bundle',
    queueName: 'reports',
    data: { month: '2026-10' },
    opts: { jobId: 'bundle-2026-10' }, // a flow's jobs otherwise get random ids
    children: [
      { name: 'build', queueName: 'reports', data: { report: 'part-a', pages: 2 }, opts: { jobId: 'part-a' } },
      { name: 'build', queueName: 'reports', data: { report: 'part-b', pages: 4 }, opts: { jobId: 'part-b' } },
    ],
  });
  await flows.close();

  // One active job: taken by a worker that processes by hand and never finishes it.
  await emails.add('digest', { to: 'team@example.com' });
  const manual = new Worker('emails', null, { connection, name: 'manual' });
  const active = await manual.getNextJob('seed-token');
  if (!active) throw new Error('no job to make active');
  for (const to of ['gus@example.com', 'hal@example.com', 'ivy@example.com']) await emails.add('welcome', { to });
  await emails.add('receipt', { to: 'jo@example.com', order: 2001 }, { priority: 5 });
  await emails.add('receipt', { to: 'kim@example.com', order: 2002 }, { priority: 1 });
  await emails.add('reminder', { to: 'lu@example.com' }, { delay: 3_600_000 });
  await emails.add('reminder', { to: 'mo@example.com' }, { delay: 7_200_000 });

  await newsletters.pause();
  for (let i = 1; i <= 4; i++) await newsletters.add('issue', { issue: i });
  return manual; // kept open: the board lists it as the queue's worker
}

async function main() {
  const queues = {};
  for (const name of QUEUES) queues[name] = new Queue(name, { connection });
  let manual = null;
  if (seedMode) manual = await seed(queues);

  const serverAdapter = new ExpressAdapter();
  serverAdapter.setBasePath('/ui');
  createBullBoard({
    queues: QUEUES.map((name) => new BullMQAdapter(queues[name])),
    serverAdapter,
  });
  const app = express();
  app.use('/ui', serverAdapter.getRouter());
  const server = app.listen(httpPort, '127.0.0.1', () => {
    console.log(JSON.stringify({ listening: server.address().port, seeded: seedMode }));
  });
  const stop = async () => {
    server.close();
    if (manual) await manual.close(true).catch(() => {});
    await Promise.all(Object.values(queues).map((q) => q.close().catch(() => {})));
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main().catch((err) => {
  console.error(err && err.stack ? err.stack : err);
  process.exit(1);
});
