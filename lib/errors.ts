/**
 * Errors thrown by napi-dlpack. Every error carries a stable `code` (listed in the README);
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

type ErrorClass = new (code: string, message: string, options?: { cause?: unknown }) => DLPackError

const CLASS_BY_CODE: Record<string, ErrorClass> = {
  ERR_DLPACK_COPY_REQUIRED: BufferError,
  ERR_DLPACK_DEVICE: BufferError,
  ERR_DLPACK_STREAM: BufferError,
  ERR_DLPACK_NOT_CPU: BufferError,
  ERR_DLPACK_TOO_LARGE: BufferError,
  ERR_DLPACK_NOT_A_CAPSULE: CapsuleError,
  ERR_DLPACK_CAPSULE_CONSUMED: CapsuleError,
  ERR_DLPACK_CAPSULE_ABI: CapsuleError,
  ERR_DLPACK_TRANSFER_CLAIMED: CapsuleError,
  ERR_DLPACK_NULL_TENSOR: InvalidTensorError, // Rust raw-pointer API only (README)
  ERR_DLPACK_VERSION: InvalidTensorError,
  ERR_DLPACK_NDIM: InvalidTensorError,
  ERR_DLPACK_NULL_SHAPE: InvalidTensorError,
  ERR_DLPACK_SHAPE: InvalidTensorError,
  ERR_DLPACK_OVERFLOW: InvalidTensorError,
  ERR_DLPACK_NULL_DATA: InvalidTensorError,
  ERR_DLPACK_BYTE_OFFSET: InvalidTensorError,
  ERR_DLPACK_DTYPE: InvalidTensorError,
  ERR_DLPACK_INVALID_LAYOUT: InvalidTensorError,
  ERR_DLPACK_MISALIGNED: InvalidTensorError,
  ERR_DLPACK_INVALID_BOOL: InvalidTensorError,
  ERR_TENSOR_DISPOSED: TensorDisposedError,
  ERR_TENSOR_DETACHED: TensorDisposedError,
  ERR_DLPACK_READ_ONLY: ReadOnlyError,
  ERR_DLPACK_INVALID_ARGUMENT: DLPackTypeError,
  ERR_CUDA_UNAVAILABLE: CudaError,
  ERR_CUDA: CudaError,
}

/** Creates the right error class for a code. */
export function dlpackError(code: string, message: string, cause?: unknown): DLPackError {
  const ErrorClass = CLASS_BY_CODE[code] ?? DLPackError
  return new ErrorClass(code, message, cause === undefined ? undefined : { cause })
}

/** Re-throws an error from the native addon as the matching DLPackError subclass. */
export function rethrow(error: unknown): never {
  if (error instanceof DLPackError) throw error
  if (error instanceof Error) {
    const code = (error as Error & { code?: unknown }).code
    if (typeof code === 'string' && code.startsWith('ERR_')) {
      throw dlpackError(code, error.message)
    }
  }
  throw error
}
