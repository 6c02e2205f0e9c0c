import type { DLPackCapsule, OwnedTensorArg, TensorArg, TensorResult } from 'napi-dlpack'

// Hot functions (src/hot.rs, napi_dlpack::hot_function!): raw Node-API callbacks, for which
// napi-rs generates no declarations. `napi build` puts this file (the `dtsHeaderFile` of
// package.json) at the top of index.d.ts.

/** `x *= factor` element by element through a mutable strided view, float32 or float64. */
export declare function scaleHot(x: TensorArg, factor: number): void
/** `target += source` (contiguous float32, same length); returns `target`'s new values. */
export declare function addIntoHot(target: TensorArg, source: TensorArg): Array<number>
/** Metadata of any tensor argument, and whether it was borrowed. */
export declare function inspectHot(x: TensorArg): Inspection
/** Borrows `x`, lends its elements (for writing when `write`), and panics (tests). */
export declare function panicHot(x: TensorArg, write: boolean): void
/** Benchmarks: 1, 3 and 8 tensor arguments converted and dropped. */
export declare function benchHot1(a: TensorArg): void
export declare function benchHot3(a: TensorArg, b: TensorArg, c: TensorArg): void
export declare function benchHot8(a: TensorArg, b: TensorArg, c: TensorArg, d: TensorArg, e: TensorArg, f: TensorArg, g: TensorArg, h: TensorArg): void
/** Benchmarks: the hot call of 1, 3 and 8 arguments, not converted. */
export declare function benchHotEmpty1(a: unknown): void
export declare function benchHotEmpty3(a: unknown, b: unknown, c: unknown): void
export declare function benchHotEmpty8(a: unknown, b: unknown, c: unknown, d: unknown, e: unknown, f: unknown, g: unknown, h: unknown): void

/**
 * `target += source` for two contiguous float32 tensors of the same length; returns `target`'s
 * new values. `target` is converted first, so whatever JS `source`'s conversion runs (its
 * `__dlpack__`, a getter) runs while `target` is borrowed: the borrow keeps `target`'s memory
 * alive even if that JS disposes it. `addInto(x, x)` (or any `source` overlapping `target`)
 * is refused with `ERR_DLPACK_ALIASED`: the write slice of one and the read slice of the other
 * would be the same memory.
 */
export declare function addInto(target: TensorArg, source: TensorArg): Array<number>

/** The floor: an empty call taking one value without converting it. */
export declare function benchFloor1(a: unknown): number

/** The floor for three arguments. */
export declare function benchFloor3(a: unknown, b: unknown, c: unknown): number

/** The floor for eight arguments. */
export declare function benchFloor8(a: unknown, b: unknown, c: unknown, d: unknown, e: unknown, f: unknown, g: unknown, h: unknown): number

/** One tensor argument, converted (borrowed, or consumed for a capsule) and dropped. */
export declare function benchTensorArg1(a: TensorArg): number

/** Three tensor arguments. */
export declare function benchTensorArg3(a: TensorArg, b: TensorArg, c: TensorArg): number

/** Eight tensor arguments. */
export declare function benchTensorArg8(a: TensorArg, b: TensorArg, c: TensorArg, d: TensorArg, e: TensorArg, f: TensorArg, g: TensorArg, h: TensorArg): number

/**
 * Consumes `capsule` (a bool CPU tensor of any layout) and counts its `true` elements. The
 * crate refuses bytes other than 0 and 1 (ERR_DLPACK_INVALID_BOOL) before any of them becomes
 * a Rust `bool`, on the contiguous path (a slice) and on the strided one alike.
 */
export declare function countTrue(capsule: DLPackCapsule): number

/**
 * Reads a capsule's metadata natively. Capsules are consume-once, and there is no way to read
 * one without taking ownership, so this CONSUMES the capsule: the tensor is released (its
 * deleter runs) before `describe` returns, and the capsule cannot be imported again.
 */
export declare function describe(capsule: DLPackCapsule): TensorDescription

/** Options of the two matrix exports. */
export interface ExportOptions {
  /** Produce a legacy (DLPack 0.x) `DLManagedTensor` instead of the versioned struct. */
  legacy?: boolean
}

/**
 * The unnormalised Walsh–Hadamard transform of every row of a 2-D, row-major, writable
 * float32 or float64 tensor whose rows have a power-of-two length.
 */
export declare function fwhtRows(x: TensorArg): void

/**
 * Consumes `capsule` (a 2-D, row-major, writable float32 or float64 CPU tensor whose rows have
 * a power-of-two length) and replaces every row by its unnormalised Walsh–Hadamard transform,
 * in the producer's memory. Returns nothing: the caller reads the result through its own
 * tensor.
 */
