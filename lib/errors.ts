import { ERROR_CLASS_BY_CODE, type ErrorClassName } from './generated/facts'

/**
 * Errors thrown by napi-dlpack. Every error carries a stable `code` (listed in docs/api.md);
 * match on `code`, or on the class for a whole family of failures.
 */
export class DLPackError extends Error {
  readonly code: string

  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.code = code
    this.name = new.target.name
  }
}

/**
 * The exchange cannot be done as asked: device, stream, a copy that `copy: false` forbids, or a
 * view larger than the runtime's largest ArrayBuffer.
 */
export class BufferError extends DLPackError {}

/**
 * The value is not a capsule (`ERR_DLPACK_NOT_A_CAPSULE`: see docs/protocol.md §1.3), the
 * capsule was already consumed, or its ABI is unknown. Nothing was consumed. Also a worker
 * transfer token that is no longer pending (`ERR_DLPACK_TRANSFER_CLAIMED`: claimed once already).
 */
export class CapsuleError extends DLPackError {}

/**
 * A foreign tensor's metadata failed validation. Its deleter has already run, as for every
 * failure after a capsule is consumed, whatever the class (docs/protocol.md §1.4).
 */
export class InvalidTensorError extends DLPackError {}

/** The tensor was disposed, or its ArrayBuffer was detached. */
export class TensorDisposedError extends DLPackError {}

/** A writable view of a read-only tensor was requested. */
export class ReadOnlyError extends DLPackError {}

/** An argument has the wrong type or value. */
export class DLPackTypeError extends DLPackError {}

/** CUDA is unavailable or a driver call failed. */
export class CudaError extends DLPackError {}

/** A Node-API call failed inside the addon: the runtime refused an operation. */
export class NodeApiError extends DLPackError {}

type ErrorClass = new (code: string, message: string, options?: { cause?: unknown }) => DLPackError

/** The class behind each name the Rust table (lib/generated/facts.ts) uses. */
const CLASSES: Readonly<Record<ErrorClassName, ErrorClass>> = {
  BufferError,
  CapsuleError,
  InvalidTensorError,
  TensorDisposedError,
  ReadOnlyError,
  DLPackTypeError,
  CudaError,
  NodeApiError,
}

/**
 * The class of every code the addon throws (defined in Rust: `ErrorKind::class`). The codes
 * only the JS layer throws (`ERR_DLPACK_ADDON_*`, on load) are `DLPackError`s.
 */
const CLASS_BY_CODE: ReadonlyMap<string, ErrorClass> = new Map(
  Object.entries(ERROR_CLASS_BY_CODE).map(([code, name]) => [code, CLASSES[name]]),
)

/** Creates the right error class for a code. */
export function dlpackError(code: string, message: string, cause?: unknown): DLPackError {
  const ErrorClass = CLASS_BY_CODE.get(code) ?? DLPackError
  return new ErrorClass(code, message, cause === undefined ? undefined : { cause })
}

/**
 * napi-rs's own codes for an argument of the wrong JS type (its `Status` names), thrown by the
 * generated argument conversion before our code runs. The JS layer checks what it passes, so
 * these are a last net: they surface as `ERR_DLPACK_INVALID_ARGUMENT`, never uncoded.
 */
const NAPI_ARGUMENT_STATUSES: ReadonlySet<unknown> = new Set([
  'InvalidArg',
  'ObjectExpected',
  'StringExpected',
  'NameExpected',
  'FunctionExpected',
  'NumberExpected',
  'BooleanExpected',
  'ArrayExpected',
  'BigintExpected',
  'DateExpected',
  'ArrayBufferExpected',
  'DetachableArraybufferExpected',
])

/** Re-throws an error from the native addon as the matching DLPackError subclass. */
export function rethrow(error: unknown): never {
  if (error instanceof DLPackError) throw error
  if (error instanceof Error) {
    const code = (error as Error & { code?: unknown }).code
    if (typeof code === 'string' && code.startsWith('ERR_')) {
      throw dlpackError(code, error.message)
    }
    if (NAPI_ARGUMENT_STATUSES.has(code)) {
      throw dlpackError('ERR_DLPACK_INVALID_ARGUMENT', `invalid argument: ${error.message}`, error)
    }
  }
  throw error
}

/** Runs a call into the addon, its errors re-thrown as DLPackErrors (`rethrow`). */
export function callNative<T>(fn: () => T): T {
  try {
    return fn()
  } catch (error) {
    return rethrow(error)
  }
}

/**
 * `value` for an error message, whatever it is. Never throws: describing bad input (a BigInt,
 * a Symbol, an object without a prototype, a cyclic object, a throwing `toJSON`, a revoked
 * Proxy) must not replace the coded error with a TypeError of its own.
 */
export function describe(value: unknown): string {
  try {
    switch (typeof value) {
      case 'string':
        return JSON.stringify(value)
      case 'bigint':
        return `${value}n`
      case 'symbol':
        return value.toString()
      case 'function':
        return `function ${value.name || '(anonymous)'}`
      case 'object': {
        if (value === null) return 'null'
        const text = JSON.stringify(value, (_key, item: unknown) => (typeof item === 'bigint' ? `${item}n` : item))
        if (text === undefined) return Object.prototype.toString.call(value)
        return text.length > 80 ? `${text.slice(0, 77)}...` : text
      }
      default:
        return String(value)
    }
  } catch {
    return `a value of type ${typeof value}`
  }
}
