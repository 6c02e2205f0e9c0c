// DLPack interop with real libtorch (Debian's libtorch-dev: torch 1.13, CPU), through the
// test addon in __test__/native/torch-addon (built by its build.sh into target/torch-addon/). Torch
// 1.13's at::toDLPack / at::fromDLPack speak only the LEGACY DLManagedTensor, so this covers
// our legacy import and export paths against a real framework.
//
// Every test runs in both modes: with external buffers allowed (Node), torch -> JS is
// zero-copy; with NAPI_DLPACK_NO_EXTERNAL_BUFFERS=1 (Electron's memory cage) torch -> JS
// imports are copies, while JS -> torch stays zero-copy. The assertions branch on
// externalBuffersAllowed(); nothing is skipped, except everything, visibly, when
// NAPI_DLPACK_SKIP_TORCH=1 says libtorch is deliberately absent.
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'

import test from 'ava'

import {
  type DLPackCapsule,
  type DType,
  Tensor,
  externalBuffersAllowed,
  fromDLPack,
  isCapsuleConsumed,
} from '../../dist/index.js'

// ---- the addon ------------------------------------------------------------------------

interface TorchSpec {
  dtype: string
  shape: number[]
  /** Row-major values (complex: interleaved re, im); default 0, 1, 2, ... */
  values?: number[]
  /** narrow(0, offset, size0 - offset) */
  offset?: number
  /** slice(dim, 0, end, step) */
  step?: [number, number]
  transpose?: [number, number]
  contiguous?: boolean
  /** Export with data = first element - n bytes and byte_offset = n (torch itself uses 0). */
  dlByteOffset?: number
}

interface TorchInfo {
  /** data_ptr() of the torch tensor: its first element. */
  dataPtr: bigint
  /** DLTensor.data and byte_offset as exported (toCapsule) or as received (fromCapsule). */
  dlData: bigint
  dlByteOffset: number
  shape: number[]
  strides: number[]
  storageOffset: number
  dtype: string
  /** Logical (row-major) values as doubles; complex interleaved. */
  values: number[]
}

interface TorchExport extends TorchInfo {
  capsule: DLPackCapsule
}

declare const handleBrand: unique symbol
type TorchHandle = { readonly [handleBrand]: true }

interface TorchAddon {
  toCapsule(spec: TorchSpec): TorchExport
  exportHandle(handle: TorchHandle): TorchExport
  fromCapsule(capsule: unknown): TorchHandle
  info(handle: TorchHandle): TorchInfo
  sum(handle: TorchHandle): number | [number, number]
  mulScalarInPlace(handle: TorchHandle, k: number): void
  addInPlace(handle: TorchHandle, value: number): void
  release(handle: TorchHandle): void
}

const require = createRequire(import.meta.url)
const SKIP = process.env.NAPI_DLPACK_SKIP_TORCH === '1'
const addonPath = fileURLToPath(new URL('../../target/torch-addon/torch_addon.node', import.meta.url))

function loadTorch(): TorchAddon {
  try {
    return require(addonPath) as TorchAddon
  } catch (error) {
    throw new Error(
      `cannot load ${addonPath}: run __test__/native/torch-addon/install-deps.sh (root) and __test__/native/torch-addon/build.sh, ` +
        'or set NAPI_DLPACK_SKIP_TORCH=1 to skip these tests explicitly',
      { cause: error },
    )
  }
}

const torch: TorchAddon = SKIP ? (undefined as unknown as TorchAddon) : loadTorch()
// Serial: the leak checks count live storages process-wide.
const torchTest = SKIP ? test.serial.skip : test.serial

// The addon's own leak counter: native storages (memory regions) alive in this process. It
// drops when the last owner of a region lets go, e.g. when torch calls our DLPack deleter.
const native = require('../../dist/binding/index.js') as { nativeStats(): { liveStorages: number } }
const liveStorages = (): number => native.nativeStats().liveStorages

const ZERO_COPY = externalBuffersAllowed()
const LEGACY = { maxVersion: [0, 8] } as const

/** Runs GC and lets deferred finalizers run. */
async function settle(): Promise<void> {
  for (let i = 0; i < 3; i++) {
    globalThis.gc?.()
    await new Promise((resolve) => setImmediate(resolve))
  }
}

