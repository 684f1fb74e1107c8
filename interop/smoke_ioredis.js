// Drives one server with ioredis and prints what it observed as JSON.
// Usage: node smoke_ioredis.js PORT
'use strict';
const Redis = require('ioredis');

const port = Number(process.argv[2] || process.env.PORT || 6379);

async function main() {
  const out = {};
  const r = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 1 });
  await r.connect();
  await r.flushall();
  const step = async (name, fn) => {
    try {
      out[name] = await fn();
    } catch (e) {
      out[name] = { error: String(e.message) };
    }
  };
  await step('ping', () => r.ping());
  await step('strings', async () => [
    await r.set('s', 'v'), await r.get('s'), await r.incr('n'), await r.incrbyfloat('f', '0.1'),
    await r.set('t', '1', 'PX', 100000, 'NX'), await r.mget('s', 'n', 'missing'),
  ]);
  await step('wrongtype', async () => { await r.lpush('s', 'x'); });
  await step('hashes', async () => [
    await r.hset('h', 'a', '1', 'b', '2'), await r.hgetall('h'), await r.hincrby('h', 'a', 5),
    await r.hmget('h', 'a', 'zz'), await r.hdel('h', 'b'), await r.hlen('h'),
  ]);
  await step('lists', async () => [
    await r.lpush('l', 'a', 'b', 'c'), await r.rpoplpush('l', 'l2'), await r.lrange('l', 0, -1),
    await r.lpos('l', 'b'), await r.lrem('l', -1, 'b'), await r.llen('l'),
  ]);
  await step('sets', async () => [
    await r.sadd('st', '1', '2', '3'), await r.sismember('st', '2'), await r.scard('st'),
    (await r.smembers('st')).sort(), await r.srem('st', '1'),
  ]);
  await step('zsets', async () => [
    await r.zadd('z', 7353298492104700, 'a', 1.5, 'b', 3, 'c'), await r.zrange('z', 0, -1, 'WITHSCORES'),
    await r.zrangebyscore('z', 0, 10, 'LIMIT', 0, 1), await r.zscore('z', 'a'), await r.zpopmin('z'),
    await r.zrevrange('z', 0, -1), await r.zcard('z'),
  ]);
  await step('streams', async () => [
    await r.xadd('x', 'MAXLEN', '~', '1000', '1-1', 'event', 'added', 'jobId', '1'),
    await r.xadd('x', '2-1', 'event', 'completed'), await r.xlen('x'), await r.xrange('x', '-', '+'),
    await r.xrevrange('x', '+', '-', 'COUNT', 1), await r.xtrim('x', 'MAXLEN', '~', 10),
  ]);
  await step('pipeline', async () => {
    const p = r.pipeline();
    for (let i = 0; i < 100; i++) p.incr('pc');
    p.get('pc');
    const res = await p.exec();
    return res[res.length - 1];
  });
  await step('multi', async () => r.multi().set('m', '1').incr('m').get('m').exec());
  await step('multi_error', async () => {
    try {
      return await r.multi().set('m2', '1').lpush('m2', 'x').get('m2').exec();
    } catch (e) {
      return { error: String(e.message) };
    }
  });
  await step('bzpopmin_timeout', async () => r.bzpopmin('marker', 0.001));
  await step('bzpopmin_woken', async () => {
    const b = new Redis({ port, host: '127.0.0.1' });
    const pending = b.bzpopmin('marker2', 5);
    await new Promise((res) => setTimeout(res, 100));
    await r.zadd('marker2', 0, '0');
    const got = await pending;
    b.disconnect();
    return got;
  });
  await step('pubsub', async () => {
    const sub = new Redis({ port, host: '127.0.0.1' });
    const msgs = [];
    await sub.subscribe('chan');
    sub.on('message', (ch, m) => msgs.push([ch, m]));
    await r.publish('chan', 'hello');
    await new Promise((res) => setTimeout(res, 100));
    sub.disconnect();
    return msgs;
  });
  await step('client_name', async () => {
    await r.client('SETNAME', 'bull:cXVldWU=:w:worker1');
    const list = await r.client('LIST');
    return [await r.client('GETNAME'), list.includes('name=bull:cXVldWU=:w:worker1')];
  });
  await step('info', async () => {
    const info = await r.info();
    return [/redis_version:\d+\.\d+\.\d+/.test(info), info.includes('loading:0')];
  });
  await step('eval', async () => r.eval("return {KEYS[1], ARGV[1], redis.call('INCR', KEYS[1])}", 1, 'ek', 'arg'));
  await step('scan', async () => {
    await r.mset('scan:1', 'a', 'scan:2', 'b', 'other', 'c');
    let cursor = '0';
    const keys = [];
    do {
      const [c, ks] = await r.scan(cursor, 'MATCH', 'scan:*', 'COUNT', 100);
      cursor = c;
      keys.push(...ks);
    } while (cursor !== '0');
    return keys.sort();
  });
  await r.quit();
  process.stdout.write(JSON.stringify(out));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