export declare function fwhtRowsInPlace(capsule: DLPackCapsule): void

/** Metadata of any tensor argument, and whether it was borrowed. */
export declare function inspect(x: TensorArg): Inspection

/** What `inspect` reports. */
export interface Inspection {
  dtype: string
  shape: Array<number>
  strides: Array<number>
  /** Address of the first element. */
  dataPointer: bigint
  readonly: boolean
  /** Borrowed through an exchange table (no capsule, nothing owned). */
  borrowed: boolean
}

/** Metadata of an owned argument (an owning export, never a borrow). */
export declare function inspectOwned(x: OwnedTensorArg): Inspection

/** Address of the first element of the most recently exported matrix. */
export declare function lastExportedPointer(): bigint

/** Matrices created by this addon and not yet freed by their DLPack deleter. */
export declare function liveMatrices(): number

/**
 * A new `rows × cols` matrix whose element `(i, j)` is `i * cols + j`, exported as a
 * consume-once DLPack capsule (shape `[rows, cols]`, row-major). The memory is Rust's and is
 * freed when the consumer releases the tensor.
 */
export declare function makeMatrix(rows: number, cols: number, dtype: 'float32' | 'float64', options?: ExportOptions): DLPackCapsule

/**
 * The transpose of `makeMatrix(rows, cols, dtype)` without copying: shape `[cols, rows]`,
 * strides `[1, cols]` over the same row-major buffer (element `(j, i)` is `i * cols + j`).
 */
export declare function makeTransposedMatrix(rows: number, cols: number, dtype: 'float32' | 'float64', options?: ExportOptions): DLPackCapsule

/**
 * A new `rows × cols` matrix (element `(i, j)` = `i * cols + j`) returned as a napi-dlpack
 * `Tensor` (a capsule if napi-dlpack is not loaded). The TypeScript signature names the dtype:
 * `matrix(2, 3, 'float32')` is a `TensorResult<'float32'>`, which
 * `fromDLPack(result, { dtype: 'float32' })` turns into a `Tensor<'float32'>` (checked).
 */
export declare function matrix<D extends 'float32' | 'float64'>(rows: number, cols: number, dtype: D): TensorResult<D>

/** `matrix`, always as a capsule (`TensorResult::capsule`), so typed as one. */
export declare function matrixCapsule(rows: number, cols: number, dtype: 'float32' | 'float64'): DLPackCapsule

/**
 * A new tensor, returned to JS as a napi-dlpack `Tensor` over this Rust memory (a capsule if
 * napi-dlpack is not loaded). The Vec is freed when the last JS user lets go.
 */
export declare function ramp(n: number): TensorResult

/**
 * `x *= factor` in place, for any strides (transposed, sliced, broadcast views). A napi-dlpack
 * `Tensor` is borrowed for the call (no capsule); a capsule or any `__dlpack__` object works too.
 */
export declare function scale(x: TensorArg, factor: number): void

/**
 * `x *= factor`, element by element, through a mutable strided view: transposed, sliced and
 * broadcast tensors included. Refused for READ_ONLY tensors (`ERR_DLPACK_READ_ONLY`).
 */
export declare function scaleInPlace(x: TensorArg, factor: number): void

/**
 * The sum of `x`, computed off the JS thread. The task owns the tensor: the JS side may
 * dispose its own handle meanwhile; the memory stays until the task is dropped.
 */
export declare function sumAsync(x: OwnedTensorArg): Promise<number>

/**
 * Contiguous data as a slice: `as_slice` / `as_mut_slice` check dtype, device, alignment and
 * contiguity (`ERR_DLPACK_NOT_CONTIGUOUS`), and READ_ONLY for writes.
 */
export declare function total(x: TensorArg): number

export declare function totalAsync(x: OwnedTensorArg): Promise<number>

/** What `describe` reports. */
export interface TensorDescription {
  dtype: string
  shape: Array<number>
  /** In elements (row-major strides synthesised when the producer sent NULL). */
  strides: Array<number>
  /** `[DLDeviceType, device id]`. */
  device: [number, number]
  /** DLPack `byte_offset`: bytes from `data` to the first element. */
  byteOffset: number
  /** Address of the first element (`data + byte_offset`). */
  dataPointer: bigint
  /** The producer set `DLPACK_FLAG_BITMASK_READ_ONLY`. */
  readonly: boolean
  /** The capsule held a `DLManagedTensorVersioned` (false: legacy `DLManagedTensor`). */
  versioned: boolean
}
