// Compiled alone by check.sh, which expects it to fail with a message naming
// each misspelt option against the function form it was written for.
import { Scheduler } from 'taskheap';

const scheduler = new Scheduler();
scheduler.after(10, () => 1, { timout: '1s' });
scheduler.every(1).day().run(() => 1, { timout: '1s' });
scheduler.every(1).day().run(() => 1, { overlap: 'skp' });
