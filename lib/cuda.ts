import { native } from './native.js'

/**
 * CUDA support. The driver (`libcuda.so` / `nvcuda.dll`) is loaded on first use; without one
 * (or without a device) `isAvailable()` is `false`, `deviceCount()` is `0`, and every CUDA
 * operation (allocating on `'cuda:N'`, `to('cuda:N')`, importing a CUDA capsule) throws a
 * `CudaError` with code `ERR_CUDA_UNAVAILABLE`.
 */
export const cuda = Object.freeze({
  /** Whether a CUDA driver with at least one device is usable. Never throws. */
  isAvailable(): boolean {
    return native.cudaIsAvailable()
  },
  /** Number of CUDA devices; `0` when CUDA is unavailable. Never throws. */
  deviceCount(): number {
    return native.cudaDeviceCount()
  },
  /** Why CUDA is unavailable, or `undefined` when it is available. */
  unavailableReason(): string | undefined {
    return native.cudaUnavailableReason() ?? undefined
  },
  /**
   * Frees the page-locked staging memory that large copies between ordinary host memory and a
   * CUDA device go through (two 4 MiB chunks per device that made such a copy; see docs/cuda.md).
   * It is otherwise kept for the next copy and freed when the last environment that used it
   * ends. The next large copy allocates it again. Never throws.
   */
  releaseStaging(): void {
    native.cudaReleaseStaging()
  },
})
