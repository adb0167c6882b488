// Flows (issue 28) behind `scheduler.flows`: with a store, the durable flows
// of durable/flows.ts, which every process sharing the store sees (the
// graph's checks and the births in durable/flow-graph.ts). See docs/flows.md.
import { ClosedError } from './core/errors.js';
import type { TaskLoop } from './core/loop.js';
import { assertId } from './scheduler-options.js';
import type { FlowSpec } from './durable/flow-graph.js';
import type { StoredFlow, FlowStatus } from './durable/flows.js';
import type { DurableRunner } from './durable/runner.js';
import { MAX_LINKS, type TaskLinks } from './durable/links.js';
import type { LimitKey } from './durable/limit-list.js';
import { describe } from './core/validate.js';

/**
 * Flows: tasks that wait for other tasks (`scheduler.flows`). A flow is
 * stored whole in one transaction, or not at all; a task of it runs once
 * every task it depends on is done, and each dependency's failure rule
 * says what a failure does. See docs/flows.md.
 */
export class Flows {
  readonly #loop: TaskLoop;
  readonly #runner: DurableRunner | undefined;

  /** @internal */
  constructor(loop: TaskLoop, runner: DurableRunner | undefined) {
    this.#loop = loop;
    this.#runner = runner;
  }

  /**
   * With a store: checks the whole flow (handlers, options, names in
   * `after`, no cycle) and stores it in one transaction (the caller's with
   * `client`, PostgreSQL); a bad task rejects it all at the call and
   * nothing is stored. Resolves once committed, with the flow's id and its
   * stored tasks by name.
   * @example
   * const flow = await scheduler.flows.add({
   *   tasks: {
   *     render: { handler: 'render', payload: { report: 7 } },
   *     mail: { handler: 'mail', after: ['render'] },
   *   },
   * });
   * const mailed = await scheduler.waitFor(flow.tasks.mail.id);
   */
  add(spec: FlowSpec): Promise<StoredFlow> {
    const runner = this.#require('flows.add()');
    if (this.#loop.closed) throw new ClosedError();
    return runner.flow(spec);
  }

  /**
   * A flow by id (`flow.id`, its first task's id): its tasks, their counts
   * by state, and for each task what it still waits for; undefined if the
   * store has no task of that flow.
   * @example
   * const { counts, done, tasks } = (await scheduler.flows.get(flow.id))!;
   */
  get(id: number): Promise<FlowStatus | undefined> {
    const runner = this.#require('flows.get()');
    assertId(id);
    return runner.getFlow(id);
  }

  /**
   * A stored task's place in the flows: the flow it was added with
   * (`flowId`, for `get()`), the tasks it depends on and the tasks that
   * depend on it, each with its state now, the rule of the edge and whether
   * the dependent counted it done; `limit` of each at most, with their
   * counts in all. Undefined if there is no such task. Any stored task has
   * links: one added on its own has none, or the dependents that name it in
   * their `after`.
   * @param limit dependencies and dependents listed at most, 1 to 1,000. @default 100
   * @example
   * const links = await scheduler.flows.links(task.id);
   * for (const dep of links?.dependencies ?? []) console.log(dep.id, dep.name, dep.state, dep.onFailure);
   */
  links(id: number, limit = 100): Promise<TaskLinks | undefined> {
    const runner = this.#require('flows.links()');
    assertId(id);
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LINKS)
      throw new RangeError(`Expected \`limit\` to be an integer from 1 to ${MAX_LINKS}, got ${describe(limit)}`);
    return runner.getTaskLinks(id, limit);
  }

  /** @internal the dashboard's Limits panel: the stored limit keys with the most waiting tasks, or null without a store that lists them. */
  limitKeys(limit: number): Promise<LimitKey[] | null> {
    return this.#runner === undefined ? Promise.resolve(null) : this.#runner.getLimitKeys(limit);
  }

  #require(what: string): DurableRunner {
    if (this.#runner === undefined) throw new TypeError(`${what} needs a scheduler created with a \`store\``);
    return this.#runner;
  }
}