// ---- value helpers --------------------------------------------------------------------

function f16ToNumber(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1
  const exponent = (bits >> 10) & 0x1f
  const mantissa = bits & 0x3ff
  if (exponent === 0) return sign * mantissa * 2 ** -24
  if (exponent === 0x1f) return mantissa ? Number.NaN : sign * Number.POSITIVE_INFINITY
  return sign * (1 + mantissa / 1024) * 2 ** (exponent - 15)
}

/** float16 bits of a number that float16 represents exactly. */
function numberToF16(value: number): number {
  if (Number.isNaN(value)) return 0x7e00
  const sign = value < 0 || Object.is(value, -0) ? 0x8000 : 0
  const magnitude = Math.abs(value)
  if (magnitude === Number.POSITIVE_INFINITY) return sign | 0x7c00
  if (magnitude < 2 ** -14) return sign | Math.round(magnitude / 2 ** -24)
  let exponent = Math.floor(Math.log2(magnitude))
  if (2 ** exponent > magnitude) exponent -= 1
  if (2 ** (exponent + 1) <= magnitude) exponent += 1
  return sign | ((exponent + 15) << 10) | Math.round((magnitude / 2 ** exponent - 1) * 1024)
}

const f32 = new Float32Array(1)
const u32 = new Uint32Array(f32.buffer)

function bf16ToNumber(bits: number): number {
  u32[0] = bits << 16
  return f32[0] as number
}

/** bfloat16 bits of a number that bfloat16 represents exactly. */
function numberToBf16(value: number): number {
  f32[0] = value
  return (u32[0] as number) >>> 16
}

/** A tensor's elements in logical (row-major) order as numbers (complex: interleaved). */
function logical(tensor: Tensor): number[] {
  const flat = tensor.toTypedArray() as ArrayLike<number | bigint>
  const out: number[] = []
  for (let i = 0; i < flat.length; i++) {
    const value = flat[i] as number | bigint
    if (typeof value === 'bigint') out.push(Number(value))
    else if (tensor.dtype === 'float16' && flat instanceof Uint16Array) out.push(f16ToNumber(value))
    else if (tensor.dtype === 'bfloat16') out.push(bf16ToNumber(value))
    else out.push(value)
  }
  return out
}

/** Element offset, within `tensor.data`, of the element at `index`. */
function at(tensor: Tensor, index: number[]): number {
  return index.reduce((offset, i, axis) => offset + i * (tensor.strides[axis] as number), tensor.offset)
}

// Values each shared dtype must carry exactly (6 elements: shape [2, 3]; complex: 6 pairs).
const F32_MAX = 3.4028234663852886e38
const BF16_MAX = 3.3895313892515355e38
const DTYPE_VALUES: Partial<Record<DType, number[]>> = {
  uint8: [0, 1, 127, 128, 200, 255],
  int8: [-128, -1, 0, 1, 100, 127],
  int16: [-32768, -300, -1, 0, 1, 32767],
  int32: [-2147483648, -65536, -1, 0, 1, 2147483647],
  int64: [-(2 ** 53), -(2 ** 40), -1, 0, 1, 2 ** 53],
  float16: [-65504, -0, 5.960464477539063e-8, 0.0999755859375, Infinity, NaN],
  bfloat16: [-BF16_MAX, -0, 0.099609375, 2 ** -133, Infinity, NaN],
  float32: [-F32_MAX, -0, Math.fround(0.1), 1.401298464324817e-45, Infinity, NaN],
  float64: [-Number.MAX_VALUE, -0, 0.1, 5e-324, Infinity, NaN],
  complex64: [1.5, -2, Math.fround(0.1), -0, Infinity, NaN, F32_MAX, 1.401298464324817e-45, 0, 1, -1, 0.5],
  complex128: [0.1, -0.1, Number.MAX_VALUE, 5e-324, -0, NaN, Infinity, -Infinity, 1, 2, 3, 4],
}

