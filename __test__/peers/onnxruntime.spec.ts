// napi-dlpack with onnxruntime-node (CPU EP): ONNX models generated here (the protobuf writer of
// onnx-model.mjs, no download) run on the zero-copy `data` of napi-dlpack tensors, and write
// their outputs into preallocated napi-dlpack tensors through `fetches`.
//
// onnxruntime-node's install script, which would download CUDA libraries, is denied by the
// `allowScripts` entry in package.json; the CPU binaries are inside the npm package.
import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

import test from 'ava'
import * as ort from 'onnxruntime-node'

import {
  BufferError,
  DLPackTypeError,
  ReadOnlyError,
  Tensor,
  externalBuffersAllowed,
  fromDLPack,
  type DLPackCapsule,
} from '../../dist/index.js'
import { addressOf, throwsCode } from '../harness/helpers.js'
import { onnxModel } from '../harness/onnx-model.mjs'

const zeroCopy = externalBuffersAllowed()

// z = x * y + x   (element-wise, any length n)
const mulAddModel = onnxModel(
  [
    { op: 'Mul', inputs: ['x', 'y'], outputs: ['xy'] },
    { op: 'Add', inputs: ['xy', 'x'], outputs: ['z'] },
  ],
  [
    ['x', ['n']],
    ['y', ['n']],
  ],
  [['z', ['n']]],
)
// c = a @ b   (a: [m, k], b: [k, n])
const matMulModel = onnxModel(
  [{ op: 'MatMul', inputs: ['a', 'b'], outputs: ['c'] }],
  [
    ['a', ['m', 'k']],
    ['b', ['k', 'n']],
  ],
  [['c', ['m', 'n']]],
)

const sessions = {
  mulAdd: ort.InferenceSession.create(mulAddModel, { executionProviders: ['cpu'], logSeverityLevel: 4 }),
  matMul: ort.InferenceSession.create(matMulModel, { executionProviders: ['cpu'], logSeverityLevel: 4 }),
}

/** An ORT tensor over a napi-dlpack tensor's zero-copy view (contiguous tensors only). */
function ortView(tensor: Tensor<'float32'>): ort.Tensor {
  if (!tensor.isContiguous || tensor.offset !== 0) throw new Error('ORT tensors are dense row-major')
  return new ort.Tensor('float32', tensor.data, tensor.shape.slice())
}

function matmul(a: number[][], b: number[][]): number[][] {
  return a.map((row) => b[0]!.map((_, j) => row.reduce((sum, v, k) => sum + v * b[k]![j]!, 0)))
}

// ---------------------------------------------------------------------------------------------
// The C addon (producer of foreign memory)

interface CAddon {
  makeTensor(options: { shape: number[]; versioned: boolean; fill?: 'iota' | 'none' }): DLPackCapsule
  dataPointer(capsule: DLPackCapsule): bigint
  consume(capsule: DLPackCapsule): unknown
  heldInfo(held: unknown): { data: bigint; byteOffset: number }
  heldFloat32(held: unknown): Float32Array
  release(held: unknown): boolean
  deleterCalls(): number
}
const here = dirname(fileURLToPath(import.meta.url))
const addonPath = join(here, '..', '..', 'target', 'c-addon', 'c_addon.node')
// `npm test` builds every fixture before running ava (the c-addon-*.spec.ts also build it if missing).
// Without it the C tests below fail rather than skip.
const c = existsSync(addonPath) ? (createRequire(import.meta.url)(addonPath) as CAddon) : undefined
function needC(): CAddon {
  if (!c) throw new Error(`${addonPath} is missing: run bash __test__/native/c-addon/build.sh`)
  return c
}

// ---------------------------------------------------------------------------------------------

test('the generated models load', async (t) => {
  const mulAdd = await sessions.mulAdd
  t.deepEqual(mulAdd.inputNames, ['x', 'y'])
  t.deepEqual(mulAdd.outputNames, ['z'])
  const matMul = await sessions.matMul
  t.deepEqual(matMul.inputNames, ['a', 'b'])
  t.deepEqual(matMul.outputNames, ['c'])
})

test('ORT tensors over napi-dlpack views keep the same memory (no JS-side copy)', (t) => {
  const tensor = Tensor.from(new Float32Array([1, 2, 3]))
  const view = ortView(tensor)
  t.is(view.data, tensor.data, 'ORT keeps the very TypedArray')
  t.is((view.data as Float32Array).buffer, tensor.data.buffer)
  t.deepEqual(view.dims, [3])
})

