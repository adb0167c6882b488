import { describe, expect, it } from 'vitest';
import { lines, runExample } from './child.js';

// The thumbnail bot of issue 26 as a child process, on small renders: every
// request answered from a thread, the huge one cancelled mid-render, the
// reminders fired meanwhile, and the process done once closed.
describe('examples/thumbnail-threads', () => {
  it('renders in threads, cancels the huge render, keeps its reminders going, and exits 0', async () => {
    const { code, stdout, stderr } = await runExample('examples/thumbnail-threads.ts', { args: ['4', '32'], timeout: 60_000, tsx: true });
    expect(stderr).toBe('');
    expect(code).toBe(0);
    const out = lines(stdout);
    for (const chat of ['chat-1', 'chat-2', 'chat-3', 'chat-4'])
      expect(out).toContainEqual(expect.stringMatching(new RegExp(`^${chat}: sent a 32x24 thumbnail \\(768 bytes, mean \\d+\\)$`)));
    expect(out).toContain('chat-huge: cancelled (CancelledError)');
    expect(out).toContainEqual(expect.stringMatching(/^reminders: \d+ fired while rendering, the latest \d+ ms late$/));
    expect(out.at(-1)).toBe('closed: every thread terminated');
  });

  it('rejects bad arguments', async () => {
    const { code, stderr } = await runExample('examples/thumbnail-threads.ts', { args: ['lots'], tsx: true });
    expect(code).toBe(1);
    expect(stderr).toContain('usage: npx tsx examples/thumbnail-threads.ts');
  });
});
