// `npm run bench` (also alone: `node --expose-gc benches/wall/convert.mjs [--quick]`): the native
// conversions (`permute` + `astype`, `contiguous`) against the plain JS loops users write today,
// on a 1920x1080x3 uint8 image (HWC, as sharp and canvas decode it). Before timing, each pair is
// checked to give the same bytes. The cases are interleaved round by round (JS, native, JS,
// native, ...) and the table reports the median over rounds of milliseconds per call.
//
//   normalise            HWC uint8 -> CHW float32, (x * (1/255) - mean[c]) / std[c] (ImageNet)
//   normalise, into out  the same, written into a preallocated output (no allocation either side)
//   contiguous           a dense uint8 copy of the CHW view of the HWC image
//   astype               HWC uint8 -> float32, x * (1/255), same layout
//   astype, no scale     HWC uint8 -> float32 as is; the JS baseline is `new Float32Array(u8)`,
//                        V8's own native conversion, not a loop
// Plus each case's memory floor, timed in the same rounds: `fill()` of a preallocated array of
// the output's type and length (24 MiB for float32 outputs, 6 MiB for uint8; written, nothing
// read or computed). No conversion that writes that output can take less, so the JS loop's
// time over the floor's bounds the speed-up any kernel can reach on this machine.
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const { Tensor } = require('../../dist/index.js')

const quick = process.argv.includes('--quick')
const ROUNDS = quick ? 5 : 15
const [H, W, C] = [1080, 1920, 3]
const HW = H * W
const gc = globalThis.gc ?? (() => {})

let seed = 12345
const pixels = new Uint8Array(H * W * C).map(() => {
  seed = (Math.imul(seed, 1103515245) + 12345) >>> 0
  return seed >>> 24
})
const image = Tensor.from(pixels, [H, W, C])
const mean = [0.485, 0.456, 0.406]
const std = [0.229, 0.224, 0.225]
const scale = 1 / 255
const preJs = new Float32Array(C * HW)
const preTensor = Tensor.empty([C, H, W], 'float32')

function normaliseLoop(out) {
  for (let c = 0; c < C; c++) {
    const m = mean[c]
    const s = std[c]
    for (let y = 0; y < H; y++) {
      for (let x = 0; x < W; x++) out[c * HW + y * W + x] = (pixels[(y * W + x) * C + c] * scale - m) / s
    }
  }
  return out
}

/** [name, JS baseline (returns a TypedArray), native (returns a Tensor, disposed after)]. */
const cases = [
  [
    'normalise HWC uint8 -> CHW float32',
    () => normaliseLoop(new Float32Array(C * HW)),
    () => image.permute(2, 0, 1).astype('float32', { scale, mean, std, axis: 0 }),
  ],
  [
    'normalise, into a preallocated out',
    () => normaliseLoop(preJs),
    () => image.permute(2, 0, 1).astype('float32', { scale, mean, std, axis: 0, out: preTensor }),
  ],
  [
    'contiguous() of the CHW view (uint8)',
    () => {
      const out = new Uint8Array(C * HW)
      for (let c = 0; c < C; c++) {
        for (let y = 0; y < H; y++) {
          for (let x = 0; x < W; x++) out[c * HW + y * W + x] = pixels[(y * W + x) * C + c]
        }
      }
      return out
    },
    () => image.permute(2, 0, 1).contiguous(),
  ],
  [
    'astype float32, x * (1/255)',
    () => {
      const out = new Float32Array(C * HW)
      for (let i = 0; i < out.length; i++) out[i] = pixels[i] * scale
      return out
    },
    () => image.astype('float32', { scale }),
  ],
  ['astype float32 (JS: new Float32Array(u8))', () => new Float32Array(pixels), () => image.astype('float32')],
]

const bytes = (view) => Buffer.from(view.buffer, view.byteOffset, view.byteLength)
/** Per case, an array of the output's type and length, for the memory floor. */
const floorArrays = new Map()
for (const [name, js, native] of cases) {
  const result = native()
  const expected = js()
  if (!bytes(expected).equals(bytes(result.data))) throw new Error(`${name}: the native result differs from the JS loop`)
  if (result !== preTensor) result.dispose()
  floorArrays.set(name, new expected.constructor(expected.length))
}

const samples = new Map(cases.map(([name]) => [name, { js: [], native: [], floor: [] }]))
const time = (fn) => {
  const start = process.hrtime.bigint()
  const result = fn()
  const ms = Number(process.hrtime.bigint() - start) / 1e6
  if (result !== preTensor && typeof result?.dispose === 'function') result.dispose()
  return ms
}
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, js, native] of cases) {
    gc()
    samples.get(name).js.push(time(js))
    gc()
    samples.get(name).native.push(time(native))
    const floorArray = floorArrays.get(name)
    samples.get(name).floor.push(time(() => floorArray.fill(1)))
  }
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]
}
console.log(
  `\n### conversions on a ${W}x${H}x${C} uint8 image (Node ${process.versions.node}; median of ${ROUNDS} interleaved rounds, ms per call; results checked equal byte for byte)\n`,
)
console.log('| operation | JS loop (ms) | native (ms) | speed-up | memory floor (ms) | JS loop / floor: the most any kernel can reach |')
console.log('|---|---:|---:|---:|---:|---:|')
for (const [name] of cases) {
  const { js, native, floor } = samples.get(name)
  const [a, b, f] = [median(js), median(native), median(floor)]
  console.log(`| ${name} | ${a.toFixed(2)} | ${b.toFixed(2)} | ${(a / b).toFixed(1)}x | ${f.toFixed(2)} | ${(a / f).toFixed(1)}x |`)
}
