// Cluster clients against a Redis Cluster (respqueue --shards N, or redis-server nodes): BullMQ on an
// ioredis Cluster with a hash-tagged prefix, and a node-redis createCluster smoke. Prints its outcome as JSON.
// Usage: node cluster_clients.js bullmq|node-redis PORT [PORT...]
'use strict';

const [what, ...portArgs] = process.argv.slice(2);
const ports = portArgs.map(Number);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitFor(pred, ms = 30000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await pred()) return true;
    await sleep(25);
  }
  throw new Error('timed out waiting');
}

function ioCluster() {
  const { Cluster } = require('ioredis');
  return new Cluster(ports.map((port) => ({ host: '127.0.0.1', port })), {
    redisOptions: { maxRetriesPerRequest: null },
    enableReadyCheck: true,
  });
}

async function bullmq() {
  const { Queue, Worker, QueueEvents } = require('bullmq');
  const opened = [];
  const out = {};
  try {
    // BullMQ on Redis Cluster: every key of a queue in one slot, through a hash tag in the prefix
    const names = ['alpha', 'delta', 'q2']; // their hash tags fall on three different masters of three
    const prefixes = names.map((n) => `{rq-${n}}`);
    const queues = names.map((n, i) => new Queue(n, { connection: ioCluster(), prefix: prefixes[i] }));
    opened.push(...queues);
    for (const q of queues) await q.obliterate({ force: true }).catch(() => {});
    const events = new QueueEvents('alpha', { connection: ioCluster(), prefix: prefixes[0] });
    opened.push(events);
    await events.waitUntilReady();
    const doneEvents = [];
    events.on('completed', ({ jobId }) => doneEvents.push(jobId));
    const done = {};
    const attempts = {};
    const workers = names.map((n, i) => {
      done[n] = [];
      const w = new Worker(n, async (job) => {
        attempts[`${n}:${job.data.i}`] = (attempts[`${n}:${job.data.i}`] || 0) + 1;
        if (job.data.fail && job.attemptsMade < 2) throw new Error('try again');
        return job.data.i * 10;
      }, { connection: ioCluster(), prefix: prefixes[i], concurrency: 4 });
      w.on('completed', (job, rv) => done[n].push([job.data.i, rv, job.attemptsMade]));
      opened.push(w);
      return w;
    });
    const t0 = Date.now();
    for (const q of queues) {
      await q.addBulk(Array.from({ length: 10 }, (_, i) => ({ name: 'plain', data: { i } })));
      await q.add('retry', { i: 100, fail: true }, { attempts: 3, backoff: { type: 'fixed', delay: 50 } });
      await q.add('delayed', { i: 200 }, { delay: 300 });
    }
    await waitFor(() => names.every((n) => done[n].length === 12));
    out.elapsed_ok = Date.now() - t0 >= 300; // the delayed jobs waited for their delay
    for (const n of names) out[n] = done[n].sort((a, b) => a[0] - b[0]);
    out.attempts_retry = names.map((n) => attempts[`${n}:100`]);
    out.counts = [];
    for (const q of queues) out.counts.push(await q.getJobCounts('wait', 'active', 'completed', 'failed', 'delayed'));
    await waitFor(() => doneEvents.length >= 12);
    out.events = doneEvents.length;
    await Promise.all(workers.map((w) => w.close()));
  } finally {
    for (const o of opened) await o.close().catch(() => {});
  }
  return out;
}

async function nodeRedis() {
  const { createCluster } = require('redis');
  const c = createCluster({ rootNodes: ports.map((port) => ({ socket: { host: '127.0.0.1', port } })) });
  c.on('error', () => {});
  await c.connect();
  const out = {};
  try {
    for (let i = 0; i < 50; i++) await c.set(`nr:${i}`, String(i));
    const got = [];
    for (let i = 0; i < 50; i++) got.push(await c.get(`nr:${i}`));
    out.got_all = got.every((v, i) => v === String(i));
    out.mset = await c.mSet(['{nr}a', '1', '{nr}b', '2']);
    out.mget = await c.mGet(['{nr}a', '{nr}b']);
    out.incr = await c.incr('nr:counter');
    out.hash = [await c.hSet('nr:h', { a: '1' }), await c.hGetAll('nr:h')];
    try {
      await c.mGet(['nr:1', 'nr:2']);
      out.crossslot = 'no error';
    } catch (e) {
      out.crossslot = String(e.message);
    }
    out.masters = c.masters.length;
  } finally {
    await c.quit().catch(() => {});
  }
  return out;
}

(what === 'bullmq' ? bullmq() : nodeRedis())
  .then((out) => {
    process.stdout.write(JSON.stringify(out) + '\n');
    process.exit(0);
  })
  .catch((e) => {
    process.stderr.write(String(e && e.stack ? e.stack : e) + '\n');
    process.exit(1);
  });
