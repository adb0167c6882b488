// `dashboard()`: the request handler (node:http or fetch), its routes, the
// `authorize` and CSRF checks, and the actions it performs.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { TaskheapError } from '../core/errors.js';
import { describe as describeValue, keysOf } from '../core/validate.js';
import { schedulerClients, type DurableClient } from '../durable/client.js';
import type { Scheduler } from '../scheduler.js';
import { assertId } from '../scheduler-options.js';
import { page } from './page.js';
import { snapshot } from './state.js';
import { bulk, parseCursor, parseFilter, type ConsoleFilter } from './console.js';
import { BodyTooLargeError } from './errors.js';
import { jobRuns, linksView } from './detail.js';
import { memoryFlowTask, memoryTaskView } from './memory.js';
import { limitsView } from './limits.js';

/** Options of `dashboard()`. */
export interface DashboardOptions {
  /**
   * Called with every request (the `node:http` IncomingMessage, or the fetch
   * `Request`); it is let through only if this returns (or resolves to)
   * true. Required, so a dashboard is never open by accident: pass
   * `() => true` to open it on purpose (a trusted network, a local tool).
   * @example
   * authorize: (req) => req.headers.authorization === `Bearer ${process.env.ADMIN_TOKEN}`
   */
  authorize: (request: IncomingMessage | Request) => boolean | Promise<boolean>;
  /**
   * Lets the page pause, resume, trigger and cancel jobs and cancel tasks.
   * @default false (read-only)
   */
  actions?: boolean;
  /**
   * The path the dashboard is served under when the server hands it whole
   * URLs (plain `node:http`, Hono). Under Express's `app.use('/admin', ...)`
   * leave it out: Express strips the mount path itself.
   * @default ''
   */
  basePath?: string;
  /** @default 'taskheap' */
  title?: string;
  /**
   * Most waiting and stored tasks listed.
   * @default 100
   */
  limit?: number;
}

/** A request, whatever server it came from. */
interface Incoming {
  method: string;
  /** The path below the mount point, '' for the mount point itself. */
  path: string;
  /** The full path as the browser asked for it, to redirect to its slash-terminated form. */
  fullPath: string;
  /** The query string's parameters. */
  query: URLSearchParams;
  header(name: string): string | undefined;
  body(): Promise<string>;
  original: IncomingMessage | Request;
}

interface Outgoing {
  status: number;
  headers: Record<string, string>;
  body: string;
}

const OPTION_KEYS: ReadonlySet<string> = new Set(
  keysOf<DashboardOptions>({ authorize: true, actions: true, basePath: true, title: true, limit: true }),
);
const MAX_BODY = 4_096;
const JOB_ACTIONS = new Set(['pause', 'resume', 'trigger', 'cancel']);

