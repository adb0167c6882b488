/**
 * A small HTTP API that schedules jobs on one taskheap Scheduler.
 *
 *   PORT=3000 WORKERS=4 npx tsx examples/http-server.ts
 *
 *   curl -X POST localhost:3000/jobs -d '{"type":"once","in":2000,"name":"tea","message":"tea is ready"}'
 *   curl -X POST localhost:3000/jobs -d '{"type":"once","at":"2030-01-01T09:00:00Z","message":"happy new year"}'
 *   curl -X POST localhost:3000/jobs -d '{"type":"cron","expression":"0,30 * * * * *","timezone":"Europe/Paris","message":"tick"}'
 *   curl -X POST localhost:3000/jobs -d '{"type":"every","ms":5000,"message":"poll"}'
 *   curl localhost:3000/jobs                 # id, name, type, state, nextRunAt, runs...
 *   curl -X POST localhost:3000/jobs/1/pause # and /resume
 *   curl -X DELETE localhost:3000/jobs/1
 *   curl localhost:3000/stats                # scheduler.stats()
 *   curl localhost:3000/log                  # what the jobs did
 *
 * A job's work is to append its message to an in-memory log after a short
 * async delay (WORK_MS, default 100 ms) that honours `ctx.signal`, so
 * cancelling a job mid-run aborts it. At most WORKERS runs go at once.
 *
 * Bad requests get 400 (404 for an unknown id or route) with
 * `{ "error": "..." }`, reusing the library's own validation messages; nothing
 * already scheduled is touched. SIGINT/SIGTERM stop accepting connections,
 * close the scheduler (running jobs finish) and exit 0.
 *
 * `createServer()` is exported for tests, which inject a ManualClock.
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import { ClosedError, QueueFullError, Scheduler } from '../src/index.js';
import type { Clock, Job, TaskContext } from '../src/index.js';

export interface ServerOptions {
  /** Runs allowed at once. @default 4 */
  workers?: number;
  /** Where time comes from; a ManualClock in tests. @default the system clock */
  clock?: Clock;
  /** Default zone of cron jobs. @default the system zone */
  timezone?: string;
  /** How long a job's simulated work takes, in ms. @default 100 */
  workMs?: number;
  /** Entries kept in the log (oldest dropped first). @default 1000 */
  logLimit?: number;
}

export interface LogEntry {
  /** When the work finished (ISO). */
  at: string;
  /** When the run was due (ISO). */
  scheduledAt: string;
  jobId: string;
  name: string;
  message: string;
}

export interface JobServer {
  server: http.Server;
  scheduler: Scheduler;
  log: LogEntry[];
  /** Starts listening; resolves with the actual port (pass 0 for any free port). */
  listen(port?: number, host?: string): Promise<number>;
  /** Stops accepting connections, closes the scheduler (running jobs finish). */
  close(): Promise<void>;
}

type JobType = 'once' | 'cron' | 'every';

interface Entry {
  id: string;
  name: string;
  type: JobType;
  message: string;
  job: Job;
  /** What the job was created from, echoed back in listings. */
  spec: Record<string, unknown>;
  /** once jobs: their due time, to re-create them on resume (see resume()). */
  at?: number;
}

/** A client mistake: 4xx with `{ error }`. */
class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

const MAX_BODY = 64 * 1024;
const KEYS: Record<JobType, readonly string[]> = {
  once: ['type', 'name', 'message', 'at', 'in'],
  cron: ['type', 'name', 'message', 'expression', 'timezone'],
  every: ['type', 'name', 'message', 'ms'],
};

