// End to end: an image file decoded by sharp -> napi-dlpack Tensor (zero-copy) -> native
// preprocessing (HWC uint8 -> CHW float32, ImageNet normalisation: permute + astype) ->
// ONNX Runtime (a small model built here as ONNX bytes, no download) -> results -> back to
// sharp as an image. Every buffer hand-over is checked (same ArrayBuffer) and the copies that
// remain are counted and printed.
//
//   node examples/image-classify/index.mjs [--out DIR]     (after `npm run build`)
//
// The model: probabilities of four colour classes from the mean of each normalised channel
// (GlobalAveragePool -> Flatten -> MatMul -> Add -> Softmax), and a grey-level map (a 1x1
// Conv averaging the channels) that goes back to sharp as a PNG.
import { mkdtempSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import * as ort from 'onnxruntime-node'
import sharp from 'sharp'

const require = createRequire(import.meta.url)
const { Tensor, externalBuffersAllowed } = require('../../dist/index.js')

const outIndex = process.argv.indexOf('--out')
const outDir = outIndex > 0 ? process.argv[outIndex + 1] : mkdtempSync(join(tmpdir(), 'image-classify-'))

const copies = []
/** Records a hand-over: zero-copy when both sides hold the same ArrayBuffer, else a copy. */
function handOver(step, from, to) {
  const zeroCopy = from.buffer === to.buffer && from.byteOffset === to.byteOffset
  if (!zeroCopy) copies.push(step)
  console.log(`  ${zeroCopy ? 'zero-copy' : 'COPY     '}  ${step}`)
}

// ---------------------------------------------------------------------------------------------
// 1. An image file: a 96x64 PNG, mostly red with a blue square, written by sharp.
const [width, height] = [96, 64]
const pixels = new Uint8Array(width * height * 3)
for (let y = 0; y < height; y++) {
  for (let x = 0; x < width; x++) {
    const inSquare = x >= 60 && x < 84 && y >= 20 && y < 44
    pixels.set(inSquare ? [30, 40, 220] : [200 + ((x + y) % 40), 30, 20 + (x % 16)], (y * width + x) * 3)
  }
}
const imagePath = join(outDir, 'input.png')
await sharp(pixels, { raw: { width, height, channels: 3 } }).png().toFile(imagePath)
console.log(`image file: ${imagePath}`)

// ---------------------------------------------------------------------------------------------
// 2. Decode with sharp, view as a Tensor.
console.log('\nhand-overs:')
const { data: decoded, info } = await sharp(imagePath).removeAlpha().raw().toBuffer({ resolveWithObject: true })
const image = Tensor.from(decoded, [info.height, info.width, info.channels])
handOver("sharp's decoded Buffer -> Tensor.from(buffer, [h, w, 3])", decoded, image.data)

// 3. Native preprocessing into a preallocated input tensor: one pass, no allocation.
const mean = [0.485, 0.456, 0.406]
const std = [0.229, 0.224, 0.225]
const input = Tensor.empty([3, info.height, info.width], 'float32')
image.permute(2, 0, 1).astype('float32', { scale: 1 / 255, mean, std, axis: 0, out: input })
console.log('  (conversion)  HWC uint8 -> CHW float32 normalised, written into the input tensor (one native pass)')

// ---------------------------------------------------------------------------------------------
// 4. ONNX Runtime: the model, built here as ONNX protobuf bytes.
const CLASSES = ['red', 'green', 'blue', 'grey']
const model = buildModel(info.height, info.width)
const session = await ort.InferenceSession.create(model, { executionProviders: ['cpu'], logSeverityLevel: 4 })

const probs = Tensor.empty([1, CLASSES.length], 'float32')
const grey = Tensor.empty([1, 1, info.height, info.width], 'float32')
const feeds = { x: new ort.Tensor('float32', input.data, [1, 3, info.height, info.width]) }
handOver('input tensor -> ort.Tensor (the session reads it in place)', input.data, feeds.x.data)
// Preallocated outputs (`fetches`): ORT writes the results straight into our tensors.
const fetches = {
  probs: new ort.Tensor('float32', probs.data, [1, CLASSES.length]),
  grey: new ort.Tensor('float32', grey.data, [1, 1, info.height, info.width]),
}
const results = await session.run(feeds, fetches)
// onnxruntime-node also returns new Tensor objects; whether their data is ours says whether it
// copied the outputs once more.
handOver("ORT's returned probs -> our probs tensor", probs.data, results.probs.data)
handOver("ORT's returned grey map -> our grey tensor", grey.data, results.grey.data)

// ---------------------------------------------------------------------------------------------
// 5. Results, and the grey map back to sharp as an image.
const scores = Array.from(probs.data)
const inPlace = scores.every((p, i) => p === results.probs.data[i])
const best = scores.indexOf(Math.max(...scores))
// Back from normalised units to 0..255 (the average of the channels' std and mean), rounded
// and saturated by astype.
const greyBytes = grey.astype('uint8', { scale: 0.226 * 255, offset: 0.449 * 255 })
const greyPath = join(outDir, 'grey.png')
await sharp(greyBytes.data, { raw: { width: info.width, height: info.height, channels: 1 } }).png().toFile(greyPath)
console.log('  (conversion)  grey map float32 -> uint8, handed to sharp as raw input (no JS copy)')

console.log('\nprobabilities:')
CLASSES.forEach((name, i) => console.log(`  ${name.padEnd(5)} ${scores[i].toFixed(4)}`))
console.log(`class: ${CLASSES[best]}`)
console.log(`ORT wrote its outputs into our tensors: ${inPlace}`)
console.log(`grey map: ${greyPath}`)
console.log(`external buffers allowed: ${externalBuffersAllowed()}`)
console.log(`copies: ${copies.length}${copies.length ? ` (${copies.join('; ')})` : ''}`)

for (const tensor of [image, input, probs, grey, greyBytes]) tensor.dispose()

// ---------------------------------------------------------------------------------------------
// A minimal ONNX (protobuf) writer: just the fields this model needs (onnx/onnx.proto numbers).
function buildModel(h, w) {
  const varint = (value) => {
    const out = []
    let v = BigInt(value)
    do {
      let byte = Number(v & 0x7fn)
      v >>= 7n
      if (v !== 0n) byte |= 0x80
      out.push(byte)
    } while (v !== 0n)
    return out
  }
  const concat = (parts) => Buffer.concat(parts.map((part) => Buffer.from(part)))
  const int = (field, value) => Uint8Array.from([...varint(field << 3), ...varint(value)])
  const bytes = (field, payload) => {
    const data = typeof payload === 'string' ? Buffer.from(payload) : payload
    return concat([Uint8Array.from([...varint((field << 3) | 2), ...varint(data.length)]), data])
  }
  const FLOAT = 1
  const valueInfo = (name, dims) => {
    const shape = concat(dims.map((d) => bytes(1, int(1, d))))
    return concat([bytes(1, name), bytes(2, bytes(1, concat([int(1, FLOAT), bytes(2, shape)])))])
  }
  // TensorProto: dims (1), data_type (2), name (8), raw_data (9, little-endian floats).
  const initializer = (name, dims, values) =>
    concat([...dims.map((d) => int(1, d)), int(2, FLOAT), bytes(8, name), bytes(9, new Uint8Array(Float32Array.from(values).buffer))])
  const node = (op, inputs, outputs, i) =>
    concat([...inputs.map((n) => bytes(1, n)), ...outputs.map((n) => bytes(2, n)), bytes(3, `node${i}`), bytes(4, op)])
  // Class scores from the channel means (normalised units): red, green, blue, and grey (low
  // spread between the channels scores nothing; it gets a constant bias instead).
  const weights = [4, -2, -2, 0, -2, 4, -2, 0, -2, -2, 4, 0] // [3, 4], row per channel
  const graph = concat([
    bytes(1, node('GlobalAveragePool', ['x'], ['pooled'], 0)),
    bytes(1, node('Flatten', ['pooled'], ['flat'], 1)),
    bytes(1, node('MatMul', ['flat', 'w'], ['logits0'], 2)),
    bytes(1, node('Add', ['logits0', 'b'], ['logits'], 3)),
    bytes(1, node('Softmax', ['logits'], ['probs'], 4)),
    bytes(1, node('Conv', ['x', 'cw'], ['grey'], 5)),
    bytes(2, 'image_classify'),
    bytes(5, initializer('w', [3, 4], weights)),
    bytes(5, initializer('b', [4], [0, 0, 0, 1])),
    bytes(5, initializer('cw', [1, 3, 1, 1], [1 / 3, 1 / 3, 1 / 3])),
    bytes(11, valueInfo('x', [1, 3, h, w])),
    bytes(12, valueInfo('probs', [1, 4])),
    bytes(12, valueInfo('grey', [1, 1, h, w])),
  ])
  return new Uint8Array(
    concat([int(1, 8), bytes(2, 'napi-dlpack-example'), bytes(7, graph), bytes(8, concat([bytes(1, ''), int(2, 13)]))]),
  )
}
