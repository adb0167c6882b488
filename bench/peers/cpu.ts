/**
 * CPU time of a server's processes, read from /proc/<pid>/stat: for each
 * process utime + stime, and for the parent (the postmaster, or redis-server)
 * also cutime + cstime, which hold the CPU of children it has reaped (a
 * backend whose connection closed before the second reading still counts).
 * In milliseconds; the difference of two readings is the server's CPU over
 * a run.
 */
import { readFileSync } from 'node:fs';

const TICK_MS = 10; // USER_HZ is 100 on Linux (getconf CLK_TCK)

/** Fields 14..17 of /proc/<pid>/stat (utime, stime, cutime, cstime) in ms; zeros when the process is gone. */
function times(pid: number): [number, number, number, number] {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // pid (comm) state ppid ...: comm may hold spaces, so read after its closing parenthesis.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // fields[0] is field 3 (state): utime is field 14, so fields[11].
    return [11, 12, 13, 14].map((k) => Number(fields[k]) * TICK_MS) as [number, number, number, number];
  } catch {
    return [0, 0, 0, 0];
  }
}

/** CPU ms used so far by `pids[0]` (with its reaped children) and the live `pids` after it. */
export function serverCpuMs(pids: readonly number[]): number {
  let total = 0;
  pids.forEach((pid, k) => {
    const [utime, stime, cutime, cstime] = times(pid);
    total += utime + stime + (k === 0 ? cutime + cstime : 0);
  });
  return total;
}

/** CPU ms used so far by the live processes \`pids\`, each its own (not its children's): a database's backends, say. */
export function processesCpuMs(pids: readonly number[]): number {
  let total = 0;
  for (const pid of pids) {
    const [utime, stime] = times(pid);
    total += utime + stime;
  }
  return total;
}
