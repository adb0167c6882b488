// What runs inside each pool thread, as source text: it is started with
// `new Worker(BOOTSTRAP, { eval: true })`, so it needs no file of its own
// that Node must find and load (the package ships .js, the tests run .ts).
// It imports a task's module, calls its default export with the task's
// context and payload (its ctx.progress() and ctx.log() post to the pool
// thread, which hands them to the run's), aborts the context's signal when told to, and posts
// the outcome back. A task comes in as an array `[id, module URL, payload,
// attempt, scheduledAt, startedAt, name, taskId]` and a success goes back as
// `[id, value]` (no keys to write and read per task); an abort, a failure,
// progress and log lines are objects (thread.ts).

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

// Handlers by module URL: a module is imported once per thread, not per task.
const handlers = new Map();

async function load(href) {
  const module = await import(href);
  const handler = module.default;
  if (typeof handler !== 'function')
    throw new TypeError('The module ' + href + ' has no default export function (export default (ctx, payload) => ...)');
  handlers.set(href, handler);
  return handler;
}

// Text a store keeps, as the main thread checks it (assertStorableText in
// core/validate.ts, toProgress in core/journal.ts, the same messages): no NUL
// (PostgreSQL cannot hold it) and no lone surrogate.
function storable(text, what) {
  let at = text.indexOf('\\0');
  if (at >= 0) throw new TypeError('Expected ' + what + ' to contain no NUL character, got one at index ' + at + ' of ' + excerpt(text, at));
  at = text.search(/\\p{Cs}/u);
  if (at >= 0) {
    const unit = text.charCodeAt(at).toString(16);
    throw new TypeError('Expected ' + what + ' to be well-formed text, got a lone surrogate (\\\\u' + unit + ') at index ' + at + ' of ' + excerpt(text, at));
  }
}

function excerpt(text, at) {
  const start = Math.max(0, Math.min(at - 30, text.length - 60));
  const end = Math.min(text.length, start + 60);
  return (start > 0 ? '…' : '') + JSON.stringify(text.slice(start, end)) + (end < text.length ? '…' : '');
}

function storableStrings(value, path) {
  if (typeof value === 'string') return storable(value, path === 'progress' ? 'the ctx.progress() value' : '\`' + path + '\` of ctx.progress()');
  if (typeof value !== 'object' || value === null) return;
  if (Array.isArray(value)) return value.forEach((item, i) => storableStrings(item, path + '[' + i + ']'));
  for (const [key, child] of Object.entries(value)) {
    storable(key, 'a key of \`' + path + '\` in ctx.progress()');
    storableStrings(child, /^[A-Za-z_$][\\w$]*$/.test(key) ? path + '.' + key : path + '[' + JSON.stringify(key) + ']');
  }
}

// The handler's ctx; its signal (an AbortController) and Dates are made only if the handler asks.
class Context {
  #id;
  #scheduledAt;
  #startedAt;
  #controller;
  #reason;
  constructor(id, attempt, scheduledAt, startedAt, name, taskId) {
    this.attempt = attempt;
    this.name = name;
    if (taskId !== undefined) this.id = taskId;
    this.#id = id;
    this.#scheduledAt = scheduledAt;
    this.#startedAt = startedAt;
  }
  get signal() {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#reason !== undefined) this.#controller.abort(this.#reason);
    }
    return this.#controller.signal;
  }
  get scheduledAt() { return new Date(this.#scheduledAt); }
  get startedAt() { return new Date(this.#startedAt); }
  progress(value) {
    const json = JSON.stringify(value);
    if (json === undefined || (typeof value === 'number' && !Number.isFinite(value)))
      throw new TypeError('Expected ctx.progress() to get a finite number or a JSON value, got ' + String(value));
    if (json.length > 1024) throw new RangeError('Expected ctx.progress() to get a value of at most 1024 characters of JSON, got ' + json.length);
    if (/\\\\u(?:0000|d[89a-f])/.test(json)) storableStrings(JSON.parse(json), 'progress');
    parentPort.postMessage({ type: 'progress', id: this.#id, json });
  }
  log(line) {
    if (typeof line !== 'string') throw new TypeError('Expected ctx.log() to get a string, got ' + typeof line);
    storable(line, 'the ctx.log() line');
    parentPort.postMessage({ type: 'log', id: this.#id, line });
  }
  // Steps keep their record on the main thread, which a thread cannot write: refused with a reason.
  step() { return noSteps('step'); }
  sleep() { return noSteps('sleep'); }
  receive() { return noSteps('receive'); }
  // Static, so a handler sees neither on its ctx.
  static abort(ctx, reason) {
    if (ctx.#reason !== undefined) return;
    ctx.#reason = reason;
    if (ctx.#controller !== undefined) ctx.#controller.abort(reason);
  }
  static threwReason(ctx, error) {
    return ctx.#reason !== undefined && error === ctx.#reason;
  }
}

function noSteps(call) {
  return Promise.reject(new TypeError('ctx.' + call + '() is not available to a worker-thread handler: steps run in a handler defined as a function (see the steps guide)'));
}

function succeed(id, value) {
  running = undefined;
  try {
    parentPort.postMessage([id, value]);
  } catch (error) {
    parentPort.postMessage({ type: 'done', id, ok: false, clone: true, error: errorToMessage(error) });
  }
}

function fail(id, ctx, error) {
  running = undefined;
  const outcome = { type: 'done', id, ok: false, error: errorToMessage(error) };
  // The handler gave up with its signal's reason: the main thread ends the task with the original one.
  if (Context.threwReason(ctx, error)) outcome.aborted = true;
  try {
    parentPort.postMessage(outcome);
  } catch (error) {
    parentPort.postMessage({ type: 'done', id, ok: false, clone: true, error: errorToMessage(error) });
  }
}

function start(handler, id, ctx, payload) {
  let value;
  let thenable;
  try {
    value = handler(ctx, payload);
    thenable = value !== null && (typeof value === 'object' || typeof value === 'function') && typeof value.then === 'function';
  } catch (error) {
    return fail(id, ctx, error);
  }
  // A plain value goes back at once; a promise (or thenable) when it settles.
  if (!thenable) return succeed(id, value);
  Promise.resolve(value).then((value) => succeed(id, value), (error) => fail(id, ctx, error));
}

// message: [id, module URL, payload, attempt, scheduledAt, startedAt, name, taskId]
function run(message) {
  const id = message[0];
  const href = message[1];
  const ctx = new Context(id, message[3], message[4], message[5], message[6], message[7]);
  running = { id, ctx };
  const handler = handlers.get(href);
  if (handler !== undefined) return start(handler, id, ctx, message[2]);
  load(href).then((handler) => start(handler, id, ctx, message[2]), (error) => fail(id, ctx, error));
}

parentPort.on('message', (message) => {
  if (Array.isArray(message)) run(message);
  else if (message.type === 'abort' && running !== undefined && running.id === message.id) {
    Context.abort(running.ctx, messageToError(message.reason));
  }
});
`;
