// Which reply does a Node client see first: the write's, or that of a blocked client the write served?
// Usage: node reply_order.js PORT MODE [ROUNDS]
//   MODE xread:  ioredis; one connection blocks in XREAD BLOCK, another one XADDs to the stream.
//   MODE events: BullMQ; a QueueEvents listens ('added' comes from its XREAD BLOCK on the events
//                stream) while `await queue.add(...)` runs on its own connection.
// Prints JSON {rounds, readerFirst}: the rounds in which the served reader's reply was seen before the
// write's own reply (with durable respqueue that would be a read of data not committed yet).
//   MODE pipeline: ioredis; INFO and a SET sent in one write on one connection (as BullMQ's Worker
//                asks INFO on a connection it shares with the Queue whose add follows). Prints
//                {rounds, together}: the rounds in which the SET's reply had been read by the time the
//                INFO's reply was handled (setImmediate after it), i.e. both came in one read, as
//                redis-server writes the replies of one read together (20 of 20). Durable respqueue sends
//                the INFO reply at once and the SET's after its commit (0 of 20): the client can act on INFO
//                (BullMQ's Worker fetches a job) before the write's reply is in. Holding them together was
//                tried and measured (docs/BENCHMARKS.md, "Replies of one read"): it is not in main.
//   MODE active: BullMQ's upstream test `events > should emit an event when a job becomes active`, in a
//                loop: a Worker is made and `await queue.add()` runs on the same shared connection (a
//                QueueEvents listening, as in its beforeEach); the test registers `worker.once('active')`
//                after the add's reply, so it misses the event when the Worker fetched the job first
//                (both replies read at once). Prints {rounds, missed}: a timing race, on redis-server too.
'use strict';
const IORedis = require('ioredis');
const { Queue, QueueEvents, Worker } = require('bullmq');

const [portArg, mode, roundsArg = '30'] = process.argv.slice(2);
const port = Number(portArg);
const rounds = Number(roundsArg);
const opts = { host: '127.0.0.1', port, maxRetriesPerRequest: null };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitBlocked(ctl, n) {
  for (let i = 0; i < 2000; i++) {
    const info = await ctl.info('clients');
    if (info.includes(`blocked_clients:${n}\r\n`)) return;
    await sleep(2);
  }
  throw new Error('the reader did not block');
}

async function xread(ctl) {
  const reader = new IORedis(opts);
  const writer = new IORedis(opts);
  let readerFirst = 0;
  for (let i = 0; i < rounds; i++) {
    const key = `reply-order:${process.pid}:${i}`;
    const seen = [];
    const read = reader.xread('BLOCK', 0, 'STREAMS', key, '$').then((r) => {
      seen.push('reader');
      return r;
    });
    await waitBlocked(ctl, 1);
    const id = await writer.xadd(key, '*', 'f', 'v').then((r) => {
      seen.push('writer');
      return r;
    });
    const r = await read;
    if (r[0][1][0][0] !== id) throw new Error(`XREAD read ${JSON.stringify(r)}, not ${id}`);
    if (seen[0] === 'reader') readerFirst++;
    await ctl.del(key);
  }
  reader.disconnect();
  writer.disconnect();
  return readerFirst;
}

async function events(ctl) {
  let readerFirst = 0;
  for (let i = 0; i < rounds; i++) {
    const name = `reply-order-${process.pid}-${i}`;
    const queue = new Queue(name, { connection: opts });
    const qe = new QueueEvents(name, { connection: opts, blockingTimeout: 5000 });
    await queue.waitUntilReady();
    await qe.waitUntilReady();
    await waitBlocked(ctl, 1);
    let added = false;
    let early = false;
    const gotAdded = new Promise((resolve) =>
      qe.once('added', () => {
        if (!added) early = true;
        resolve();
      }),
    );
    await queue.add('t', {});
    added = true;
    await gotAdded;
    if (early) readerFirst++;
    await qe.close();
    await queue.obliterate({ force: true });
    await queue.close();
  }
  return readerFirst;
}

async function pipeline() {
  const c = new IORedis(opts);
  await c.ping();
  let together = 0;
  for (let i = 0; i < rounds; i++) {
    const key = `reply-order:pipeline:${process.pid}:${i}`;
    let wrote = false;
    c.stream.cork(); // one write: the server reads both requests at once
    const info = c.info('server');
    const set = c.set(key, 'v').then(() => {
      wrote = true;
    });
    process.nextTick(() => c.stream.uncork());
    const seen = await info.then(() => new Promise((resolve) => setImmediate(() => resolve(wrote))));
    if (seen) together++;
    await set;
  }
  c.disconnect();
  return together;
}

async function active() {
  const connection = new IORedis(opts);
  let missed = 0;
  for (let i = 0; i < rounds; i++) {
    const name = `reply-order-active-${process.pid}-${i}`;
    const queue = new Queue(name, { connection });
    const qe = new QueueEvents(name, { connection, blockingTimeout: 1000 });
    await queue.waitUntilReady();
    await qe.waitUntilReady();
    await sleep(50);
    let activeSeen = false;
    const worker = new Worker(name, async () => {}, { connection });
    worker.on('active', () => {
      activeSeen = true;
    });
    const completed = new Promise((resolve) => worker.once('completed', resolve));
    await queue.add('test', {});
    if (activeSeen) missed++; // the test's worker.once('active') would come too late
    await completed;
    await worker.close();
    await qe.close();
    await queue.obliterate({ force: true });
    await queue.close();
  }
  connection.disconnect();
  return missed;
}

async function main() {
  if (mode === 'active') {
    const missed = await active();
    process.stdout.write(JSON.stringify({ rounds, missed }) + '\n');
    return;
  }
  if (mode === 'pipeline') {
    const together = await pipeline();
    process.stdout.write(JSON.stringify({ rounds, together }) + '\n');
    return;
  }
  const ctl = new IORedis(opts);
  const readerFirst = mode === 'events' ? await events(ctl) : await xread(ctl);
  ctl.disconnect();
  process.stdout.write(JSON.stringify({ rounds, readerFirst }) + '\n');
}

main().then(
  () => process.exit(0),
  (e) => {
    process.stdout.write(JSON.stringify({ error: String((e && e.stack) || e) }) + '\n');
    process.exit(1);
  },
);
