// More BullMQ scenarios (rate limits, global concurrency, worker pause, flow failure policies,
// deduplication, job schedulers, stalled jobs, getters, clean/drain/obliterate, removeOn*,
// job operations). Loaded by run.js; each returns a JSON-able, deterministic outcome.
'use strict';
const path = require('path');
const { spawn } = require('child_process');
const {
  Queue, Worker, QueueEvents, FlowProducer, DelayedError, MetricsTime, WaitingChildrenError,
} = require('bullmq');
const IORedis = require('ioredis');

module.exports = function moreScenarios({ connection, track, waitFor, sleep, port, clientKind }) {
  const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;
  const scrub = (s) => (typeof s === 'string' ? s.replace(UUID, '<uuid>') : s);
  const byName = (a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
  async function raw() {
    return track(new IORedis({ host: '127.0.0.1', port, maxRetriesPerRequest: null }));
  }
  async function fresh(name, opts = {}) {
    const q = await track(new Queue(name, { connection: await connection(), ...opts }));
    await q.obliterate({ force: true }).catch(() => {});
    return q;
  }
  async function worker(name, fn, opts = {}) {
    const w = await track(new Worker(name, fn, { connection: await connection(), ...opts }));
    w.on('error', () => {});
    return w;
  }
  // The queue's Redis keys (suffix after bull:<queue>:) with their types, minus the ones whose
  // presence depends on timing (marker, limiter, stalled bookkeeping, lock keys).
  const VOLATILE = /^(marker|limiter|stalled|stalled-check|events|.*:lock)$/;
  async function layout(queueName) {
    const r = await raw();
    const keys = await r.keys(`bull:${queueName}:*`);
    const out = [];
    for (const k of keys) {
      const suffix = scrub(k.slice(`bull:${queueName}:`.length)).replace(/^repeat:every-1:\d+$/, 'repeat:every-1:<ms>');
      if (VOLATILE.test(suffix)) continue;
      out.push(`${suffix}=${await r.type(k)}`);
    }
    return out.sort();
  }
  // Split sorted timestamps into bursts separated by gaps larger than `gap` ms.
  function bursts(ts, gap) {
    const s = [...ts].sort((a, b) => a - b);
    const out = [];
    let n = 0;
    for (let i = 0; i < s.length; i++) {
      if (i > 0 && s[i] - s[i - 1] > gap) { out.push(n); n = 0; }
      n++;
    }
    if (n) out.push(n);
    return out;
  }

  return {
    async rate_limiter() {
      // worker limiter {max, duration}: 6 jobs run as 3 bursts of 2, about `duration` apart
      const q = await fresh('s_rl');
      for (let i = 0; i < 6; i++) await q.add('j', { i });
      const starts = [];
      let ttlSeen = false;
      await worker('s_rl', async (job) => { starts.push(Date.now()); return job.data.i; },
        { concurrency: 3, limiter: { max: 2, duration: 500 } });
      await waitFor(async () => {
        if (!ttlSeen && starts.length >= 2 && starts.length < 6) ttlSeen = (await q.getRateLimitTtl()) > 0;
        return (await q.getCompletedCount()) === 6;
      });
      const span = Math.max(...starts) - Math.min(...starts);

      // manual rate limit: worker.rateLimit + Worker.RateLimitError (job is not failed, not counted)
      const q2 = await fresh('s_rl2');
      let calls = 0;
      let ttlAfter = null;
      const t0 = [];
      const w2 = await worker('s_rl2', async (job) => {
        calls++;
        t0.push(Date.now());
        if (calls === 1) {
          await w2.rateLimit(400);
          ttlAfter = await q2.getRateLimitTtl();
          throw Worker.RateLimitError();
        }
        return `done ${job.data.k}`;
      }, { limiter: { max: 100, duration: 1000 } });
      const mj = await q2.add('manual', { k: 'x' });
      await waitFor(async () => (await mj.getState()) === 'completed');
      const m = await q2.getJob(mj.id);
      return {
        bursts: bursts(starts, 250),
        spanOk: span >= 2 * 500 - 60,
        ttlSeen,
        manual: {
          calls, ttlPositive: ttlAfter > 0 && ttlAfter <= 400, waitedOk: t0[1] - t0[0] >= 300,
          rv: m.returnvalue, attemptsMade: m.attemptsMade, attemptsStarted: m.attemptsStarted,
          failedReason: m.failedReason || null,
          counts: await q2.getJobCounts('completed', 'failed', 'wait', 'delayed'),
        },
      };
    },

    async global_concurrency() {
      const q = await fresh('s_gc');
      await q.setGlobalConcurrency(1);
      const gc = await q.getGlobalConcurrency();
      for (let i = 0; i < 8; i++) await q.add('j', { i });
      let active = 0;
      let maxActive = 0;
      const done = [];
      const fn = async (job) => {
        active++; maxActive = Math.max(maxActive, active);
        await sleep(25);
        active--; done.push(job.data.i);
        return job.data.i;
      };
      await worker('s_gc', fn, { concurrency: 4 });
      await worker('s_gc', fn, { concurrency: 4 });
      await waitFor(() => done.length === 8);
      const serialMax = maxActive;
      maxActive = 0;
      await q.removeGlobalConcurrency();
      const after = await q.getGlobalConcurrency();
      // without the global limit the two workers run jobs in parallel again
      for (let i = 8; i < 16; i++) await q.add('j', { i });
      await waitFor(() => done.length === 16);
      const meta = await q.getMeta();
      return { gc, serialMax, parallel: maxActive > 1, after, done: done.sort((a, b) => a - b), metaConcurrency: meta.concurrency ?? null };
    },

    async worker_pause() {
      const q = await fresh('s_wpause');
      const done = [];
      let release;
      const gate = new Promise((r) => { release = r; });
      const w = await worker('s_wpause', async (job) => {
        if (job.name === 'slow') await gate;
        done.push(job.name);
      }, { concurrency: 1 });
      await w.waitUntilReady();
      await q.add('slow', {});
      await waitFor(async () => (await q.getActiveCount()) === 1);
      let pauseResolved = false;
      const p = w.pause().then(() => { pauseResolved = true; });
      await sleep(100);
      const beforeRelease = [pauseResolved, w.isPaused()];
      release();
      await p;
      const afterPause = [pauseResolved, [...done]];
      for (let i = 0; i < 3; i++) await q.add(`j${i}`, {});
      await sleep(300);
      const whilePaused = [done.length, w.isPaused(), await q.getWaitingCount(), await q.isPaused()];
      w.resume();
      await waitFor(() => done.length === 4);
      return { beforeRelease, afterPause, whilePaused, done: done.sort(), running: w.isRunning() };
    },

    async flow_failures() {
      const q = await fresh('s_ff');
      const fp = await track(new FlowProducer({ connection: await connection() }));
      const mk = (pname, policy) => ({
        name: pname, queueName: 's_ff', data: {},
        children: [
          { name: `${pname}-bad`, queueName: 's_ff', data: { fail: true }, opts: { [policy]: true } },
          { name: `${pname}-ok`, queueName: 's_ff', data: { v: 7 } },
        ],
      });
      const trees = {
        fail: await fp.add(mk('pf', 'failParentOnFailure')),
        ignore: await fp.add(mk('pi', 'ignoreDependencyOnFailure')),
        remove: await fp.add(mk('pr', 'removeDependencyOnFailure')),
      };
      const ran = [];
      await worker('s_ff', async (job) => {
        ran.push(job.name);
        if (job.data.fail) throw new Error(`boom ${job.name}`);
        if (job.name.startsWith('p') && !job.name.includes('-')) {
          const vals = await job.getChildrenValues();
          const ign = await job.getIgnoredChildrenFailures();
          return { vals: Object.values(vals).sort(), ignored: Object.values(ign).sort() };
        }
        return job.data.v;
      }, { concurrency: 1 });
      const want = { fail: 'failed', ignore: 'completed', remove: 'completed' };
      await waitFor(async () => {
        for (const k of Object.keys(trees)) if ((await trees[k].job.getState()) !== want[k]) return false;
        return true;
      });
      const out = {};
      for (const [k, t] of Object.entries(trees)) {
        const j = await q.getJob(t.job.id);
        out[k] = {
          state: await j.getState(),
          failedReason: scrub(j.failedReason) || null,
          rv: j.returnvalue ?? null,
          deps: await j.getDependenciesCount(),
          children: (await Promise.all(t.children.map(async (c) => [c.job.name, await c.job.getState()]))).sort(),
        };
      }
      return { out, ran: ran.sort(), counts: await q.getJobCounts('completed', 'failed', 'waiting-children'), keys: await layout('s_ff') };
    },

    async events_dedup() {
      const q = await fresh('s_evd');
      const qe = await track(new QueueEvents('s_evd', { connection: await connection() }));
      await qe.waitUntilReady();
      await sleep(300);
      const dedup = [];
      qe.on('deduplicated', (a) => dedup.push([a.jobId, a.deduplicationId, a.deduplicatedJobId]));
      const a = await q.add('a', { v: 1 }, { deduplication: { id: 'dd' } });
      const b = await q.add('a', { v: 2 }, { deduplication: { id: 'dd' } });
      await waitFor(() => dedup.length === 1);
      await worker('s_evd', async (job) => {
        if (job.name === 'bad') throw new Error('it broke');
        return { v: job.data.v };
      });
      const rv = await a.waitUntilFinished(qe, 10000);
      const bad = await q.add('bad', {});
      let err = null;
      try { await bad.waitUntilFinished(qe, 10000); } catch (e) { err = e.message; }
      const c = await q.add('a', { v: 3 }, { deduplication: { id: 'dd' } }); // key released after completion
      const rv3 = await c.waitUntilFinished(qe, 10000);
      return { ids: [a.id, b.id, c.id], dedup, rv, err, rv3, counts: await q.getJobCounts('completed', 'failed') };
    },

    async schedulers() {
      const q = await fresh('s_sched');
      const every = await q.upsertJobScheduler('every-1', { every: 150 }, { name: 'tick', data: { k: 1 } });
      const cron = await q.upsertJobScheduler('cron-1',
        { pattern: '0 12 * * *', tz: 'Europe/Paris', startDate: '2030-01-01T00:00:00Z' },
        { name: 'cron', data: { k: 2 }, opts: { attempts: 2 } });
      const listed = (await q.getJobSchedulers(0, -1, true)).map((s) => ({
        key: s.key, name: s.name, every: s.every ?? null, pattern: s.pattern ?? null, tz: s.tz ?? null,
        next: s.key === 'cron-1' ? s.next : typeof s.next, template: s.template ?? null,
      })).sort((x, y) => (x.key < y.key ? -1 : 1));
      const one = await q.getJobScheduler('cron-1');
      const delayed = (await q.getDelayed()).map((j) => [j.name, j.name === 'cron' ? j.id : 'repeat', j.repeatJobKey]).sort();
      const ticks = [];
      const w = await worker('s_sched', async (job) => { ticks.push([job.name, job.repeatJobKey, job.data.k]); },
        { concurrency: 1 });
      await waitFor(() => ticks.length >= 3);
      const removed = [await q.removeJobScheduler('every-1'), await q.removeJobScheduler('nope')];
      await w.close();
      const after = (await q.getJobSchedulers()).map((s) => s.key);
      return {
        created: [every.name, every.id.startsWith('repeat:every-1:'), cron.name, cron.id, cron.delay > 0],
        listed, one: { key: one.key, next: one.next, tz: one.tz, pattern: one.pattern },
        count: await q.getJobSchedulersCount(), delayed,
        ticks: ticks.slice(0, 3), removed, after,
        delayedAfter: (await q.getDelayed()).map((j) => j.name).sort(),
        keys: await layout('s_sched'),
      };
    },

    async dedup() {
      const q = await fresh('s_dedup');
      // simple mode: one job per dedup id until that job completes or fails
      const s1 = await q.add('simple', { v: 1 }, { deduplication: { id: 's' } });
      const s2 = await q.add('simple', { v: 2 }, { deduplication: { id: 's' } });
      const simple = [s1.id, s2.id, await q.getDeduplicationJobId('s')];
      // throttle mode: ttl bounds the window
      const t1 = await q.add('thr', { v: 1 }, { deduplication: { id: 't', ttl: 300 } });
      const t2 = await q.add('thr', { v: 2 }, { deduplication: { id: 't', ttl: 300 } });
      const thrKey = await q.getDeduplicationJobId('t');
      await waitFor(async () => (await q.getDeduplicationJobId('t')) == null, 5000);
      const t3 = await q.add('thr', { v: 3 }, { deduplication: { id: 't', ttl: 300 } });
      // debounce mode: extend + replace while delayed keeps only the last job
      const dopts = { delay: 400, deduplication: { id: 'd', ttl: 400, extend: true, replace: true } };
      const d1 = await q.add('deb', { v: 1 }, dopts);
      const d2 = await q.add('deb', { v: 2 }, dopts);
      const d3 = await q.add('deb', { v: 3 }, dopts);
      const d1Gone = (await q.getJob(d1.id)) == null;
      const debKey = await q.getDeduplicationJobId('d');
      const pre = await q.getJobCounts('wait', 'delayed');
      const removedKey = await q.removeDeduplicationKey('s');
      const s3 = await q.add('simple', { v: 3 }, { deduplication: { id: 's' } });
      const seen = [];
      await worker('s_dedup', async (job) => { seen.push([job.name, job.data.v]); return job.data.v; });
      await waitFor(() => seen.length === 5);
      await sleep(100);
      return {
        simple, thr: [t1.id, t2.id, thrKey, t3.id], deb: [d1.id, d2.id, d3.id, d1Gone, debKey],
        pre, removedKey, s3: s3.id, seen: seen.sort(), after: await q.getJobCounts('completed', 'wait', 'delayed'),
        keysAfter: [await q.getDeduplicationJobId('s'), await q.getDeduplicationJobId('d')],
        keys: await layout('s_dedup'),
      };
    },

    async stalled() {
      const q = await fresh('s_stall');
      const job = await q.add('victim', { x: 1 }, { attempts: 3 });
      const child = spawn(process.execPath, [path.join(__dirname, 'stall_worker.js'), String(port), clientKind, 's_stall'],
        { stdio: ['ignore', 'pipe', 'inherit'] });
      let out = '';
      child.stdout.on('data', (d) => { out += d; });
      const exited = new Promise((r) => child.on('exit', (code, sig) => r(sig)));
      try {
        await waitFor(() => out.includes('taken') || out.includes('error'), 15000);
      } catch (e) {
        child.kill('SIGKILL');
        throw e;
      }
      if (out.includes('error')) throw new Error(`child failed: ${out}`);
      child.kill('SIGKILL');
      const sig = await exited;
      const afterKill = [await job.getState(), await q.getActiveCount()];
      const stalledEv = [];
      const w = await worker('s_stall', async (j) => `recovered ${j.data.x}`,
        { stalledInterval: 300, lockDuration: 1000, maxStalledCount: 2 });
      w.on('stalled', (id, prev) => stalledEv.push([id, prev]));
      await waitFor(async () => (await job.getState()) === 'completed', 15000);
      const j = await q.getJob(job.id);
      return {
        taken: out.trim().split('\n').filter((l) => l.startsWith('taken')), sig, afterKill,
        stalledEv, state: await j.getState(), rv: j.returnvalue,
        attemptsMade: j.attemptsMade, attemptsStarted: j.attemptsStarted, stalledCounter: j.stalledCounter,
      };
    },

    async getters() {
      const q = await fresh('s_getters');
      const ids = {};
      for (let i = 0; i < 5; i++) ids[`w${i}`] = (await q.add(`w${i}`, { i })).id;
      for (let i = 0; i < 2; i++) ids[`d${i}`] = (await q.add(`d${i}`, { i }, { delay: 60000 + i })).id;
      for (let i = 0; i < 3; i++) ids[`p${i}`] = (await q.add(`p${i}`, { i }, { priority: 3 - i })).id;
      const names = (js) => js.map((j) => j.name);
      const g = {
        waitAsc: names(await q.getJobs(['wait'], 0, 1, true)),
        waitDesc: names(await q.getJobs(['wait'], 0, 1, false)),
        waiting13: names(await q.getWaiting(1, 3)),
        delayed: names(await q.getDelayed()),
        prioritized: names(await q.getPrioritized()),
        prioritizedTop: names(await q.getJobs(['prioritized'], 0, 0, true)),
        mixed: names(await q.getJobs(['wait', 'delayed'], 0, -1, true)).sort(),
        counts: await q.getJobCounts(),
        byTypes: await q.getJobCountByTypes('wait', 'delayed', 'prioritized'),
        count: await q.count(),
        states: Object.fromEntries(await Promise.all(Object.entries(ids).map(async ([n, id]) => [n, await q.getJobState(id)]))),
        missing: (await q.getJob('nope')) ?? null,
        missingState: await q.getJobState('nope'),
      };
      g.keys = await layout('s_getters');
      const j = await q.getJob(ids.p1);
      g.job = { name: j.name, data: j.data, priority: j.opts.priority, state: await j.getState(), delay: j.delay };
      await worker('s_getters', async (job) => {
        if (job.name === 'w3') throw new Error('w3 failed');
        return job.name.toUpperCase();
      }, { name: 'getter-w', metrics: { maxDataPoints: MetricsTime.ONE_WEEK }, concurrency: 1 });
      await waitFor(async () => (await q.getCompletedCount()) + (await q.getFailedCount()) === 8);
      await sleep(50);
      const workers = await q.getWorkers();
      const mc = await q.getMetrics('completed');
      const mf = await q.getMetrics('failed', 0, -1);
      g.after = {
        workers: workers.map((w) => [w.name, w.rawname]).sort(), workersCount: await q.getWorkersCount(),
        metrics: [mc.meta.count, mf.meta.count, mc.count >= 0, mc.data.reduce((a, b) => a + b, 0) <= mc.meta.count],
        completedRange: names(await q.getCompleted(0, 2)).length,
        failed: names(await q.getFailed()),
        counts: await q.getJobCounts(),
        rv: (await q.getJob(ids.w0)).returnvalue,
        failedState: await (await q.getJob(ids.w3)).getState(),
      };
      return g;
    },

    async clean_drain_obliterate() {
      const q = await fresh('s_cdo');
      const r = await raw();
      for (let i = 0; i < 6; i++) await q.add(`j${i}`, { i });
      const w = await worker('s_cdo', async (job) => {
        if (job.data.i % 3 === 0) throw new Error('x');
        return job.data.i;
      });
      await waitFor(async () => (await q.getCompletedCount()) === 4 && (await q.getFailedCount()) === 2);
      await w.close();
      await sleep(20);
      const c1 = await q.clean(0, 1, 'completed');
      const c2 = await q.clean(0, 0, 'completed');
      const c3 = await q.clean(60000, 10, 'failed'); // grace keeps the recent ones
      const c4 = await q.clean(0, 10, 'failed');
      for (let i = 0; i < 3; i++) await q.add(`w${i}`, {});
      for (let i = 0; i < 2; i++) await q.add(`d${i}`, {}, { delay: 60000 });
      await sleep(20);
      const c5 = await q.clean(0, 10, 'wait');
      for (let i = 0; i < 2; i++) await q.add(`w${i}`, {});
      await q.add('p', {}, { priority: 2 });
      await q.drain();
      const afterDrain = await q.getJobCounts('wait', 'delayed', 'prioritized');
      await q.drain(true);
      const afterDrainDelayed = await q.getJobCounts('wait', 'delayed', 'prioritized');
      // obliterate refuses while a job is active unless forced
      let release;
      const gate = new Promise((res) => { release = res; });
      await q.add('held', {});
      const w2 = await worker('s_cdo', async () => { await gate; });
      await waitFor(async () => (await q.getActiveCount()) === 1);
      let err = null;
      try { await q.obliterate(); } catch (e) { err = e.message; }
      release();
      await waitFor(async () => (await q.getActiveCount()) === 0);
      await w2.close();
      await q.obliterate();
      const keys = await r.keys('bull:s_cdo:*');
      return {
        cleaned: [c1.length, c2.length, c3.length, c4.length, c5.length], afterDrain, afterDrainDelayed,
        err, keys: keys.sort(), counts: await q.getJobCounts('completed', 'failed', 'wait'),
      };
    },

    async remove_on() {
      const q = await fresh('s_ro');
      const ids = [];
      for (let i = 0; i < 5; i++) ids.push((await q.add(`c${i}`, { i }, { removeOnComplete: 2 })).id);
      for (let i = 0; i < 3; i++) ids.push((await q.add(`f${i}`, { i, fail: true }, { removeOnFail: { count: 1 } })).id);
      ids.push((await q.add('gone', {}, { removeOnComplete: true })).id);
      ids.push((await q.add('gonef', { fail: true }, { removeOnFail: true })).id);
      const w = await worker('s_ro', async (job) => {
        if (job.data.fail) throw new Error('f');
        return job.data.i ?? null;
      }, { concurrency: 1 });
      await waitFor(async () => (await q.getJobCounts('wait')).wait === 0 && (await q.getActiveCount()) === 0);
      await sleep(100);
      const exists = [];
      for (const id of ids) exists.push((await q.getJob(id)) != null);
      const byCount = {
        completed: (await q.getCompleted()).map((j) => j.name).sort(),
        failed: (await q.getFailed()).map((j) => j.name).sort(), exists,
      };
      await w.close();
      // age: keep jobs for 1 s; older ones go when a later job finishes
      const q2 = await fresh('s_ro_age');
      const opts = { removeOnComplete: { age: 1 }, removeOnFail: { age: 1, count: 10 } };
      await q2.add('old1', {}, opts);
      await q2.add('oldf', { fail: true }, opts);
      const w2 = await worker('s_ro_age', async (job) => { if (job.data.fail) throw new Error('f'); }, { concurrency: 1 });
      await waitFor(async () => (await q2.getCompletedCount()) === 1 && (await q2.getFailedCount()) === 1);
      await sleep(1300);
      await q2.add('new1', {}, opts);
      await q2.add('newf', { fail: true }, opts);
      await waitFor(async () => (await q2.getJobCounts('wait')).wait === 0 && (await q2.getActiveCount()) === 0);
      await sleep(100);
      await w2.close();
      return {
        byCount,
        byAge: { completed: (await q2.getCompleted()).map((j) => j.name), failed: (await q2.getFailed()).map((j) => j.name) },
        keys: [await layout('s_ro'), await layout('s_ro_age')],
      };
    },

    async job_ops() {
      const q = await fresh('s_ops');
      const rm = await q.add('rm', {});
      await rm.remove();
      const rmGone = (await q.getJob(rm.id)) == null;
      const upd = await q.add('upd', { v: 1 });
      await upd.updateData({ v: 2 });
      const updData = (await q.getJob(upd.id)).data;
      const prom = await q.add('prom', {}, { delay: 60000 });
      await prom.promote();
      const promState = await prom.getState();
      let promErr = null;
      try { await prom.promote(); } catch (e) { promErr = scrub(e.message); }
      const cd = await q.add('cd', {}, { delay: 60000 });
      await cd.changeDelay(120000);
      const cdJob = await q.getJob(cd.id);
      const cdInfo = [cdJob.delay, await cdJob.getState()];
      let cdErr = null;
      try { await upd.changeDelay(10); } catch (e) { cdErr = scrub(e.message); }
      await cd.changeDelay(0);
      const cp1 = await q.add('cp1', {}, { priority: 5 });
      await q.add('cp2', {}, { priority: 3 });
      await cp1.changePriority({ priority: 1 });
      const cpPrio = (await q.getJob(cp1.id)).priority;
      for (const n of ['l1', 'l2', 'l3']) await q.add(n, {}, { lifo: true });
      await q.add('md', {});
      await q.add('rt', {});
      const order = [];
      let mdRuns = 0;
      let rtRuns = 0;
      await worker('s_ops', async (job, token) => {
        order.push(job.name);
        if (job.name === 'md') {
          mdRuns++;
          if (mdRuns === 1) {
            await job.moveToDelayed(Date.now() + 500, token);
            throw new DelayedError();
          }
        }
        if (job.name === 'rt') {
          rtRuns++;
          if (rtRuns === 1) throw new Error('first run fails');
        }
        return job.name;
      }, { concurrency: 1 });
      const rtJob = (await q.getJobs(['wait', 'prioritized', 'active', 'completed', 'failed'])).find((j) => j.name === 'rt');
      await waitFor(async () => (await q.getJobState(rtJob.id)) === 'failed');
      const rtFailed = await q.getJob(rtJob.id);
      await rtFailed.retry('failed');
      await waitFor(async () => (await q.getCompletedCount()) === 10);
      const md = (await q.getJobs(['completed'])).find((j) => j.name === 'md');
      const rt = await q.getJob(rtJob.id);
      return {
        rmGone, updData, promState, promErr, cdInfo, cdErr, cpPrio,
        // up to rt's first (failing) run everything was queued up front and runs in
        // queue order; after it, md's delayed rerun and rt's retry race each other
        order: order.slice(0, order.indexOf('rt') + 1),
        reruns: order.slice(order.indexOf('rt') + 1).sort(),
        mdRuns, md: [md.attemptsMade, md.attemptsStarted, md.returnvalue],
        rt: [rt.attemptsMade, rt.failedReason || null, rt.returnvalue], rtRuns,
        counts: await q.getJobCounts('completed', 'failed', 'delayed', 'wait'),
        keys: await layout('s_ops'),
      };
    },
    async manual_misc() {
      const q = await fresh('s_man');
      const qe = await track(new QueueEvents('s_man', { connection: await connection() }));
      await qe.waitUntilReady();
      await sleep(300);
      const evs = [];
      for (const ev of ['duplicated', 'waiting-children', 'retries-exhausted', 'completed', 'failed']) {
        qe.on(ev, (a) => evs.push([ev, a.jobId]));
      }
      // custom job ids: a duplicate add returns the existing job and emits 'duplicated'
      const c1 = await q.add('custom', { v: 1 }, { jobId: 'my-id' });
      const c2 = await q.add('custom', { v: 2 }, { jobId: 'my-id' });
      const dupData = (await q.getJob('my-id')).data;
      // manual processing with getNextJob + moveToCompleted/moveToFailed and a token
      const w = await worker('s_man', null, { autorun: false });
      const token = 'tok-1';
      await q.add('m2', {}, { attempts: 1 });
      const j1 = await w.getNextJob(token);
      const lock = await (await raw()).get(`bull:s_man:${j1.id}:lock`);
      await j1.moveToCompleted('manual-ok', token, false);
      const j2 = await w.getNextJob(token);
      await j2.moveToFailed(new Error('manual-fail'), token, false);
      const none = await w.getNextJob(token, { block: false });
      let badToken = null;
      await q.add('m3', {});
      const j3 = await w.getNextJob(token);
      try { await j3.moveToCompleted('x', 'wrong-token', false); } catch (e) { badToken = scrub(e.message); }
      await j3.moveToCompleted('right', token, false);
      await w.close();
      // logs: keepLogs, pagination, clearLogs
      const lj = await q.add('logs', {}, { keepLogs: 3 });
      for (let i = 0; i < 5; i++) await lj.log(`line ${i}`);
      const logs = [await q.getJobLogs(lj.id), await q.getJobLogs(lj.id, 0, 0, false)];
      await lj.clearLogs(1);
      logs.push(await q.getJobLogs(lj.id));
      await lj.remove();
      // priorities, bulk retry/promote, trimEvents, prometheus text
      for (const p of [0, 1, 1, 2]) await q.add('pp', {}, { priority: p });
      const perPrio = await q.getCountsPerPriority([0, 1, 2, 3]);
      await q.drain();
      for (let i = 0; i < 3; i++) await q.add(`d${i}`, {}, { delay: 60000 });
      await q.promoteJobs({ count: 2 });
      const afterPromote = await q.getJobCounts('delayed', 'wait');
      await q.drain(true);
      // dynamic children: parent waits for a child added while it runs
      const order = [];
      const w2 = await worker('s_man', async (job, tok) => {
        order.push(`${job.name}:${job.data.step ?? 0}`);
        if (job.name === 'fails') throw new Error('always');
        if (job.name === 'dyn-parent') {
          if (!job.data.step) {
            await q.add('dyn-child', { v: 5 }, { parent: { id: job.id, queue: job.queueQualifiedName } });
            await job.updateData({ step: 1 });
            const moved = await job.moveToWaitingChildren(tok);
            if (moved) throw new WaitingChildrenError();
          }
          return Object.values(await job.getChildrenValues());
        }
        return job.data.v ?? null;
      }, { concurrency: 1 });
      const dp = await q.add('dyn-parent', {});
      await q.add('fails', {}, { attempts: 2 });
      await waitFor(async () => (await dp.getState()) === 'completed' && (await q.getFailedCount()) === 2);
      const retried = await q.retryJobs({ state: 'failed', count: 10 });
      await waitFor(async () => order.filter((o) => o.startsWith('fails')).length === 3 && (await q.getFailedCount()) === 1 && (await q.getCompletedCount()) >= 5);
      await w2.close();
      await sleep(200);
      const prom = await q.exportPrometheusMetrics({ env: 'test' });
      const xlenBefore = await (await raw()).xlen('bull:s_man:events');
      const trimmed = await q.trimEvents(5);
      const xlen = await (await raw()).xlen('bull:s_man:events');
      const per = {};
      for (const [e, id] of evs) per[`${e}:${id}`] = (per[`${e}:${id}`] || 0) + 1;
      return {
        custom: [c1.id, c2.id, dupData], manual: [j1.name, lock === token, j2.name, none ?? null, badToken],
        manualStates: [await q.getJobState(j1.id), await q.getJobState(j2.id), (await q.getJob(j2.id)).failedReason, (await q.getJob(j3.id)).returnvalue],
        logs, perPrio, afterPromote, order, dynRv: (await q.getJob(dp.id)).returnvalue, retried: retried ?? null,
        prom: prom.split('\n').filter((l) => l && !l.startsWith('#')).sort(), trimmedOk: trimmed >= 0, xlenOk: xlen <= xlenBefore,
        events: per,
      };
    },

    async volume() {
      // 2000 jobs through two workers with concurrency 50 each, added with addBulk in chunks
      const q = await fresh('s_vol');
      const N = 2000;
      const t0 = Date.now();
      for (let c = 0; c < N; c += 500) {
        await q.addBulk(Array.from({ length: 500 }, (_, i) => ({ name: 'v', data: { i: c + i }, opts: { removeOnComplete: 1000 } })));
      }
      const added = await q.getJobCounts('wait');
      let sum = 0;
      let n = 0;
      const fn = async (job) => { sum += job.data.i; n++; return job.data.i; };
      await worker('s_vol', fn, { concurrency: 50 });
      await worker('s_vol', fn, { concurrency: 50 });
      await waitFor(() => n === N, 60000);
      await sleep(200);
      const ms = Date.now() - t0;
      if (process.env.BULLMQ_VERBOSE) process.stderr.write(`volume: ${N} jobs in ${ms} ms\n`);
      return { added, n, sum, counts: await q.getJobCounts('wait', 'active', 'completed', 'failed') };
    },
  };
};
