// The pattern of BullMQ's upstream test `events > should emit an event when a job becomes active`,
// looped: a fresh Worker is created, then `await queue.add(...)`, and only then is a listener for
// the worker's 'active' event registered. The test misses the event (and times out) when the
// worker's 'active' is emitted before the add's promise has resolved.
// Usage: node active_race.js PORT [ROUNDS]
// Prints JSON {rounds, early, missed}: `early` counts rounds in which 'active' came before the add
// resolved (seen by a listener registered up front), `missed` those in which the late listener (the
// upstream test's) did not see 'active' within 3 s. The Queue and the Worker share one ioredis client,
// as upstream: the add and the worker's first moveToActive travel pipelined on one socket, and when
// their replies reach Node in one read, ioredis resolves the moveToActive chain (fewer promise hops)
// before the add's, whatever the server. Redis rarely lets that happen (it answers the add before the
// worker's commands are sent); durable respqueue answers it after its commit, by which time they often
// are. A measurement, not a test (it is racy on Redis too).
'use strict';
const { Queue, Worker } = require('bullmq');

const [portArg, roundsArg = '40'] = process.argv.slice(2);
const port = Number(portArg);
const rounds = Number(roundsArg);
const IORedis = require('ioredis');

async function round(connection, i) {
  const name = `active-race-${process.pid}-${i}`;
  const queue = new Queue(name, { connection });
  await queue.waitUntilReady();
  await new Promise((r) => setTimeout(r, 20));
  const worker = new Worker(name, async () => {}, { connection });
  worker.on('error', () => {});
  let added = false;
  let early = false;
  worker.on('active', () => {
    if (!added) early = true;
  });
  await queue.add('test', {});
  added = true;
  const seen = await new Promise((resolve) => {
    const t = setTimeout(() => resolve(false), 3000);
    worker.once('active', () => {
      worker.once('completed', () => {
        clearTimeout(t);
        resolve(true);
      });
    });
  });
  await worker.close();
  await queue.obliterate({ force: true });
  await queue.close();
  return { early, missed: !seen };
}

async function main() {
  let early = 0;
  let missed = 0;
  // one client shared by the Queue and the Worker's main connection, as in the upstream test
  const connection = new IORedis({ host: '127.0.0.1', port, maxRetriesPerRequest: null });
  for (let i = 0; i < rounds; i++) {
    const r = await round(connection, i);
    if (r.early) early++;
    if (r.missed) missed++;
  }
  await connection.quit();
  process.stdout.write(JSON.stringify({ rounds, early, missed }) + '\n');
}

main().then(
  () => process.exit(0),
  (e) => {
    process.stdout.write(JSON.stringify({ error: String((e && e.stack) || e) }) + '\n');
    process.exit(1);
  },
);
