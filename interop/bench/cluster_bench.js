// Cluster benchmark driver: producers and workers on hash-tagged BullMQ queues, one server or a cluster.
//
//   node cluster_bench.js single|cluster PORTS TAGS [--jobs N] [--concurrency C] [--inflight I]
//
// PORTS: comma-separated (one for single, the seed nodes for cluster); TAGS: comma-separated queue hash
// tags (queue q, prefix {tag}). Each queue gets a producer (Queue.add with --inflight calls in flight,
// --jobs jobs) and a Worker (--concurrency) started together; the run ends when every job is processed.
// Prints "RESULT {json}": jobs, start/end (epoch ms) and each job's pickup delay (processor start - job
// timestamp, ms).
'use strict';
const path = require('path');
const { Queue, Worker } = require(path.join(__dirname, '..', 'node_modules', 'bullmq'));
const IORedis = require(path.join(__dirname, '..', 'node_modules', 'ioredis'));

const [mode, portsArg, tagsArg, ...rest] = process.argv.slice(2);
const opts = { jobs: 500, concurrency: 20, inflight: 20 };
for (let i = 0; i < rest.length; i += 2) opts[rest[i].replace(/^--/, '')] = Number(rest[i + 1]);
const ports = portsArg.split(',').map(Number);
const tags = tagsArg.split(',');

function connection() {
  if (mode === 'cluster') {
    return new IORedis.Cluster(ports.map((port) => ({ host: '127.0.0.1', port })), {
      redisOptions: { maxRetriesPerRequest: null },
    });
  }
  return new IORedis({ host: '127.0.0.1', port: ports[0], maxRetriesPerRequest: null });
}

async function main() {
  const opened = [];
  const pickups = [];
  let done = 0;
  const total = opts.jobs * tags.length;
  let finish;
  const allDone = new Promise((r) => { finish = r; });
  const queues = tags.map((t) => {
    const q = new Queue('q', { connection: connection(), prefix: `{${t}}` });
    opened.push(q);
    return q;
  });
  for (const q of queues) {
    await q.waitUntilReady();
    await q.obliterate({ force: true }).catch(() => {});
  }
  const start = Date.now();
  for (const t of tags) {
    const w = new Worker('q', async (job) => {
      pickups.push(Date.now() - job.timestamp);
    }, { connection: connection(), prefix: `{${t}}`, concurrency: opts.concurrency });
    w.on('completed', () => { if (++done === total) finish(); });
    opened.push(w);
  }
  const produce = async (q) => {
    let next = 0;
    const lane = async () => {
      while (next < opts.jobs) {
        next++;
        await q.add('j', { n: next }, { removeOnComplete: true });
      }
    };
    await Promise.all(Array.from({ length: opts.inflight }, lane));
  };
  await Promise.all(queues.map(produce));
  await allDone;
  const end = Date.now();
  for (const o of opened) await o.close().catch(() => {});
  process.stdout.write('RESULT ' + JSON.stringify({ jobs: done, start, end, pickups }) + '\n');
  process.exit(0);
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack ? e.stack : e) + '\n');
  process.exit(1);
});
