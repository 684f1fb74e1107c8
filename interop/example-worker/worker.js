// An example BullMQ worker for respqueue. It connects to the respqueue service by name
// (REDIS_HOST, default "respqueue", the service in docker-compose.yml) and processes jobs
// of QUEUE_NAME. With PRODUCE=N it first adds N demo jobs; with EXIT_AFTER=N it exits
// after N completed jobs (the tests use that).
'use strict';

const { Queue, Worker } = require('bullmq');

const connection = {
  host: process.env.REDIS_HOST || 'respqueue',
  port: Number(process.env.REDIS_PORT || 6379),
  password: process.env.REDIS_PASSWORD || undefined,
  maxRetriesPerRequest: null, // what BullMQ workers need: retry until the server is back
};
const queueName = process.env.QUEUE_NAME || 'example';
const produce = Number(process.env.PRODUCE || 0);
const exitAfter = Number(process.env.EXIT_AFTER || 0);

async function main() {
  let done = 0;
  const worker = new Worker(
    queueName,
    async (job) => {
      // the work: here, add up the numbers in the job's data
      const sum = (job.data.numbers || []).reduce((a, b) => a + b, 0);
      return { sum };
    },
    { connection, concurrency: Number(process.env.CONCURRENCY || 4) },
  );
  worker.on('completed', async (job, result) => {
    done += 1;
    console.log(`completed job ${job.id} (${job.name}): ${JSON.stringify(result)}`);
    if (exitAfter && done >= exitAfter) {
      await shutdown(0);
    }
  });
  worker.on('failed', (job, err) => console.error(`failed job ${job && job.id}: ${err.message}`));
  worker.on('error', (err) => console.error(`worker error: ${err.message}`));

  let queue = null;
  async function shutdown(code) {
    await worker.close();
    if (queue) await queue.close();
    process.exit(code);
  }
  process.on('SIGTERM', () => shutdown(0));
  process.on('SIGINT', () => shutdown(0));

  await worker.waitUntilReady();
  console.log(`worker ready on queue "${queueName}" at ${connection.host}:${connection.port}`);
  if (produce > 0) {
    queue = new Queue(queueName, { connection });
    for (let i = 0; i < produce; i++) {
      await queue.add('sum', { numbers: [i, i + 1, i + 2] }, { removeOnComplete: 100, removeOnFail: 100 });
    }
    console.log(`added ${produce} demo jobs`);
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
