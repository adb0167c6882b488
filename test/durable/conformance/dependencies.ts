// Issue 28 on any store: flows (tasks that depend on tasks) through the
// Scheduler. Chains and batches run in dependency order, once, seeing their
// dependencies' results; the failure rules ('fail', 'continue', 'ignore');
// cancels cascade; retry() revives what a failure sank; a bad flow stores
// nothing; flows.get() says what each blocked task waits for; a dependent
// starts without polling (poll of an hour) once its last dependency ends.
import { describe, expect } from 'vitest';
import { FlowError, type DependencyInfo, type Scheduler } from '../../../src/index.js';
import { Gate } from '../handler-gates.js';
import { HOUR, itWhen, type Backend, type Env } from './backend.js';

const FINAL = new Set(['succeeded', 'failed', 'timed-out', 'cancelled']);

export function dependencyScenarios(backend: Backend, setup: () => Promise<Env>): void {
  const { caps } = backend;
  const it = itWhen(true, '');
  // In memory a flow depends only on tasks of flows (docs/flows.md): not on tasks added by schedule().
  const itStored = itWhen(caps.store, 'needs store: a flow depending on tasks added by schedule()');

  /**
   * A scheduler with 'step' (payload { id, fail?: attempts to fail, gate?: true }) recording starts and what it saw;
   * held at its gate, it stops (fails) when its signal aborts, as a handler should.
   */
  async function openSteps(workers = 4, retention?: { succeeded: number }) {
    const env = await setup();
    const { scheduler, errors } = env.open({ workers, store: env.db.store({ poll: HOUR }), ...(retention && { retention }) });
    const gate = new Gate();
    const starts: string[] = [];
    const seen = new Map<string, DependencyInfo[]>();
    const attempts = new Map<string, number>();
    scheduler.define('step', async (ctx, payload: { id: string; fail?: number; gate?: boolean }) => {
      const attempt = (attempts.get(payload.id) ?? 0) + 1;
      attempts.set(payload.id, attempt);
      starts.push(payload.id);
      seen.set(payload.id, await ctx.dependencies());
      if (payload.gate)
        await new Promise<void>((resolve, reject) => {
          void gate.wait(payload.id).then(resolve);
          ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason), { once: true });
        });
      if (attempt <= (payload.fail ?? 0)) throw new Error(`${payload.id} fails attempt ${attempt}`);
      return `${payload.id}!`;
    });
    await scheduler.start();
    /** The task once final: waitFor() where time is real; on a ManualClock the clock is driven until it is. */
    const finished = async (id: number) => {
      if (!env.time.exact) return scheduler.waitFor(id, { timeout: 60_000 });
      await env.time.until(async () => FINAL.has((await scheduler.getTask(id))?.state ?? ''), `task ${id} is final`);
      return (await scheduler.getTask(id))!;
    };
    return { ...env, scheduler, gate, starts, seen, errors, finished };
  }

  const state = async (scheduler: Scheduler, id: number) => (await scheduler.getTask(id))?.state;

  describe('flows: dependencies between tasks', () => {
    it('a chain runs in order, each step once, seeing the result of the one before', async () => {
      const { scheduler, starts, seen, time, finished } = await openSteps();
      const flow = await scheduler.flows.add({
        tasks: {
          a: { handler: 'step', payload: { id: 'a' } },
          b: { handler: 'step', payload: { id: 'b' }, after: ['a'] },
          c: { handler: 'step', payload: { id: 'c' }, after: ['b'] },
        },
      });
      expect([flow.tasks.a!.state, flow.tasks.b!.state, flow.tasks.c!.state]).toEqual(['waiting', 'blocked', 'blocked']);
      expect(flow.id).toBe(flow.tasks.a!.id);
      const done = await finished(flow.tasks.c!.id);
      expect(done.state).toBe('succeeded');
      expect(done.result).toBe('c!');
      await time.pass(50);
      expect(starts).toEqual(['a', 'b', 'c']);
      // In memory a flow's task is named by its name in the flow (its handler is a function).
      expect(seen.get('c')).toEqual([
        { id: flow.tasks.b!.id, name: caps.handlerNames ? 'step' : 'b', state: 'succeeded', result: 'b!', error: null, onFailure: 'fail' },
      ]);
      expect(seen.get('a')).toEqual([]);
    });

    it('a batch: the final task runs once, after all of its tasks, and sees their results in the order given', async () => {
      const { scheduler, starts, seen, gate, time, finished } = await openSteps();
      const tasks: Record<string, { handler: string; payload: object; after?: string[] }> = {};
      for (let i = 0; i < 6; i++) tasks[`p${i}`] = { handler: 'step', payload: { id: `p${i}`, gate: true } };
      tasks.album = { handler: 'step', payload: { id: 'album' }, after: Object.keys(tasks).reverse() };
      const flow = await scheduler.flows.add({ tasks });
      for (let i = 0; i < 5; i++) gate.open(`p${i}`);
      await time.until(() => starts.filter((s) => s.startsWith('p')).length === 6, 'every photo starts');
      await time.until(async () => (await scheduler.flows.get(flow.id))!.counts.succeeded === 5, 'five photos are stored done');
      await time.pass(100);
      expect(starts).not.toContain('album');
      const status = (await scheduler.flows.get(flow.id))!;
      expect(status.counts).toMatchObject({ blocked: 1, running: 1, succeeded: 5 });
      expect(status.tasks.at(-1)!.waitingFor).toEqual([flow.tasks.p5!.id]);
      gate.open('p5');
      await finished(flow.tasks.album!.id);
      await time.pass(50);
      expect(starts.filter((s) => s === 'album')).toEqual(['album']);
      expect(seen.get('album')!.map((dep) => dep.result)).toEqual(['p5!', 'p4!', 'p3!', 'p2!', 'p1!', 'p0!']);
      const after = (await scheduler.flows.get(flow.id))!;
      expect(after.done).toBe(true);
      expect(after.counts.succeeded).toBe(7);
    });

    it("'fail' (the default): a failed dependency fails its dependents and theirs, which never run; waitFor() says why", async () => {
      const { scheduler, starts, time, finished } = await openSteps();
      const flow = await scheduler.flows.add({
        tasks: {
          a: { handler: 'step', payload: { id: 'a', fail: 1 } },
          b: { handler: 'step', payload: { id: 'b' }, after: ['a'] },
          c: { handler: 'step', payload: { id: 'c' }, after: ['b'] },
          side: { handler: 'step', payload: { id: 'side' } },
        },
      });
      const c = await finished(flow.tasks.c!.id);
      expect(c.state).toBe('failed');
      expect(c.lastError).toBe(`DependencyError: dependency ${flow.tasks.a!.id} failed`);
      expect(await state(scheduler, flow.tasks.b!.id)).toBe('failed');
      await time.until(async () => (await state(scheduler, flow.tasks.side!.id)) === 'succeeded', 'the independent task runs');
      expect(starts.sort()).toEqual(['a', 'side']);
    });

    it("'continue' runs the dependent and shows it the failure; 'ignore' runs it and leaves the failure out", async () => {
      const { scheduler, seen, finished } = await openSteps();
      const flow = await scheduler.flows.add({
        tasks: {
          bad: { handler: 'step', payload: { id: 'bad', fail: 1 } },
          good: { handler: 'step', payload: { id: 'good' } },
          cont: { handler: 'step', payload: { id: 'cont' }, after: [{ task: 'bad', onFailure: 'continue' }, 'good'] },
          ign: { handler: 'step', payload: { id: 'ign' }, after: [{ task: 'bad', onFailure: 'ignore' }, 'good'] },
        },
      });
      expect((await finished(flow.tasks.cont!.id)).state).toBe('succeeded');
      expect((await finished(flow.tasks.ign!.id)).state).toBe('succeeded');
      const cont = seen.get('cont')!;
      expect(cont.map((dep) => [dep.state, dep.onFailure])).toEqual([
        ['failed', 'continue'],
        ['succeeded', 'fail'],
      ]);
      expect(cont[0]!.error).toMatch(/bad fails attempt 1/);
      expect(seen.get('ign')!.map((dep) => dep.result)).toEqual(['good!']);
    });

    it('cancelling a task cancels what depends on it by the default rule; a continue dependent still runs', async () => {
      const { scheduler, starts, gate, time, finished } = await openSteps();
      const flow = await scheduler.flows.add({
        tasks: {
          root: { handler: 'step', payload: { id: 'root', gate: true } },
          child: { handler: 'step', payload: { id: 'child' }, after: ['root'] },
          grandchild: { handler: 'step', payload: { id: 'grandchild' }, after: ['child'] },
          report: { handler: 'step', payload: { id: 'report' }, after: [{ task: 'child', onFailure: 'continue' }] },
        },
      });
      await time.until(() => starts.includes('root'), 'root starts');
      expect(await scheduler.cancelTask(flow.tasks.root!.id)).toBe(true);
      gate.open('root');
      const grandchild = await finished(flow.tasks.grandchild!.id);
      expect(grandchild.state).toBe('cancelled');
      expect(grandchild.lastError).toBe(`DependencyError: dependency ${flow.tasks.root!.id} was cancelled`);
      expect(await state(scheduler, flow.tasks.child!.id)).toBe('cancelled');
      expect((await finished(flow.tasks.report!.id)).state).toBe('succeeded');
      expect(starts).toEqual(['root', 'report']);
      // A blocked task can be cancelled too; its own dependents follow.
      const more = await scheduler.flows.add({
        tasks: {
          slow: { handler: 'step', payload: { id: 'slow', gate: true } },
          next: { handler: 'step', payload: { id: 'next' }, after: ['slow'] },
          last: { handler: 'step', payload: { id: 'last' }, after: ['next'] },
        },
      });
      expect(await scheduler.cancelTask(more.tasks.next!.id)).toBe(true);
      expect(await state(scheduler, more.tasks.last!.id)).toBe('cancelled');
      gate.open('slow');
      expect((await finished(more.tasks.slow!.id)).state).toBe('succeeded');
    });

    it('retry() of the failed task revives what it sank: the graph runs again to the end, each task once more at most', async () => {
      const { scheduler, starts, finished } = await openSteps();
      const flow = await scheduler.flows.add({
        tasks: {
          a: { handler: 'step', payload: { id: 'a', fail: 1 } },
          b: { handler: 'step', payload: { id: 'b' }, after: ['a'] },
          c: { handler: 'step', payload: { id: 'c' }, after: ['b'] },
        },
      });
      expect((await finished(flow.tasks.c!.id)).state).toBe('failed');
      const again = await scheduler.retryTask(flow.tasks.a!.id);
      expect(again.state).toBe('waiting');
      expect((await finished(flow.tasks.c!.id)).state).toBe('succeeded');
      expect(starts).toEqual(['a', 'a', 'b', 'c']);
      // retry() of a sunk task retries the failure that sank it.
      const second = await scheduler.flows.add({
        tasks: {
          x: { handler: 'step', payload: { id: 'x', fail: 1 } },
          y: { handler: 'step', payload: { id: 'y' }, after: ['x'] },
        },
      });
      expect((await finished(second.tasks.y!.id)).state).toBe('failed');
      expect((await scheduler.retryTask(second.tasks.y!.id)).state).toBe('blocked');
      expect((await finished(second.tasks.y!.id)).state).toBe('succeeded');
      expect(starts.slice(4)).toEqual(['x', 'x', 'y']);
    });

    it('a flow with a cycle, an unknown name, an unknown handler or a bad option is refused at the call; nothing is stored', async () => {
      const { scheduler } = await openSteps();
      const bad = [
        { tasks: { a: { handler: 'step', after: ['b'] }, b: { handler: 'step', after: ['a'] } } },
        { tasks: { a: { handler: 'step', after: ['nope'] } } },
        { tasks: { a: { handler: 'step' }, b: { handler: 'nope', after: ['a'] } } },
        { tasks: { a: { handler: 'step', timeout: -1 } } },
        { tasks: { a: { handler: 'step', key: 'k' } } },
        { tasks: { a: { handler: 'step', after: [{ task: 'a', onFailure: 'maybe' }] } } },
        { tasks: {} },
      ];
      for (const spec of bad) expect(() => scheduler.flows.add(spec as never), JSON.stringify(spec)).toThrow();
      expect(() => scheduler.flows.add(bad[0] as never)).toThrow(FlowError);
      expect(() => scheduler.flows.add(bad[0] as never)).toThrow(/cycle: a -> b -> a|cycle: b -> a -> b/);
      expect(() => scheduler.flows.add(bad[2] as never)).toThrow(
        caps.handlerNames ? /flow task "b": No handler named "nope"/ : /flow task "b": Expected `handler` to be a function/,
      );
      // An id that does not exist: refused (by a store in its transaction): nothing stored.
      await expect(async () => scheduler.flows.add({ tasks: { a: { handler: 'step', after: [987_654] } } })).rejects.toThrow(/987654/);
      expect(await scheduler.listTasks()).toEqual([]);
    });

    itStored('a flow may depend on stored tasks by id: one that succeeded counts, one still waiting is waited for', async () => {
      const { scheduler, seen, gate, time, finished } = await openSteps();
      const done = await scheduler.schedule(time.now(), 'step', { payload: { id: 'done' } });
      await finished(done.id);
      const slow = await scheduler.schedule(time.now(), 'step', { payload: { id: 'slow', gate: true } });
      const flow = await scheduler.flows.add({ tasks: { then: { handler: 'step', payload: { id: 'then' }, after: [done.id, slow.id] } } });
      expect(flow.tasks.then!.state).toBe('blocked');
      const status = (await scheduler.flows.get(flow.id))!;
      expect(status.tasks[0]!.waitingFor).toEqual([slow.id]);
      gate.open('slow');
      expect((await finished(flow.tasks.then!.id)).state).toBe('succeeded');
      expect(seen.get('then')!.map((dep) => dep.result)).toEqual(['done!', 'slow!']);
      // On a task that already failed, a 'fail' dependent is born failed.
      const failed = await scheduler.schedule(time.now(), 'step', { payload: { id: 'f', fail: 1 } });
      await finished(failed.id);
      const late = await scheduler.flows.add({ tasks: { z: { handler: 'step', payload: { id: 'z' }, after: [failed.id] } } });
      expect(late.tasks.z!.state).toBe('failed');
      expect(late.tasks.z!.lastError).toBe(`DependencyError: dependency ${failed.id} failed`);
    });

    itStored(
      'retention 0: a flow runs whole and in order, a stored task it depends on included (flows keep their tasks until the sweep)',
      async () => {
        const { scheduler, starts, seen, gate, time, finished } = await openSteps(4, { succeeded: 0 });
        const slow = await scheduler.schedule(time.now(), 'step', { payload: { id: 'slow', gate: true } });
        const flow = await scheduler.flows.add({
          tasks: {
            a: { handler: 'step', payload: { id: 'a' }, after: [slow.id] },
            b: { handler: 'step', payload: { id: 'b' }, after: ['a'] },
          },
        });
        gate.open('slow');
        expect((await finished(flow.tasks.b!.id)).state).toBe('succeeded');
        expect(starts).toEqual(['slow', 'a', 'b']);
        expect(seen.get('a')!.map((dep) => dep.result)).toEqual(['slow!']);
        expect(seen.get('b')!.map((dep) => dep.result)).toEqual(['a!']);
      },
    );

    itStored(
      'a finished task that flows depend on stays as it ended when its key is used again: the key names a new task, its dependents stay as they ended',
      async () => {
        const { scheduler, starts, gate, time, finished } = await openSteps();
        // A failed order: its 'fail' dependent failed with it ("never ships an unpaid order").
        const charge = await scheduler.schedule(time.now(), 'step', { key: 'charge:1', payload: { id: 'charge', fail: 1 } });
        await finished(charge.id);
        const failedFlow = await scheduler.flows.add({ tasks: { ship: { handler: 'step', payload: { id: 'ship' }, after: [charge.id] } } });
        expect(failedFlow.tasks.ship!.state).toBe('failed');
        // A cancelled one: its 'fail' dependent was cancelled with it.
        const hold = await scheduler.schedule(time.now() + HOUR, 'step', { key: 'hold:1', payload: { id: 'hold' } });
        const cancelledFlow = await scheduler.flows.add({
          tasks: { after: { handler: 'step', payload: { id: 'after' }, after: [hold.id] } },
        });
        await scheduler.cancelTask(hold.id);
        expect(await state(scheduler, cancelledFlow.tasks.after!.id)).toBe('cancelled');
        // A succeeded one, already counted by a dependent that still waits for another task.
        const first = await scheduler.schedule(time.now(), 'step', { key: 'first:1', payload: { id: 'first' } });
        await finished(first.id);
        const slow = await scheduler.schedule(time.now(), 'step', { payload: { id: 'slow', gate: true } });
        const countedFlow = await scheduler.flows.add({
          tasks: { both: { handler: 'step', payload: { id: 'both' }, after: [first.id, slow.id] } },
        });
        expect((await scheduler.flows.get(countedFlow.id))!.tasks[0]!.waitingFor).toEqual([slow.id]);

        const again = await Promise.all(
          ['charge:1', 'hold:1', 'first:1'].map((key) =>
            scheduler.schedule(time.now() + HOUR, 'step', { key, payload: { id: `again ${key}` } }),
          ),
        );
        expect(again.map((task) => task.enqueued)).toEqual(['inserted', 'inserted', 'inserted']);
        expect(again.map((task) => task.id)).not.toContain(charge.id);
        expect(again.map((task) => task.id)).not.toContain(hold.id);
        expect(again.map((task) => task.id)).not.toContain(first.id);
        // The finished tasks keep their outcome (and give up their key), their dependents theirs.
        expect(await Promise.all([charge.id, hold.id, first.id].map((id) => scheduler.getTask(id)))).toMatchObject([
          { state: 'failed', key: null },
          { state: 'cancelled', key: null },
          { state: 'succeeded', key: null },
        ]);
        expect(await state(scheduler, failedFlow.tasks.ship!.id)).toBe('failed');
        expect(await state(scheduler, cancelledFlow.tasks.after!.id)).toBe('cancelled');
        expect((await scheduler.flows.get(countedFlow.id))!.tasks[0]!.waitingFor).toEqual([slow.id]);
        gate.open('slow');
        expect((await finished(countedFlow.tasks.both!.id)).state).toBe('succeeded');
        await time.pass(50);
        expect(starts.filter((id) => id === 'ship' || id === 'after')).toEqual([]);
        expect((await scheduler.getTask(again[0]!.id))!.key).toBe('charge:1');
      },
    );

    itWhen(backend.caps.transactionsWithClient, 'needs transactionsWithClient')(
      "flows.add({ client }) writes the whole flow in the caller's transaction: rolled back, nothing",
      async () => {
        const { scheduler, db, starts, time, finished } = await openSteps();
        const client = await db.connect!();
        try {
          await client.query('BEGIN');
          await scheduler.flows.add({
            client,
            tasks: { a: { handler: 'step', payload: { id: 'a' } }, b: { handler: 'step', payload: { id: 'b' }, after: ['a'] } },
          });
          await client.query('ROLLBACK');
          await client.query('BEGIN');
          const flow = await scheduler.flows.add({
            client,
            tasks: { c: { handler: 'step', payload: { id: 'c' } }, d: { handler: 'step', payload: { id: 'd' }, after: ['c'] } },
          });
          await client.query('COMMIT');
          expect((await finished(flow.tasks.d!.id)).state).toBe('succeeded');
        } finally {
          client.release();
        }
        await time.pass(50);
        expect(starts).toEqual(['c', 'd']);
        expect((await scheduler.listTasks()).length).toBe(2);
      },
    );
  });
}