/** JS memory holding `values` as `dtype`. */
function jsArray(dtype: DType, values: number[]): ArrayBufferView {
  switch (dtype) {
    case 'uint8':
      return Uint8Array.from(values)
    case 'int8':
      return Int8Array.from(values)
    case 'int16':
      return Int16Array.from(values)
    case 'int32':
      return Int32Array.from(values)
    case 'int64':
      return BigInt64Array.from(values.map((v) => BigInt(v)))
    case 'float16':
      return Uint16Array.from(values.map(numberToF16))
    case 'bfloat16':
      return Uint16Array.from(values.map(numberToBf16))
    case 'float32':
    case 'complex64':
      return Float32Array.from(values)
    case 'float64':
    case 'complex128':
      return Float64Array.from(values)
    default:
      throw new Error(`no JS array for ${dtype}`)
  }
}

test('float16/bfloat16 test helpers are exact on the test values', (t) => {
  for (const v of DTYPE_VALUES.float16 as number[]) t.is(f16ToNumber(numberToF16(v)), v)
  for (const v of DTYPE_VALUES.bfloat16 as number[]) t.is(bf16ToNumber(numberToBf16(v)), v)
})

// ---- torch -> JS ----------------------------------------------------------------------

torchTest('torch -> JS: shares torch memory (copies in Electron mode); JS writes reach torch', (t) => {
  const values = [1, 2, 3, 4, 5, 6]
  const exported = torch.toCapsule({ dtype: 'float32', shape: [2, 3], values })
  t.is(exported.dlData, exported.dataPtr)
  t.is(exported.dlByteOffset, 0)

  const js = fromDLPack(exported.capsule)
  t.true(isCapsuleConsumed(exported.capsule))
  t.is(js.dtype, 'float32')
  t.deepEqual(js.shape, [2, 3])
  t.deepEqual(js.strides, [3, 1])
  t.deepEqual(js.toArray(), [
    [1, 2, 3],
    [4, 5, 6],
  ])
  if (ZERO_COPY) {
    t.false(js.isCopy)
    t.is(js.dataPointer, exported.dataPtr)
  } else {
    t.true(js.isCopy)
    t.not(js.dataPointer, exported.dataPtr)
  }

  // JS writes, then hands the tensor back to torch as a legacy capsule.
  js.data[4] = 42
  const handle = torch.fromCapsule(js.__dlpack__(LEGACY))
  const seen = torch.info(handle)
  t.deepEqual(seen.values, [1, 2, 3, 4, 42, 6])
  t.is(seen.dataPtr, js.dataPointer) // JS -> torch is zero-copy in both modes
  if (ZERO_COPY) t.is(seen.dataPtr, exported.dataPtr) // ... so torch is back on its own memory
  t.is(seen.dlByteOffset, 0)
  t.deepEqual(seen.strides, [3, 1])

  // And torch's in-place arithmetic shows up in the JS tensor.
  torch.mulScalarInPlace(handle, 2)
  t.deepEqual(Array.from(js.data as Float32Array), [2, 4, 6, 8, 84, 12])
  t.is(torch.sum(handle), 116)
  torch.release(handle)
  js.dispose()
})

torchTest('torch -> JS: the memory outlives torch dropping its tensor; disposing releases it', async (t) => {
  await settle()
  const before = liveStorages()
  // Torch keeps the exported tensor alive only through the DLPack context now.
  const exported = torch.toCapsule({ dtype: 'float64', shape: [1000], values: Array.from({ length: 1000 }, (_, i) => i) })
  const js = fromDLPack(exported.capsule)
  t.is(liveStorages(), before + 1)
  await settle()
  for (let i = 0; i < 20; i++) new Float64Array(1000).fill(-1) // churn the allocator
  const sum = (js.data as Float64Array).reduce((a, b) => a + b, 0)
  t.is(sum, 499500)
  if (ZERO_COPY) t.is(js.dataPointer, exported.dataPtr)
  js.dispose() // drops our storage; zero-copy: this runs torch's deleter
  t.is(liveStorages(), before)
})

// ---- JS -> torch ----------------------------------------------------------------------

