// napi-dlpack with sharp: fromDLPack takes `.raw().toBuffer({ resolveWithObject: true })` as it
// is ({ data, info }): an HWC tensor over sharp's output Buffer (pointer identity), with the
// dtype sharp's `info.depth` names. Back to sharp: `sharp(t.data, { raw })` of a dense tensor.
// The pitfalls are explicit cases: float input is read as a 16-bit range, crops (strided
// views) need a dense copy, `buf.buffer` of a small Buffer is Node's whole pool.
import test from 'ava'
import sharp from 'sharp'

import { DLPackTypeError, Tensor, fromDLPack } from '../../dist/index.js'
import { addressOf, runtime, throwsCode } from '../harness/helpers.js'

const width = 5
const height = 4
const channels = 3
/** An HWC test image: pixel (y, x), channel c = 10y + 2x + c. */
const pixels = Uint8Array.from({ length: width * height * channels }, (_, i) => {
  const c = i % channels
  const x = Math.floor(i / channels) % width
  const y = Math.floor(i / channels / width)
  return 10 * y + 2 * x + c
})
const raw = { width, height, channels } as const

test("raw output { data, info } is an HWC uint8 tensor over sharp's Buffer", async (t) => {
  const output = await sharp(pixels, { raw }).raw().toBuffer({ resolveWithObject: true })
  const tensor = fromDLPack(output)
  t.is(tensor.dtype, 'uint8')
  t.deepEqual(tensor.shape, [height, width, channels])
  t.is(tensor.dataPointer, addressOf(output.data), 'zero-copy: the Buffer sharp returned')
  t.deepEqual([...tensor.data], [...pixels])
  tensor.data[0] = 99
  t.is(output.data[0], 99, 'writes through the tensor land in the Buffer')
  output.data[1] = 98
  t.is(tensor.data[1], 98, 'and the other way round')
})

test('info.depth gives the dtype: float and ushort output are reinterpreted in place', async (t) => {
  const floats = await sharp(pixels, { raw }).raw({ depth: 'float' }).toBuffer({ resolveWithObject: true })
  const f32 = fromDLPack(floats)
  t.is(f32.dtype, 'float32')
  t.deepEqual(f32.shape, [height, width, channels])
  t.is(f32.dataPointer, addressOf(floats.data))

  const words = await sharp(pixels, { raw }).toColourspace('rgb16').raw({ depth: 'ushort' }).toBuffer({ resolveWithObject: true })
  const u16 = fromDLPack(words)
  t.is(u16.dtype, 'uint16')
  t.deepEqual(u16.shape, [height, width, channels])
  t.is(u16.dataPointer, addressOf(words.data))
})

test('a data length that does not match info is refused', (t) => {
  const bogus = { data: new Uint8Array(10), info: { width: 2, height: 2, channels: 3 } }
  throwsCode(t, () => fromDLPack(bogus), 'ERR_DLPACK_INVALID_ARGUMENT', DLPackTypeError)
})

test('back to sharp: a dense tensor is raw input as is', async (t) => {
  const tensor = Tensor.from(pixels.slice(), [height, width, channels])
  const png = await sharp(tensor.data, { raw: { width, height, channels } }).png().toBuffer()
  const decoded = await sharp(png).raw().toBuffer()
  t.deepEqual([...decoded], [...tensor.data])
})

test('pitfall: float input is read as a 16-bit range (0..255 floats come out black)', async (t) => {
  const asFloat = Tensor.from(Float32Array.from(pixels), [height, width, channels])
  const out = await sharp(asFloat.data, { raw }).raw().toBuffer()
  t.true(
    out.every((v) => v <= 1),
    'sharp scaled the float input down to near black',
  )
  // uint8 input is what sharp expects for 0..255 values
  const ok = await sharp(Tensor.from(pixels.slice()).data, { raw }).raw().toBuffer()
  t.deepEqual([...ok], [...pixels])
})

test('pitfall: a crop is a strided view; sharp needs a dense copy (toTypedArray)', async (t) => {
  const image = Tensor.from(pixels.slice(), [height, width, channels])
  // rows 1..2, columns 1..3: a view with the full image's row stride
  const crop = fromDLPack({
    data: image.data,
    shape: [2, 3, channels],
    strides: [width * channels, channels, 1],
    offset: (width + 1) * channels,
  }) as Tensor<'uint8'>
  t.false(crop.isContiguous)
  const dense = crop.toTypedArray()
  const extracted = await sharp(pixels, { raw }).extract({ left: 1, top: 1, width: 3, height: 2 }).raw().toBuffer()
  t.deepEqual([...dense], [...extracted], 'the dense copy is what sharp crops itself')
  const viaSharp = await sharp(dense, { raw: { width: 3, height: 2, channels } }).raw().toBuffer()
  t.deepEqual([...viaSharp], [...extracted])
})

test("pitfall: a small Buffer lives in Node's 8 KiB pool; import the Buffer, not .buffer", (t) => {
  const small = Buffer.from([1, 2, 3])
  const whole = fromDLPack(small.buffer)
  t.is(whole.numel, small.buffer.byteLength, '.buffer is the whole ArrayBuffer')
  // Node allocates small Buffers in a shared pool (Bun does not).
  if (runtime === 'node') t.true(whole.numel > 3, `.buffer is the pool (${whole.numel} bytes), not the 3 bytes`)
  const exact = fromDLPack(small)
  t.deepEqual(exact.shape, [3])
  t.is(exact.dataPointer, addressOf(small))
})

test('an unknown sharp depth is refused with ERR_DLPACK_UNSUPPORTED_DTYPE', (t) => {
  const odd = { data: new Uint8Array(4), info: { width: 1, height: 1, channels: 4, depth: 'bitfield' } }
  throwsCode(t, () => fromDLPack(odd), 'ERR_DLPACK_UNSUPPORTED_DTYPE', DLPackTypeError)
  // names every object has are no depths either
  const inherited = { data: new Uint8Array(4), info: { width: 1, height: 1, channels: 4, depth: 'constructor' } }
  throwsCode(t, () => fromDLPack(inherited), 'ERR_DLPACK_UNSUPPORTED_DTYPE', DLPackTypeError)
})