const COMMON_HEADERS = {
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

function json(status: number, value: unknown): Outgoing {
  return { status, headers: { ...COMMON_HEADERS, 'content-type': 'application/json; charset=utf-8' }, body: JSON.stringify(value) };
}

/**
 * The dashboard: one page listing jobs, waiting tasks and stored tasks with
 * their state, next and last run, errors and lateness, refreshed every
 * second; actions only when enabled; every request through `authorize`.
 * Mount `handle` on `node:http` or Express, or `fetch` on Hono and other
 * fetch-style servers.
 */
export class Dashboard {
  readonly #scheduler: Scheduler;
  /** The scheduler's client of stored work (its store), or undefined without one: every stored read and action. */
  readonly #client: DurableClient | undefined;
  readonly #authorize: DashboardOptions['authorize'];
  readonly #actions: boolean;
  readonly #basePath: string;
  readonly #title: string;
  readonly #limit: number;
  /** Required on every action, in a header: a cross-site page can neither read it nor send the header. */
  readonly #csrf = randomBytes(32).toString('hex');

  /** @internal use `dashboard(scheduler, options)` */
  constructor(scheduler: Scheduler, options: DashboardOptions) {
    if (typeof options !== 'object' || options === null)
      throw new TypeError(`Expected dashboard options with an \`authorize\` function, got ${describeValue(options)}`);
    for (const key in options) {
      if (!OPTION_KEYS.has(key))
        throw new TypeError(`Unknown dashboard option \`${key}\`; expected one of: ${[...OPTION_KEYS].join(', ')}`);
    }
    const { authorize, actions = false, basePath = '', title = 'taskheap', limit = 100 } = options;
    if (typeof authorize !== 'function') {
      throw new TypeError(
        `Expected \`authorize\` to be a function (pass \`() => true\` for an open dashboard), got ${describeValue(authorize)}`,
      );
    }
    if (typeof actions !== 'boolean') throw new TypeError(`Expected \`actions\` to be a boolean, got ${describeValue(actions)}`);
    if (typeof basePath !== 'string' || (basePath !== '' && (!basePath.startsWith('/') || basePath.endsWith('/')))) {
      throw new TypeError(
        `Expected \`basePath\` to be '' or a path like '/admin/jobs' (no trailing slash), got ${describeValue(basePath)}`,
      );
    }
    if (typeof title !== 'string') throw new TypeError(`Expected \`title\` to be a string, got ${describeValue(title)}`);
    if (!Number.isInteger(limit) || limit < 1 || limit > 10_000)
      throw new RangeError(`Expected \`limit\` to be an integer from 1 to 10000, got ${describeValue(limit)}`);
    this.#scheduler = scheduler;
    this.#client = schedulerClients.get(scheduler);
    this.#authorize = authorize;
    this.#actions = actions;
    this.#basePath = basePath;
    this.#title = title;
    this.#limit = limit;
  }

  /**
   * For `node:http` and Express/Connect (`app.use('/admin', dash.handle)`);
   * a request outside the dashboard's paths goes to `next` when there is one.
   */
  handle = (request: IncomingMessage, response: ServerResponse, next?: (error?: unknown) => void): void => {
    const original = (request as IncomingMessage & { originalUrl?: string }).originalUrl;
    // A malformed target (`GET //[`) is the client's error: 400, never a throw out of the server's callback.
    const url = parseTarget(request.url ?? '/');
    const fullUrl = original === undefined ? url : parseTarget(original);
    if (url === undefined || fullUrl === undefined) {
      response.writeHead(400, { ...COMMON_HEADERS, 'content-type': 'text/plain; charset=utf-8' }).end('Bad request: malformed URL');
      return;
    }
    const path = this.#below(url.pathname);
    if (path === undefined) {
      if (next !== undefined) return next();
      response.writeHead(404, { ...COMMON_HEADERS, 'content-type': 'text/plain; charset=utf-8' }).end('Not found');
      return;
    }
    const incoming: Incoming = {
      method: request.method ?? 'GET',
      path,
      fullPath: fullUrl.pathname,
      query: url.searchParams,
      header: (name) => {
        const value = request.headers[name];
        return Array.isArray(value) ? value[0] : value;
      },
      body: () => parsedBody(request) ?? readBody(request),
      original: request,
    };
    this.#respond(incoming).then(
      (out) => {
        response.writeHead(out.status, out.headers).end(out.body);
        // A body refused unread: the rest of it is not read, so the connection cannot carry another request.
        if (out.status === 413) request.resume();
      },
      (error: unknown) => {
        if (next !== undefined) return next(error);
        response.writeHead(500, { ...COMMON_HEADERS, 'content-type': 'text/plain; charset=utf-8' }).end('Internal error');
      },
    );
  };

  /** For fetch-style servers: Hono (`app.all('/admin/*', (c) => dash.fetch(c.req.raw))`), Bun, Deno. */
  fetch = async (request: Request): Promise<Response> => {
    const url = new URL(request.url);
    const path = this.#below(url.pathname);
    if (path === undefined) return new Response('Not found', { status: 404, headers: COMMON_HEADERS });
    const out = await this.#respond({
      method: request.method,
      path,
      fullPath: url.pathname,
      query: url.searchParams,
      header: (name) => request.headers.get(name) ?? undefined,
      body: async () => {
        if (Number(request.headers.get('content-length') ?? 0) > MAX_BODY) throw new BodyTooLargeError();
        const text = await request.text();
        if (Buffer.byteLength(text) > MAX_BODY) throw new BodyTooLargeError();
        return text;
      },
      original: request,
    });
    return new Response(out.body, { status: out.status, headers: out.headers });
  };

  /** The path below basePath, or undefined when the request is not the dashboard's. */
  #below(pathname: string): string | undefined {
    if (this.#basePath === '') return pathname === '/' ? '' : pathname;
    if (pathname === this.#basePath) return '';
    if (pathname.startsWith(`${this.#basePath}/`))
      return pathname.slice(this.#basePath.length) === '/' ? '' : pathname.slice(this.#basePath.length);
    return undefined;
  }

  async #respond(request: Incoming): Promise<Outgoing> {
    let allowed = false;
    try {
      allowed = (await this.#authorize(request.original)) === true;
    } catch {
      allowed = false;
    }
    if (!allowed) return json(401, { error: 'Unauthorized' });
    if (request.path === '' && request.method === 'GET') {
      // The page loads its data with relative URLs: they need the trailing slash.
      if (!request.fullPath.endsWith('/'))
        return { status: 308, headers: { ...COMMON_HEADERS, location: `${request.fullPath}/` }, body: '' };
      // The first state comes with the page: its first render waits for no second request.
      // The counts (a scan of every stored task) are left to the page's first api/state request: the rows come first.
      return this.#page(await snapshot(this.#scheduler, this.#client, this.#limit, this.#actions, {}, undefined, false));
    }
    if (request.path === '/api/state' && request.method === 'GET') {
      const query = request.query;
      let filter: ConsoleFilter;
      let after: ReturnType<typeof parseCursor>;
      try {
        filter = parseFilter((key) => query.get(key) ?? undefined);
        after = parseCursor(query.get('after'));
      } catch (error) {
        return json(400, { error: (error as Error).message });
      }
      return json(200, await snapshot(this.#scheduler, this.#client, this.#limit, this.#actions, filter, after));
    }
    if (request.path === '/api/task' && request.method === 'GET') {
      const id = Number(request.query.get('id'));
      if (!Number.isSafeInteger(id) || id < 1) return json(400, { error: 'Expected `id` to be a task id' });
      // Without a store, the ids of `scheduler.flows`: an in-memory flow's task.
      const task = this.#client === undefined ? memoryFlowTask(this.#scheduler, id) : await this.#client.getTask(id);
      return task === undefined ? json(404, { error: this.#noTask(id) }) : json(200, task);
    }
    if (request.path === '/api/memory-task' && request.method === 'GET') {
      const id = Number(request.query.get('id'));
      if (!Number.isSafeInteger(id) || id < 1) return json(400, { error: 'Expected `id` to be a task id' });
      const task = memoryTaskView(this.#scheduler, id);
      return task === undefined
        ? json(404, { error: `No in-memory task #${id} waiting or running (a finished one is not kept)` })
        : json(200, task);
    }
    if (request.path === '/api/links' && request.method === 'GET') {
      const id = Number(request.query.get('id'));
      if (!Number.isSafeInteger(id) || id < 1) return json(400, { error: 'Expected `id` to be a task id' });
      const view = await refused(linksView(this.#scheduler, this.#client, id));
      if (view instanceof Error) return json(400, { error: view.message });
      if (view === undefined) return json(404, { error: this.#noTask(id) });
      return json(200, view === null ? { dependencies: [], dependencyCount: 0, dependents: [], dependentCount: 0, flow: null } : view);
    }
    if (request.path === '/api/limits' && request.method === 'GET') {
      const view = await refused(Promise.resolve().then(() => limitsView(this.#client, request.query.get('limit'))));
      return view instanceof Error ? json(400, { error: view.message }) : json(200, view);
    }
    if (request.path === '/api/job-runs' && request.method === 'GET') {
      const key = request.query.get('key');
      if (key === null || key === '') return json(400, { error: "Expected `key`, a stored job's key" });
      const runs = await refused(
        Promise.resolve().then(() => jobRuns(this.#stored('listTasks()'), key, request.query.get('after'), this.#limit)),
      );
      return runs instanceof Error ? json(400, { error: runs.message }) : json(200, runs);
    }
    if (request.path === '/api/action') {
      if (request.method !== 'POST') {
        const out = json(405, { error: 'Use POST' });
        out.headers.allow = 'POST';
        return out;
      }
      return this.#act(request);
    }
    return json(404, { error: 'Not found' });
  }

  #page(state: unknown): Outgoing {
    const nonce = randomBytes(16).toString('base64');
    return {
      status: 200,
      headers: {
        ...COMMON_HEADERS,
        'content-type': 'text/html; charset=utf-8',
        'x-frame-options': 'DENY',
        'content-security-policy': [
          "default-src 'none'",
          `script-src 'nonce-${nonce}'`,
          `style-src 'nonce-${nonce}'`,
          "connect-src 'self'",
          "base-uri 'none'",
          "form-action 'none'",
          "frame-ancestors 'none'",
        ].join('; '),
      },
      body: page(this.#title, nonce, this.#csrf, state),
    };
  }

  /** Runs an action: enabled, same origin, carrying the CSRF token, JSON. */
  async #act(request: Incoming): Promise<Outgoing> {
    if (!this.#actions) return json(403, { error: 'This dashboard is read-only (actions: false)' });
    if (!this.#sameOrigin(request) || !this.#tokenMatches(request.header('x-taskheap-csrf')))
      return json(403, { error: 'Forbidden: cross-site request' });
    if (!(request.header('content-type') ?? '').startsWith('application/json')) return json(415, { error: 'Expected application/json' });
    let text: string;
    try {
      text = await request.body();
    } catch (error) {
      if (error instanceof BodyTooLargeError) return tooLarge();
      return json(400, { error: 'Could not read the request body' });
    }
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      return json(400, { error: 'Expected a JSON body { kind, id, action }' });
    }
    if (typeof body !== 'object' || body === null || Array.isArray(body))
      return json(400, { error: `Expected a JSON object { kind, id, action }, got ${describeValue(body)}` });
    try {
      return await this.#run(body);
    } catch (error) {
      // A job or task that is gone, or a task not in a state the action fits: say so.
      if (error instanceof TaskheapError) return json(409, { error: error.message });
      // A value refused (a key too long, a stored call without a store): the request's fault.
      if (error instanceof TypeError || error instanceof RangeError) return json(400, { error: error.message });
      throw error;
    }
  }

  async #run(body: { kind?: unknown; id?: unknown; action?: unknown; key?: unknown; filter?: unknown }): Promise<Outgoing> {
    const { kind, id, action } = body;
    if (kind === 'bulk') {
      if (action !== 'retry' && action !== 'cancel' && action !== 'delete')
        return json(400, { error: `Unknown bulk action ${JSON.stringify(action)}` });
      const filter = body.filter ?? {};
      if (typeof filter !== 'object' || filter === null || Array.isArray(filter))
        return json(400, { error: 'Expected `filter` to be an object' });
      return json(200, {
        ok: true,
        ...(await bulk(
          this.#stored(action === 'delete' ? 'deleteTasks()' : 'listTasks()'),
          action,
          parseFilter((key) => (filter as Record<string, unknown>)[key]),
        )),
      });
    }
    if (kind === 'job') {
      if (typeof id !== 'number' || !Number.isSafeInteger(id)) return json(400, { error: 'Expected `id` to be an integer' });
      if (typeof action !== 'string' || !JOB_ACTIONS.has(action))
        return json(400, { error: `Unknown job action ${JSON.stringify(action)}` });
      const job = this.#scheduler.jobs().find((candidate) => candidate.id === id);
      if (job === undefined) return json(404, { error: `No job #${id}` });
      if (action === 'pause') job.pause();
      else if (action === 'resume') job.resume();
      else if (action === 'trigger') job.trigger();
      else job.cancel();
      return json(200, { ok: true });
    }
    if (kind === 'stored-job') {
      const key = (body as { key?: unknown }).key;
      if (typeof key !== 'string') return json(400, { error: 'Expected `key` to be a string' });
      if (action === 'pause') return json(200, { ok: await this.#stored('pauseJob()').setJobState(key, 'scheduled', 'paused') });
      if (action === 'resume') return json(200, { ok: await this.#stored('resumeJob()').setJobState(key, 'paused', 'scheduled') });
      if (action === 'trigger') return json(200, { ok: (await this.#stored('triggerJob()').triggerJob(key)) !== undefined });
      if (action === 'cancel') return json(200, { ok: await this.#stored('cancelJob()').cancelJob(key) });
      return json(400, { error: `Unknown job action ${JSON.stringify(action)}` });
    }
    if (typeof id !== 'number' || !Number.isSafeInteger(id)) return json(400, { error: 'Expected `id` to be an integer' });
    // Without a store, `stored` ids are an in-memory flow's tasks, which the scheduler's task verbs reach.
    if (kind === 'stored' && action === 'retry') {
      assertId(id);
      return json(200, { ok: (await (this.#client?.retry(id) ?? this.#scheduler.retryTask(id))) !== undefined });
    }
    if (action !== 'cancel') return json(400, { error: `Unknown task action ${JSON.stringify(action)}` });
    if (kind === 'task') {
      const task = this.#scheduler.waitingTasks().find((candidate) => candidate.id === id);
      if (task === undefined) return json(404, { error: `No waiting task #${id}` });
      task.cancel();
      return json(200, { ok: true });
    }
    if (kind === 'stored') return json(200, { ok: await (this.#client?.cancel(id) ?? this.#scheduler.cancelTask(id)) });
    return json(400, { error: `Unknown kind ${JSON.stringify(kind)}` });
  }

  /** The client of stored work; without a store, the TypeError the scheduler's `what` throws (the request's fault: 400). */
  #stored(what: string): DurableClient {
    if (this.#client === undefined) throw new TypeError(`${what} needs a scheduler created with a \`store\``);
    return this.#client;
  }

  /** The 404 of a task that is not there: a stored one, or without a store an in-memory flow's. */
  #noTask(id: number): string {
    if (this.#client !== undefined) return `No stored task #${id}`;
    return `No in-memory flow task #${id} (without a store, a flow's tasks are kept until 1,000 more flows have finished)`;
  }

  /** A browser says where a request comes from; anything but this very origin is refused. */
  #sameOrigin(request: Incoming): boolean {
    const site = request.header('sec-fetch-site');
    if (site !== undefined && site !== 'same-origin') return false;
    const origin = request.header('origin');
    if (origin === undefined) return true;
    try {
      return new URL(origin).host === request.header('host');
    } catch {
      return false;
    }
  }

  #tokenMatches(token: string | undefined): boolean {
    if (token === undefined || token.length !== this.#csrf.length) return false;
    return timingSafeEqual(Buffer.from(token), Buffer.from(this.#csrf));
  }
}

/** The value, or the TypeError or RangeError it was refused with (a bad value, no store): the request's fault. */
function refused<T>(promise: Promise<T>): Promise<T | TypeError | RangeError> {
  return promise.catch((error: unknown) => (error instanceof TypeError || error instanceof RangeError ? error : Promise.reject(error)));
}

/** A body a framework's middleware already read (Express's `express.json()`, say): the stream is spent. */
function parsedBody(request: IncomingMessage): Promise<string> | undefined {
  const body = (request as IncomingMessage & { body?: unknown }).body;
  if (body === undefined) return undefined;
  const text = typeof body === 'string' ? body : Buffer.isBuffer(body) ? body.toString('utf8') : JSON.stringify(body);
  return Buffer.byteLength(text) > MAX_BODY ? Promise.reject(new BodyTooLargeError()) : Promise.resolve(text);
}

function tooLarge(): Outgoing {
  const out = json(413, { error: `The request body is larger than ${MAX_BODY} bytes` });
  out.headers.connection = 'close';
  return out;
}

/** `request.url` as a URL, or undefined when it is not one (`//[`). */
function parseTarget(target: string): URL | undefined {
  try {
    return new URL(target, 'http://localhost');
  } catch {
    return undefined;
  }
}

/** Reads at most MAX_BODY bytes; a larger body (said by its length, or found while reading) is refused unread. */
function readBody(request: IncomingMessage): Promise<string> {
  if (Number(request.headers['content-length'] ?? 0) > MAX_BODY) return Promise.reject(new BodyTooLargeError());
  return new Promise((resolve, reject) => {
    let size = 0;
    const chunks: Buffer[] = [];
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY) return void chunks.push(chunk);
      // Stop keeping it; the response (413) closes the connection.
      request.off('data', onData);
      reject(new BodyTooLargeError());
    };
    request.on('data', onData);
    request.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    request.on('error', reject);
  });
}

/**
 * Creates the dashboard of `scheduler`.
 * @example
 * import { dashboard } from 'taskheap/dashboard';
 * const dash = dashboard(scheduler, { authorize: (req) => isAdmin(req), actions: true });
 * app.use('/admin/jobs', dash.handle);                       // Express
 * http.createServer(dashboard(scheduler, { authorize, basePath: '/jobs' }).handle); // node:http
 */
export function dashboard(scheduler: Scheduler, options: DashboardOptions): Dashboard {
  return new Dashboard(scheduler, options);
}