test('element-wise model: inputs from Tensor.from, output written in place into Tensor.empty', async (t) => {
  const session = await sessions.mulAdd
  const n = 1000
  const xs = new Float32Array(n).map((_, i) => i / 8)
  const ys = new Float32Array(n).map((_, i) => 2 - i / 16)
  const x = Tensor.from(xs)
  const y = Tensor.from(ys)
  const out = Tensor.empty([n], 'float32')
  out.data.fill(Number.NaN) // a sentinel: anything not written by ORT stays NaN
  const pointer = out.dataPointer
  const outView = out.data

  const results = await session.run({ x: ortView(x), y: ortView(y) }, { z: ortView(out) })

  const expected = Array.from(xs, (v, i) => Math.fround(Math.fround(v * ys[i]!) + v))
  t.deepEqual([...out.data], expected, 'ORT wrote the result into the preallocated tensor')
  t.is(out.dataPointer, pointer, 'same memory')
  t.is(out.data, outView, 'same view')
  // onnxruntime-node 1.30 returns a new ORT tensor whose data is a copy of what it wrote in place
  t.deepEqual([...(results.z!.data as Float32Array)], expected)
  t.log(`returned ORT tensor shares our buffer: ${(results.z!.data as Float32Array).buffer === out.data.buffer}`)
})

test('element-wise model: ORT reads the inputs where they are (writes just before run are used)', async (t) => {
  const session = await sessions.mulAdd
  const x = Tensor.from(new Float32Array([1, 2, 3, 4]))
  const y = Tensor.from(new Float32Array([1, 1, 1, 1]))
  const ortX = ortView(x)
  const ortY = ortView(y)
  // change the napi-dlpack memory after the ORT tensors were made
  x.data[0] = 10
  y.data.set([2, 3, 4, 5])
  const out = Tensor.empty([4], 'float32')
  await session.run({ x: ortX, y: ortY }, { z: ortView(out) })
  t.deepEqual([...out.data], [30, 8, 15, 24])
})

test('MatMul: output in a preallocated tensor, then exported to C zero-copy', async (t) => {
  const session = await sessions.matMul
  const a = Tensor.from(new Float32Array([1, 2, 3, 4, 5, 6]), [2, 3])
  const b = Tensor.from(new Float32Array([7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18]), [3, 4])
  const out = Tensor.zeros([2, 4], 'float32')
  out.data.fill(Number.NaN)
  await session.run({ a: ortView(a), b: ortView(b) }, { c: ortView(out) })
  const expected = matmul(a.toArray() as number[][], b.toArray() as number[][])
  t.deepEqual(out.toArray(), expected)
  const cAddon = needC()
  const held = cAddon.consume(out.__dlpack__())
  const info = cAddon.heldInfo(held)
  t.is(info.data + BigInt(info.byteOffset), out.dataPointer, 'C gets the memory ORT wrote')
  t.deepEqual([...cAddon.heldFloat32(held)], expected.flat())
  cAddon.release(held)
})

test('MatMul on a transposed view needs a contiguous copy first (ORT has no strides)', async (t) => {
  const session = await sessions.matMul
  // a^T where a is stored [3, 2]: a non-contiguous [2, 3] view
  const stored = Tensor.from(new Float32Array([1, 4, 2, 5, 3, 6]), [3, 2])
  const aT = fromDLPack({ data: stored.data, shape: [2, 3], strides: [1, 2], offset: 0 }) as Tensor<'float32'>
  t.false(aT.isContiguous)
  t.throws(() => ortView(aT))
  const dense = Tensor.from(aT.toTypedArray() as Float32Array, [2, 3])
  const b = Tensor.from(new Float32Array([1, 0, 0, 1, 1, 1]), [3, 2])
  const out = Tensor.empty([2, 2], 'float32')
  await session.run({ a: ortView(dense), b: ortView(b) }, { c: ortView(out) })
  t.deepEqual(out.toArray(), matmul(aT.toArray() as number[][], b.toArray() as number[][]))
})

