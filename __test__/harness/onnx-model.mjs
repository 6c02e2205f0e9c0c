// ONNX models written as bytes (no download, no onnx package): a minimal protobuf writer, enough
// for ONNX's ModelProto (onnx/onnx.proto field numbers). Shared by the tests that run ONNX Runtime
// (onnxruntime.spec.ts, the worker pool in workers.spec.ts) and benches/wall/workers.mjs; plain
// JavaScript so worker threads and the benchmark load it without a TypeScript loader
// (types: onnx-model.d.mts).

/** @param {number | bigint} value */
function varint(value) {
  let v = BigInt(value)
  if (v < 0n) v += 1n << 64n // int64 two's complement
  const out = []
  do {
    let byte = Number(v & 0x7fn)
    v >>= 7n
    if (v !== 0n) byte |= 0x80
    out.push(byte)
  } while (v !== 0n)
  return out
}

/** @param {Uint8Array[]} parts */
function concat(parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0))
  let at = 0
  for (const part of parts) {
    out.set(part, at)
    at += part.length
  }
  return out
}

/** Wire type 0 (varint) field. */
const int = (field, value) => Uint8Array.from([...varint(field << 3), ...varint(value)])
/** Wire type 2 (length-delimited) field: bytes, string or embedded message. */
function bytes(field, payload) {
  const data = typeof payload === 'string' ? new TextEncoder().encode(payload) : payload
  return concat([Uint8Array.from([...varint((field << 3) | 2), ...varint(data.length)]), data])
}
const message = (...fields) => concat(fields)

const FLOAT = 1 // TensorProto.DataType.FLOAT

/** ValueInfoProto of a float tensor; string dims are symbolic (dim_param). */
function floatTensorInfo(name, dims) {
  const shape = message(...dims.map((d) => bytes(1, typeof d === 'number' ? int(1, d) : bytes(2, d))))
  const tensorType = message(int(1, FLOAT), bytes(2, shape))
  return message(bytes(1, name), bytes(2, bytes(1, tensorType)))
}

/** A ModelProto (IR version 8, default opset 13) holding one graph of float32 tensors. */
export function onnxModel(nodes, inputs, outputs) {
  const graph = message(
    ...nodes.map((node, i) =>
      bytes(
        1,
        message(
          ...node.inputs.map((name) => bytes(1, name)),
          ...node.outputs.map((name) => bytes(2, name)),
          bytes(3, `node${i}`),
          bytes(4, node.op),
        ),
      ),
    ),
    bytes(2, 'napi_dlpack_test'),
    ...inputs.map(([name, dims]) => bytes(11, floatTensorInfo(name, dims))),
    ...outputs.map(([name, dims]) => bytes(12, floatTensorInfo(name, dims))),
  )
  return message(
    int(1, 8), // ir_version
    bytes(2, 'napi-dlpack-tests'), // producer_name
    bytes(7, graph),
    bytes(8, message(bytes(1, ''), int(2, 13))), // opset_import: ai.onnx 13
  )
}

/** y = relu(x @ w)   (x: [n, k], w: [k, m], y: [n, m]): one dense layer, the worker pool's model. */
export const denseReluModel = () =>
  onnxModel(
    [
      { op: 'MatMul', inputs: ['x', 'w'], outputs: ['xw'] },
      { op: 'Relu', inputs: ['xw'], outputs: ['y'] },
    ],
    [
      ['x', ['n', 'k']],
      ['w', ['k', 'm']],
    ],
    [['y', ['n', 'm']]],
  )