torchTest('JS -> torch: zero-copy in both modes; torch arithmetic on JS memory', (t) => {
  const array = new Float32Array([1, 2, 3, 4, 5, 6])
  const js = Tensor.from(array, [2, 3])
  const handle = torch.fromCapsule(js.__dlpack__(LEGACY))
  const seen = torch.info(handle)
  t.is(seen.dataPtr, js.dataPointer)
  t.is(seen.dlData, js.dataPointer)
  t.is(seen.dlByteOffset, 0)
  t.deepEqual(seen.shape, [2, 3])
  t.deepEqual(seen.strides, [3, 1])
  t.is(seen.dtype, 'float32')
  t.deepEqual(seen.values, [1, 2, 3, 4, 5, 6])
  t.is(torch.sum(handle), 21)

  torch.mulScalarInPlace(handle, 3)
  t.deepEqual(Array.from(array), [3, 6, 9, 12, 15, 18])
  torch.addInPlace(handle, 0.5)
  t.deepEqual(Array.from(js.data as Float32Array), [3.5, 6.5, 9.5, 12.5, 15.5, 18.5])
  t.is(torch.sum(handle), 66)

  // JS writes are seen by torch.
  array[0] = -100
  t.is(torch.info(handle).values[0], -100)
  torch.release(handle)
  t.throws(() => torch.sum(handle), { code: 'ERR_TORCH_RELEASED' })
  js.dispose()
})

torchTest('JS -> torch: JS memory stays valid while torch holds it; torch calls our deleter', async (t) => {
  await settle()
  const before = liveStorages()
  let handle: TorchHandle | undefined
  let pointer = 0n
  ;(() => {
    const js = Tensor.from(new Float32Array(4096).fill(1.5))
    pointer = js.dataPointer
    handle = torch.fromCapsule(js.__dlpack__(LEGACY))
    js.dispose() // our JS tensor is gone; the export still holds the ArrayBuffer
  })()
  await settle()
  for (let i = 0; i < 50; i++) new Float32Array(4096).fill(-7) // churn
  await settle()
  const held = handle as TorchHandle
  t.is(liveStorages(), before + 1)
  t.is(torch.info(held).dataPtr, pointer)
  t.is(torch.sum(held), 6144)
  torch.mulScalarInPlace(held, 2)
  t.is(torch.sum(held), 12288)
  torch.release(held) // torch's last reference: it runs our DLPack deleter
  t.is(liveStorages(), before)
})

torchTest('JS -> torch -> JS: torch re-exports JS memory; the full circle is zero-copy where allowed', (t) => {
  const array = new Int32Array([10, 20, 30, 40])
  const js = Tensor.from(array, [2, 2])
  const handle = torch.fromCapsule(js.__dlpack__(LEGACY))
  const back = torch.exportHandle(handle)
  t.is(back.dataPtr, js.dataPointer)
  const again = fromDLPack(back.capsule)
  t.deepEqual(again.toArray(), [
    [10, 20],
    [30, 40],
  ])
  if (ZERO_COPY) {
    t.false(again.isCopy)
    t.is(again.dataPointer, js.dataPointer)
    again.data[3] = 99
    t.is(array[3], 99)
  } else {
    t.true(again.isCopy)
    t.not(again.dataPointer, js.dataPointer)
    again.data[3] = 99
    t.is(array[3], 40)
  }
  torch.release(handle)
  again.dispose()
  js.dispose()
})

// ---- non-contiguous views -------------------------------------------------------------

const TORCH_VIEWS: Array<{ name: string; spec: TorchSpec; strides: number[]; storageOffset: number; contiguous?: boolean }> = [
  { name: 'transpose', spec: { dtype: 'float32', shape: [3, 4], transpose: [0, 1] }, strides: [1, 4], storageOffset: 0 },
  { name: 'stepped columns', spec: { dtype: 'float32', shape: [3, 6], step: [1, 2] }, strides: [6, 2], storageOffset: 0 },
  { name: 'stepped rows', spec: { dtype: 'int16', shape: [7, 2], step: [0, 3] }, strides: [6, 1], storageOffset: 0 },
  { name: 'narrowed offset', spec: { dtype: 'float64', shape: [5, 3], offset: 2 }, strides: [3, 1], storageOffset: 6, contiguous: true },
  {
    name: 'narrow + step + transpose',
    spec: { dtype: 'int64', shape: [4, 6], offset: 1, step: [1, 2], transpose: [0, 1] },
    strides: [2, 6],
    storageOffset: 6,
  },
  {
    name: '3-d permuted slice',
    spec: { dtype: 'float32', shape: [3, 4, 5], offset: 1, step: [2, 2], transpose: [0, 2] },
    strides: [2, 5, 20],
    storageOffset: 20,
  },
]

