// Typed imports: `fromDLPack(x, { dtype })` and `Tensor.fromTransfer(x, { dtype })` are checked
// at run time and typed `Tensor<D>`; `t.is(dtype)` narrows. The type-level lines are checked by
// `tsc -p __test__` (they failed to compile before: fromDLPack(capsule) was an untyped Tensor,
// fromTransfer(unknown) did not compile, TensorResult had no dtype).
import test from 'ava'

import {
  type DLPackCapsule,
  DLPackTypeError,
  type DType,
  Tensor,
  type TensorResult,
  externalBuffersAllowed,
  fromDLPack,
  isCapsuleConsumed,
  releaseTransfer,
} from '../../dist/index.js'
import { throwsCode } from '../harness/helpers.js'

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false
type Expect<T extends true> = T

declare const someCapsule: DLPackCapsule
declare const someResult: TensorResult<'float64'>
declare const message: unknown
// Never called: their inferred return types are what is checked.
const typedCapsule = () => fromDLPack(someCapsule, { dtype: 'int16' })
const typedResult = () => fromDLPack(someResult, { dtype: 'float64' })
const typedTransfer = () => Tensor.fromTransfer(message, { dtype: 'uint8' })
const untyped = () => fromDLPack(someCapsule)
export type TypeChecks = [
  Expect<Equal<ReturnType<typeof typedCapsule>, Tensor<'int16'>>>,
  Expect<Equal<ReturnType<typeof typedResult>, Tensor<'float64'>>>,
  Expect<Equal<ReturnType<typeof typedTransfer>, Tensor<'uint8'>>>,
  Expect<Equal<ReturnType<typeof untyped>, Tensor>>,
  Expect<Equal<TensorResult, Tensor<DType> | DLPackCapsule>>,
]
void [typedCapsule, typedResult, typedTransfer, untyped]

// What a user writes, under --strict: no casts.
function sum(capsule: DLPackCapsule): number {
  const y = fromDLPack(capsule, { dtype: 'float32' })
  return Array.from(y.data).reduce((a, b) => a + b, 0)
}

test('fromDLPack(x, { dtype }) types the result and checks it at run time', (t) => {
  const x = Tensor.from(new Float32Array([1, 2, 3]))
  t.is(sum(x.__dlpack__()), 6)
  // A mismatch throws; the source tensor is untouched.
  throwsCode(t, () => fromDLPack(x as Tensor, { dtype: 'int32' }), 'ERR_DLPACK_DTYPE_MISMATCH', DLPackTypeError)
  t.false(x.disposed)
  // A capsule is consumed (its dtype is only known then) and released.
  const capsule = x.__dlpack__()
  throwsCode(t, () => fromDLPack(capsule, { dtype: 'float64' }), 'ERR_DLPACK_DTYPE_MISMATCH', DLPackTypeError)
  t.true(isCapsuleConsumed(capsule))
  // Library and JS memory sources are checked too.
  throwsCode(t, () => fromDLPack(new Int8Array(2) as ArrayBufferView, { dtype: 'uint8' }), 'ERR_DLPACK_DTYPE_MISMATCH', DLPackTypeError)
  t.is(fromDLPack({ data: new Uint16Array(4), shape: [2, 2] }, { dtype: 'uint16' }).numel, 4)
  throwsCode(t, () => fromDLPack(x, { dtype: 'float33' as DType }), 'ERR_DLPACK_INVALID_ARGUMENT', DLPackTypeError)
})

test('t.is(dtype) narrows the type', (t) => {
  const unknownDtype: Tensor = fromDLPack(Tensor.from(new Float64Array([0.5, 1.5])).__dlpack__())
  if (unknownDtype.is('float64')) {
    const data: Float64Array = unknownDtype.data
    t.deepEqual(Array.from(data), [0.5, 1.5])
  } else {
    t.fail('a float64 tensor')
  }
  t.false(unknownDtype.is('float32'))
})

test('Tensor.fromTransfer(message, { dtype }) checks before claiming', (t) => {
  const shared = Tensor.from(new Uint8Array(new SharedArrayBuffer(4)), [4])
  const message: unknown = structuredClone(shared.transfer())
  const back = Tensor.fromTransfer(message, { dtype: 'uint8' })
  const bytes: Uint8Array = back.data
  t.is(bytes.length, 4)
  throwsCode(t, () => Tensor.fromTransfer(message, { dtype: 'int8' }), 'ERR_DLPACK_DTYPE_MISMATCH', DLPackTypeError)
  // A token (memory no JS thread owns: a copy made for an export, imported zero-copy; in
  // Electron mode such memory is copied into an ArrayBuffer at import, which has no token) is
  // not claimed by a refused dtype: the right one still claims it.
  if (!externalBuffersAllowed()) return
  const foreign = fromDLPack(Tensor.from(new Float32Array([1, 2])).__dlpack__({ copy: true }))
  const token = foreign.transfer()
  t.is(token.kind, 'token')
  throwsCode(t, () => Tensor.fromTransfer(token as unknown, { dtype: 'int32' }), 'ERR_DLPACK_DTYPE_MISMATCH', DLPackTypeError)
  t.deepEqual(Tensor.fromTransfer(token as unknown, { dtype: 'float32' }).toArray(), [1, 2])
  t.false(releaseTransfer(token), 'claimed')
})

test('TensorResult<D> comes back as a checked Tensor<D>', (t) => {
  const result: TensorResult<'float32'> = Tensor.from(new Float32Array([4, 5]))
  const tensor = fromDLPack(result, { dtype: 'float32' })
  t.deepEqual(Array.from(tensor.data), [4, 5])
  if (result instanceof Tensor) t.deepEqual(result.shape, [2])
})
