/**
 * Which contenders exist and what each cannot do. The parent process reads
 * only this file (it imports no scheduling library), so it can mark "n/a"
 * without paying for a child process. The adapters live beside it, one file
 * per contender, named after `name`, and are imported only inside children.
 */

export type Capability = 'schedule' | 'cancel' | 'cron' | 'interval' | 'drain' | 'precision' | 'nextRun';

export interface ContenderInfo {
  /** File name of the adapter (without .ts) and key in the results. */
  name: string;
  /** The npm package whose version is printed; undefined for built-ins and taskheap itself. */
  pkg?: string;
  /** Capabilities it lacks, with the reason shown in the tables. */
  na: Partial<Record<Capability, string>>;
}

const NO_ONE_SHOT = 'no one-shot tasks: cron/interval only';
const NO_NEXT = 'no next-from-a-date API';

export const CONTENDERS: readonly ContenderInfo[] = [
  { name: 'taskheap', na: {} },
  {
    name: 'tinyqueue',
    pkg: 'tinyqueue',
    na: {
      cancel: 'no removal in a bare heap',
      cron: 'a heap, not a scheduler',
      interval: 'a heap, not a scheduler',
      precision: 'no timer',
      nextRun: 'a heap, not a scheduler',
    },
  },
  { name: 'setTimeout', na: { cron: 'no cron patterns', nextRun: 'no cron patterns' } },
  { name: 'croner', pkg: 'croner', na: {} },
  { name: 'node-schedule', pkg: 'node-schedule', na: { interval: 'calendar rules only (no fixed-interval rule)' } },
  { name: 'cron', pkg: 'cron', na: { interval: 'cron patterns only' } },
  {
    name: 'node-cron',
    pkg: 'node-cron',
    na: {
      schedule: NO_ONE_SHOT,
      cancel: NO_ONE_SHOT,
      drain: NO_ONE_SHOT,
      precision: NO_ONE_SHOT,
      interval: 'cron patterns only',
      nextRun: NO_NEXT,
    },
  },
  {
    name: 'toad-scheduler',
    pkg: 'toad-scheduler',
    na: {
      schedule: NO_ONE_SHOT,
      cancel: NO_ONE_SHOT,
      drain: NO_ONE_SHOT,
      precision: NO_ONE_SHOT,
      nextRun: 'uses croner internally; no own API',
    },
  },
];

/** Loads an adapter inside a child process. */
export async function loadContender(name: string): Promise<import('./types.js').Contender> {
  if (!CONTENDERS.some((c) => c.name === name)) throw new Error(`unknown contender ${name}`);
  const module = (await import(`./${name}.js`)) as { contender: import('./types.js').Contender };
  return module.contender;
}
