// The dashboard's console over stored tasks: the filter a request names (a
// query string, or an action's JSON), one page of tasks with the counts per
// state under that filter (both read from the store), one task in detail,
// and the bulk actions on a filter (retry failed, cancel waiting, delete
// finished).
import { TASK_STATES, type StoredState, type StoredTask, type TaskFilter } from '../durable/store.js';
import type { DurableClient } from '../durable/client.js';
import type { DurableQueueInfo } from '../durable/queues.js';

/** The filter of the stored-task list, as the page sends it. */
export interface ConsoleFilter {
  state?: StoredState;
  name?: string;
  queue?: string;
  keyPrefix?: string;
  /** Due at or after, epoch ms. */
  from?: number;
  /** Due before, epoch ms. */
  to?: number;
}

const STATES: ReadonlySet<string> = new Set(TASK_STATES);
const TEXT_KEYS = ['name', 'queue', 'keyPrefix'] as const;
/** Tasks one bulk action touches at most (the page says when there were more). */
const BULK_LIMIT = 10_000;
/** Rows read per page while a bulk action walks the tasks. */
const BULK_PAGE = 500;

/** A filter from string fields (a query string, or an action's `filter` object); throws a TypeError naming a bad one. */
export function parseFilter(get: (key: string) => unknown): ConsoleFilter {
  const filter: ConsoleFilter = {};
  const state = get('state');
  if (state !== undefined && state !== null && state !== '') {
    if (typeof state !== 'string' || !STATES.has(state)) throw new TypeError(`Unknown state ${JSON.stringify(state)}`);
    filter.state = state as StoredState;
  }
  for (const key of TEXT_KEYS) {
    const value = get(key);
    if (value === undefined || value === null || value === '') continue;
    if (typeof value !== 'string' || value.length > 1_000)
      throw new TypeError(`Expected \`${key}\` to be a string of at most 1,000 characters`);
    filter[key] = value;
  }
  for (const key of ['from', 'to'] as const) {
    const value = get(key);
    if (value === undefined || value === null || value === '') continue;
    const ms = Number(value);
    if (!Number.isSafeInteger(ms)) throw new TypeError(`Expected \`${key}\` to be epoch milliseconds, got ${JSON.stringify(value)}`);
    filter[key] = ms;
  }
  return filter;
}

/** `runAt:id` (the last row of the previous page), or undefined. */
export function parseCursor(value: string | null): TaskFilter['after'] {
  if (value === null || value === '') return undefined;
  const match = /^(-?\d{1,16}):(\d{1,16})$/.exec(value);
  if (match === null) throw new TypeError(`Expected \`after\` to be <runAt>:<id>, got ${JSON.stringify(value)}`);
  return { runAt: Number(match[1]), id: Number(match[2]) };
}

/** A page of stored tasks under `filter`, the counts per state (all states, the state filter aside; null without `queues`), and the next cursor. @internal */
export async function storedPage(
  client: DurableClient,
  filter: ConsoleFilter,
  after: TaskFilter['after'],
  limit: number,
  queues: Promise<DurableQueueInfo[]> | undefined,
) {
  const { state, ...selection } = filter;
  const [tasks, counts] = await Promise.all([
    client.listTasks({ ...filter, limit, ...(after === undefined ? {} : { after }) }),
    // Without `queues`, no count (the page's first state: the rows first, the counts from its next request).
    queues === undefined
      ? null
      : // Filtered by nothing but a queue, the counts are the queues' (read anyway for the page): no second scan.
        Object.keys(selection).every((key) => key === 'queue')
        ? queues.then((list) => queueCounts(list, selection.queue))
        : client.countTasks(selection),
  ]);
  const last = tasks.at(-1);
  return { tasks, counts, next: tasks.length === limit && last !== undefined ? `${last.runAt.getTime()}:${last.id}` : null, state };
}

/** Tasks by state in one queue, or in all of them. */
function queueCounts(queues: readonly DurableQueueInfo[], name: string | undefined): Record<StoredState, number> {
  const counts: Record<StoredState, number> = { blocked: 0, waiting: 0, running: 0, succeeded: 0, failed: 0, 'timed-out': 0, cancelled: 0 };
  for (const queue of queues) {
    if (name !== undefined && queue.name !== name) continue;
    for (const state of Object.keys(counts) as StoredState[]) counts[state] += queue.counts[state] ?? 0;
  }
  return counts;
}

/** What a bulk action did: how many tasks it changed, and whether it stopped at BULK_LIMIT. */
export interface BulkResult {
  count: number;
  more: boolean;
}

/**
 * A bulk action on the tasks under `filter`: `retry` the failed and timed-out
 * ones (or those of the filter's final state), `cancel` the waiting and
 * running ones, `delete` the finished ones (one statement in the store).
 * @internal
 */
export async function bulk(client: DurableClient, action: 'retry' | 'cancel' | 'delete', filter: ConsoleFilter): Promise<BulkResult> {
  if (action === 'delete') {
    if (filter.state === 'waiting' || filter.state === 'running')
      throw new RangeError('Only finished tasks can be deleted: cancel waiting and running ones first');
    const count = await client.deleteTasks({ ...filter, limit: BULK_LIMIT });
    return { count, more: count === BULK_LIMIT };
  }
  const states: StoredState[] =
    action === 'retry'
      ? filter.state === undefined
        ? ['failed', 'timed-out']
        : [filter.state]
      : filter.state === undefined
        ? ['blocked', 'waiting', 'running']
        : [filter.state];
  let count = 0;
  for (const state of states) {
    let after: TaskFilter['after'];
    for (;;) {
      const page: StoredTask[] = await client.listTasks({
        ...filter,
        state,
        limit: BULK_PAGE,
        ...(after === undefined ? {} : { after }),
      });
      for (const task of page) {
        if (count >= BULK_LIMIT) return { count, more: true };
        if (action === 'retry') {
          // Only what is finished and not succeeded is retried; a task that moved meanwhile is left alone.
          if (task.state === 'succeeded') continue;
          if (
            await client.retry(task.id).then(
              () => true,
              () => false,
            )
          )
            count++;
        } else if (await client.cancel(task.id)) count++;
      }
      if (page.length < BULK_PAGE) break;
      const last = page.at(-1)!;
      after = { runAt: last.runAt, id: last.id };
    }
  }
  return { count, more: false };
}
