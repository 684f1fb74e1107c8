// Authenticates as an ACL user with ioredis and runs BullMQ-style commands; prints what it saw as JSON.
// Usage: node acl_ioredis.js PORT USERNAME PASSWORD
'use strict';
const Redis = require('ioredis');

const [port, username, password] = [Number(process.argv[2]), process.argv[3], process.argv[4]];

async function main() {
  const out = {};
  const r = new Redis({ port, host: '127.0.0.1', username, password, lazyConnect: true, maxRetriesPerRequest: 1 });
  await r.connect();
  const step = async (name, fn) => {
    try {
      out[name] = await fn();
    } catch (e) {
      out[name] = { error: String(e.message) };
    }
  };
  await step('whoami', () => r.call('ACL', 'WHOAMI'));
  await step('job', async () => [
    await r.incr('bull:q:id'),
    await r.hset('bull:q:1', 'name', 'job', 'data', '{"x":1}', 'timestamp', '1'),
    await r.lpush('bull:q:wait', '1'),
    await r.xadd('bull:q:events', '*', 'event', 'waiting', 'jobId', '1') !== null,
    await r.zadd('bull:q:delayed', 5, '2'),
    await r.hgetall('bull:q:1'),
    await r.lmove('bull:q:wait', 'bull:q:active', 'RIGHT', 'LEFT'),
    await r.eval("return redis.call('lrange', KEYS[1], 0, -1)", 1, 'bull:q:active'),
  ]);
  await step('multi', () => r.multi().incr('bull:q:id').hget('bull:q:1', 'name').exec());
  await step('other_key', () => r.set('other', '1'));
  await step('script_other_key', () => r.eval("return redis.call('get', 'other')", 0));
  await step('dangerous', () => r.flushall());
  await step('keys', () => r.keys('*'));
  r.disconnect();
  const bad = new Redis({ port, host: '127.0.0.1', username, password: 'wrong', lazyConnect: true,
    maxRetriesPerRequest: 0, retryStrategy: () => null });
  await step('wrongpass', () => bad.connect());
  bad.disconnect();
  process.stdout.write(JSON.stringify(out));
}

main().catch((e) => { console.error(e); process.exit(1); });
