// Type-level contract of the TypeScript API, checked by `tsc -p __test__` (a step of npm test),
// plus the runtime facts each static type promises.
import test from 'ava'

import {
  type CanDLPack,
  type CanDLPackDevice,
  type DataArray,
  DLDataTypeCode,
  DLDeviceType,
  type DType,
  type Float16View,
  Tensor,
  type TensorArg,
  type TensorHandle,
  fromDLPack,
} from '../../dist/index.js'

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false
type Expect<T extends true> = T

// The dtype → TypedArray map, as the issue states it: Tensor<'float32'>['data'] is Float32Array.
export type TypeChecks = [
  Expect<Equal<Tensor<'float32'>['data'], Float32Array>>,
  Expect<Equal<Tensor<'int64'>['data'], BigInt64Array>>,
  Expect<Equal<Tensor<'bfloat16'>['data'], Uint16Array>>,
  Expect<Equal<Tensor<'float16'>['data'], Float16View>>,
  Expect<Equal<Tensor<'complex128'>['data'], Float64Array>>,
  Expect<Equal<Tensor<'bool'>['data'], Uint8Array>>,
  Expect<Equal<DataArray<'float8_e4m3fn'>, Uint8Array>>,
  // Factories carry the dtype through.
  Expect<Equal<ReturnType<typeof Tensor.zeros<'int16'>>, Tensor<'int16'>>>,
  // A tensor is a DLPack producer for the protocol interfaces.
  Expect<Tensor extends CanDLPack & CanDLPackDevice ? true : false>,
  // `native` is a handle (an id external) and `id` a number; a typed argument of an addon takes both.
  Expect<Equal<Tensor<'uint8'>['native'], TensorHandle>>,
  Expect<Tensor['native'] extends TensorArg ? true : false>,
  Expect<Equal<Tensor['id'], number>>,
  Expect<Tensor['id'] extends TensorArg ? true : false>,
  // The handle is opaque: not a Tensor, nothing to read from JS.
  Expect<TensorHandle extends Tensor ? false : true>,
]

test('Tensor.from infers the dtype from the TypedArray type, and the runtime agrees', (t) => {
  const floats = Tensor.from(new Float64Array(2))
  const typed: Tensor<'float64'> = floats
  const data: Float64Array = typed.data
  t.true(data instanceof Float64Array)
  t.is(typed.dtype, 'float64')

  const words = Tensor.from(new Uint16Array(4), undefined, { dtype: 'bfloat16' })
  const bf16: Tensor<'bfloat16'> = words
  t.true(bf16.data instanceof Uint16Array)
  t.is(bf16.dtype, 'bfloat16')

  const big: Tensor<'int64'> = fromDLPack(new BigInt64Array(1))
  t.true(big.data instanceof BigInt64Array)
})

test('the DLPack enums hold the DLPack 1.3 numbers', (t) => {
  t.is(DLDeviceType.CPU, 1)
  t.is(DLDeviceType.CUDA, 2)
  t.is(DLDeviceType.CUDAManaged, 13)
  t.is(DLDeviceType.Trn, 18)
  t.is(DLDataTypeCode.Bool, 6)
  t.is(DLDataTypeCode.Float4_e2m1fn, 17)
  const device: CanDLPackDevice<DLDeviceType.CPU, 0> = { __dlpack_device__: () => [DLDeviceType.CPU, 0] }
  t.deepEqual(device.__dlpack_device__(), [1, 0])
  const dtypes: DType[] = ['float32', 'float8_e5m2', 'complex64']
  t.is(dtypes.length, 3)
})
