// Which reply does a Node client see first: the write's, or that of a blocked client the write served?
// Usage: node reply_order.js PORT MODE [ROUNDS]
//   MODE xread:  ioredis; one connection blocks in XREAD BLOCK, another one XADDs to the stream.
//   MODE events: BullMQ; a QueueEvents listens ('added' comes from its XREAD BLOCK on the events
//                stream) while `await queue.add(...)` runs on its own connection.
// Prints JSON {rounds, readerFirst}: the rounds in which the served reader's reply was seen before the
// write's own reply (with durable respqueue that would be a read of data not committed yet).
'use strict';
const IORedis = require('ioredis');
const { Queue, QueueEvents } = require('bullmq');

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

async function main() {
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
