/**
 * Operating a scheduler: the dashboard, Prometheus metrics and a health
 * probe, mounted in a plain node:http server next to the application's own
 * routes.
 *
 *   ADMIN_TOKEN=secret PORT=3000 npx tsx examples/ops-server.ts
 *
 *   open http://127.0.0.1:3000/admin/?token=secret   # the dashboard (actions enabled)
 *   curl http://127.0.0.1:3000/metrics               # Prometheus text format
 *   curl http://127.0.0.1:3000/healthz               # 200 or 503, JSON
 *
 * The scheduler runs a few demo jobs (a digest, a flaky feed poll with
 * retries, a slow report with a timeout) so every figure moves. The
 * dashboard lets a request through only with the admin token, as a query
 * parameter once (then a cookie) or a bearer header; without ADMIN_TOKEN a
 * random one is printed at start. SIGINT/SIGTERM close everything and exit 0.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { dashboard } from '../src/dashboard.js';
import { Scheduler } from '../src/index.js';
import { health, metrics } from '../src/metrics.js';

const token = process.env.ADMIN_TOKEN ?? randomBytes(12).toString('hex');
const port = Number(process.env.PORT ?? 3000);

const scheduler = new Scheduler({ workers: 4, onError: () => {} });
let polls = 0;
scheduler
  .every(5)
  .seconds()
  .run(() => {}, { name: 'digest' });
scheduler
  .every(3)
  .seconds()
  .run(
    () => {
      if (++polls % 3 === 0) throw new Error('feed timed out');
    },
    { name: 'poll feeds', retry: { attempts: 2, delay: 500 } },
  );
scheduler
  .every(10)
  .seconds()
  .run(
    ({ signal }) =>
      new Promise((resolve) => {
        const timer = setTimeout(resolve, 1_500);
        signal.addEventListener('abort', () => clearTimeout(timer));
      }),
    { name: 'slow report', timeout: 1_000 },
  );

function isAdmin(request: http.IncomingMessage): boolean {
  const given =
    /(?:^|;\s*)admin=([^;]+)/.exec(request.headers.cookie ?? '')?.[1] ?? /^Bearer (.+)$/.exec(request.headers.authorization ?? '')?.[1];
  return given !== undefined && given.length === token.length && timingSafeEqual(Buffer.from(given), Buffer.from(token));
}

const counters = metrics(scheduler);
const probe = health(scheduler);
const admin = dashboard(scheduler, {
  basePath: '/admin',
  actions: true,
  title: 'ops-server example',
  authorize: (request) => 'socket' in request && isAdmin(request),
});

const server = http.createServer((request, response) => {
  const url = new URL(request.url ?? '/', 'http://localhost');
  // `?token=` once sets the cookie the dashboard's requests then carry.
  if (url.pathname.startsWith('/admin') && url.searchParams.get('token') === token) {
    response.writeHead(303, { 'set-cookie': `admin=${token}; HttpOnly; SameSite=Strict; Path=/admin`, location: '/admin/' }).end();
    return;
  }
  if (url.pathname === '/metrics') return counters.handler(request, response);
  if (url.pathname === '/healthz') return probe.handler(request, response);
  admin.handle(request, response, () => {
    response.writeHead(404, { 'content-type': 'text/plain' }).end('Not found');
  });
});

server.listen(port, '127.0.0.1', () => {
  const { port: actual } = server.address() as AddressInfo;
  console.log(`ops-server listening on http://127.0.0.1:${actual}`);
  console.log(`dashboard: http://127.0.0.1:${actual}/admin/?token=${token}`);
});

async function shutdown(): Promise<void> {
  server.close();
  counters.close();
  probe.close();
  await scheduler.close({ abort: true });
  process.exit(0);
}
process.once('SIGINT', () => void shutdown());
process.once('SIGTERM', () => void shutdown());
