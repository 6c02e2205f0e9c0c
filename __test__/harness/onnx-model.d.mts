// Types of onnx-model.mjs (plain JavaScript so worker threads and benches load it as is).

export interface NodeSpec {
  op: string
  inputs: string[]
  outputs: string[]
}

/** A float32 value of the graph: its name and dims (a string dim is symbolic). */
export type ValueSpec = [name: string, dims: (number | string)[]]

/** A ModelProto (IR version 8, default opset 13) holding one graph of float32 tensors. */
export function onnxModel(nodes: NodeSpec[], inputs: ValueSpec[], outputs: ValueSpec[]): Uint8Array

/** y = relu(x @ w)   (x: [n, k], w: [k, m], y: [n, m]): one dense layer, the worker pool's model. */
export function denseReluModel(): Uint8Array