test('C capsules: input and output memory owned by the C addon', async (t) => {
  const c = needC()
  const session = await sessions.mulAdd
  const n = 16
  const xCapsule = c.makeTensor({ shape: [n], versioned: true }) // iota: 0, 1, 2, ...
  const outCapsule = c.makeTensor({ shape: [n], versioned: false, fill: 'none' })
  const outPointer = c.dataPointer(outCapsule)
  const x = fromDLPack(xCapsule) as Tensor<'float32'>
  const out = fromDLPack(outCapsule) as Tensor<'float32'>
  const y = Tensor.from(new Float32Array(n).fill(3))

  if (zeroCopy) {
    t.false(out.isCopy)
    t.is(out.dataPointer, outPointer, 'the output view is the C memory itself')
  } else {
    t.true(out.isCopy)
    t.not(out.dataPointer, outPointer, 'Electron mode: a V8 copy of the C memory')
  }
  await session.run({ x: ortView(x), y: ortView(y) }, { z: ortView(out) })
  const expected = Array.from({ length: n }, (_, i) => i * 3 + i)
  t.deepEqual([...out.data], expected)

  // send the result back to C: it reads it from the memory ORT wrote
  const held = c.consume(out.__dlpack__())
  const info = c.heldInfo(held)
  t.is(info.data + BigInt(info.byteOffset), out.dataPointer)
  if (zeroCopy) t.is(info.data + BigInt(info.byteOffset), outPointer, 'ORT wrote straight into C memory')
  t.deepEqual([...c.heldFloat32(held)], expected)
  c.release(held)
  x.dispose()
  out.dispose()
})

test('a shape mismatch between fetches and the result is reported by ORT, and our tensor stays usable', async (t) => {
  const session = await sessions.mulAdd
  const x = Tensor.from(new Float32Array([1, 2, 3]))
  const out = Tensor.empty([4], 'float32')
  await t.throwsAsync(() => session.run({ x: ortView(x), y: ortView(x) }, { z: ortView(out) }))
  t.deepEqual([...out.data], [0, 0, 0, 0])
  out.dispose()
})

// ---------------------------------------------------------------------------------------------
// Direct acceptance: fromDLPack(ortTensor) and new ort.Tensor(...t.toOrt()), no glue.

test('fromDLPack takes an ORT tensor as it is, zero-copy (writes seen both ways)', (t) => {
  const values = new Float32Array([1, 2, 3, 4])
  const ortTensor = new ort.Tensor('float32', values, [2, 2])
  const tensor = fromDLPack(ortTensor)
  t.deepEqual(tensor.shape, [2, 2])
  t.is(tensor.dataPointer, addressOf(values))
  tensor.data[3] = 40
  t.is((ortTensor.data as Float32Array)[3], 40)
  values[0] = 10
  t.is(tensor.data[0], 10)
})

test('ORT session outputs come in zero-copy over the array ORT returned', async (t) => {
  const session = await sessions.mulAdd
  const x = Tensor.from(new Float32Array([1, 2, 3]))
  const results = await session.run({ x: new ort.Tensor(...x.toOrt()), y: new ort.Tensor(...x.toOrt()) })
  const z = fromDLPack(results.z!)
  t.deepEqual([...z.data], [2, 6, 12])
  t.is(z.dataPointer, addressOf(results.z!.data as Float32Array))
})

test('toOrt: ORT keeps our array as input, and writes fetches into our memory', async (t) => {
  const session = await sessions.mulAdd
  const x = Tensor.from(new Float32Array([1, 2, 3, 4]))
  const out = Tensor.empty([4], 'float32')
  const args = x.toOrt()
  t.is(args[0], 'float32')
  t.is(args[1], x.data, 'no copy for a dense tensor')
  t.deepEqual(args[2], [4])
  await session.run({ x: new ort.Tensor(...args), y: new ort.Tensor(...x.toOrt()) }, { z: new ort.Tensor(...out.toOrt()) })
  t.deepEqual([...out.data], [2, 6, 12, 20])
})

