// Each marked line must be a type error. If `When` degraded to `any` (as it
// would if taskheap's .d.ts needed @types/luxon and skipLibCheck hid it), the
// expect-error directives would be unused, which is itself an error.
import { Scheduler } from 'taskheap';

const scheduler = new Scheduler();
// @ts-expect-error a string is not a point in time
scheduler.schedule('tomorrow', () => {});
// @ts-expect-error an object without toMillis() is not a DateTime
scheduler.schedule({ isValid: true }, () => {});
void scheduler.close();
