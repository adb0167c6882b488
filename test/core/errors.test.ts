// Every error taskheap creates is a TaskheapError whose `code` is typed as a
// member of TaskheapErrorCode: a code that does not exist is a compile error
// (`npm run typecheck`; the @ts-expect-error lines below fail it otherwise),
// and a right one narrows a branch.
import { describe, expect, it } from 'vitest';
import { ClosedError, QueueFullError, TaskheapError, ThreadError, type TaskheapErrorCode } from '../../src/index.js';

describe('TaskheapError codes', () => {
  it('are members of TaskheapErrorCode', () => {
    const errors: TaskheapError[] = [new ClosedError(), new QueueFullError(3), new ThreadError('gone', 'ERR_THREAD_EXIT')];
    const codes: TaskheapErrorCode[] = errors.map((error) => error.code);
    expect(codes).toEqual(['ERR_SCHEDULER_CLOSED', 'ERR_QUEUE_FULL', 'ERR_THREAD_EXIT']);
  });

  it('a code that does not exist does not compile', () => {
    const error: TaskheapError = new ClosedError();
    // @ts-expect-error a comparison with no code in common
    expect(error.code === 'ERR_CLOSED').toBe(false);
    // @ts-expect-error no such code
    expect(new TaskheapError('a typo', 'ERR_SCHEDULER_CLOSD').code).toBe('ERR_SCHEDULER_CLOSD');
    // @ts-expect-error a ThreadError takes only the codes of threads
    expect(new ThreadError('not a thread code', 'ERR_QUEUE_FULL')).toBeInstanceOf(TaskheapError);
  });
});
