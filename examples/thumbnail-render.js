/**
 * The CPU-heavy half of examples/thumbnail-threads.ts: renders a greyscale
 * Mandelbrot thumbnail, pixel by pixel, in a worker thread. Its default
 * export is the handler, `(ctx, payload) => result`; it checks `ctx.signal`
 * between rows, so a cancel or a timeout stops it at once.
 *
 * Plain JavaScript: a thread loads its module with Node alone (no
 * TypeScript loader runs in a thread), so ship such modules as .js or
 * point at your build's output.
 *
 * @param {import('../src/index.js').ThreadContext} ctx
 * @param {{ chat: string, width: number, height: number, detail: number }} request
 */
export default function render(ctx, { chat, width, height, detail }) {
  const pixels = new Uint8Array(width * height);
  let sum = 0;
  for (let y = 0; y < height; y++) {
    ctx.signal.throwIfAborted();
    for (let x = 0; x < width; x++) {
      const cr = -2.2 + (3 * x) / width;
      const ci = -1.2 + (2.4 * y) / height;
      let zr = 0;
      let zi = 0;
      let i = 0;
      while (i < detail && zr * zr + zi * zi < 4) {
        const t = zr * zr - zi * zi + cr;
        zi = 2 * zr * zi + ci;
        zr = t;
        i++;
      }
      const shade = Math.round((255 * i) / detail);
      pixels[y * width + x] = shade;
      sum += shade;
    }
  }
  return { chat, width, height, pixels, mean: Math.round(sum / pixels.length) };
}