test('pitfall: ORT has no strides, so toOrt of a transposed view is a dense copy (correct MatMul)', async (t) => {
  const session = await sessions.matMul
  const stored = Tensor.from(new Float32Array([1, 4, 2, 5, 3, 6]), [3, 2])
  const aT = fromDLPack({ data: stored.data, shape: [2, 3], strides: [1, 2], offset: 0 }) as Tensor<'float32'>
  const args = aT.toOrt()
  t.not((args[1] as Float32Array).buffer, stored.data.buffer, 'a copy')
  t.deepEqual([...args[1]], [1, 2, 3, 4, 5, 6])
  const b = Tensor.from(new Float32Array([1, 0, 0, 1, 1, 1]), [3, 2])
  const out = Tensor.empty([2, 2], 'float32')
  await session.run({ a: new ort.Tensor(...args), b: new ort.Tensor(...b.toOrt()) }, { c: new ort.Tensor(...out.toOrt()) })
  t.deepEqual(out.toArray(), matmul(aT.toArray() as number[][], b.toArray() as number[][]))
})

test('pitfall: read-only tensors go to ORT only with allowReadOnly (ORT must not write them)', (t) => {
  const tensor = Tensor.from(new Float32Array([1, 2]), undefined, { readonly: true })
  throwsCode(t, () => tensor.toOrt(), 'ERR_DLPACK_READ_ONLY', ReadOnlyError)
  const [, data] = tensor.toOrt({ allowReadOnly: true })
  t.is(addressOf(data as Float32Array), tensor.dataPointer)
})

test('pitfall: bool keeps its label both ways (ORT would otherwise see uint8)', (t) => {
  const mask = new ort.Tensor('bool', new Uint8Array([1, 0, 1]), [3])
  const tensor = fromDLPack(mask) as Tensor<'bool'>
  t.is(tensor.dtype, 'bool')
  t.deepEqual(tensor.toArray(), [true, false, true])
  const back = new ort.Tensor(...tensor.toOrt())
  t.is(back.type, 'bool')
  t.is(back.data, tensor.data)
})

test('float16 ORT tensors (Uint16Array bits) keep the float16 dtype', (t) => {
  const bits = new Uint16Array([0x3c00, 0x4000])
  const half = fromDLPack(new ort.Tensor('float16', bits, [2]))
  t.is(half.dtype, 'float16')
  t.is(half.dataPointer, addressOf(bits))
})

test('ORT tensors that are not CPU numeric arrays are refused with a code', (t) => {
  throwsCode(t, () => fromDLPack(new ort.Tensor('string', ['a', 'b'], [2])), 'ERR_DLPACK_UNSUPPORTED_DTYPE', DLPackTypeError)
  throwsCode(t, () => fromDLPack(new ort.Tensor('uint4', new Uint8Array([0x12]), [2])), 'ERR_DLPACK_UNSUPPORTED_DTYPE', DLPackTypeError)
  // What ORT's GPU locations look like (only the WebGPU EP makes them in Node).
  const onGpu = { type: 'float32', dims: [2], location: 'gpu-buffer', data: undefined }
  throwsCode(t, () => fromDLPack(onGpu), 'ERR_DLPACK_NOT_CPU', BufferError)
  // ORT checks sizes itself; an object of the same shape need not have.
  const short = { type: 'float32', dims: [2, 2], location: 'cpu', data: new Float32Array(3) }
  throwsCode(t, () => fromDLPack(short), 'ERR_DLPACK_INVALID_ARGUMENT', DLPackTypeError)
  throwsCode(t, () => Tensor.zeros([2], 'bfloat16').toOrt(), 'ERR_DLPACK_UNSUPPORTED_DTYPE', DLPackTypeError)
  // library tensors are CPU memory: another device is refused, a copy to none is made
  const cpu = new ort.Tensor('float32', new Float32Array(2), [2])
  throwsCode(t, () => fromDLPack(cpu, { device: 'cuda:0' }), 'ERR_DLPACK_DEVICE', BufferError)
  throwsCode(t, () => fromDLPack(cpu, { device: 'cuda:0', copy: false }), 'ERR_DLPACK_COPY_REQUIRED', BufferError)
  t.is(fromDLPack(cpu, { device: 'cpu' }).dataPointer, addressOf(cpu.data as Float32Array))
})

test('a clamped tensor (ImageData pixels) goes to ORT as a Uint8Array over the same memory', (t) => {
  const pixels = Tensor.from(new Uint8ClampedArray([1, 2, 3, 4]), [1, 4])
  const [type, data] = pixels.toOrt()
  t.is(type, 'uint8')
  t.true(data instanceof Uint8Array, 'ORT checks the array type')
  const ortTensor = new ort.Tensor('uint8', data, [1, 4])
  t.is(addressOf(ortTensor.data as Uint8Array), pixels.dataPointer)
})