for (const { name, spec, strides, storageOffset, contiguous = false } of TORCH_VIEWS) {
  torchTest(`torch view -> JS -> torch keeps layout: ${name}`, (t) => {
    const exported = torch.toCapsule(spec)
    t.deepEqual(exported.strides, strides)
    t.is(exported.storageOffset, storageOffset)
    t.is(exported.dlData, exported.dataPtr) // torch: data = first element, byte_offset 0
    t.is(exported.dlByteOffset, 0)

    const js = fromDLPack(exported.capsule)
    t.deepEqual(js.shape, exported.shape)
    t.deepEqual(js.strides, exported.strides)
    t.is(js.byteOffset, 0)
    t.is(js.offset, 0)
    t.is(js.isContiguous, contiguous)
    t.deepEqual(logical(js), exported.values)
    if (ZERO_COPY) {
      t.false(js.isCopy)
      t.is(js.dataPointer, exported.dataPtr)
    } else {
      t.true(js.isCopy)
      t.not(js.dataPointer, exported.dataPtr)
    }

    // Write the last logical element through the strided JS view.
    const last = exported.shape.map((dim) => dim - 1)
    const data = js.data as unknown as { [i: number]: number | bigint }
    data[at(js, last)] = typeof data[0] === 'bigint' ? -5n : -5

    const handle = torch.fromCapsule(js.__dlpack__(LEGACY))
    const seen = torch.info(handle)
    t.deepEqual(seen.shape, exported.shape)
    t.deepEqual(seen.strides, exported.strides)
    t.is(seen.dataPtr, js.dataPointer)
    if (ZERO_COPY) t.is(seen.dataPtr, exported.dataPtr)
    t.deepEqual(seen.values, [...exported.values.slice(0, -1), -5])
    torch.release(handle)
    js.dispose()
  })
}

// torch 1.13's at::fromDLPack ignores byte_offset, so a zero-copy re-export of a foreign host
// tensor must fold byte_offset into `data` (src/storage.rs, Storage::export_address) for torch to read
// the first element (regression test for that fix).
torchTest('a foreign tensor with byte_offset != 0 re-exported to torch keeps its first element', (t) => {
  const exported = torch.toCapsule({ dtype: 'float64', shape: [5, 3], offset: 2, dlByteOffset: 48 })
  t.is(exported.dlByteOffset, 48)
  t.is(exported.dlData, exported.dataPtr - 48n)
  const js = fromDLPack(exported.capsule)
  t.deepEqual(logical(js), exported.values)
  if (ZERO_COPY) t.is(js.dataPointer, exported.dataPtr)
  const handle = torch.fromCapsule(js.__dlpack__(LEGACY))
  const seen = torch.info(handle)
  t.is(seen.dataPtr, js.dataPointer)
  t.deepEqual(seen.values, exported.values)
  torch.release(handle)
  js.dispose()
})

const JS_VIEWS: Array<{ name: string; shape: number[]; strides: number[]; offset: number }> = [
  { name: 'transposed', shape: [3, 4], strides: [1, 3], offset: 0 },
  { name: 'offset rows', shape: [2, 3], strides: [6, 1], offset: 3 },
  { name: 'stepped columns with offset', shape: [3, 2], strides: [4, 2], offset: 1 },
  { name: 'broadcast (zero stride)', shape: [3, 4], strides: [0, 1], offset: 2 },
]

for (const { name, shape, strides, offset } of JS_VIEWS) {
  torchTest(`JS view -> torch keeps layout and first element: ${name}`, (t) => {
    const array = Float32Array.from({ length: 12 }, (_, i) => i)
    const js = Tensor.from(array, shape, { strides, offset })
    const base = Tensor.from(array)
    t.is(js.dataPointer, base.dataPointer + BigInt(offset * 4))
    base.dispose()
    const handle = torch.fromCapsule(js.__dlpack__(LEGACY))
    const seen = torch.info(handle)
    t.deepEqual(seen.shape, shape)
    t.deepEqual(seen.strides, strides)
    // torch 1.13 ignores byte_offset, so our exports must point data at the first element.
    t.is(seen.dlByteOffset, 0)
    t.is(seen.dataPtr, js.dataPointer)
    t.deepEqual(seen.values, logical(js))
    t.is(torch.sum(handle), logical(js).reduce((a, b) => a + b, 0))
    if (strides.every((s) => s !== 0)) {
      // Torch writes into the view land in exactly the viewed elements of the JS array.
      const expected = Array.from(array)
      for (const index of indices(shape)) {
        const element = offset + index.reduce((sum, i, axis) => sum + i * (strides[axis] as number), 0)
        expected[element] = (expected[element] as number) + 100
      }
      torch.addInPlace(handle, 100)
      t.deepEqual(Array.from(array), expected)
    }
    torch.release(handle)
    js.dispose()
  })
}

