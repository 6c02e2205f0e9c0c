// Types of index.js, the JS half of the napi-dlpack Python bridge (see README.md).

/** A DLPack capsule of the Node capsule ABI (include/napi_dlpack.h): napi-dlpack's `DLPackCapsule`. */
export type Capsule = object

/** Anything that exports a capsule: napi-dlpack's `Tensor`, or any `__dlpack__` implementer. */
export interface DLPackExporter {
  __dlpack__(options?: { maxVersion?: readonly [number, number] }): Capsule
}

/**
 * Hands a tensor to Python (consuming the capsule) and returns the token Python claims once with
 * `napi_dlpack_bridge.from_node(token)` or `to_numpy(token)`.
 * @throws Error with `code` ERR_DLPACK_NOT_A_CAPSULE, ERR_DLPACK_CAPSULE_CONSUMED, ERR_DLPACK_VERSION
 */
export function toPython(x: Capsule | DLPackExporter): number

/**
 * Claims the tensor Python handed over with `napi_dlpack_bridge.to_node(array)`, as a capsule for
 * napi-dlpack's `fromDLPack` (or any consumer of capsules).
 * @throws Error with `code` ERR_DLPACK_CAPSULE_CONSUMED (claimed before) or
 * ERR_DLPACK_INVALID_ARGUMENT (never issued, not an integer)
 */
export function fromPython(token: number): Capsule

/** Releases a tensor handed over and never claimed; false when it was claimed already. */
export function release(token: number): boolean

/** Tensors handed over (either direction) and not claimed yet. */
export function pending(): number

/**
 * node-calls-python's `interpreter`, loaded with the Python that build.sh built against; `path`
 * (default `pythonPath()`) goes first in PYTHONPATH.
 */
export function loadInterpreter(options?: { path?: string[] }): import('node-calls-python').Interpreter

/** The folders put first on Python's path: this example's and its `.python-packages`. */
export function pythonPath(): string[]

/** What build.sh recorded: the interpreter, its python3-config and Node's header prefix. */
export function config(): { python: string; pythonConfig: string; nodedir: string }
