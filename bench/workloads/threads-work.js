// The work of bench/threads.ts, as a module a thread can load (plain
// JavaScript): `spin` is CPU-bound arithmetic, the same function the main
// thread runs in the comparison; `trivial` returns its payload. The default
// export is taskheap's handler `(ctx, payload)`; `pool` is the same work as
// piscina's and tinypool's handler `(payload)`, loaded by name.

/** `rounds` rounds of arithmetic; returns a checksum so nothing is optimised away. */
export function spin(rounds) {
  let x = 0;
  for (let i = 0; i < rounds; i++) x = (x * 31 + i) % 1_000_003;
  return x;
}

export default function work(_ctx, payload) {
  return payload.kind === 'spin' ? spin(payload.rounds) : payload.value;
}

export function pool(payload) {
  return payload.kind === 'spin' ? spin(payload.rounds) : payload.value;
}
