// A process that exits with everything napi-dlpack can leave alive at teardown: tensors over JS
// and native memory, unconsumed capsules, @napi-rs/canvas canvases and ImageData (its own
// cleanup hooks run next to ours), tensors over canvas memory, a C addon's borrow kept past the
// call, owning exports held by the C addon, and a Worker that exits with its own. Used by
// __test__/threads/exit-stress.spec.ts, which runs it many times under each Node version:
//   node exit-child.cjs <root> <mode>    mode: natural | exit | throw | worker
'use strict'
const { Worker, isMainThread } = require('node:worker_threads')
const root = process.argv[2]
const mode = process.argv[3] || 'natural'
const { Tensor, fromDLPack } = require(root + '/dist/index.js')
const { ImageData, createCanvas } = require(root + '/node_modules/@napi-rs/canvas')
const c = require(root + '/target/exchange-c/exchange_c.node')

const keep = []
function fill(rounds) {
  for (let i = 0; i < rounds; i++) {
    const canvas = createCanvas(16, 16)
    const ctx = canvas.getContext('2d')
    ctx.fillRect(0, 0, 8, 8)
    const image = ctx.getImageData(0, 0, 16, 16)
    const overCanvas = fromDLPack(image)
    keep.push(canvas, image, overCanvas, new ImageData(new Uint8ClampedArray(16), 2, 2))
    // An export of canvas memory (an external ArrayBuffer @napi-rs/canvas made): the export marks
    // it untransferable, which is what Node 24 aborts on at exit (see exit-stress.spec.ts).
    if (process.env.NAPI_DLPACK_EXIT_EXPORT_EXTERNAL === '1') keep.push(overCanvas.__dlpack__())
    keep.push(Tensor.from(new Float32Array(64)).__dlpack__(), Tensor.zeros([4, 4]), c.makeTensor(4, false))
    keep.push(fromDLPack(Tensor.from(new Float32Array(8)).__dlpack__()))
    // Garbage too, so that finalizers are pending at exit.
    Tensor.from(new Float32Array(16)).__dlpack__()
    createCanvas(4, 4)
  }
}
fill(40)
const lent = Tensor.from(new Float32Array([1, 2, 3]))
// The C fixture keeps one borrow per process: the main thread's.
if (isMainThread) c.borrowKeep(lent) // a borrow still held at exit
c.exportHold(lent) // an owning export still held at exit
keep.push(lent)

if (mode === 'worker') {
  const worker = new Worker(__filename, { argv: [root, 'natural'] })
  worker.on('exit', (code) => {
    if (code !== 0) process.exitCode = 10
  })
} else if (mode === 'exit') {
  process.exit(0)
} else if (mode === 'throw') {
  process.on('uncaughtException', () => process.exit(0))
  setImmediate(() => {
    throw new Error('exit through an uncaught exception')
  })
}
