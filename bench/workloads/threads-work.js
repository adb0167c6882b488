// The work of bench/threads.ts, as a module a thread can load (plain
// JavaScript): `spin` is CPU-bound arithmetic, the same function the main
// thread runs in the comparison; `trivial` returns its payload.

/** `rounds` rounds of arithmetic; returns a checksum so nothing is optimised away. */
export function spin(rounds) {
  let x = 0;
  for (let i = 0; i < rounds; i++) x = (x * 31 + i) % 1_000_003;
  return x;
}

export default function work(_ctx, payload) {
  return payload.kind === 'spin' ? spin(payload.rounds) : payload.value;
}
