// A real pg.Pool that records every statement its connections send, by the
// name of the store's statement (statements()) or by its text: what a test
// counts when it asserts how much a scheduler asks of PostgreSQL. A statement
// named in `failing` fails once, unsent, as a query whose connection broke.
import pg from 'pg';
import { statements } from '../../../src/durable/postgres/store.js';

export function countedPool(url: string, schema: string, sent: string[], failing = new Set<string>()): pg.Pool {
  const names = new Map(Object.entries(statements(schema)).map(([key, text]) => [text as unknown, key]));
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  pool.on('error', () => {});
  pool.on('connect', (client) => {
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as { query: unknown }).query = (...args: unknown[]) => {
      const [first] = args;
      const text = typeof first === 'string' ? first : (first as { text?: unknown }).text;
      const named = names.get(text) ?? String(text);
      if (failing.delete(named)) {
        const error = new Error('Connection terminated unexpectedly');
        const callback = args.at(-1);
        // pg's pool.query() passes a callback; a client's own query() returns a promise.
        if (typeof callback !== 'function') return Promise.reject(error);
        setImmediate(() => (callback as (error: Error) => void)(error));
        return undefined;
      }
      sent.push(named);
      return query(...args);
    };
  });
  return pool;
}
