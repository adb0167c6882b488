import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Starts the longest files first, the classic way to finish a batch of jobs
 * early on a fixed number of workers: one that starts last must not be one
 * of the 30 s PostgreSQL fault files.
 *
 * Why not vitest's own order: it sorts by the durations it cached in
 * `node_modules/.vite` on the previous run, and a fresh checkout (CI, a new
 * contributor) has none, so it goes by project name and file size, and the
 * longest PostgreSQL files started 80 s into a 2-minute run (issue 25: 126 to
 * 139 s cold against 112 s warm). Here a file's duration is the one vitest
 * cached, else the one committed in `test/durations.json` (written by
 * `node scripts/durations.mjs` after a run), else 0 (a new file: short, or
 * measured on its first run). Failed files still go first, as vitest does.
 */
export class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const committed = readCommitted(this.ctx.config.root);
    const cache = this.ctx.cache;
    const weight = (spec: TestSpecification) => {
      const key = `${spec.project.name}:${relative(this.ctx.config.root, spec.moduleId)}`; // vitest's own cache key
      const cached = cache.getFileTestResults(key);
      return { failed: cached?.failed === true, ms: cached?.duration ?? committed[key] ?? 0 };
    };
    const weights = new Map(files.map((spec) => [spec, weight(spec)]));
    return [...files].sort((a, b) => {
      const groupOrder = a.project.config.sequence.groupOrder - b.project.config.sequence.groupOrder;
      if (groupOrder !== 0) return groupOrder;
      const wa = weights.get(a)!;
      const wb = weights.get(b)!;
      if (wa.failed !== wb.failed) return wa.failed ? -1 : 1;
      return wb.ms - wa.ms;
    });
  }
}

/** `test/durations.json`: `"project:path": ms`; none if the file is missing or unreadable. */
function readCommitted(root: string): Record<string, number> {
  try {
    return JSON.parse(readFileSync(join(root, 'test', 'durations.json'), 'utf8')) as Record<string, number>;
  } catch {
    return {};
  }
}
