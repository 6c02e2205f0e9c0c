/** The absolute path of the directory holding `napi_dlpack.h` (for `-I`, `include_dirs`). */
export declare const dir: string
/** {@link dir}, double-quoted: ready to paste into a compiler command line. */
export declare const include: string
/** The absolute path of `napi_dlpack.h` itself. */
export declare const header: string
