// In-memory flows (issue 28): scheduler.flows without a store, on function
// tasks and a ManualClock. What the model test (durable/dependencies.property)
// does not reach: results and payloads flowing forward, the rules as a
// handler sees them, times, retry policies and timeouts of dependencies,
// atomic creation, waitFor, close, and finished flows let go of.
import { describe, expect, it } from 'vitest';
import { CancelledError, FlowError, TaskheapError, type FlowContext, type FlowTask } from '../../src/index.js';
import { gate, setup, START } from '../helpers.js';

describe('in-memory flows', () => {
  it('a chain and a fan-in: each runs after its dependencies, sees their results in the order of its after, and its payload', async () => {
    const { clock, scheduler } = setup({ workers: 4 });
    const log: string[] = [];
    const flow = await scheduler.flows.add({
      tasks: {
        post: {
          handler: async (ctx, { album }: { album: string }) => {
            log.push(`post ${ctx.id}`);
            const deps = await ctx.dependencies();
            return `${album}: ${deps.map((dep) => `${dep.name}=${String(dep.result)}`).join(', ')}`;
          },
          payload: { album: 'summer' },
          after: ['b', 'a'],
        },
        a: { handler: () => log.push('a') && 'a.jpg' },
        b: { handler: (_ctx, n: number) => log.push('b') && `b${n}.jpg`, payload: 2, after: ['a'] },
      },
    });
    expect(Object.fromEntries(Object.entries(flow.tasks).map(([name, task]) => [name, [task.id, task.state]]))).toEqual({
      post: [1, 'blocked'],
      a: [2, 'waiting'],
      b: [3, 'blocked'],
    });
    expect(flow.id).toBe(1);
    await clock.advance(0);
    const post = await scheduler.waitFor(flow.tasks.post.id);
    expect(post).toMatchObject({ state: 'succeeded', result: 'summer: b=b2.jpg, a=a.jpg', name: 'post', attempts: 1 });
    expect(log).toEqual(['a', 'b', 'post 1']);
    const status = (await scheduler.flows.get(flow.id))!;
    expect(status.done).toBe(true);
    expect(status.counts.succeeded).toBe(3);
    expect(status.tasks[0]!.dependencies).toEqual([
      { id: 3, onFailure: 'fail', state: 'succeeded', done: true },
      { id: 2, onFailure: 'fail', state: 'succeeded', done: true },
    ]);
    // links(): the same call as with a store, from either end of an edge.
    const links = (await scheduler.flows.links(flow.tasks.b.id))!;
    expect(links).toMatchObject({ id: 3, state: 'succeeded', flowId: 1, dependencyCount: 1, dependentCount: 1 });
    expect(links.dependencies.map((link) => [link.id, link.name, link.state])).toEqual([[2, 'a', 'succeeded']]);
    expect(links.dependents.map((link) => [link.id, link.name, link.onFailure])).toEqual([[1, 'post', 'fail']]);
    expect((await scheduler.flows.links(flow.tasks.post.id, 1))!.dependencies).toHaveLength(1);
    await expect(scheduler.flows.links(999)).resolves.toBeUndefined();
    expect(() => scheduler.flows.links(1, 0)).toThrow(RangeError);
  });

  it("the three rules: 'fail' sinks the dependent (and its own), 'continue' runs it with the failure, 'ignore' runs it without", async () => {
    const { clock, scheduler, errors } = setup();
    const seen: Record<string, unknown> = {};
    const see = (name: string) => async (ctx: FlowContext) => {
      seen[name] = (await ctx.dependencies()).map((dep) => [dep.name, dep.state, dep.error?.split('\n')[0] ?? null]);
    };
    const flow = await scheduler.flows.add({
      tasks: {
        charge: {
          handler: () => {
            throw new Error('card declined');
          },
        },
        ship: { handler: see('ship'), after: ['charge'] },
        notify: { handler: see('notify'), after: ['ship'] },
        report: { handler: see('report'), after: [{ task: 'charge', onFailure: 'continue' }] },
        cleanup: { handler: see('cleanup'), after: [{ task: 'charge', onFailure: 'ignore' }] },
      },
    });
    await clock.advance(0);
    const [ship, notify, report, cleanup] = await Promise.all(
      ['ship', 'notify', 'report', 'cleanup'].map((name) => scheduler.waitFor(flow.tasks[name]!.id)),
    );
    expect(ship).toMatchObject({ state: 'failed', lastError: 'DependencyError: dependency 1 failed', attempts: 0 });
    expect(notify).toMatchObject({ state: 'failed', lastError: 'DependencyError: dependency 1 failed' });
    expect(report!.state).toBe('succeeded');
    expect(cleanup!.state).toBe('succeeded');
    expect(seen).toEqual({ report: [['charge', 'failed', 'Error: card declined']], cleanup: [] });
    expect(errors).toHaveLength(1); // onError hears of the task that ran and failed, not of those it sank
  });

  it('cancelling a task cancels what depends on it by the fail rule; continue dependents run; a running task is cancelled through its signal', async () => {
    const { clock, scheduler } = setup();
    const hold = gate();
    let aborted: unknown;
    const flow = await scheduler.flows.add({
      tasks: {
        long: {
          handler: (ctx) => {
            ctx.signal.addEventListener('abort', () => {
              aborted = ctx.signal.reason;
              hold.fail(ctx.signal.reason);
            });
            return hold.promise;
          },
        },
        blockedOne: { handler: () => 'never', after: ['long'] },
        after: { handler: () => 'ran', after: [{ task: 'blockedOne', onFailure: 'continue' }] },
      },
    });
    await clock.advance(0);
    expect((await scheduler.flows.get(flow.id))!.counts).toMatchObject({ running: 1, blocked: 2 });
    expect(await scheduler.cancelTask(flow.tasks.blockedOne!.id)).toBe(true);
    expect(await scheduler.cancelTask(flow.tasks.blockedOne!.id)).toBe(false);
    expect((await scheduler.waitFor(flow.tasks.after!.id)).state).toBe('succeeded');
    expect(await scheduler.cancelTask(flow.tasks.long!.id)).toBe(true);
    await clock.advance(0);
    expect(aborted).toBeInstanceOf(CancelledError);
    expect((await scheduler.waitFor(flow.tasks.long!.id)).state).toBe('cancelled');
    // A chain under a cancelled task: every 'fail' dependent ends cancelled, naming it.
    const chain = await scheduler.flows.add({
      tasks: {
        a: { handler: () => 1, when: START + 60_000 },
        b: { handler: () => 2, after: ['a'] },
        c: { handler: () => 3, after: ['b'] },
      },
    });
    expect(await scheduler.cancelTask(chain.tasks.a!.id)).toBe(true);
    expect(await scheduler.waitFor(chain.tasks.c!.id)).toMatchObject({
      state: 'cancelled',
      lastError: `DependencyError: dependency ${chain.tasks.a!.id} was cancelled`,
    });
  });

  it('retry(id) of a failed dependency revives the tasks it sank; retry of a sunk task retries the failure above it', async () => {
    const { clock, scheduler } = setup();
    let fail = true;
    const runs: string[] = [];
    const flow = await scheduler.flows.add({
      tasks: {
        fetch: {
          handler: () => {
            runs.push('fetch');
            if (fail) throw new Error('down');
            return 'data';
          },
        },
        parse: { handler: async (ctx) => runs.push('parse') && (await ctx.dependencies())[0]!.result, after: ['fetch'] },
        store: { handler: () => runs.push('store'), after: ['parse'] },
      },
    });
    await clock.advance(0);
    expect((await scheduler.flows.get(flow.id))!.counts).toMatchObject({ failed: 3 });
    await expect(scheduler.retryTask(flow.tasks.parse!.id + 100)).rejects.toMatchObject({ code: 'ERR_TASK_NOT_FOUND' });
    fail = false;
    // parse was sunk by fetch: retrying it retries fetch.
    const retried = await scheduler.retryTask(flow.tasks.store!.id);
    expect(retried.state).toBe('blocked');
    await clock.advance(0);
    expect(await scheduler.waitFor(flow.tasks.store!.id)).toMatchObject({ state: 'succeeded', lastError: null });
    expect((await scheduler.waitFor(flow.tasks.parse!.id)).result).toBe('data');
    expect(runs).toEqual(['fetch', 'fetch', 'parse', 'store']);
    const error = await scheduler.retryTask(flow.tasks.store!.id).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TaskheapError);
    expect(error).toMatchObject({ code: 'ERR_TASK_NOT_FINISHED' });
  });

  it("a dependency's retry policy keeps its dependents blocked between attempts; a timeout sinks them as a failure", async () => {
    const { clock, scheduler } = setup();
    let attempts = 0;
    const flow = await scheduler.flows.add({
      tasks: {
        flaky: {
          handler: () => {
            if (++attempts < 3) throw new Error(`attempt ${attempts}`);
            return 'ok';
          },
          retry: { attempts: 3, delay: '1m', backoff: 'fixed' },
        },
        next: { handler: () => 'next', after: ['flaky'] },
        slow: { handler: () => new Promise(() => {}), timeout: '10s' },
        late: { handler: () => 'late', after: ['slow'] },
      },
    });
    await clock.advance(0);
    let status = (await scheduler.flows.get(flow.id))!;
    expect(status.tasks.map((t) => t.task.state)).toEqual(['waiting', 'blocked', 'running', 'blocked']);
    expect(status.tasks[1]!.waitingFor).toEqual([flow.tasks.flaky!.id]);
    await clock.advance('1m');
    status = (await scheduler.flows.get(flow.id))!;
    expect(status.tasks.map((t) => t.task.state)).toEqual(['waiting', 'blocked', 'timed-out', 'failed']);
    expect(status.tasks[0]!.task.errors.map((e) => e.error.split('\n')[0])).toEqual(['Error: attempt 1', 'Error: attempt 2']);
    await clock.advance('1m');
    expect(await scheduler.waitFor(flow.tasks.next!.id)).toMatchObject({ state: 'succeeded', result: 'next' });
    expect((await scheduler.flows.get(flow.id))!.tasks[0]!.task).toMatchObject({ state: 'succeeded', attempts: 3 });
  });

  it('a task waits for its `when` as well as its dependencies', async () => {
    const { clock, scheduler } = setup();
    const starts: Record<string, number> = {};
    const at = (name: string) => () => void (starts[name] = clock.now() - START);
    await scheduler.flows.add({
      tasks: { a: { handler: at('a'), when: START + 5_000 }, b: { handler: at('b'), when: START + 1_000, after: ['a'] } },
    });
    await clock.advance('10s');
    expect(starts).toEqual({ a: 5_000, b: 5_000 });
  });

  it('atomic creation: a bad task or a cycle throws at the call and adds nothing', async () => {
    const { clock, scheduler } = setup();
    const ran: string[] = [];
    const ok = (name: string) => () => void ran.push(name);
    const bad: [Record<string, FlowTask>, RegExp | (new (...args: never[]) => Error)][] = [
      [
        { a: { handler: ok('a') }, b: { handler: ok('b'), after: ['c'] } },
        /flow task "b": It depends on "c".*, which is not a task of this flow/,
      ],
      [{ a: { handler: ok('a'), after: ['b'] }, b: { handler: ok('b'), after: ['a'] } }, /The flow has a cycle: a -> b -> a/],
      [{ a: { handler: ok('a') }, b: { handler: ok('b'), timeout: -1 } }, /flow task "b".*timeout/],
      [
        { a: { handler: ok('a') }, b: { handler: 'named' } },
        /flow task "b": Expected `handler` to be a function \(handler names need a scheduler created with a `store`\), got "named"/,
      ],
      [{ a: { handler: ok('a'), key: 'k' } as FlowTask }, /no key, dedupe or client/],
      [{ a: { handler: ok('a'), after: [{ task: 'b', onFailure: 'maybe' as never }] }, b: { handler: ok('b') } }, /onFailure/],
      [{ a: { handler: ok('a'), after: [99] } }, /No stored task with id 99/],
    ];
    for (const [tasks, error] of bad) expect(() => scheduler.flows.add({ tasks }), JSON.stringify(Object.keys(tasks))).toThrow(error);
    expect(() => scheduler.flows.add({ tasks: { a: { handler: ok('a'), after: ['a'] } } })).toThrow(FlowError);
    expect(() => scheduler.flows.add({ tasks: { a: { handler: ok('a') } }, client: {} })).toThrow(/no `client`/);
    await clock.advance('1h');
    expect(ran).toEqual([]);
    expect(scheduler.size).toBe(0);
    expect(await scheduler.flows.get(1)).toBeUndefined();
    // Nothing was taken: the next flow's first task is task 1.
    expect((await scheduler.flows.add({ tasks: { a: { handler: ok('a') } } })).id).toBe(1);
    // With flows in the scheduler (their code loaded), a bad flow still throws at the call.
    for (const [tasks, error] of bad) expect(() => scheduler.flows.add({ tasks }), JSON.stringify(Object.keys(tasks))).toThrow(error);
    expect((await scheduler.flows.add({ tasks: { b: { handler: ok('b'), after: [1] } } })).id).toBe(2);
  });

  it('a task may depend on a task of an earlier flow by its id, done or not', async () => {
    const { clock, scheduler } = setup();
    const first = await scheduler.flows.add({ tasks: { a: { handler: () => 'a', when: START + 1_000 } } });
    const second = await scheduler.flows.add({
      tasks: { b: { handler: async (ctx) => (await ctx.dependencies()).map((d) => d.result), after: [first.tasks.a!.id] } },
    });
    expect(second.tasks.b!.state).toBe('blocked');
    await clock.advance('1s');
    expect((await scheduler.waitFor(second.tasks.b!.id)).result).toEqual(['a']);
    const third = await scheduler.flows.add({ tasks: { c: { handler: () => 'c', after: [first.tasks.a!.id] } } });
    expect(third.tasks.c!.state).toBe('waiting');
  });

  it('waitFor: a timeout, a signal, an unknown id', async () => {
    const { clock, scheduler } = setup();
    const flow = await scheduler.flows.add({ tasks: { a: { handler: () => 1, when: START + 60_000 } } });
    const late = scheduler.waitFor(flow.id, { timeout: '10s' }).catch((e: unknown) => e);
    await clock.advance('10s');
    expect(await late).toMatchObject({ code: 'ERR_WAIT_TIMEOUT' });
    const controller = new AbortController();
    const stopped = scheduler.waitFor(flow.id, { signal: controller.signal }).catch((e: unknown) => e);
    controller.abort(new Error('enough'));
    expect(await stopped).toMatchObject({ message: 'enough' });
    await expect(scheduler.waitFor(42)).rejects.toMatchObject({ code: 'ERR_TASK_NOT_FOUND' });
    expect(() => scheduler.waitFor(0)).toThrow(TypeError);
    await clock.advance('1m');
    expect((await scheduler.waitFor(flow.id)).result).toBe(1);
  });

  it('close(): waiting tasks are cancelled and blocked ones follow their rules, so every waitFor ends', async () => {
    const { scheduler } = setup();
    const flow = await scheduler.flows.add({
      tasks: {
        a: { handler: () => 1, when: START + 60_000 },
        b: { handler: () => 2, after: ['a'] },
        c: { handler: () => 3, after: [{ task: 'a', onFailure: 'ignore' }] },
      },
    });
    const all = Promise.all(Object.values(flow.tasks).map((task) => scheduler.waitFor(task.id)));
    await scheduler.close();
    expect((await all).map((task) => task.state)).toEqual(['cancelled', 'cancelled', 'cancelled']);
    expect(() => scheduler.flows.add({ tasks: { a: { handler: () => 1 } } })).toThrow(/closed/);
  });

  it('a finished flow is kept for get() and retry() until 1,000 more have finished', async () => {
    const { clock, scheduler } = setup({ workers: 64 });
    const first = await scheduler.flows.add({ tasks: { a: { handler: () => 'first' } } });
    const open = await scheduler.flows.add({ tasks: { a: { handler: () => 1, when: START + 60_000 } } });
    for (let i = 0; i < 1_000; i++) await scheduler.flows.add({ tasks: { a: { handler: () => i } } });
    await clock.advance(0);
    expect(await scheduler.flows.get(first.id)).toBeUndefined();
    expect((await scheduler.flows.get(first.id + 2))!.done).toBe(true);
    expect((await scheduler.flows.get(open.id))!.done).toBe(false);
  });
});
