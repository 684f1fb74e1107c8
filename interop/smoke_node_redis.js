// Drives one server with node-redis and prints what it observed as JSON.
// Usage: node smoke_node_redis.js PORT
'use strict';
const { createClient } = require('redis');

const port = Number(process.argv[2] || process.env.PORT || 6379);

async function main() {
  const out = {};
  const r = createClient({ socket: { port, host: '127.0.0.1' } });
  r.on('error', () => {});
  await r.connect();
  await r.flushAll();
  const step = async (name, fn) => {
    try {
      out[name] = await fn();
    } catch (e) {
      out[name] = { error: String(e.message) };
    }
  };
  await step('ping', () => r.ping());
  await step('strings', async () => [await r.set('s', 'v'), await r.get('s'), await r.incr('n'), await r.mGet(['s', 'n', 'zz'])]);
  await step('wrongtype', async () => r.lPush('s', 'x'));
  await step('hashes', async () => [await r.hSet('h', { a: '1', b: '2' }), await r.hGetAll('h'), await r.hIncrBy('h', 'a', 5)]);
  await step('lists', async () => [await r.lPush('l', ['a', 'b']), await r.lRange('l', 0, -1), await r.lPos('l', 'a')]);
  await step('zsets', async () => [
    await r.zAdd('z', [{ score: 2, value: 'b' }, { score: 1, value: 'a' }]),
    await r.zRangeWithScores('z', 0, -1),
    await r.zPopMin('z'),
  ]);
  await step('multi', async () => r.multi().set('m', '1').incr('m').get('m').exec());
  await step('script', async () => {
    const sha = await r.scriptLoad("return redis.call('INCRBY', KEYS[1], ARGV[1])");
    return [await r.evalSha(sha, { keys: ['k'], arguments: ['5'] }), await r.scriptExists(sha)];
  });
  await step('blocking', async () => {
    const b = r.duplicate();
    b.on('error', () => {});
    await b.connect();
    const pending = b.blPop('bl', 5);
    await new Promise((res) => setTimeout(res, 100));
    await r.rPush('bl', 'x');
    const got = await pending;
    await b.quit();
    return got;
  });
  await step('pubsub', async () => {
    const sub = r.duplicate();
    await sub.connect();
    const msgs = [];
    await sub.subscribe('chan', (m, ch) => msgs.push([ch, m]));
    await r.publish('chan', 'hi');
    await new Promise((res) => setTimeout(res, 100));
    await sub.quit();
    return msgs;
  });
  await r.quit();
  process.stdout.write(JSON.stringify(out));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