/** Resolves after `ms` on `clock`, or rejects with the signal's reason. */
function sleep(clock: Clock, ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = () => {
      clock.clearTimer(timer);
      reject(signal.reason);
    };
    const timer = clock.setTimer(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function optionalString(body: Record<string, unknown>, key: string): string | undefined {
  const value = body[key];
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw new HttpError(400, `"${key}" must be a string, got ${JSON.stringify(value)}`);
  return value;
}

export function createServer(options: ServerOptions = {}): JobServer {
  const { workers = 4, clock, timezone, workMs = 100, logLimit = 1000 } = options;
  const scheduler = new Scheduler({
    workers,
    ...(clock === undefined ? {} : { clock }),
    ...(timezone === undefined ? {} : { timezone }),
    onError: (error, info) => console.error(`job ${info.name ?? `#${info.task?.id ?? '?'}`} failed:`, error),
  });
  const entries = new Map<string, Entry>();
  const log: LogEntry[] = [];
  let nextId = 1;

  const work =
    (entry: Entry) =>
    async (ctx: TaskContext): Promise<void> => {
      await sleep(scheduler.clock, workMs, ctx.signal);
      log.push({
        at: new Date(scheduler.clock.now()).toISOString(),
        scheduledAt: ctx.scheduledAt.toISOString(),
        jobId: entry.id,
        name: entry.name,
        message: entry.message,
      });
      if (log.length > logLimit) log.splice(0, log.length - logLimit);
    };

  function view(entry: Entry) {
    const { job } = entry;
    return {
      id: entry.id,
      name: entry.name,
      type: entry.type,
      state: job.state,
      running: job.running,
      nextRunAt: job.nextRunAt?.toISOString() ?? null,
      lastRunAt: job.lastRunAt?.toISOString() ?? null,
      runs: job.runs,
      failures: job.failures,
      message: entry.message,
      ...entry.spec,
    };
  }

  /** Validates a POST /jobs body and schedules it; throws HttpError or the library's TypeError/RangeError. */
  function create(body: unknown): Entry {
    if (!isPlainObject(body)) {
      throw new HttpError(400, 'Expected a JSON object such as {"type":"once","in":5000,"message":"hello"}');
    }
    const type = body.type;
    if (type === undefined) throw new HttpError(400, 'Missing "type": expected "once", "cron" or "every"');
    if (type !== 'once' && type !== 'cron' && type !== 'every') {
      throw new HttpError(400, `Unknown job type ${JSON.stringify(type)}: expected "once", "cron" or "every"`);
    }
    for (const key of Object.keys(body)) {
      if (!KEYS[type].includes(key)) {
        throw new HttpError(400, `Unknown field "${key}" for a ${type} job; expected: ${KEYS[type].join(', ')}`);
      }
    }
    const id = String(nextId);
    const name = optionalString(body, 'name') ?? `${type}-${id}`;
    const message = optionalString(body, 'message') ?? name;
    const entry = { id, name, type, message, spec: {} } as Entry;
    const runOptions = { name };

    if (type === 'once') {
      if ((body.at === undefined) === (body.in === undefined)) {
        throw new HttpError(400, 'A once job needs exactly one of "at" (an ISO date or epoch ms) and "in" (ms from now)');
      }
      let when: number;
      if (body.in !== undefined) {
        if (typeof body.in !== 'number' || !Number.isFinite(body.in) || body.in < 0) {
          throw new HttpError(400, `"in" must be a number of milliseconds >= 0, got ${JSON.stringify(body.in)}`);
        }
        when = scheduler.clock.now() + body.in;
        entry.spec = { in: body.in };
      } else {
        if (typeof body.at !== 'string' && typeof body.at !== 'number') {
          throw new HttpError(400, `"at" must be an ISO date string or epoch milliseconds, got ${JSON.stringify(body.at)}`);
        }
        // An unparsable string becomes an Invalid Date, which the library rejects with a clear RangeError.
        when = new Date(body.at).getTime();
        entry.spec = { at: body.at };
      }
      entry.job = field('at', () => scheduler.at(new Date(when)).run(work(entry), runOptions));
      entry.at = when;
    } else if (type === 'cron') {
      const { expression, timezone: zone } = body;
      if (expression === undefined) throw new HttpError(400, 'A cron job needs "expression", e.g. "*/5 * * * *"');
      if (zone !== undefined && typeof zone !== 'string')
        throw new HttpError(400, `"timezone" must be a string, got ${JSON.stringify(zone)}`);
      // The library names the bad field: 'Invalid cron expression "* * *": wrong number of fields (3)...'
      entry.job = scheduler.cron(expression as string, zone === undefined ? {} : { timezone: zone }).run(work(entry), runOptions);
      entry.spec = { expression, timezone: zone ?? scheduler.timezone };
    } else {
      // Without this check every(undefined) would mean every(1): once a millisecond.
      if (body.ms === undefined) throw new HttpError(400, 'An every job needs "ms", the interval in milliseconds');
      entry.job = field('ms', () =>
        scheduler
          .every(body.ms as number)
          .milliseconds()
          .run(work(entry), runOptions),
      );
      entry.spec = { ms: body.ms };
    }
    nextId++;
    entries.set(id, entry);
    return entry;
  }

  /** Runs `fn`, prefixing a validation error's message with the request field it came from. */
  function field<T>(name: string, fn: () => T): T {
    try {
      return fn();
    } catch (error) {
      if (error instanceof TypeError || error instanceof RangeError) throw new HttpError(400, `"${name}": ${error.message}`);
      throw error;
    }
  }

  function find(id: string): Entry {
    const entry = entries.get(id);
    if (entry === undefined) throw new HttpError(404, `No job with id "${id}"`);
    return entry;
  }

  function pause(entry: Entry): void {
    if (!entry.job.pause()) throw new HttpError(409, `Job "${entry.id}" cannot be paused: it is ${entry.job.state}`);
  }

  function resume(entry: Entry): void {
    const { job } = entry;
    if (job.state !== 'paused') throw new HttpError(409, `Job "${entry.id}" cannot be resumed: it is ${job.state}`);
    if (entry.type === 'once') {
      // Job.resume() plans "the next occurrence after now", and an at() rule
      // has none, so resuming a paused one-shot would end it without running.
      // Re-create it instead: at its original time, or now if that passed.
      job.cancel();
      entry.job = scheduler.at(new Date(Math.max(entry.at!, scheduler.clock.now()))).run(work(entry), { name: entry.name });
      return;
    }
    job.resume();
  }

  async function route(method: string, path: string, body: () => Promise<unknown>): Promise<[number, unknown]> {
    const parts = path.split('/').filter(Boolean);
    if (parts[0] === 'jobs') {
      if (parts.length === 1) {
        if (method === 'GET') return [200, [...entries.values()].map(view)];
        if (method === 'POST') return [201, view(create(await body()))];
        throw new HttpError(405, `${method} is not allowed on /jobs; use GET or POST`);
      }
      const entry = find(decodeURIComponent(parts[1]!));
      if (parts.length === 2) {
        if (method === 'GET') return [200, view(entry)];
        if (method === 'DELETE') {
          // Cancels the next occurrence and aborts ctx.signal of a run in progress.
          entry.job.cancel();
          entries.delete(entry.id);
          return [200, view(entry)];
        }
        throw new HttpError(405, `${method} is not allowed on /jobs/${entry.id}; use GET or DELETE`);
      }
      if (parts.length === 3 && (parts[2] === 'pause' || parts[2] === 'resume')) {
        if (method !== 'POST') throw new HttpError(405, `Use POST /jobs/${entry.id}/${parts[2]}`);
        if (parts[2] === 'pause') pause(entry);
        else resume(entry);
        return [200, view(entry)];
      }
    } else if (parts.length === 1 && (parts[0] === 'stats' || parts[0] === 'log') && method === 'GET') {
      return [200, parts[0] === 'stats' ? scheduler.stats() : log];
    } else if (parts.length === 0 && method === 'GET') {
      return [
        200,
        {
          routes: [
            'POST /jobs',
            'GET /jobs',
            'GET /jobs/:id',
            'DELETE /jobs/:id',
            'POST /jobs/:id/pause',
            'POST /jobs/:id/resume',
            'GET /stats',
            'GET /log',
          ],
        },
      ];
    }
    throw new HttpError(404, `Not found: ${method} ${path}`);
  }

  function readJson(req: http.IncomingMessage): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      let size = 0;
      req.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_BODY) {
          reject(new HttpError(413, `Request body too large (limit ${MAX_BODY} bytes)`));
          req.destroy();
        } else {
          chunks.push(chunk);
        }
      });
      req.on('error', reject);
      req.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        if (text.trim() === '') return reject(new HttpError(400, 'Missing request body: send a JSON object'));
        try {
          resolve(JSON.parse(text));
        } catch (error) {
          reject(new HttpError(400, `Invalid JSON: ${(error as Error).message}`));
        }
      });
    });
  }

  const server = http.createServer((req, res) => {
    const method = req.method ?? 'GET';
    const path = new URL(req.url ?? '/', 'http://localhost').pathname;
    route(method, path, () => readJson(req)).then(
      ([status, payload]) => send(res, status, payload),
      (error: unknown) => {
        if (error instanceof HttpError) return send(res, error.status, { error: error.message });
        // The library's validation errors (bad cron expression, bad zone...) are the client's mistake.
        if (error instanceof TypeError || error instanceof RangeError) return send(res, 400, { error: error.message });
        if (error instanceof QueueFullError || error instanceof ClosedError) return send(res, 503, { error: error.message });
        console.error(error);
        send(res, 500, { error: 'Internal error' });
      },
    );
  });

  function send(res: http.ServerResponse, status: number, payload: unknown): void {
    const text = JSON.stringify(payload);
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  }

  return {
    server,
    scheduler,
    log,
    listen(port = 0, host = '127.0.0.1') {
      return new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, () => {
          server.off('error', reject);
          resolve((server.address() as AddressInfo).port);
        });
      });
    },
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      await scheduler.close();
      await closed;
    },
  };
}

function envNumber(name: string, fallback: number): number {
  const text = process.env[name];
  if (text === undefined || text === '') return fallback;
  const value = Number(text);
  if (!Number.isFinite(value)) throw new RangeError(`${name} must be a number, got "${text}"`);
  return value;
}

async function main(): Promise<void> {
  const port = envNumber('PORT', 3000);
  const app = createServer({ workers: envNumber('WORKERS', 4), workMs: envNumber('WORK_MS', 100) });
  const actual = await app.listen(port, process.env.HOST ?? '127.0.0.1');
  console.log(`taskheap job server listening on http://${process.env.HOST ?? '127.0.0.1'}:${actual} (workers: ${app.scheduler.workers})`);
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    console.log(`${signal}: no new connections; waiting for running jobs to finish`);
    app.close().then(
      () => {
        console.log('bye');
        process.exit(0);
      },
      (error: unknown) => {
        console.error(error);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  });
}
