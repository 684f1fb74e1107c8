// A BullMQ producer and worker on an ioredis Cluster, running while the test moves the queue's slot to
// another node. Prints "ready" once some jobs are done; after a "stop" line on stdin it stops adding, waits
// until every added job has completed and prints, as JSON, the ids it added and every job id the worker ran.
// Usage: node cluster_migration.js QUEUE PREFIX PORT [PORT...]
'use strict';

const [queueName, prefix, ...portArgs] = process.argv.slice(2);
const ports = portArgs.map(Number);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function ioCluster() {
  const { Cluster } = require('ioredis');
  // While a slot moves, multi-key scripts get -TRYAGAIN (as from Redis) until it is closed: let ioredis keep
  // retrying for the whole move instead of giving up after its default 16 redirections.
  return new Cluster(ports.map((port) => ({ host: '127.0.0.1', port })), {
    redisOptions: { maxRetriesPerRequest: null },
    maxRedirections: 2000,
    retryDelayOnTryAgain: 50,
    retryDelayOnMoved: 20,
  });
}

async function main() {
  const { Queue, Worker } = require('bullmq');
  const queue = new Queue(queueName, { connection: ioCluster(), prefix });
  await queue.obliterate({ force: true }).catch(() => {});
  const ran = [];
  const completed = new Set();
  const errors = [];
  const worker = new Worker(queueName, async (job) => {
    ran.push(job.id);
    await sleep(2);
    return job.data.i;
  }, { connection: ioCluster(), prefix, concurrency: 4 });
  worker.on('completed', (job) => completed.add(job.id));
  worker.on('error', (e) => errors.push(String(e && e.message)));
  let stop = false;
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', (d) => {
    if (d.includes('stop')) stop = true;
  });
  const added = [];
  let ready = false;
  let addRetries = 0;
  for (let i = 0; !stop; i++) {
    const jobId = `j${i}`;
    // an add whose reply was lost is retried with the same job id: BullMQ keeps one job per id
    for (;;) {
      try {
        await queue.add('m', { i }, { jobId, removeOnComplete: false });
        break;
      } catch (e) {
        addRetries++;
        if (addRetries > 200) throw e;
        await sleep(50);
      }
    }
    added.push(jobId);
    if (!ready && completed.size >= 30) {
      ready = true;
      process.stdout.write('ready\n');
    }
    await sleep(5);
  }
  const end = Date.now() + 120000;
  while (completed.size < added.length && Date.now() < end) await sleep(50);
  await sleep(500); // a job run twice would show up here
  const counts = await queue.getJobCounts('wait', 'active', 'completed', 'failed', 'delayed');
  await worker.close();
  await queue.close();
  process.stdout.write(JSON.stringify({ added, ran, completed: completed.size, counts, addRetries, errors }) + '\n');
}

main()
  .then(() => process.exit(0))
  .catch((e) => {
    process.stderr.write(String(e && e.stack ? e.stack : e) + '\n');
    process.exit(1);
  });
