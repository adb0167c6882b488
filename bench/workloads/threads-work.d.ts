// The types of threads-work.js (plain JavaScript, so a thread can load it).
export type Work = { kind: 'spin'; rounds: number } | { kind: 'trivial'; value: unknown };
export function spin(rounds: number): number;
export default function work(ctx: unknown, payload: Work): unknown;
