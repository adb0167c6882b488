// The check of an in-memory flow at the call (`scheduler.flows.add()` without
// a store): the graph's shared checks (durable/flow-graph.ts) and each task's
// handler and options, synchronously, before any of the flow exists. Part of
// the root entry's code, so that a bad flow throws at the call; the graph
// that runs flows (memory-graph.ts) loads with the first flow.
import type { TaskLoop } from '../core/loop.js';
import { toSettings } from '../core/task-options.js';
import { describe, toEpoch } from '../core/validate.js';
import { assertFlowTaskKeys, toNewFlow, type FlowFunction, type FlowSpec } from '../durable/flow-graph.js';
import type { NewFlow } from '../durable/store.js';

/** A flow's task as checked, before it is a node. */
export interface CheckedTask {
  readonly name: string;
  readonly fn: FlowFunction;
  readonly payload: unknown;
  readonly runAt: number;
  readonly options: object;
}

/** A flow as checked at the call, with the scheduler's time of the call. */
export interface CheckedFlow {
  readonly flow: NewFlow<CheckedTask>;
  readonly now: number;
}

/** Checks a whole in-memory flow; throws at the first thing wrong, naming it. */
export function checkMemoryFlow(spec: FlowSpec, loop: TaskLoop): CheckedFlow {
  const now = loop.clock.now();
  if (spec !== null && typeof spec === 'object' && spec.client !== undefined)
    throw new TypeError(
      `Expected no \`client\`: a flow in memory has no transaction (client is for PostgreSQL), got ${describe(spec.client)}`,
    );
  const flow = toNewFlow(spec, (name, task): CheckedTask => {
    assertFlowTaskKeys(task);
    if (typeof task.handler !== 'function')
      throw new TypeError(
        `Expected \`handler\` to be a function (handler names need a scheduler created with a \`store\`), got ${describe(task.handler)}`,
      );
    const { handler, when, after: _after, payload, ...options } = task;
    const runAt = when === undefined ? now : toEpoch(when);
    toSettings({ ...options, name }, loop.defaults); // its options, checked now
    return { name, fn: handler, payload, runAt, options };
  });
  return { flow, now };
}
