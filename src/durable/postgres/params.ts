// Parameters of the batch statements: what the JavaScript side hands
// PostgreSQL as parallel arrays (a settle's outcomes, a claim's queue
// rooms) or as plain values (a filter's times), so that one statement
// carries a whole batch.
import type { Outcome, QueueRooms, TaskFilter } from '../store.js';

/** The claim's parameters $9 and $10: the queues this process limits, and the room it has for each. */
export function roomArrays(rooms: QueueRooms | undefined): [string[] | null, number[] | null] {
  if (rooms === undefined || rooms.size === 0) return [null, null];
  return [[...rooms.keys()], [...rooms.values()]];
}

/** A filter's time as epoch ms, or null. */
export function epoch(time: Date | number | undefined): number | null {
  return time === undefined ? null : typeof time === 'number' ? time : time.getTime();
}

/** A settle's outcomes as the statement's parallel arrays: id, kind, state, delay, error, result. */
export function outcomeArrays(
  outcomes: readonly Outcome[],
): [number[], string[], (string | null)[], (number | null)[], (string | null)[], (string | null)[]] {
  const id: number[] = [];
  const kind: string[] = [];
  const state: (string | null)[] = [];
  const delay: (number | null)[] = [];
  const error: (string | null)[] = [];
  const result: (string | null)[] = [];
  for (const outcome of outcomes) {
    id.push(outcome.id);
    kind.push(outcome.kind);
    state.push(outcome.kind === 'complete' ? outcome.state : null);
    delay.push(outcome.kind === 'retry' ? outcome.delay : null);
    error.push(outcome.kind === 'release' ? null : outcome.error);
    result.push(outcome.kind === 'complete' ? (outcome.result ?? null) : null);
  }
  return [id, kind, state, delay, error, result];
}

/** listTasks's parameters $1 to $10. */
export function listParams(filter: TaskFilter): unknown[] {
  return [
    filter.state ?? null,
    filter.name ?? null,
    filter.jobKey ?? null,
    filter.limit ?? 100,
    filter.keyPrefix ?? null,
    epoch(filter.from),
    epoch(filter.to),
    epoch(filter.after?.runAt),
    filter.after?.id ?? null,
    filter.queue ?? null,
  ];
}
