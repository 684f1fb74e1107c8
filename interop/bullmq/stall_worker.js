// Child process for the `stalled` scenario: takes one job, reports it on stdout, then hangs
// until the parent kills it with SIGKILL (so the job's lock is never released or renewed).
// Usage: node stall_worker.js PORT [ioredis|node-redis] QUEUE
'use strict';
const { Worker } = require('bullmq');

const [portArg, clientKind = 'ioredis', queueName] = process.argv.slice(2);
const port = Number(portArg);

async function main() {
  let connection = { host: '127.0.0.1', port, maxRetriesPerRequest: null };
  if (clientKind === 'node-redis') {
    const { createClient } = require('redis');
    connection = createClient({ socket: { host: '127.0.0.1', port } });
    connection.on('error', () => {});
    await connection.connect();
  }
  const w = new Worker(queueName, async (job) => {
    process.stdout.write(`taken ${job.id}\n`);
    await new Promise(() => {}); // never finishes
  }, { connection, lockDuration: 500, skipStalledCheck: true, skipLockRenewal: true, name: 'doomed' });
  w.on('error', () => {});
  await w.waitUntilReady();
  process.stdout.write('ready\n');
}

main().catch((e) => {
  process.stdout.write(`error ${e && e.stack || e}\n`);
  process.exit(1);
});
