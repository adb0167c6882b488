// The types of threads-work.js (plain JavaScript, so a thread can load it).
export function spin(rounds: number): number;
export default function work(ctx: unknown, payload: { kind: 'spin'; rounds: number } | { kind: 'trivial'; value: unknown }): unknown;
