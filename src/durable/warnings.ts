// The process warnings of stored work, each with a code of its own so that
// `node --disable-warning=<code>` silences it, each printed once per process.
/** The code of the warning that work given as a function is not stored. */
const LOCAL_WORK_WARNING = 'TASKHEAP_LOCAL_WORK';

let localWorkWarned = false;

/**
 * Warns, once per process, when a function (or module) task or job is added
 * on a scheduler whose store many processes share: it is not stored, so it
 * runs in this process alone, in every process that adds it (each replica
 * runs the same start-up code), and is lost if the process stops. A handler
 * name is what stores it.
 */
export function warnLocalWork(): void {
  if (localWorkWarned) return;
  localWorkWarned = true;
  process.emitWarning(
    'A task or job given as a function is not stored: with a store that many processes share, each process that adds it runs its own copy, ' +
      'and it is lost if the process stops. Define a handler and schedule it by name to store it once for all processes.',
    { type: 'TaskheapWarning', code: LOCAL_WORK_WARNING },
  );
}
