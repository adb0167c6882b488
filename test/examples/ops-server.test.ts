import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { program, ROOT, terminate } from './child.js';

describe('examples/ops-server.ts', () => {
  it('serves the dashboard behind its token, /metrics and /healthz, and exits 0 on SIGTERM', async () => {
    const child = spawn(process.execPath, program('examples/ops-server.ts'), {
      cwd: ROOT,
      env: { ...process.env, PORT: '0', ADMIN_TOKEN: 'letmein' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    child.stdout.setEncoding('utf8');
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    try {
      const origin = await new Promise<string>((resolve, reject) => {
        child.stdout.on('data', (chunk: string) => {
          stdout += chunk;
          const match = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(stdout);
          if (match !== null) resolve(match[1]!);
        });
        child.on('close', () => reject(new Error(`exited before listening:\n${stdout}`)));
      });
      expect((await fetch(`${origin}/admin/`)).status).toBe(401);
      const login = await fetch(`${origin}/admin/?token=letmein`, { redirect: 'manual' });
      expect(login.status).toBe(303);
      const cookie = login.headers.get('set-cookie')!.split(';')[0]!;
      const state = (await (await fetch(`${origin}/admin/api/state`, { headers: { cookie } })).json()) as { jobs: { name: string }[] };
      expect(state.jobs.map((job) => job.name)).toEqual(['digest', 'poll feeds', 'slow report']);
      const text = await (await fetch(`${origin}/metrics`)).text();
      expect(text).toContain('# TYPE taskheap_runs_total counter');
      expect(text).toMatch(/^taskheap_jobs 3$/m);
      const probe = await fetch(`${origin}/healthz`);
      expect(probe.status).toBe(200);
      expect(((await probe.json()) as { healthy: boolean }).healthy).toBe(true);
    } finally {
      terminate(child);
    }
    expect(await exited).toBe(0);
  }, 30_000);
});
