// What runs inside each pool thread, as source text: it is started with
// `new Worker(BOOTSTRAP, { eval: true })`, so it needs no file of its own
// that Node must find and load (the package ships .js, the tests run .ts).
// It imports a task's module, calls its default export with the task's
// context and payload (its ctx.progress() and ctx.log() post to the pool
// thread, which hands them to the run's), aborts the context's signal when told to, and posts
// the outcome back. Messages are described in messages.ts.

/**
 * The thread's program (CommonJS, as `eval` workers are): plain JavaScript,
 * kept small, with no imports besides Node's own.
 * @internal
 */
export const BOOTSTRAP = `
'use strict';
const { parentPort } = require('node:worker_threads');
let running;

function errorToMessage(error) {
  if (!(error instanceof Error)) {
    try { return { thrown: structuredClone(error) }; } catch { return { thrown: String(error) }; }
  }
  const fields = {};
  for (const key of Object.keys(error)) {
    try { fields[key] = structuredClone(error[key]); } catch { /* not cloneable: left out */ }
  }
  if (error.code !== undefined) fields.code = error.code;
  return { name: error.name, message: error.message, stack: error.stack, fields };
}

function messageToError(message) {
  const error = new Error(message.message);
  error.name = message.name;
  if (message.code !== undefined) error.code = message.code;
  return error;
}

async function run(job) {
  const controller = new AbortController();
  running = { id: job.id, controller };
  const ctx = {
    signal: controller.signal,
    scheduledAt: new Date(job.scheduledAt),
    startedAt: new Date(job.startedAt),
    attempt: job.attempt,
    name: job.name,
    progress(value) {
      const json = JSON.stringify(value);
      if (json === undefined || (typeof value === 'number' && !Number.isFinite(value)))
        throw new TypeError('Expected ctx.progress() to get a finite number or a JSON value, got ' + String(value));
      if (json.length > 1024) throw new RangeError('Expected ctx.progress() to get a value of at most 1024 characters of JSON, got ' + json.length);
      parentPort.postMessage({ type: 'progress', id: job.id, json });
    },
    log(line) {
      if (typeof line !== 'string') throw new TypeError('Expected ctx.log() to get a string, got ' + typeof line);
      parentPort.postMessage({ type: 'log', id: job.id, line });
    },
  };
  if (job.taskId !== undefined) ctx.id = job.taskId;
  let outcome;
  try {
    const module = await import(job.module);
    const handler = module.default;
    if (typeof handler !== 'function')
      throw new TypeError('The module ' + job.module + ' has no default export function (export default (ctx, payload) => ...)');
    outcome = { type: 'done', id: job.id, ok: true, value: await handler(ctx, job.payload) };
  } catch (error) {
    outcome = { type: 'done', id: job.id, ok: false, error: errorToMessage(error) };
    if (controller.signal.aborted && error === controller.signal.reason) outcome.aborted = true;
  }
  running = undefined;
  try {
    parentPort.postMessage(outcome);
  } catch (error) {
    parentPort.postMessage({ type: 'done', id: job.id, ok: false, clone: true, error: errorToMessage(error) });
  }
}

parentPort.on('message', (message) => {
  if (message.type === 'run') run(message);
  else if (message.type === 'abort' && running !== undefined && running.id === message.id)
    running.controller.abort(messageToError(message.reason));
});
`;
