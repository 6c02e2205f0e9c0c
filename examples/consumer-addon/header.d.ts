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

