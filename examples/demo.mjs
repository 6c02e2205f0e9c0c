// `npm run demo`: the main job end to end.
//   1. a tensor made in JS is exported through DLPack,
//   2. native code (examples/consumer-addon, a separate Rust addon built on the napi-dlpack
//      crate) consumes it and runs a Walsh–Hadamard transform on it in place,
//   3. JS reads the result back through the same memory — no copy — and the data pointers
//      printed on both sides are the same;
// then the other direction: a Rust-owned matrix imported into JS zero-copy.
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const { Tensor, fromDLPack, externalBuffersAllowed } = require('../dist/index.js')
const consumer = require('../target/consumer-addon/consumer_addon.node')

const hex = (pointer) => `0x${pointer.toString(16)}`

console.log('1. A tensor made in JS (V8 memory)')
const signal = Tensor.from(new Float32Array([1, 0, 1, 0, 0, 1, 1, 0, 3, 1, 4, 1, 5, 9, 2, 6]), [2, 8])
console.log(`   ${signal}  data pointer ${hex(signal.dataPointer)}`)
console.log(`   rows before: ${JSON.stringify(signal.toArray())}`)

console.log('2. Exported through DLPack; the native addon reads the capsule:')
const seen = consumer.describe(signal.__dlpack__())
console.log(`   native sees dtype=${seen.dtype} shape=[${seen.shape}] strides=[${seen.strides}] data pointer ${hex(seen.dataPointer)}`)

console.log('3. The native addon transforms each row in place (fwhtRowsInPlace):')
consumer.fwhtRowsInPlace(signal.__dlpack__())
console.log(`   rows after:  ${JSON.stringify(signal.toArray())}`)
console.log(`   JS data pointer still ${hex(signal.dataPointer)}; same memory as native saw: ${signal.dataPointer === seen.dataPointer}`)

console.log('4. The other way: a Rust-owned matrix imported into JS')
const matrix = fromDLPack(consumer.makeMatrix(2, 4, 'float64'))
const exported = consumer.lastExportedPointer()
console.log(`   ${matrix}  Rust pointer ${hex(exported)}  JS pointer ${hex(matrix.dataPointer)}  isCopy=${matrix.isCopy}`)
if (externalBuffersAllowed()) {
  matrix.data[0] = 42
  console.log(`   JS wrote 42 into element 0; a native read through a fresh capsule sees data pointer ${hex(consumer.describe(matrix.__dlpack__()).dataPointer)}`)
} else {
  console.log('   (external buffers are disallowed here — the Electron path — so the import is a copy, reported by isCopy)')
}
console.log(`   matrix: ${JSON.stringify(matrix.toArray())}`)
matrix.dispose()
signal.dispose()
console.log(`5. Disposed; Rust matrices still alive: ${consumer.liveMatrices()}`)
