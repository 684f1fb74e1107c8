// A BullMQ producer and worker that reach the master through Redis Sentinel (ioredis `sentinels`),
// for the failover tests (tests/test_sentinel.py) and interop/bench/failover.py.
// Usage: node bullmq_failover.js SENTINEL_PORTS QUEUE N [DELAY_MS]
//   SENTINEL_PORTS: comma-separated ports on 127.0.0.1; the master set is named `mymaster`.
// It adds jobs j0, j1, ... one at a time (an add that fails is retried with the same job id, so it is
// idempotent), at most N, and stops adding when a line `stop` arrives on stdin; it processes them. Lines on stdout:
// `added ID MS` once an add was acknowledged, `processed ID MS` each time the processor ran, `completed ID MS` for
// each 'completed' event (emitted once moveToFinished returned), with MS the wall clock (Date.now()), `error MSG`,
// then, once the queue holds every job as finished, `finished ID ID ...` (the completed set), `done`
// and the counts as JSON: `counts {...}`.
'use strict';
const { Queue, Worker } = require('bullmq');

const [portsArg, queueName, nArg, delayArg = '5'] = process.argv.slice(2);
const N = Number(nArg);  // at most this many jobs
const delay = Number(delayArg);
const sentinels = portsArg.split(',').map((p) => ({ host: '127.0.0.1', port: Number(p) }));
const out = (s) => process.stdout.write(s + '\n');

function connection() {
  return {
    sentinels,
    name: 'mymaster',
    maxRetriesPerRequest: null,
    retryStrategy: () => 200,
    sentinelRetryStrategy: () => 200,
    // a demoted master answers writes with READONLY: reconnect (through Sentinel) and resend
    reconnectOnError: (err) => (/READONLY|LOADING/.test(err.message) ? 2 : false),
  };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  const queue = new Queue(queueName, { connection: connection() });
  queue.on('error', (e) => out(`error queue ${e.message}`));
  let finished = false;
  const worker = new Worker(queueName, async (job) => {
    out(`processed ${job.id} ${Date.now()}`);
    return job.data.i;
  }, {
    connection: connection(), concurrency: 4, lockDuration: 5000, stalledInterval: 2000, maxStalledCount: 100,
  });
  worker.on('error', (e) => out(`error worker ${e.message}`));
  worker.on('completed', (job) => {
    out(`completed ${job.id} ${Date.now()}`);
  });
  let stop = false;
  process.stdin.on('data', (d) => { if (String(d).includes('stop')) stop = true; });
  let total = 0;
  for (let i = 0; i < N && !stop; i++) {
    const id = `j${i}`;
    for (;;) {
      try {
        await queue.add('job', { i }, { jobId: id, removeOnComplete: false });
        out(`added ${id} ${Date.now()}`);
        total = i + 1;
        break;
      } catch (e) {
        out(`error add ${id} ${e.message}`);
        await sleep(200);
      }
    }
    if (delay) await sleep(delay);
  }
  // done when every job added is finished in the queue itself: a completion the server committed
  // while its reply was lost in a failover emits no 'completed' event here
  let counts;
  while (!finished) {
    try {
      counts = await queue.getJobCounts('completed', 'failed', 'active', 'wait', 'delayed', 'prioritized');
      if (counts.completed + counts.failed >= total && counts.active === 0 && counts.wait === 0) finished = true;
    } catch (e) {
      out(`error counts ${e.message}`);
    }
    if (!finished) await sleep(200);
  }
  for (;;) {
    try {
      const ids = (await queue.getCompleted(0, -1)).map((j) => j.id);
      out(`finished ${ids.join(' ')}`);
      break;
    } catch (e) {
      await sleep(200);
    }
  }
  out('done');
  out(`counts ${JSON.stringify(counts)}`);
  await worker.close();
  await queue.close();
  process.exit(0);
}

main().catch((e) => {
  out(`error fatal ${e && e.stack || e}`);
  process.exit(1);
});
