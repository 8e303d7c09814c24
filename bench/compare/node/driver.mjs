// The Powertools for AWS Lambda (TypeScript) side of bench/compare: the
// idempotency utility's makeIdempotent around a bare handler, with its
// DynamoDB persistence layer or an in-memory one. The Go harness starts this
// process and sends it one JSON command per line on stdin; it answers each
// with one JSON line on stdout. The protocol is the Go driver's (see
// ../driver.go), so both sides run exactly the same phases.
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { hrtime } from 'node:process';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  IdempotencyConfig,
  IdempotencyItemAlreadyExistsError,
  IdempotencyItemNotFoundError,
  IdempotencyRecordStatus,
  makeIdempotent,
} from '@aws-lambda-powertools/idempotency';
import { BasePersistenceLayer } from '@aws-lambda-powertools/idempotency/persistence';
import { DynamoDBPersistenceLayer } from '@aws-lambda-powertools/idempotency/dynamodb';

// MemoryPersistenceLayer keeps records in a Map, with the semantics of the
// DynamoDB layer's conditional writes: a reservation fails while a live
// record holds the key. It stores the record objects themselves, without
// serialising them, which is the cheapest a custom layer can be.
class MemoryPersistenceLayer extends BasePersistenceLayer {
  #records = new Map();

  async _putRecord(record) {
    const existing = this.#records.get(record.idempotencyKey);
    if (existing !== undefined) {
      const now = Date.now();
      const expired = existing.expiryTimestamp !== undefined && existing.expiryTimestamp < now / 1000;
      const inProgressExpired =
        existing.status === IdempotencyRecordStatus.INPROGRESS &&
        existing.inProgressExpiryTimestamp !== undefined &&
        existing.inProgressExpiryTimestamp < now;
      if (!expired && !inProgressExpired) {
        throw new IdempotencyItemAlreadyExistsError(
          `Failed to put record for already existing idempotency key: ${record.idempotencyKey}`,
          existing,
        );
      }
    }
    this.#records.set(record.idempotencyKey, record);
  }

  async _getRecord(idempotencyKey) {
    const record = this.#records.get(idempotencyKey);
    if (record === undefined) throw new IdempotencyItemNotFoundError();
    return record;
  }

  async _updateRecord(record) {
    const existing = this.#records.get(record.idempotencyKey);
    // As the DynamoDB layer's UpdateItem: the in-progress expiry stays.
    if (existing !== undefined && record.inProgressExpiryTimestamp === undefined) {
      record.inProgressExpiryTimestamp = existing.inProgressExpiryTimestamp;
    }
    this.#records.set(record.idempotencyKey, record);
  }

  async _deleteRecord(record) {
    this.#records.delete(record.idempotencyKey);
  }
}

const KEY = 'powertools_json(body).order_id';
const RESPONSE_BODY = '{"payment_id":"pay_123","status":"created"}';

// The bare handler: what the function does without idempotency.
const bare = async (_event, _context) => ({
  statusCode: 201,
  headers: { 'Content-Type': 'application/json' },
  body: RESPONSE_BODY,
});

let init; // the init command
let client; // one DynamoDB client for the process, as in a Lambda execution environment
let phase; // the prepared phase

// lambdaContext is the part of a Lambda context Powertools reads: the time
// left, for the in-progress expiry.
function lambdaContext(deadline) {
  return {
    functionName: 'compare',
    awsRequestId: 'c6af9ac6-7b61-11e6-9a41-93e8deadbeef',
    getRemainingTimeInMillis: () => deadline - Date.now(),
  };
}

// CHUNK is how many events the driver decodes at a time, outside the
// measurements, as the Go driver does (see chunk in ../driver.go): a Lambda
// function holds one event at a time, not a whole phase's.
const CHUNK = 64;

function decode(orderID, from, count) {
  const out = new Array(count);
  for (let j = 0; j < count; j++) out[j] = JSON.parse(init.event.replace('ORDER_ID', orderID(from + j)));
  return out;
}

function persistence(store) {
  switch (store) {
    case 'memory':
      return { layer: new MemoryPersistenceLayer(), cache: false };
    case 'dynamodb':
      return { layer: new DynamoDBPersistenceLayer({ tableName: init.table, awsSdkV3Client: client }), cache: false };
    case 'cached':
      return { layer: new DynamoDBPersistenceLayer({ tableName: init.table, awsSdkV3Client: client }), cache: true };
  }
  throw new Error(`unknown store ${store}`);
}

