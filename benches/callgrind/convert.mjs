// Instructions per call of the cases of benches/wall/convert.mjs (the JS loop and the native
// conversion on a 1920x1080x3 uint8 image), counted by callgrind (valgrind): on a shared 2-core
// machine wall time is noise, instruction counts are not. Each side of each case runs twice in
// its own node process, with LOW and HIGH calls; the difference divided by HIGH - LOW is
// reported, so start-up, JIT warm-up (the first calls) and teardown cancel out. (Not
// `--predictable`: it makes V8 compile on the main thread with other settings, which more than
// doubled the JS loops' counts.) Outputs are
// preallocated on both sides where the case allows (page faults are the kernel's, which
// callgrind does not count).
//
//   node benches/callgrind/convert.mjs [case ...]     (needs valgrind; takes a few minutes)
import { instructions, perOperation } from './runner.mjs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const LOW = 2
const HIGH = 4
const ELEMENTS = 1920 * 1080 * 3

const SETUP = `
const { Tensor } = require(${JSON.stringify(join(root, 'dist', 'index.js'))})
const [H, W, C] = [1080, 1920, 3], HW = H * W
const pixels = new Uint8Array(H * W * C).map((_, i) => (i * 37) % 251)
const image = Tensor.from(pixels, [H, W, C])
const mean = [0.485, 0.456, 0.406], std = [0.229, 0.224, 0.225], scale = 1 / 255
const preJs = new Float32Array(C * HW), preU8 = new Uint8Array(C * HW)
const preTensor = Tensor.empty([C, H, W], 'float32'), preHwc = Tensor.empty([H, W, C], 'float32'), preChw = Tensor.empty([C, H, W], 'uint8')
`

const CASES = {
  normalise: {
    js: `for (let c = 0; c < C; c++) { const m = mean[c], s = std[c]
  for (let y = 0; y < H; y++) for (let x = 0; x < W; x++) preJs[c * HW + y * W + x] = (pixels[(y * W + x) * C + c] * scale - m) / s }`,
    native: `image.permute(2, 0, 1).astype('float32', { scale, mean, std, axis: 0, out: preTensor })`,
  },
  contiguous: {
    js: `for (let c = 0; c < C; c++) for (let y = 0; y < H; y++) for (let x = 0; x < W; x++) preU8[c * HW + y * W + x] = pixels[(y * W + x) * C + c]`,
    native: `image.permute(2, 0, 1).astype('uint8', { out: preChw })`,
  },
  astype: {
    js: `for (let i = 0; i < preJs.length; i++) preJs[i] = pixels[i] * scale`,
    native: `image.astype('float32', { scale, out: preHwc })`,
  },
}

function programInstructions(body, calls) {
  // Inside a function, as users' loops are (top-level script code reads its variables through
  // the script context and compiles to slower code).
  const program = `(function () {\n${SETUP}\nfunction run() { ${body} }\nfor (let call = 0; call < ${calls}; call++) run()\n})()\n`
  return instructions(process.execPath, ['-e', program])
}

const perCall = (body) => perOperation((calls) => programInstructions(body, calls), LOW, HIGH)
const wanted = process.argv.slice(2)
console.log(`\n### instructions per call (callgrind, node ${process.versions.node}; ${ELEMENTS} elements)\n`)
console.log('| case | JS loop | native | instructions per element (JS / native) | ratio |')
console.log('|---|---:|---:|---:|---:|')
for (const [name, { js, native }] of Object.entries(CASES)) {
  if (wanted.length && !wanted.includes(name)) continue
  const [a, b] = [perCall(js), perCall(native)]
  const per = (n) => (n / ELEMENTS).toFixed(2)
  console.log(`| ${name} | ${(a / 1e6).toFixed(1)} M | ${(b / 1e6).toFixed(1)} M | ${per(a)} / ${per(b)} | ${(a / b).toFixed(1)}x |`)
}