function indices(shape: number[]): number[][] {
  let out: number[][] = [[]]
  for (const dim of shape) out = out.flatMap((prefix) => Array.from({ length: dim }, (_, i) => [...prefix, i]))
  return out
}

torchTest('JS view with a negative stride is refused by the torch side, and released', async (t) => {
  await settle()
  const before = liveStorages()
  const js = Tensor.from(new Float32Array([1, 2, 3, 4]), [4], { strides: [-1], offset: 3 })
  t.deepEqual(js.toArray(), [4, 3, 2, 1])
  const capsule = js.__dlpack__(LEGACY)
  // torch 1.13 has no negative strides (at::fromDLPack would abort the process).
  t.throws(() => torch.fromCapsule(capsule), { code: 'ERR_TORCH_NEGATIVE_STRIDES' })
  t.true(isCapsuleConsumed(capsule))
  js.dispose()
  t.is(liveStorages(), before)
})

// ---- dtypes ---------------------------------------------------------------------------

for (const [dtype, values] of Object.entries(DTYPE_VALUES) as Array<[DType, number[]]>) {
  const complex = dtype.startsWith('complex')
  const shape = [2, (complex ? values.length / 2 : values.length) / 2]

  torchTest(`dtype ${dtype}: torch -> JS -> torch is exact`, (t) => {
    const exported = torch.toCapsule({ dtype, shape, values })
    t.is(exported.dtype, dtype)
    t.deepEqual(exported.values, values)
    const js = fromDLPack(exported.capsule)
    t.is(js.dtype, dtype)
    t.deepEqual(js.shape, shape)
    t.deepEqual(logical(js), values)
    if (ZERO_COPY) t.is(js.dataPointer, exported.dataPtr)
    else t.true(js.isCopy)
    const handle = torch.fromCapsule(js.__dlpack__(LEGACY))
    const seen = torch.info(handle)
    t.is(seen.dtype, dtype)
    t.is(seen.dataPtr, js.dataPointer)
    t.deepEqual(seen.values, values)
    torch.release(handle)
    js.dispose()
  })

  torchTest(`dtype ${dtype}: JS -> torch -> JS is exact`, (t) => {
    const js = Tensor.from(jsArray(dtype, values), shape, { dtype })
    t.deepEqual(logical(js), values)
    const handle = torch.fromCapsule(js.__dlpack__(LEGACY))
    const seen = torch.info(handle)
    t.is(seen.dtype, dtype)
    t.is(seen.dataPtr, js.dataPointer)
    t.deepEqual(seen.values, values)
    const back = fromDLPack(torch.exportHandle(handle).capsule)
    t.is(back.dtype, dtype)
    t.deepEqual(logical(back), values)
    if (ZERO_COPY) t.is(back.dataPointer, js.dataPointer)
    else t.true(back.isCopy)
    back.dispose()
    torch.release(handle)
    js.dispose()
  })
}