async function prepare(cmd) {
  const { layer, cache } = persistence(cmd.store);
  const config = new IdempotencyConfig({ eventKeyJmesPath: KEY, useLocalCache: cache });
  const wrapped = makeIdempotent(bare, { persistenceStore: layer, config, keyPrefix: 'orders' });
  const context = lambdaContext(Date.now() + 15 * 60 * 1000);
  let latencyID, cpuID;
  if (cmd.path === 'first') {
    latencyID = (i) => `${cmd.tag}-lat-${i}`;
    cpuID = (i) => `${cmd.tag}-cpu-${i}`;
  } else {
    latencyID = () => `${cmd.tag}-replay`;
    cpuID = latencyID;
  }
  if (cmd.path === 'replay') {
    await wrapped(decode(latencyID, 0, 1)[0], context); // the first call, which the replays repeat
  }
  phase = { wrapped, context, latencyID, cpuID, n: cmd.n };
  // Start every phase from a collected heap, as the Go side does.
  globalThis.gc?.();
}

function cpuNanos() {
  const u = process.cpuUsage();
  return (u.user + u.system) * 1000;
}

async function run() {
  const { wrapped, context, latencyID, cpuID, n } = phase;
  phase = undefined;
  const bareNs = new Array(n);
  const wrappedNs = new Array(n);
  for (let from = 0; from < n; from += CHUNK) {
    const batch = decode(latencyID, from, Math.min(CHUNK, n - from));
    for (let j = 0; j < batch.length; j++) {
      const ev = batch[j];
      const t0 = hrtime.bigint();
      await bare(ev, context);
      const t1 = hrtime.bigint();
      const out = await wrapped(ev, context);
      const t2 = hrtime.bigint();
      if (out.statusCode !== 201) throw new Error(`unexpected response ${JSON.stringify(out)}`);
      bareNs[from + j] = Number(t1 - t0);
      wrappedNs[from + j] = Number(t2 - t1);
    }
  }
  // The CPU loops read the clocks around each chunk of calls only, not
  // around the decoding of the next chunk.
  const timed = async (fn) => {
    let cpu = 0;
    let wall = 0;
    for (let from = 0; from < n; from += CHUNK) {
      const batch = decode(cpuID, from, Math.min(CHUNK, n - from));
      const c0 = cpuNanos();
      const w0 = hrtime.bigint();
      for (let j = 0; j < batch.length; j++) await fn(batch[j], context);
      cpu += cpuNanos() - c0;
      wall += Number(hrtime.bigint() - w0);
    }
    return [cpu, wall];
  };
  const [cpuBare, wallBare] = await timed(bare);
  const [cpuWrapped, wallWrapped] = await timed(wrapped);
  return {
    n,
    bare_ns: bareNs,
    wrapped_ns: wrappedNs,
    cpu_bare_ns: cpuBare,
    cpu_wrapped_ns: cpuWrapped,
    wall_bare_ns: wallBare,
    wall_wrapped_ns: wallWrapped,
  };
}

// call makes one call of a fresh handler that returns cmd.body, wrapped
// as the phases' are, with the order ID cmd.tag: the capacity phase.
async function call(cmd) {
  const { layer } = persistence(cmd.store);
  const config = new IdempotencyConfig({ eventKeyJmesPath: KEY });
  const handler = async () => ({ statusCode: 201, headers: { 'Content-Type': 'application/json' }, body: cmd.body });
  const wrapped = makeIdempotent(handler, { persistenceStore: layer, config, keyPrefix: 'orders' });
  const out = await wrapped(decode(() => cmd.tag, 0, 1)[0], lambdaContext(Date.now() + 15 * 60 * 1000));
  if (out.body !== cmd.body) throw new Error(`call ${cmd.tag}: got a body of ${out.body?.length} characters, want ${cmd.body.length}`);
}

async function handle(cmd) {
  switch (cmd.op) {
    case 'init': {
      init = cmd;
      client = new DynamoDBClient({
        endpoint: cmd.endpoint,
        region: cmd.region,
        credentials: { accessKeyId: 'compare', secretAccessKey: 'compare' },
      });
      const pkg = JSON.parse(readFileSync(new URL('./node_modules/@aws-lambda-powertools/idempotency/package.json', import.meta.url)));
      return { ok: true, runtime: `Node.js ${process.versions.node}`, library: `@aws-lambda-powertools/idempotency ${pkg.version}` };
    }
    case 'prepare':
      await prepare(cmd);
      return { ok: true };
    case 'run':
      return run();
    case 'call':
      await call(cmd);
      return { ok: true };
    case 'exit':
      process.exit(0);
  }
  throw new Error(`unknown op ${cmd.op}`);
}

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  let reply;
  try {
    reply = await handle(JSON.parse(line));
  } catch (err) {
    reply = { error: String(err?.stack ?? err) };
  }
  process.stdout.write(`${JSON.stringify(reply)}\n`);
}
process.exit(0);
