// Drives one server over TLS with ioredis and prints what it observed as JSON.
// Usage: node tls_ioredis.js PORT CA_FILE [CERT_FILE KEY_FILE]
'use strict';
const fs = require('fs');
const Redis = require('ioredis');

const [port, ca, cert, key] = process.argv.slice(2);

async function main() {
  const tls = { ca: fs.readFileSync(ca), servername: 'localhost' };
  if (cert) {
    tls.cert = fs.readFileSync(cert);
    tls.key = fs.readFileSync(key);
  }
  const out = {};
  const r = new Redis({
    port: Number(port), host: '127.0.0.1', tls, lazyConnect: true, maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  r.on('error', () => {});
  try {
    await r.connect();
  } catch (e) {
    out.connect = { error: String(e.message) };
    console.log(JSON.stringify(out));
    return;
  }
  const step = async (name, fn) => {
    try {
      out[name] = await fn();
    } catch (e) {
      out[name] = { error: String(e.message) };
    }
  };
  await step('flushall', () => r.flushall());
  await step('ping', () => r.ping());
  await step('strings', async () => [
    await r.set('s', 'v'), await r.get('s'), await r.incr('n'), await r.mget('s', 'n', 'missing'),
  ]);
  await step('wrongtype', () => r.lpush('s', 'x'));
  await step('hash', async () => [await r.hset('h', 'a', '1', 'b', '2'), await r.hgetall('h')]);
  await step('big', async () => {
    const v = 'x'.repeat(300000);
    await r.set('big', v);
    return (await r.get('big')).length;
  });
  await step('pipeline', async () => {
    const p = r.pipeline();
    for (let i = 0; i < 200; i++) p.rpush('l', String(i));
    p.lrange('l', 0, 4);
    const res = await p.exec();
    return res[res.length - 1];
  });
  await step('eval', () => r.eval("return {KEYS[1], ARGV[1], redis.call('incr', KEYS[1])}", 1, 'k', 'a'));
  const sub = r.duplicate();
  sub.on('error', () => {});
  await step('pubsub', async () => {
    await sub.subscribe('ch');
    const got = new Promise((resolve) => sub.on('message', (ch, msg) => resolve([ch, msg])));
    const n = await r.publish('ch', 'hello');
    return [n, await got];
  });
  sub.disconnect();
  r.disconnect();
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