torchTest('dtypes torch 1.13 refuses: bool both ways, uint16/32/64 into torch, complex32 out of it', async (t) => {
  // at::toDLPack: "Bool type is not supported by dlpack".
  t.throws(() => torch.toCapsule({ dtype: 'bool', shape: [2], values: [1, 0] }), { code: 'ERR_TORCH_DTYPE' })

  await settle()
  const before = liveStorages()
  const refused: Array<[DType, ArrayBufferView]> = [
    ['bool', new Uint8Array([1, 0])], // kDLBool: "Unsupported code 6"
    ['uint16', new Uint16Array([1, 2])], // "Unsupported kUInt bits 16"
    ['uint32', new Uint32Array([1, 2])],
    ['uint64', new BigUint64Array([1n, 2n])],
  ]
  for (const [dtype, array] of refused) {
    const js = Tensor.from(array, [2], { dtype })
    const capsule = js.__dlpack__(LEGACY)
    const error = t.throws(() => torch.fromCapsule(capsule), { code: 'ERR_TORCH_DTYPE' })
    t.regex(error?.message ?? '', /Unsupported/)
    t.true(isCapsuleConsumed(capsule))
    js.dispose()
  }
  // The addon released every refused tensor: nothing of ours is left alive.
  t.is(liveStorages(), before)

  // torch's complex32 (ComplexHalf) exports as kDLComplex/32, which we do not know.
  const exported = torch.toCapsule({ dtype: 'complex32', shape: [2] })
  t.throws(() => fromDLPack(exported.capsule), { code: 'ERR_DLPACK_DTYPE' })
  t.is(liveStorages(), before)
})

// ---- capsule protocol edges -----------------------------------------------------------

torchTest('a versioned capsule is refused with ERR_TORCH_NEEDS_LEGACY and released', async (t) => {
  await settle()
  const before = liveStorages()
  const js = Tensor.from(new Float32Array([1, 2, 3]))
  const capsule = js.__dlpack__() // versioned (DLPack 1.x)
  t.throws(() => torch.fromCapsule(capsule), { code: 'ERR_TORCH_NEEDS_LEGACY' })
  t.true(isCapsuleConsumed(capsule))
  t.deepEqual(js.toArray(), [1, 2, 3])
  js.dispose()
  t.is(liveStorages(), before)
})

torchTest('capsules are consumed once, whichever side consumes', (t) => {
  const js = Tensor.from(new Float32Array([1, 2]))
  const capsule = js.__dlpack__(LEGACY)
  const handle = torch.fromCapsule(capsule)
  t.throws(() => torch.fromCapsule(capsule), { code: 'ERR_DLPACK_CAPSULE_CONSUMED' })
  t.throws(() => fromDLPack(capsule), { code: 'ERR_DLPACK_CAPSULE_CONSUMED' })

  const exported = torch.toCapsule({ dtype: 'float32', shape: [2] })
  const imported = fromDLPack(exported.capsule)
  t.throws(() => torch.fromCapsule(exported.capsule), { code: 'ERR_DLPACK_CAPSULE_CONSUMED' })
  t.throws(() => torch.fromCapsule({}), { code: 'ERR_DLPACK_NOT_A_CAPSULE' })

  // torch -> torch through our ABI alone.
  const direct = torch.toCapsule({ dtype: 'float32', shape: [3], values: [1, 2, 4] })
  const same = torch.fromCapsule(direct.capsule)
  t.is(torch.info(same).dataPtr, direct.dataPtr)
  t.is(torch.sum(same), 7)

  for (const h of [handle, same]) torch.release(h)
  imported.dispose()
  js.dispose()
})

torchTest('zero-size and 0-d tensors cross both ways', (t) => {
  const empty = fromDLPack(torch.toCapsule({ dtype: 'float32', shape: [2, 0] }).capsule)
  t.deepEqual(empty.shape, [2, 0])
  t.is(empty.numel, 0)
  const scalar = fromDLPack(torch.toCapsule({ dtype: 'float64', shape: [], values: [2.5] }).capsule)
  t.deepEqual(scalar.shape, [])
  t.is(scalar.toArray(), 2.5)

  const jsEmpty = Tensor.from(new Float32Array(0), [0])
  const h0 = torch.fromCapsule(jsEmpty.__dlpack__(LEGACY))
  t.deepEqual(torch.info(h0).shape, [0])
  t.is(torch.sum(h0), 0)
  const jsScalar = Tensor.from(new Float32Array([5]), [])
  const h1 = torch.fromCapsule(jsScalar.__dlpack__(LEGACY))
  t.deepEqual(torch.info(h1).shape, [])
  t.is(torch.info(h1).dataPtr, jsScalar.dataPointer)
  t.is(torch.sum(h1), 5)
  for (const h of [h0, h1]) torch.release(h)
  for (const x of [empty, scalar, jsEmpty, jsScalar]) x.dispose()
})
