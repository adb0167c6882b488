// Which JavaScript runtime taskheap runs in. It is written for Node and runs
// on Bun and Deno through their Node compatibility, where a few Node
// features are missing or only pretend to work (a worker's resourceLimits,
// its execArgv, better-sqlite3's native addon): the call that needs one
// throws an error naming the runtime instead of misbehaving later.

/** `Bun 1.4.5` or `Deno 2.9.6` when running there; undefined on Node. @internal */
export function nonNodeRuntime(): string | undefined {
  const versions = process.versions;
  if (versions.bun !== undefined) return `Bun ${versions.bun}`;
  if (versions.deno !== undefined) return `Deno ${versions.deno}`;
  return undefined;
}
