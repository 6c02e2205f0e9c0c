// The facts Rust and TypeScript share (defined in Rust, generated into lib/generated/facts.ts;
// `cargo test -p napi-dlpack-node` checks that file is current): here, that the running addon
// agrees with the generated file, and that every error code has its class, in the code and in
// docs/api.md.
import { readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

import test from 'ava'

import { dlpackError, rethrow } from '../../dist/errors.js'
import {
  COPY_MODE,
  DEVICE_NAMES,
  DLPACK_VERSION,
  DTYPE_FACTS,
  DTYPE_ORDER,
  ERROR_CLASS_BY_CODE,
  HOST_ACCESSIBLE_DEVICE_TYPES,
  INFO_BIT,
  INFO_SLOT,
  INFO_SLOTS,
  MAX_NDIM,
} from '../../dist/generated/facts.js'
import * as api from '../../dist/index.js'
import { DLDeviceType, DLPackError, DTYPES, MAX_VERSION, Tensor, fromDLPack, toDevice } from '../../dist/index.js'
import { native } from '../../dist/native.js'
import { codeOf, throwsCode } from '../harness/helpers'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')

/** The native handle behind a tensor (`_handle` is internal: stripped from the declarations). */
const handleOf = (tensor: Tensor): unknown => (tensor as unknown as { _handle(): unknown })._handle()

test('the addon lists the dtypes in the generated order, with the generated sizes', (t) => {
  t.deepEqual(native.dtypeNames(), [...DTYPE_ORDER])
  t.deepEqual(Object.keys(DTYPES).sort(), [...DTYPE_ORDER].sort())
  for (const dtype of DTYPE_ORDER) {
    const tensor = Tensor.zeros([3], dtype)
    // The dtype slot of handleInfoInto indexes DTYPE_ORDER; the view length follows itemsize.
    t.is(tensor.dtype, dtype)
    t.is(tensor.nbytes, 3 * DTYPE_FACTS[dtype].itemsize, dtype)
    t.is(DTYPES[dtype].code, DTYPE_FACTS[dtype].code, dtype)
    const info = native.handleInfo(handleOf(tensor))
    t.is(info.dtype, dtype)
    tensor.dispose()
  }
})

/** Decodes `handleInfoInto`'s slots with the generated layout. */
function decode(handle: unknown) {
  const slots = new Float64Array(INFO_SLOTS)
  native.handleInfoInto(handle, slots)
  const bits = slots[INFO_SLOT.BITS]
  const ndim = slots[INFO_SLOT.NDIM]
  return {
    dtype: DTYPE_ORDER[slots[INFO_SLOT.DTYPE]],
    shape: Array.from(slots.subarray(INFO_SLOT.SHAPE, INFO_SLOT.SHAPE + ndim)),
    strides: Array.from(slots.subarray(INFO_SLOT.SHAPE + ndim, INFO_SLOT.SHAPE + 2 * ndim)),
    byteOffset: slots[INFO_SLOT.BYTE_OFFSET],
    deviceType: slots[INFO_SLOT.DEVICE_TYPE],
    deviceId: slots[INFO_SLOT.DEVICE_ID],
    readonly: (bits & INFO_BIT.READ_ONLY) !== 0,
    isCopy: (bits & INFO_BIT.IS_COPY) !== 0,
    contiguous: (bits & INFO_BIT.CONTIGUOUS) !== 0,
    numel: slots[INFO_SLOT.NUMEL],
    viewOffset: slots[INFO_SLOT.VIEW_OFFSET],
    viewLength: slots[INFO_SLOT.VIEW_LENGTH],
    version: (bits & INFO_BIT.HAS_VERSION) !== 0 ? [slots[INFO_SLOT.VERSION_MAJOR], slots[INFO_SLOT.VERSION_MINOR]] : null,
    flags: slots[INFO_SLOT.FLAGS],
  }
}

test('handleInfoInto writes the slots the generated layout names (against handleInfo, field by field)', (t) => {
  const bytes = new Uint8Array(64)
  const tensors = [
    Tensor.from(new Float32Array(12), [3, 4]),
    Tensor.from(new Float32Array(12), [2, 3], { strides: [-3, 1], offset: 3 }), // negative stride
    Tensor.from(new Int16Array(8), [8], { readonly: true }),
    Tensor.from(new Uint8Array(bytes.buffer, 1, 8), [4], { dtype: 'uint16' } as never), // misaligned: a copy
    fromDLPack(Tensor.from(new Float64Array(6), [2, 3]).__dlpack__()), // versioned import
    fromDLPack(Tensor.from(new Float64Array(6), [6]).__dlpack__({ maxVersion: [0, 8] })), // legacy
    Tensor.from(new Float32Array(1), new Array(MAX_NDIM).fill(1)), // the most dimensions
  ]
  for (const tensor of tensors) {
    const handle = handleOf(tensor)
    const named = native.handleInfo(handle)
    t.deepEqual(decode(handle), { ...named, version: named.version ?? null }, String(tensor))
  }
  t.is(tensors[2].readonly, true)
  t.is(tensors[3].isCopy, true)
  t.deepEqual(decode(handleOf(tensors[4])).version, [...DLPACK_VERSION])
  t.is(decode(handleOf(tensors[5])).version, null)
  t.is(decode(handleOf(tensors[6])).shape.length, MAX_NDIM)
  throwsCode(t, () => Tensor.from(new Float32Array(1), new Array(MAX_NDIM + 1).fill(1)), 'ERR_DLPACK_NDIM')
  t.is(codeOf(() => native.handleInfoInto(handleOf(tensors[0]), new Float64Array(INFO_SLOTS - 1))), 'ERR_DLPACK_INVALID_ARGUMENT')
  for (const tensor of tensors) tensor.dispose()
})

test('the DLPack version announced to producers is the one the addon writes', (t) => {
  t.deepEqual([...MAX_VERSION], [...DLPACK_VERSION])
  const imported = fromDLPack(Tensor.from(new Float32Array(2)).__dlpack__())
  t.deepEqual(native.handleInfo(handleOf(imported)).version, [...DLPACK_VERSION])
})

test('copy modes: the generated values are the ones the addon accepts', (t) => {
  const source = Tensor.from(new Float32Array([1, 2]))
  const outOfRange = Math.max(...Object.values(COPY_MODE)) + 1
  const capsule = source.__dlpack__()
  t.is(codeOf(() => native.importCapsule(capsule, outOfRange, null)), 'ERR_DLPACK_INVALID_ARGUMENT')
  t.false(api.isCapsuleConsumed(capsule), 'a refused copy mode leaves the capsule usable')
  const always = native.importCapsule(capsule, COPY_MODE.ALWAYS, null)
  t.true(native.handleInfo(always).isCopy)
  const shared = native.importCapsule(source.__dlpack__(), COPY_MODE.NEVER, null)
  t.false(native.handleInfo(shared).isCopy)
  t.is(native.dataPointer(shared), source.dataPointer)
  const ifNeeded = native.importCapsule(source.__dlpack__(), COPY_MODE.IF_NEEDED, null)
  t.false(native.handleInfo(ifNeeded).isCopy)
})

test('device names and types come from the Rust table', (t) => {
  for (const [type, name] of Object.entries(DEVICE_NAMES)) {
    const device = toDevice(type === String(DLDeviceType.CPU) ? name : `${name}:1`)
    t.is(device.type, Number(type))
    t.is(device.name, name)
  }
  t.deepEqual([...HOST_ACCESSIBLE_DEVICE_TYPES].sort(), [DLDeviceType.CPU, DLDeviceType.CUDAHost, DLDeviceType.ROCMHost].sort())
})

test('every code the addon throws maps to its own class, never the bare DLPackError', (t) => {
  for (const [code, className] of Object.entries(ERROR_CLASS_BY_CODE)) {
    const Class = (api as unknown as Record<string, typeof DLPackError>)[className]
    t.is(typeof Class, 'function', `${className} is exported`)
    t.not(Class, DLPackError, code)
    const error = dlpackError(code, 'message')
    t.true(error instanceof Class, `${code} → ${className}`)
    t.is(error.name, className)
    t.is(error.code, code)
    // What the JS layer does with a native error carrying the code.
    const native = Object.assign(new Error('from the addon'), { code })
    t.true(t.throws(() => rethrow(native)) instanceof Class, code)
  }
  // The four that used to fall through to the base class.
  t.true(dlpackError('ERR_DLPACK_DTYPE_MISMATCH', '') instanceof api.DLPackTypeError)
  t.true(dlpackError('ERR_DLPACK_NOT_CONTIGUOUS', '') instanceof api.DLPackTypeError)
  t.true(dlpackError('ERR_DLPACK_NO_MEMORY', '') instanceof api.BufferError)
  t.true(dlpackError('ERR_DLPACK_NAPI', '') instanceof api.NodeApiError)
})

test("the error table of docs/api.md says what the code says", (t) => {
  const readme = readFileSync(join(root, 'docs', 'api.md'), 'utf8')
  const section = readme.slice(readme.indexOf('\n## Errors'), readme.indexOf('\n## ', readme.indexOf('\n## Errors') + 1))
  const rows = [...section.matchAll(/^\| `([A-Z_]+)` \| `(\w+)` \|/gm)].map(([, code, className]) => [code, className] as const)
  const documented = new Map(rows)
  t.is(documented.size, rows.length, 'each code once')
  for (const [code, className] of Object.entries(ERROR_CLASS_BY_CODE)) {
    t.is(documented.get(code), className, code)
  }
  // The rest are thrown by the JS layer alone (on load), as plain DLPackErrors, and are really thrown there.
  const libSources = ['loader.ts', 'tensor.ts', 'protocol.ts', 'device.ts', 'errors.ts'].map((file) =>
    readFileSync(join(root, 'lib', file), 'utf8'),
  )
  for (const [code, className] of documented) {
    if (code in ERROR_CLASS_BY_CODE) continue
    t.is(className, 'DLPackError', code)
    t.true(libSources.some((source) => source.includes(`'${code}'`)), `${code} is thrown by lib/`)
  }
})
