/*
 * napi_dlpack.h - the "Node capsule ABI" for exchanging DLPack tensors
 * between native Node.js addons through JavaScript.
 *
 * Part of napi-dlpack. This header is self-contained C99 and also compiles as
 * C++. It declares the DLPack 1.3 data structures (written for this project;
 * the layout is the standard DLPack ABI) and implements, as static inline
 * functions, the producer and consumer sides of the capsule protocol, so that
 * any C, C++ or Rust addon loaded into the same process can pass a tensor to
 * any other addon without copying and without linking against each other.
 *
 * ---------------------------------------------------------------------------
 * The JavaScript side of the protocol
 * ---------------------------------------------------------------------------
 *
 *   const capsule = x.__dlpack__({ maxVersion: [1, 3], ... });
 *   const [deviceType, deviceId] = x.__dlpack_device__();
 *
 * `__dlpack__()` returns a *capsule*: an opaque `External` JS value as defined
 * below. A capsule owns exactly one DLPack managed tensor. It is meant to be
 * handed straight to a consumer (`fromDlpack(x)` in some other library), which
 * takes ownership of the tensor exactly once. A capsule that is never consumed
 * releases its tensor when the garbage collector finalizes it. JS code never
 * looks inside a capsule; only native code does, via the functions below.
 *
 * ---------------------------------------------------------------------------
 * Usage
 * ---------------------------------------------------------------------------
 *
 *   #define NAPI_VERSION 8          (or higher; 8 added napi_type_tag_object)
 *   #include <napi_dlpack.h>
 *
 * It shares a translation unit with any official dlpack.h (0.6 or newer: the
 * dmlc/dlpack header, libtorch's ATen/dlpack.h, ...), included before or after
 * it, with nothing to define:
 *  - dlpack.h first (its include guard DLPACK_DLPACK_H_ is defined): this
 *    header declares only what that version lacks (for 0.6-0.8:
 *    DLPackVersion, DLManagedTensorVersioned and the flag bits) and uses the
 *    rest as declared there.
 *  - this header first: it declares DLPack 1.3's data structures itself and
 *    defines DLPACK_DLPACK_H_, so a dlpack.h included later adds nothing (and
 *    conflicts with nothing). Code that needs declarations only dlpack.h has
 *    (1.3's Python exchange API, DLPackExchangeAPI) includes dlpack.h first.
 * Code that declares the DLPack >= 1.0 types itself, under another include
 * guard, defines NAPI_DLPACK_NO_DLPACK_TYPES before including this header.
 * The helpers below use the standard names DLManagedTensor and
 * DLManagedTensorVersioned in every case.
 */
#ifndef NAPI_DLPACK_H_
#define NAPI_DLPACK_H_

#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h> /* memset */
#include <node_api.h>
#if defined(_MSC_VER) && !defined(__clang__) && !defined(__GNUC__)
#include <intrin.h> /* _InterlockedExchangePointer */
#endif

#if !defined(NAPI_VERSION) || NAPI_VERSION < 8
#error "napi_dlpack.h needs Node-API version 8 or newer (napi_type_tag_object): #define NAPI_VERSION 8 before including it"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ===========================================================================
 * Compile-time assertions (usable at file scope in C99, C11 and C++)
 * ========================================================================= */
#if defined(__cplusplus) && __cplusplus >= 201103L
#define NAPI_DLPACK_STATIC_ASSERT(cond, name) static_assert(cond, #name)
#elif !defined(__cplusplus) && defined(__STDC_VERSION__) && \
    __STDC_VERSION__ >= 201112L
#define NAPI_DLPACK_STATIC_ASSERT(cond, name) _Static_assert(cond, #name)
#else
/* C99 / C++98: a negative array size is a compile error. */
#define NAPI_DLPACK_STATIC_ASSERT(cond, name) \
  typedef char napi_dlpack_assert_##name[(cond) ? 1 : -1]
#endif

/* ===========================================================================
 * Part 1: DLPack 1.3 declarations (those no dlpack.h included earlier made)
 * ========================================================================= */
#if defined(NAPI_DLPACK_NO_DLPACK_TYPES)
/* The includer declared DLPack >= 1.0's types. */
#elif defined(DLPACK_DLPACK_H_)
/* An official dlpack.h came first. 1.x declares everything used here; 0.6 to
 * 0.8 (DLPACK_VERSION 60..80) lack the versioned struct, declared below. */
#if !defined(DLPACK_MAJOR_VERSION)
#if !defined(DLPACK_VERSION) || DLPACK_VERSION < 60
#error "napi_dlpack.h: the dlpack.h included before it predates DLPack 0.6 (DLContext instead of DLDevice); include a newer one, or napi_dlpack.h alone"
#endif
#define NAPI_DLPACK_DECLARE_VERSIONED_ 1
#endif
#else
#define NAPI_DLPACK_DECLARE_ALL_ 1
#define NAPI_DLPACK_DECLARE_VERSIONED_ 1
/* dlpack.h's include guard: a dlpack.h included after this header then adds
 * nothing (every version's declarations are a subset of these, to the
 * layout), instead of declaring every type a second time. */
#define DLPACK_DLPACK_H_
/* The DLPack ABI version these declarations describe. */
#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 3
/* Macros of dlpack.h that code written for it may use. */
#ifndef DLPACK_EXTERN_C
#ifdef __cplusplus
#define DLPACK_EXTERN_C extern "C"
#else
#define DLPACK_EXTERN_C
#endif
#endif
#ifndef DLPACK_DLL
#define DLPACK_DLL
#endif
#endif

#ifdef NAPI_DLPACK_DECLARE_ALL_

#endif /* NAPI_DLPACK_DECLARE_ALL_ */

#ifdef NAPI_DLPACK_DECLARE_VERSIONED_
/*
 * Version stamped into every DLManagedTensorVersioned by its producer.
 * A consumer compares `major` with the major version it was built for:
 *   - different major: the layout after `deleter` may differ, and the
 *     producer need not allocate it. The consumer must not read anything but
 *     version, manager_ctx and deleter (not `flags`); it must call the deleter
 *     (that is always safe) and report an error.
 *   - same major, newer minor: accepted, as long as the consumer understands
 *     the values it finds (minor bumps only add enum values and flags).
 */
typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;
#endif /* NAPI_DLPACK_DECLARE_VERSIONED_ */

#ifdef NAPI_DLPACK_DECLARE_ALL_

/* Kind of memory a tensor lives in. Stored as a 32-bit integer. */
typedef enum {
  kDLCPU = 1,          /* host memory */
  kDLCUDA = 2,         /* CUDA device memory */
  kDLCUDAHost = 3,     /* pinned host memory registered with CUDA */
  kDLOpenCL = 4,       /* OpenCL buffer (data is an opaque cl_mem) */
  kDLVulkan = 7,       /* Vulkan buffer */
  kDLMetal = 8,        /* Metal buffer (data is an opaque MTLBuffer) */
  kDLVPI = 9,          /* Verilog simulator memory */
  kDLROCM = 10,        /* ROCm/HIP device memory */
  kDLROCMHost = 11,    /* pinned host memory registered with ROCm */
  kDLExtDev = 12,      /* reserved for out-of-tree devices */
  kDLCUDAManaged = 13, /* CUDA unified (managed) memory */
  kDLOneAPI = 14,      /* oneAPI unified shared memory */
  kDLWebGPU = 15,      /* WebGPU buffer */
  kDLHexagon = 16,     /* Qualcomm Hexagon DSP */
  kDLMAIA = 17,        /* Microsoft MAIA */
  kDLTrn = 18          /* AWS Trainium */
} DLDeviceType;

/* A device: its type plus an ordinal (0 for the host). */
typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;

/* Type code stored in DLDataType.code. */
typedef enum {
  kDLInt = 0,                /* signed integer */
  kDLUInt = 1,               /* unsigned integer */
  kDLFloat = 2,              /* IEEE 754 binary floating point */
  kDLOpaqueHandle = 3,       /* opaque pointer-sized handle */
  kDLBfloat = 4,             /* bfloat16 */
  kDLComplex = 5,            /* complex; `bits` counts both parts */
  kDLBool = 6,               /* boolean, normally stored in 8 bits */
  kDLFloat8_e3m4 = 7,        /* 8-bit float formats ... */
  kDLFloat8_e4m3 = 8,
  kDLFloat8_e4m3b11fnuz = 9,
  kDLFloat8_e4m3fn = 10,
  kDLFloat8_e4m3fnuz = 11,
  kDLFloat8_e5m2 = 12,
  kDLFloat8_e5m2fnuz = 13,
  kDLFloat8_e8m0fnu = 14,
  kDLFloat6_e2m3fn = 15,     /* 6-bit floats; bits must be 6 */
  kDLFloat6_e3m2fn = 16,
  kDLFloat4_e2m1fn = 17      /* 4-bit float; bits must be 4 */
} DLDataTypeCode;

/*
 * Element type. `code` holds a DLDataTypeCode value, `bits` the width of one
 * lane, `lanes` the vector width (1 for ordinary scalars; consumers that do
 * not support vector types reject lanes != 1). Examples: float32 = {2,32,1},
 * bool = {6,8,1}, complex64 = {5,64,1}, bfloat16 = {4,16,1}. Element data is
 * in native byte order. Sub-byte types (bits < 8) are packed, lowest bits
 * first, unless the producer sets DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED.
 */
typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

/*
 * A borrowed view of an n-dimensional array. Field rules:
 *
 *  data        Start of the allocation. A plain address for CPU and CUDA-like
 *              memory, an opaque handle on some devices (OpenCL, Metal), so do
 *              not do arithmetic on it unless the device allows it. Producers
 *              should set it to NULL for tensors with zero elements, but
 *              consumers must also accept a non-NULL pointer there. Nothing
 *              guarantees any alignment of `data`.
 *  device      Where the memory lives.
 *  ndim        Number of dimensions; 0 for a scalar.
 *  dtype       Element type.
 *  shape       `ndim` extents. May be NULL when ndim == 0.
 *  strides     `ndim` steps, counted in ELEMENTS (not bytes); may be negative
 *              or zero. Since DLPack 1.2 a producer must provide strides when
 *              ndim > 0 (NULL only for ndim == 0). Consumers accept NULL from
 *              any producer, of any version (1.2 and newer included), and read
 *              it as compact row-major (C-contiguous) layout.
 *  shape and strides, when not NULL, must be 8-byte aligned (int64_t arrays);
 *              consumers refuse misaligned ones.
 *  byte_offset The first element is at (char*)data + byte_offset. Needed where
 *              `data` is a handle rather than an address.
 */
typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} DLTensor;

/*
 * Pre-1.0 managed tensor ("legacy"). Carries no version and no flags.
 *
 *  manager_ctx  Producer's private context.
 *  deleter      Called exactly once by whoever owns the tensor when it is done
 *               with it; it frees the struct itself too. It may be NULL when
 *               the producer has nothing to release. It may run on ANY thread
 *               (a consumer can drop the tensor from a worker or during
 *               garbage collection), so it must not use JS engine state
 *               without first getting back onto the right thread.
 */
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;

#endif /* NAPI_DLPACK_DECLARE_ALL_ */

/* Bits of DLManagedTensorVersioned.flags, each defined unless a dlpack.h did
 * (1.0 has the first two). A producer sets only bits defined
 * for its version. A consumer ignores bits it does not know (a newer minor
 * version may define them) and never forwards them when it re-exports. */
/* The consumer must not write through the data pointer. */
#ifndef DLPACK_FLAG_BITMASK_READ_ONLY
#define DLPACK_FLAG_BITMASK_READ_ONLY (1ULL << 0)
#endif
/* The producer made a copy for this export; memory is not shared with it. */
#ifndef DLPACK_FLAG_BITMASK_IS_COPIED
#define DLPACK_FLAG_BITMASK_IS_COPIED (1ULL << 1)
#endif
/* Sub-byte elements each occupy a whole byte instead of being packed. */
#ifndef DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1ULL << 2)
#endif

#ifdef NAPI_DLPACK_DECLARE_VERSIONED_
/*
 * Versioned managed tensor (DLPack >= 1.0). The first three fields
 * (version, manager_ctx, deleter) keep their places across all future major
 * versions so that the deleter can always be found; everything after them
 * belongs to the major version in `version.major`. Same deleter rules as for
 * DLManagedTensor.
 */
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;
#endif /* NAPI_DLPACK_DECLARE_VERSIONED_ */

/* ---- layout checks ------------------------------------------------------
 * Of the declarations in force, whoever made them (a dlpack.h, the includer
 * or this header), so that a layout the helpers do not expect fails to
 * compile. Offsets are written in terms of the pointer size and the alignment of
 * uint64_t so that they hold on 32-bit targets as well as 64-bit ones.
 * On x86_64 / aarch64 they reduce to the standard numbers: DLTensor 48 bytes
 * (offsets 0,8,16,20,24,32,40), DLManagedTensor 64, DLManagedTensorVersioned
 * 80 (offsets 0,8,16,24,32). */
typedef struct {
  char c;
  uint64_t v;
} napi_dlpack_u64_align_probe_;
#define NAPI_DLPACK_P_ sizeof(void*)
#define NAPI_DLPACK_A64_ offsetof(napi_dlpack_u64_align_probe_, v)
#define NAPI_DLPACK_ROUND_UP_(n, a) ((((n) + (a)-1) / (a)) * (a))
#define NAPI_DLPACK_MAXA_ \
  (NAPI_DLPACK_A64_ > NAPI_DLPACK_P_ ? NAPI_DLPACK_A64_ : NAPI_DLPACK_P_)
#define NAPI_DLPACK_TENSOR_SIZE_                                           \
  NAPI_DLPACK_ROUND_UP_(                                                   \
      NAPI_DLPACK_ROUND_UP_(3 * NAPI_DLPACK_P_ + 16, NAPI_DLPACK_A64_) + 8, \
      NAPI_DLPACK_MAXA_)

NAPI_DLPACK_STATIC_ASSERT(sizeof(void (*)(void)) == sizeof(void*),
                          function_pointer_size);
NAPI_DLPACK_STATIC_ASSERT(sizeof(DLPackVersion) == 8, version_size);
#ifdef NAPI_DLPACK_DECLARE_ALL_
NAPI_DLPACK_STATIC_ASSERT(sizeof(DLDeviceType) == 4, device_type_size);
#endif
NAPI_DLPACK_STATIC_ASSERT(sizeof(DLDevice) == 8, device_size);
NAPI_DLPACK_STATIC_ASSERT(sizeof(DLDataType) == 4, dtype_size);
NAPI_DLPACK_STATIC_ASSERT(offsetof(DLTensor, data) == 0, tensor_data);
NAPI_DLPACK_STATIC_ASSERT(offsetof(DLTensor, device) == NAPI_DLPACK_P_,
                          tensor_device);
NAPI_DLPACK_STATIC_ASSERT(offsetof(DLTensor, ndim) == NAPI_DLPACK_P_ + 8,
                          tensor_ndim);
NAPI_DLPACK_STATIC_ASSERT(offsetof(DLTensor, dtype) == NAPI_DLPACK_P_ + 12,
                          tensor_dtype);
NAPI_DLPACK_STATIC_ASSERT(offsetof(DLTensor, shape) == NAPI_DLPACK_P_ + 16,
                          tensor_shape);
NAPI_DLPACK_STATIC_ASSERT(offsetof(DLTensor, strides) ==
                              2 * NAPI_DLPACK_P_ + 16,
                          tensor_strides);
NAPI_DLPACK_STATIC_ASSERT(offsetof(DLTensor, byte_offset) ==
                              NAPI_DLPACK_ROUND_UP_(3 * NAPI_DLPACK_P_ + 16,
                                                    NAPI_DLPACK_A64_),
                          tensor_byte_offset);
NAPI_DLPACK_STATIC_ASSERT(sizeof(DLTensor) == NAPI_DLPACK_TENSOR_SIZE_,
                          tensor_size);
NAPI_DLPACK_STATIC_ASSERT(offsetof(DLManagedTensor, manager_ctx) ==
                              NAPI_DLPACK_TENSOR_SIZE_,
                          managed_ctx);
NAPI_DLPACK_STATIC_ASSERT(offsetof(DLManagedTensor, deleter) ==
                              NAPI_DLPACK_TENSOR_SIZE_ + NAPI_DLPACK_P_,
                          managed_deleter);
NAPI_DLPACK_STATIC_ASSERT(sizeof(DLManagedTensor) ==
                              NAPI_DLPACK_ROUND_UP_(NAPI_DLPACK_TENSOR_SIZE_ +
                                                        2 * NAPI_DLPACK_P_,
                                                    NAPI_DLPACK_MAXA_),
                          managed_size);
NAPI_DLPACK_STATIC_ASSERT(offsetof(DLManagedTensorVersioned, version) == 0,
                          versioned_version);
NAPI_DLPACK_STATIC_ASSERT(offsetof(DLManagedTensorVersioned, manager_ctx) == 8,
                          versioned_ctx);
NAPI_DLPACK_STATIC_ASSERT(offsetof(DLManagedTensorVersioned, deleter) ==
                              8 + NAPI_DLPACK_P_,
                          versioned_deleter);
NAPI_DLPACK_STATIC_ASSERT(offsetof(DLManagedTensorVersioned, flags) ==
                              NAPI_DLPACK_ROUND_UP_(8 + 2 * NAPI_DLPACK_P_,
                                                    NAPI_DLPACK_A64_),
                          versioned_flags);
NAPI_DLPACK_STATIC_ASSERT(
    offsetof(DLManagedTensorVersioned, dl_tensor) ==
        NAPI_DLPACK_ROUND_UP_(
            NAPI_DLPACK_ROUND_UP_(8 + 2 * NAPI_DLPACK_P_, NAPI_DLPACK_A64_) + 8,
            NAPI_DLPACK_MAXA_),
    versioned_tensor);
#if UINTPTR_MAX == UINT64_MAX
NAPI_DLPACK_STATIC_ASSERT(sizeof(DLTensor) == 48, tensor_size_64);
NAPI_DLPACK_STATIC_ASSERT(sizeof(DLManagedTensor) == 64, managed_size_64);
NAPI_DLPACK_STATIC_ASSERT(sizeof(DLManagedTensorVersioned) == 80,
                          versioned_size_64);
#endif

#undef NAPI_DLPACK_DECLARE_ALL_
#undef NAPI_DLPACK_DECLARE_VERSIONED_

/* ===========================================================================
 * Part 2: the Node capsule ABI
 * ===========================================================================
 *
 * A capsule is a JS value created with napi_create_external whose data
 * pointer is a `napi_dlpack_capsule*`, and which is tagged with
 * napi_type_tag_object using the 128-bit tag below. The tag identifies
 * capsules across independently built addons; nothing else (class, prototype,
 * property) is part of the contract.
 *
 * Producer:
 *  - allocates the payload (any allocator; only the producer frees it),
 *    fills abi_version, kind and tensor, creates the external with its own
 *    finalizer and tags it.
 *  - the finalizer does exactly:
 *        t = atomic_exchange(&payload->tensor, NULL);
 *        if (t != NULL && t->deleter != NULL) t->deleter(t);
 *        free the payload;
 *    so an unconsumed capsule releases its tensor when it is collected, and a
 *    consumed one releases nothing.
 *
 * Consumer (napi_dlpack_capsule_consume does all of this):
 *  1. checks that the value is an external carrying the tag;
 *  2. reads the payload pointer with napi_get_value_external;
 *  3. rejects abi_version != NAPI_DLPACK_CAPSULE_ABI_VERSION or an unknown kind
 *     WITHOUT touching `tensor`;
 *  4. takes ownership with ONE sequentially consistent atomic exchange of
 *     `tensor` with NULL. A NULL result means the capsule was already
 *     consumed: report an error, touch nothing.
 *  5. from then on owns the tensor and must call its deleter exactly once
 *     (if non-NULL), INCLUDING when its own validation rejects the tensor
 *     afterwards (for a versioned tensor with version.major != 1: read only
 *     version, manager_ctx and deleter, call the deleter, read nothing else;
 *     in particular not `flags`).
 *  The consumer never frees the payload and never writes any field other than
 *  `tensor` (and that only through the exchange).
 *
 * `abi_version` and `kind` are written once, before the capsule is visible to
 * JS, and never change. `tensor` is only ever accessed atomically.
 *
 * Values that are not capsules: anything but an external, an external without
 * the tag (or with another tag), and a tagged external whose data pointer is
 * NULL (producers never make one). All are NAPI_DLPACK_ERR_NOT_A_CAPSULE,
 * "ERR_DLPACK_NOT_A_CAPSULE" in JS. A NULL `tensor` in a valid payload only
 * ever means "consumed".
 *
 * Inspecting without consuming (e.g. reading the device to refuse a capsule
 * while leaving it usable): only on the JS thread of the capsule's env, after
 * steps 1-3 of the checks, and only fields the version allows (nothing past
 * `deleter` for major != 1). Every consume goes through the napi_value, hence
 * through that thread, so the tensor cannot be released during the read.
 */

#define NAPI_DLPACK_CAPSULE_ABI_VERSION 1u

/* Type tag stamped on every capsule with napi_type_tag_object. */
#define NAPI_DLPACK_CAPSULE_TAG_LOWER 0xc8f8f2b7f76b4e13ULL
#define NAPI_DLPACK_CAPSULE_TAG_UPPER 0xb778e7826105b33aULL

/* Which struct `napi_dlpack_capsule.tensor` points to. */
enum {
  NAPI_DLPACK_KIND_LEGACY = 0,   /* DLManagedTensor* */
  NAPI_DLPACK_KIND_VERSIONED = 1 /* DLManagedTensorVersioned* */
};

typedef struct napi_dlpack_capsule {
  uint32_t abi_version; /* NAPI_DLPACK_CAPSULE_ABI_VERSION */
  uint32_t kind;        /* NAPI_DLPACK_KIND_*: which struct `tensor` points to */
  void* tensor;         /* owned DLManagedTensorVersioned* or DLManagedTensor*;
                           only ever accessed with atomic operations; NULL once
                           consumed */
} napi_dlpack_capsule;  /* 16 bytes on 64-bit */

NAPI_DLPACK_STATIC_ASSERT(offsetof(napi_dlpack_capsule, abi_version) == 0,
                          capsule_abi_version);
NAPI_DLPACK_STATIC_ASSERT(offsetof(napi_dlpack_capsule, kind) == 4,
                          capsule_kind);
NAPI_DLPACK_STATIC_ASSERT(offsetof(napi_dlpack_capsule, tensor) == 8,
                          capsule_tensor);
NAPI_DLPACK_STATIC_ASSERT(sizeof(napi_dlpack_capsule) == 8 + sizeof(void*),
                          capsule_size);

/* Status of the helper functions. */
typedef enum {
  NAPI_DLPACK_OK = 0,
  NAPI_DLPACK_ERR_NOT_A_CAPSULE = 1, /* not an external with the capsule tag */
  NAPI_DLPACK_ERR_CONSUMED = 2,      /* tensor already taken by someone */
  NAPI_DLPACK_ERR_ABI_VERSION = 3,   /* abi_version or kind not understood */
  NAPI_DLPACK_ERR_NAPI = 4,          /* a Node-API call failed */
  NAPI_DLPACK_ERR_NO_MEMORY = 5,     /* allocation failed */
  NAPI_DLPACK_ERR_INVALID_ARG = 6,   /* NULL pointer or bad kind passed in */
  /* Part 3 (the exchange table): */
  NAPI_DLPACK_ERR_VERSION = 7,       /* exchange table of an unknown major */
  NAPI_DLPACK_ERR_NO_EXCHANGE = 8,   /* the value exposes no (usable) table */
  NAPI_DLPACK_ERR_PRODUCER = 9,      /* the producer's function failed; its JS
                                        exception is pending: return NULL */
  NAPI_DLPACK_ERR_NOT_INSTALLED = 10 /* napi_dlpack_exchange_object_install made
                                        the external (its finalizer will run)
                                        but could not install it */
} napi_dlpack_status;

/* ---- atomics ------------------------------------------------------------
 * NAPI_DLPACK_ATOMIC_EXCHANGE_PTR(pp, v): store v into *pp and return the old
 * value, sequentially consistent. NAPI_DLPACK_ATOMIC_LOAD_PTR(pp): load *pp,
 * sequentially consistent. `pp` has type void**. Either may be predefined by
 * the user for other compilers. */
#if !defined(NAPI_DLPACK_ATOMIC_EXCHANGE_PTR) || \
    !defined(NAPI_DLPACK_ATOMIC_LOAD_PTR)
#if defined(__GNUC__) || defined(__clang__)
#define NAPI_DLPACK_ATOMIC_EXCHANGE_PTR(pp, v) \
  __atomic_exchange_n((void**)(pp), (void*)(v), __ATOMIC_SEQ_CST)
#define NAPI_DLPACK_ATOMIC_LOAD_PTR(pp) \
  __atomic_load_n((void**)(pp), __ATOMIC_SEQ_CST)
#elif defined(_MSC_VER)
/* <intrin.h> is included at the top of this file, outside extern "C". */
/* Interlocked operations are full barriers on every Windows target. */
#define NAPI_DLPACK_ATOMIC_EXCHANGE_PTR(pp, v) \
  _InterlockedExchangePointer((void* volatile*)(pp), (void*)(v))
#define NAPI_DLPACK_ATOMIC_LOAD_PTR(pp) \
  _InterlockedCompareExchangePointer((void* volatile*)(pp), NULL, NULL)
#else
#error "napi_dlpack.h: define NAPI_DLPACK_ATOMIC_EXCHANGE_PTR and NAPI_DLPACK_ATOMIC_LOAD_PTR for this compiler"
#endif
#endif

/* Environment type of a finalizer passed to napi_create_external. With
 * NAPI_EXPERIMENTAL on Node >= 21 headers it is the const "basic" env. */
#ifndef NAPI_DLPACK_FINALIZE_ENV
#if defined(NAPI_EXPERIMENTAL) &&                        \
    defined(NODE_API_EXPERIMENTAL_HAS_POST_FINALIZER) && \
    !defined(NODE_API_EXPERIMENTAL_NOGC_ENV_OPT_OUT) &&  \
    !defined(NODE_API_EXPERIMENTAL_BASIC_ENV_OPT_OUT)
#define NAPI_DLPACK_FINALIZE_ENV node_api_nogc_env
#else
#define NAPI_DLPACK_FINALIZE_ENV napi_env
#endif
#endif

/* A finalizer of napi_create_external as the included Node-API headers declare
 * it (its env is NAPI_DLPACK_FINALIZE_ENV). */
typedef void (*napi_dlpack_finalize)(NAPI_DLPACK_FINALIZE_ENV env, void* data,
                                     void* hint);

/* The type tag as a napi_type_tag value. */
static inline const napi_type_tag* napi_dlpack_capsule_tag(void) {
  static const napi_type_tag tag = {NAPI_DLPACK_CAPSULE_TAG_LOWER,
                                    NAPI_DLPACK_CAPSULE_TAG_UPPER};
  return &tag;
}

/* Releases a tensor of the given kind: calls its deleter if there is one. */
static inline void napi_dlpack_tensor_release(uint32_t kind, void* tensor) {
  if (tensor == NULL) return;
  if (kind == NAPI_DLPACK_KIND_VERSIONED) {
    DLManagedTensorVersioned* t = (DLManagedTensorVersioned*)tensor;
    if (t->deleter != NULL) t->deleter(t);
  } else if (kind == NAPI_DLPACK_KIND_LEGACY) {
    DLManagedTensor* t = (DLManagedTensor*)tensor;
    if (t->deleter != NULL) t->deleter(t);
  }
}

/* Finalizer of capsules made by napi_dlpack_capsule_create. Touches no JS
 * state, so it is safe to run during garbage collection. */
static inline void napi_dlpack_capsule_finalize_(NAPI_DLPACK_FINALIZE_ENV env,
                                                 void* data, void* hint) {
  napi_dlpack_capsule* payload = (napi_dlpack_capsule*)data;
  void* tensor;
  (void)env;
  (void)hint;
  if (payload == NULL) return;
  tensor = NAPI_DLPACK_ATOMIC_EXCHANGE_PTR(&payload->tensor, NULL);
  napi_dlpack_tensor_release(payload->kind, tensor);
  free(payload);
}

/*
 * Producer: wraps `tensor` (a DLManagedTensorVersioned* when kind is
 * NAPI_DLPACK_KIND_VERSIONED, a DLManagedTensor* when NAPI_DLPACK_KIND_LEGACY)
 * in a new capsule stored in *result. On success the capsule owns the tensor.
 * On ANY failure ownership stays with the caller and the deleter has not been
 * called.
 */
static inline napi_dlpack_status napi_dlpack_capsule_create(
    napi_env env, uint32_t kind, void* tensor, napi_value* result) {
  napi_dlpack_capsule* payload;
  napi_value value;
  if (env == NULL || tensor == NULL || result == NULL ||
      (kind != NAPI_DLPACK_KIND_LEGACY && kind != NAPI_DLPACK_KIND_VERSIONED))
    return NAPI_DLPACK_ERR_INVALID_ARG;
  payload = (napi_dlpack_capsule*)malloc(sizeof(napi_dlpack_capsule));
  if (payload == NULL) return NAPI_DLPACK_ERR_NO_MEMORY;
  payload->abi_version = NAPI_DLPACK_CAPSULE_ABI_VERSION;
  payload->kind = kind;
  payload->tensor = tensor;
  if (napi_create_external(env, payload, napi_dlpack_capsule_finalize_, NULL,
                           &value) != napi_ok) {
    free(payload);
    return NAPI_DLPACK_ERR_NAPI;
  }
  if (napi_type_tag_object(env, value, napi_dlpack_capsule_tag()) !=
      napi_ok) {
    /* The external exists and its finalizer will run later: take the tensor
     * back out so that the finalizer only frees the payload. */
    (void)NAPI_DLPACK_ATOMIC_EXCHANGE_PTR(&payload->tensor, NULL);
    return NAPI_DLPACK_ERR_NAPI;
  }
  *result = value;
  return NAPI_DLPACK_OK;
}

/* The payload of `value` if it is a capsule (internal): an external with the
 * tag and a non-NULL data pointer. */
static inline napi_dlpack_status napi_dlpack_capsule_external_(
    napi_env env, napi_value value, napi_dlpack_capsule** out) {
  napi_valuetype type;
  bool tagged = false;
  void* data = NULL;
  if (env == NULL || value == NULL) return NAPI_DLPACK_ERR_INVALID_ARG;
  if (napi_typeof(env, value, &type) != napi_ok) return NAPI_DLPACK_ERR_NAPI;
  /* Checking a tag on a non-object fails with napi_object_expected, so
   * anything but an external is rejected first. */
  if (type != napi_external) return NAPI_DLPACK_ERR_NOT_A_CAPSULE;
  if (napi_check_object_type_tag(env, value, napi_dlpack_capsule_tag(),
                                 &tagged) != napi_ok)
    return NAPI_DLPACK_ERR_NAPI;
  if (!tagged) return NAPI_DLPACK_ERR_NOT_A_CAPSULE;
  if (napi_get_value_external(env, value, &data) != napi_ok)
    return NAPI_DLPACK_ERR_NAPI;
  /* A tagged external with a NULL payload is not a capsule: no producer makes
   * one, and there is no `tensor` to read. */
  if (data == NULL) return NAPI_DLPACK_ERR_NOT_A_CAPSULE;
  *out = (napi_dlpack_capsule*)data;
  return NAPI_DLPACK_OK;
}

/* NAPI_DLPACK_OK if `value` is a capsule: an external carrying the tag whose
 * payload pointer is not NULL, consumed or not, of any abi_version (the
 * consume and is_consumed helpers then refuse an unknown one).
 * NAPI_DLPACK_ERR_NOT_A_CAPSULE for anything else. */
static inline napi_dlpack_status napi_dlpack_capsule_check(napi_env env,
                                                           napi_value value) {
  napi_dlpack_capsule* payload = NULL;
  return napi_dlpack_capsule_external_(env, value, &payload);
}

/* Reads the payload of a capsule (internal; validates tag and abi_version,
 * never reads `tensor`). */
static inline napi_dlpack_status napi_dlpack_capsule_payload_(
    napi_env env, napi_value value, napi_dlpack_capsule** out) {
  napi_dlpack_capsule* payload = NULL;
  napi_dlpack_status st = napi_dlpack_capsule_external_(env, value, &payload);
  if (st != NAPI_DLPACK_OK) return st;
  if (payload->abi_version != NAPI_DLPACK_CAPSULE_ABI_VERSION ||
      (payload->kind != NAPI_DLPACK_KIND_LEGACY &&
       payload->kind != NAPI_DLPACK_KIND_VERSIONED))
    return NAPI_DLPACK_ERR_ABI_VERSION;
  *out = payload;
  return NAPI_DLPACK_OK;
}

/*
 * Consumer: takes ownership of the capsule's tensor. On NAPI_DLPACK_OK,
 * *kind and *tensor are written and the caller must eventually call the
 * tensor's deleter exactly once (napi_dlpack_tensor_release does that), even
 * if it then rejects the tensor. On any error nothing was taken and *kind and
 * *tensor are left untouched. An unknown kind is reported as
 * NAPI_DLPACK_ERR_ABI_VERSION.
 */
static inline napi_dlpack_status napi_dlpack_capsule_consume(
    napi_env env, napi_value value, uint32_t* kind, void** tensor) {
  napi_dlpack_capsule* payload = NULL;
  void* taken;
  napi_dlpack_status st;
  if (kind == NULL || tensor == NULL) return NAPI_DLPACK_ERR_INVALID_ARG;
  st = napi_dlpack_capsule_payload_(env, value, &payload);
  if (st != NAPI_DLPACK_OK) return st;
  taken = NAPI_DLPACK_ATOMIC_EXCHANGE_PTR(&payload->tensor, NULL);
  if (taken == NULL) return NAPI_DLPACK_ERR_CONSUMED;
  *kind = payload->kind;
  *tensor = taken;
  return NAPI_DLPACK_OK;
}

/* Writes 1 to *consumed if the capsule's tensor has been taken, else 0. A
 * capsule of another abi_version or kind is NAPI_DLPACK_ERR_ABI_VERSION, its
 * `tensor` not read. Consumes happen on the JS thread of the capsule's env
 * (they go through the napi_value), so on that thread the answer holds until
 * the next consume there. */
static inline napi_dlpack_status napi_dlpack_capsule_is_consumed(
    napi_env env, napi_value value, int* consumed) {
  napi_dlpack_capsule* payload = NULL;
  napi_dlpack_status st;
  if (consumed == NULL) return NAPI_DLPACK_ERR_INVALID_ARG;
  st = napi_dlpack_capsule_payload_(env, value, &payload);
  if (st != NAPI_DLPACK_OK) return st;
  *consumed = NAPI_DLPACK_ATOMIC_LOAD_PTR(&payload->tensor) == NULL ? 1 : 0;
  return NAPI_DLPACK_OK;
}

/* Stable JS error code (the `code` property of thrown errors) for a status. */
static inline const char* napi_dlpack_status_code(napi_dlpack_status status) {
  switch (status) {
    case NAPI_DLPACK_OK: return "OK";
    case NAPI_DLPACK_ERR_NOT_A_CAPSULE: return "ERR_DLPACK_NOT_A_CAPSULE";
    case NAPI_DLPACK_ERR_CONSUMED: return "ERR_DLPACK_CAPSULE_CONSUMED";
    case NAPI_DLPACK_ERR_ABI_VERSION: return "ERR_DLPACK_CAPSULE_ABI";
    case NAPI_DLPACK_ERR_NAPI: return "ERR_DLPACK_NAPI";
    case NAPI_DLPACK_ERR_NO_MEMORY: return "ERR_DLPACK_NO_MEMORY";
    case NAPI_DLPACK_ERR_INVALID_ARG: return "ERR_DLPACK_INVALID_ARGUMENT";
    case NAPI_DLPACK_ERR_VERSION: return "ERR_DLPACK_VERSION";
    case NAPI_DLPACK_ERR_NO_EXCHANGE: return "ERR_DLPACK_INVALID_ARGUMENT";
    case NAPI_DLPACK_ERR_PRODUCER: return "ERR_DLPACK_NAPI";
    case NAPI_DLPACK_ERR_NOT_INSTALLED: return "ERR_DLPACK_NAPI";
  }
  return "ERR_DLPACK_UNKNOWN";
}


/* ===========================================================================
 * Part 3: the exchange table (docs/protocol.md section 5)
 * ===========================================================================
 *
 * The Node counterpart of DLPack 1.3's DLPackExchangeAPI: a producer's
 * process-lifetime table of C functions that any addon can call given a JS
 * object, without a capsule:
 *
 *  - dltensor_from_value: fill a caller-provided DLTensor that BORROWS the
 *    object's tensor, plus its DLPack flags (READ_ONLY, IS_COPIED,
 *    IS_SUBBYTE_TYPE_PADDED: those its owning export would carry; a bare
 *    DLTensor cannot carry them), plus an opaque keep-alive token. No
 *    finalizer, no stream synchronisation, and no allocation per call. The
 *    producer keeps everything the DLTensor points to (data, shape, strides)
 *    alive until the consumer passes the token to release_borrow, whatever
 *    JS runs meanwhile: disposing the JS object, or collecting it, releases
 *    nothing the borrow still uses. Shape and strides are filled (strides
 *    non-NULL for ndim > 0) and must not be written. May be NULL.
 *  - release_borrow: ends a borrow: called exactly once per successful
 *    dltensor_from_value, with its token (which may be NULL), on the JS
 *    thread of that env while the env is alive. Non-NULL whenever
 *    dltensor_from_value is. (A JS object's memory can still be moved by
 *    transferring its ArrayBuffer: napi-dlpack's Tensor refuses a borrow of
 *    a detached buffer, but cannot stop a transfer during one.)
 *  - managed_tensor_from_value: a new OWNING DLManagedTensorVersioned* (the
 *    caller calls its deleter once), without stream synchronisation.
 *  - managed_tensor_to_value: takes ownership of a DLManagedTensorVersioned*
 *    (ALWAYS: on failure the producer has called its deleter) and returns a
 *    new JS object of the producer's kind viewing it, as its fromDLPack
 *    would: how an addon returns, e.g., a napi-dlpack Tensor without linking
 *    napi-dlpack.
 *  - current_work_stream: the producer's current stream for a device (the
 *    stream its kernels run on); NULL for the CPU and devices without
 *    streams. napi-dlpack answers CU_STREAM_LEGACY ((void*)1) for CUDA.
 *  - dltensor_from_object (table minor >= 1): dltensor_from_value for an
 *    object found through its own per-object external (see Discovery), given
 *    that external's data, so the producer looks nothing up again. Same
 *    contract as dltensor_from_value otherwise. May be NULL.
 *
 * Every function returns 0 on success, and -1 on failure with a JS exception
 * pending (an Error whose `code` is stable): a consumer simply returns NULL
 * from its callback to pass it on. They are called on the JS thread of `env`
 * and must not throw C++ exceptions or unwind.
 *
 * Discovery: ONE property lookup on the object (own or inherited), keyed by
 * the registered symbol Symbol.for(NAPI_DLPACK_EXCHANGE_API_PROPERTY)
 * (napi_dlpack_exchange_key; a symbol, not a string, so that consumers can
 * keep it in a napi_ref and pay nothing per call to make the key). Its value
 * is a napi_external of one of two kinds
 * (no other property of the object is read; the tags, which only native code
 * can set, are all a consumer trusts):
 *
 *  - tagged NAPI_DLPACK_EXCHANGE_API_TAG: the external's data is the table's
 *    header. A producer defines it on the prototype of its objects
 *    (napi_dlpack_exchange_api_install). Borrow with dltensor_from_value.
 *  - tagged NAPI_DLPACK_OBJECT_TAG (the fast path): the external's data
 *    starts with a napi_dlpack_object naming the table, followed by the
 *    producer's own per-object data; it stays valid as long as the external
 *    lives (give the external a finalizer or a count on that data). A
 *    producer defines it as an OWN property of each object, shadowing the
 *    prototype's table (napi_dlpack_exchange_object_install), and deletes
 *    that property when the object stops lending (a dispose()): consumers then
 *    find the prototype's table, whose dltensor_from_value reports why.
 *    Borrow with dltensor_from_object(env, value, data, ...), which spares the
 *    producer a second lookup (napi-dlpack's Tensor keeps its native handle
 *    there). JS can copy such an external onto another object: it then lends
 *    the same tensor, which stays memory-safe because the external keeps the
 *    data alive. JS can also pass the external itself as the argument
 *    (napi-dlpack's Tensor.native hands it out): a consumer given an external
 *    with this tag borrows it with no lookup at all, calling the table's
 *    functions with `value` = the external. A producer must therefore never
 *    assume `value` is one of its objects in dltensor_from_object; one that
 *    hands its externals to JS accepts them as `value` in every function.
 *
 * napi_dlpack_exchange_find does both. napi-dlpack also installs its table on
 * globalThis: the environment's default importer, for
 * managed_tensor_to_value when there is no object at hand.
 *
 * Versions. header.version is the TABLE's version (not DLPack's): a consumer
 * uses a table whose major it knows, else walks prev_api to an older one,
 * else fails (napi_dlpack_exchange_api_select). Minor versions only append
 * functions at the end of the struct.
 */

#define NAPI_DLPACK_EXCHANGE_API_MAJOR 1u
#define NAPI_DLPACK_EXCHANGE_API_MINOR 3u
/* The registry key of the property's symbol: Symbol.for(this). */
#define NAPI_DLPACK_EXCHANGE_API_PROPERTY "__dlpack_napi_exchange_api__"
#define NAPI_DLPACK_EXCHANGE_API_TAG_LOWER 0x3f0d9a51c4e24b87ULL
#define NAPI_DLPACK_EXCHANGE_API_TAG_UPPER 0xa6b152e87d094c3eULL
/* The tag of a per-object external (layout version 1: napi_dlpack_object). */
#define NAPI_DLPACK_OBJECT_TAG_LOWER 0x7c2e4b19a05d43f6ULL
#define NAPI_DLPACK_OBJECT_TAG_UPPER 0xd18a3f6092b44e7dULL

typedef struct napi_dlpack_exchange_api_header {
  DLPackVersion version; /* of the table: {NAPI_DLPACK_EXCHANGE_API_MAJOR, ..} */
  const struct napi_dlpack_exchange_api_header* prev_api; /* older, or NULL */
} napi_dlpack_exchange_api_header;

typedef int (*napi_dlpack_dltensor_from_value_fn)(napi_env env,
                                                  napi_value value,
                                                  DLTensor* out,
                                                  uint64_t* out_flags,
                                                  void** out_keep_alive);
typedef void (*napi_dlpack_release_borrow_fn)(napi_env env, void* keep_alive);
typedef int (*napi_dlpack_managed_tensor_from_value_fn)(
    napi_env env, napi_value value, DLManagedTensorVersioned** out);
typedef int (*napi_dlpack_managed_tensor_to_value_fn)(
    napi_env env, DLManagedTensorVersioned* tensor, napi_value* out);
typedef int (*napi_dlpack_current_work_stream_fn)(napi_env env,
                                                  int32_t device_type,
                                                  int32_t device_id,
                                                  void** out_stream);
typedef int (*napi_dlpack_dltensor_from_object_fn)(napi_env env,
                                                   napi_value value,
                                                   void* object,
                                                   DLTensor* out,
                                                   uint64_t* out_flags,
                                                   void** out_keep_alive);

/* Where a tensor's elements are (napi_dlpack_tensor_extent computes it; a
 * borrow by handle id hands it over). */
typedef struct napi_dlpack_extent {
  int64_t numel;       /* product of the shape */
  int64_t itemsize;    /* bytes per element (1 for padded sub-byte types) */
  int64_t min_offset;  /* lowest element offset, in elements, <= 0 */
  int64_t max_offset;  /* highest element offset, in elements, >= 0 */
  uint64_t span_bytes; /* lowest element to end of highest; 0 when empty */
  int c_contiguous;    /* row-major dense (size-1 dims ignored) */
} napi_dlpack_extent;

/*
 * Borrow by handle id (minor >= 2; docs/protocol.md section 5.6). A producer
 * may hand JS an integer id per tensor (napi-dlpack: Tensor#id), below 2^53 so
 * that it is exact as a JS number, and the same id inside an "id external"
 * (Tensor#native): a napi_external whose data is not a pointer but
 * NAPI_DLPACK_HANDLE_ID_EXTERNAL_MARK | id (no user-space address has those
 * top bits set on a 64-bit platform; JS cannot make externals, so this form
 * cannot be forged, while any JS of the realm can write a number). Neither
 * form names its table: the environment's default importer (the table on
 * globalThis, napi_dlpack_exchange_default) is the producer. borrow_id returns
 * the producer's own record of the tensor (napi_dlpack_lent_tensor), which the
 * consumer reads in place and never writes: the DLTensor as
 * dltensor_from_value describes it (strides non-NULL for ndim > 0), its flags,
 * its extent, and the token that ends the borrow. The producer validated the
 * tensor (section 5.4) when it made the id and guarantees the extent agrees
 * with it, so the consumer need not validate. The record, and all it points
 * to, stays valid and unchanged until the consumer passes record->keep_alive
 * to release_borrow, exactly once. An id that names no live tensor of this JS
 * thread (disposed, collected, another thread's) is refused: NULL with a coded
 * exception pending (napi-dlpack: ERR_TENSOR_STALE_ID), and nothing is read
 * through it. One call and one pointer back, nothing copied: the hot path.
 */
#define NAPI_DLPACK_HANDLE_ID_MAX ((1ULL << 53) - 1)
#define NAPI_DLPACK_HANDLE_ID_EXTERNAL_MARK (0x6d5ULL << 53)
#define NAPI_DLPACK_HANDLE_ID_EXTERNAL_MASK (~NAPI_DLPACK_HANDLE_ID_MAX)
typedef struct napi_dlpack_lent_tensor {
  DLTensor tensor;           /* read-only: shape and strides are the producer's */
  uint64_t flags;            /* READ_ONLY, IS_COPIED, IS_SUBBYTE_TYPE_PADDED */
  napi_dlpack_extent extent; /* what napi_dlpack_tensor_extent would compute */
  void* keep_alive;          /* pass to release_borrow to end the borrow */
} napi_dlpack_lent_tensor;
typedef const napi_dlpack_lent_tensor* (*napi_dlpack_borrow_id_fn)(napi_env env,
                                                                  uint64_t id);
NAPI_DLPACK_STATIC_ASSERT(offsetof(napi_dlpack_lent_tensor, flags) ==
                              sizeof(DLTensor),
                          lent_tensor_flags);
NAPI_DLPACK_STATIC_ASSERT(offsetof(napi_dlpack_lent_tensor, keep_alive) ==
                              sizeof(DLTensor) + 8 + sizeof(napi_dlpack_extent),
                          lent_tensor_keep_alive);

/*
 * The slot table behind handle ids (minor >= 3; docs/protocol.md section
 * 5.6), which a producer may publish so that consumers borrow an id INLINE,
 * without a call: where `thread_key` is NAPI_DLPACK_THREAD_KEY_POINTER (the
 * thread pointer: fs:0 on x86_64 Linux, gs:0x30 on x86_64 Windows, tpidr_el0
 * on aarch64 Linux), an id names slot `id & (2^24 - 1)` with generation
 * `id >> 24` (0 is never an id), in chunk `slot >> 12` at place `slot & 4095`
 * (chunks[] has 4096 entries, NULL until made; a chunk holds 4096 slots of
 * `slot_size` bytes that never move). A consumer may lend itself a slot only
 * if `owner` (read with acquire) equals its own thread pointer, `generation`
 * equals the id's, and `ready` is non-zero, and then adds 1 to `pins`
 * (owner-thread fields are touched only by the thread whose key is in
 * `owner`); it reads `lent` in place. To end that borrow it subtracts 1 from
 * `pins`, except when `released` is non-zero and `pins` is 1: then it calls
 * release_borrow(env, lent.keep_alive), which frees the slot. Anything else
 * (a check that fails) goes to borrow_id, which refuses or does the
 * producer's own steps. `scratch` belongs to whichever consumer last wrote
 * `scratch_key` (an address in its own binary, so no two binaries share a
 * key): it keeps there what it derived from `lent`, and reads it back while
 * the key is still its own; the producer sets the key to 0 whenever the slot
 * gets a new tensor (a record never changes while a slot keeps a
 * generation). Copy out what you read: another consumer may overwrite it.
 * napi-dlpack's crate does all this (its id_slots module); C consumers may
 * simply call borrow_id.
 */
#define NAPI_DLPACK_ID_SLOTS_LAYOUT 1u
#define NAPI_DLPACK_THREAD_KEY_PRIVATE 0u
#define NAPI_DLPACK_THREAD_KEY_POINTER 1u
typedef struct napi_dlpack_id_slot {
  uint64_t owner;      /* atomic: the owner thread's key; 0 free; ~0 ended */
  uint32_t generation; /* atomic */
  uint32_t reserved;   /* the producer's */
  /* the owner thread's: */
  uint32_t pins;       /* borrows in progress */
  uint8_t ready;       /* non-zero: a borrow needs no producer step */
  uint8_t released;    /* non-zero: the tensor let go, freed at pins == 0 */
  uint8_t reserved2[2];
  napi_dlpack_lent_tensor lent;
  uint64_t scratch_key; /* whose scratch it is: 0 nobody's */
  uint64_t scratch[10]; /* a consumer's derived form of lent */
  /* the producer's own fields follow, up to slot_size */
} napi_dlpack_id_slot;
typedef struct napi_dlpack_id_slots {
  uint32_t layout;     /* NAPI_DLPACK_ID_SLOTS_LAYOUT */
  uint32_t thread_key; /* NAPI_DLPACK_THREAD_KEY_* */
  uint64_t slot_size;  /* bytes from one slot to the next */
  void* const* chunks; /* 4096 atomic pointers to chunks */
} napi_dlpack_id_slots;
NAPI_DLPACK_STATIC_ASSERT(offsetof(napi_dlpack_id_slot, pins) == 16,
                          id_slot_pins);
NAPI_DLPACK_STATIC_ASSERT(offsetof(napi_dlpack_id_slot, lent) == 24,
                          id_slot_lent);
NAPI_DLPACK_STATIC_ASSERT(offsetof(napi_dlpack_id_slot, scratch) ==
                              24 + sizeof(napi_dlpack_lent_tensor) + 8,
                          id_slot_scratch);

/* What the data of a NAPI_DLPACK_OBJECT_TAG external starts with. */
typedef struct napi_dlpack_object {
  const napi_dlpack_exchange_api_header* api; /* the producer's table */
} napi_dlpack_object;

/* Major version 1. Any function may be NULL (unsupported). */
typedef struct napi_dlpack_exchange_api {
  napi_dlpack_exchange_api_header header;
  napi_dlpack_dltensor_from_value_fn dltensor_from_value;
  napi_dlpack_release_borrow_fn release_borrow;
  napi_dlpack_managed_tensor_from_value_fn managed_tensor_from_value;
  napi_dlpack_managed_tensor_to_value_fn managed_tensor_to_value;
  napi_dlpack_current_work_stream_fn current_work_stream;
  /* minor >= 1 (read it only from such a table: a minor-0 table ends above) */
  napi_dlpack_dltensor_from_object_fn dltensor_from_object;
  /* minor >= 2: borrow by handle id (napi_dlpack_exchange_api_id_borrow) */
  napi_dlpack_borrow_id_fn borrow_id;
  /* minor >= 3: the slot table behind handle ids, or NULL */
  const napi_dlpack_id_slots* id_slots;
} napi_dlpack_exchange_api;

NAPI_DLPACK_STATIC_ASSERT(offsetof(napi_dlpack_exchange_api,
                                   dltensor_from_value) ==
                              sizeof(napi_dlpack_exchange_api_header),
                          exchange_api_first_function);
NAPI_DLPACK_STATIC_ASSERT(offsetof(napi_dlpack_exchange_api,
                                   release_borrow) ==
                              sizeof(napi_dlpack_exchange_api_header) +
                                  sizeof(void*),
                          exchange_api_release_borrow);
NAPI_DLPACK_STATIC_ASSERT(sizeof(napi_dlpack_exchange_api) ==
                              sizeof(napi_dlpack_exchange_api_header) +
                                  8 * sizeof(void*),
                          exchange_api_size);
NAPI_DLPACK_STATIC_ASSERT(sizeof(napi_dlpack_object) == sizeof(void*),
                          exchange_object_size);

/* The type tag of the external holding a table. */
static inline const napi_type_tag* napi_dlpack_exchange_api_tag(void) {
  static const napi_type_tag tag = {NAPI_DLPACK_EXCHANGE_API_TAG_LOWER,
                                    NAPI_DLPACK_EXCHANGE_API_TAG_UPPER};
  return &tag;
}

/* The type tag of a per-object external. */
static inline const napi_type_tag* napi_dlpack_object_tag(void) {
  static const napi_type_tag tag = {NAPI_DLPACK_OBJECT_TAG_LOWER,
                                    NAPI_DLPACK_OBJECT_TAG_UPPER};
  return &tag;
}

/* dltensor_from_object of `api`, or NULL for a table older than minor 1. */
static inline napi_dlpack_dltensor_from_object_fn
napi_dlpack_exchange_api_object_borrow(const napi_dlpack_exchange_api* api) {
  return api->header.version.minor >= 1 ? api->dltensor_from_object : NULL;
}

/* borrow_id of `api`, or NULL for a table older than minor 2 (or one without
 * release_borrow). */
static inline napi_dlpack_borrow_id_fn
napi_dlpack_exchange_api_id_borrow(const napi_dlpack_exchange_api* api) {
  return api->header.version.minor >= 2 && api->release_borrow != NULL
             ? api->borrow_id
             : NULL;
}

/*
 * Consumer: the handle id `value` is, in *id: a number that is an exact
 * integer in 0..NAPI_DLPACK_HANDLE_ID_MAX (read as a double, so 1.5 is refused
 * rather than rounded), or an id external. NAPI_DLPACK_ERR_NO_EXCHANGE when
 * `value` is neither a number nor an id external (an object, a capsule: go on
 * with napi_dlpack_exchange_find), NAPI_DLPACK_ERR_INVALID_ARG for a number
 * that is no id. Try the external first: napi_get_value_external fails
 * cheaply, without throwing, on anything else.
 */
static inline napi_dlpack_status napi_dlpack_handle_id(napi_env env,
                                                       napi_value value,
                                                       uint64_t* id) {
  void* data = NULL;
  double number = 0;
  napi_valuetype type;
  uint64_t bits;
  if (env == NULL || value == NULL || id == NULL)
    return NAPI_DLPACK_ERR_INVALID_ARG;
  if (napi_get_value_external(env, value, &data) == napi_ok) {
    bits = (uint64_t)(uintptr_t)data;
    if (sizeof(void*) < 8 || (bits & NAPI_DLPACK_HANDLE_ID_EXTERNAL_MASK) !=
                                 NAPI_DLPACK_HANDLE_ID_EXTERNAL_MARK)
      return NAPI_DLPACK_ERR_NO_EXCHANGE;
    *id = bits & NAPI_DLPACK_HANDLE_ID_MAX;
    return NAPI_DLPACK_OK;
  }
  if (napi_typeof(env, value, &type) != napi_ok) return NAPI_DLPACK_ERR_NAPI;
  if (type != napi_number) return NAPI_DLPACK_ERR_NO_EXCHANGE;
  if (napi_get_value_double(env, value, &number) != napi_ok)
    return NAPI_DLPACK_ERR_NAPI;
  if (!(number >= 0 && number <= (double)NAPI_DLPACK_HANDLE_ID_MAX) ||
      number != (double)(uint64_t)number)
    return NAPI_DLPACK_ERR_INVALID_ARG;
  *id = (uint64_t)number;
  return NAPI_DLPACK_OK;
}

/* How many tables of a chain a consumer looks at, at most: the first and up to
 * 15 older ones behind it (15 prev_api links). A longer chain is a broken
 * producer; stopping keeps a cycle from looping forever. */
#define NAPI_DLPACK_EXCHANGE_MAX_TABLES 16

/* The table of `header`'s chain with major NAPI_DLPACK_EXCHANGE_API_MAJOR
 * among its first NAPI_DLPACK_EXCHANGE_MAX_TABLES tables, or NULL. */
static inline const napi_dlpack_exchange_api* napi_dlpack_exchange_api_select(
    const napi_dlpack_exchange_api_header* header) {
  int tables;
  for (tables = 0; header != NULL && tables < NAPI_DLPACK_EXCHANGE_MAX_TABLES;
       tables++) {
    if (header->version.major == NAPI_DLPACK_EXCHANGE_API_MAJOR)
      return (const napi_dlpack_exchange_api*)header;
    header = header->prev_api;
  }
  return NULL;
}

/*
 * The property key: Symbol.for(NAPI_DLPACK_EXCHANGE_API_PROPERTY), made by
 * calling the global Symbol.for (every runtime has it). Hot consumers keep it
 * in a napi_ref (Node-API references symbols) per environment instead.
 */
static inline napi_dlpack_status napi_dlpack_symbol_for_(napi_env env,
                                                         const char* name,
                                                         napi_value* key) {
  napi_value global, symbol, symbol_for, text;
  napi_valuetype type;
  if (env == NULL || key == NULL) return NAPI_DLPACK_ERR_INVALID_ARG;
  if (napi_get_global(env, &global) != napi_ok ||
      napi_get_named_property(env, global, "Symbol", &symbol) != napi_ok ||
      napi_get_named_property(env, symbol, "for", &symbol_for) != napi_ok ||
      napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &text) != napi_ok ||
      napi_call_function(env, symbol, symbol_for, 1, &text, key) != napi_ok ||
      napi_typeof(env, *key, &type) != napi_ok || type != napi_symbol)
    return NAPI_DLPACK_ERR_NAPI;
  return NAPI_DLPACK_OK;
}

static inline napi_dlpack_status napi_dlpack_exchange_key(napi_env env,
                                                          napi_value* key) {
  return napi_dlpack_symbol_for_(env, NAPI_DLPACK_EXCHANGE_API_PROPERTY, key);
}

/*
 * Producer: makes the table starting with `header` (static, process lifetime;
 * pass &api.header) discoverable on `target` (a prototype): defines the
 * exchange symbol as a non-enumerable, writable (so that each object may
 * shadow it by assignment with its own per-object external) data property
 * holding a tagged external.
 */
static inline napi_dlpack_status napi_dlpack_exchange_api_install(
    napi_env env, napi_value target,
    const napi_dlpack_exchange_api_header* header) {
  napi_value external, key;
  napi_property_descriptor descriptor;
  if (env == NULL || target == NULL || header == NULL)
    return NAPI_DLPACK_ERR_INVALID_ARG;
  if (napi_dlpack_exchange_key(env, &key) != NAPI_DLPACK_OK)
    return NAPI_DLPACK_ERR_NAPI;
  /* No finalizer: the table outlives every environment. */
  if (napi_create_external(env, (void*)header, NULL, NULL, &external) !=
      napi_ok)
    return NAPI_DLPACK_ERR_NAPI;
  if (napi_type_tag_object(env, external, napi_dlpack_exchange_api_tag()) !=
      napi_ok)
    return NAPI_DLPACK_ERR_NAPI;
  memset(&descriptor, 0, sizeof descriptor);
  descriptor.name = key;
  descriptor.value = external;
  descriptor.attributes = napi_writable;
  if (napi_define_properties(env, target, 1, &descriptor) != napi_ok)
    return NAPI_DLPACK_ERR_NAPI;
  return NAPI_DLPACK_OK;
}

/*
 * Producer: makes `object` lend through its own per-object external (the
 * fast path): creates a napi_external of `data` (which starts with a
 * napi_dlpack_object naming your table), tags it NAPI_DLPACK_OBJECT_TAG and
 * defines it as the own, configurable, non-enumerable property of `object`
 * under the exchange symbol (`key`: napi_dlpack_exchange_key's, or NULL to
 * make it here). `finalize_cb` (may be NULL; its env parameter is
 * NAPI_DLPACK_FINALIZE_ENV, the const "basic" env under NAPI_EXPERIMENTAL on
 * Node >= 21 headers) runs once when the external is collected. Hold a count
 * on `data` for it, taken before the call; the status says whether it will
 * run, i.e. whether that count is now the finalizer's to release:
 *   NAPI_DLPACK_OK                installed; finalize_cb will run.
 *   NAPI_DLPACK_ERR_NOT_INSTALLED the external was made (finalize_cb WILL run,
 *                                 keep the count for it) but could not be
 *                                 tagged or defined on `object` (a frozen
 *                                 object, a primitive): `object` does not lend.
 *   any other status              nothing was made; finalize_cb will never
 *                                 run: release the count yourself.
 * Delete the property (napi_delete_property) when the object stops lending.
 */
static inline napi_dlpack_status napi_dlpack_exchange_object_install(
    napi_env env, napi_value object, napi_value key, napi_dlpack_object* data,
    napi_dlpack_finalize finalize_cb, void* finalize_hint) {
  napi_value external;
  napi_property_descriptor descriptor;
  if (env == NULL || object == NULL || data == NULL || data->api == NULL)
    return NAPI_DLPACK_ERR_INVALID_ARG;
  if (key == NULL && napi_dlpack_exchange_key(env, &key) != NAPI_DLPACK_OK)
    return NAPI_DLPACK_ERR_NAPI;
  if (napi_create_external(env, data, finalize_cb, finalize_hint, &external) !=
      napi_ok)
    return NAPI_DLPACK_ERR_NAPI;
  /* From here on the finalizer is registered: failures say so. */
  if (napi_type_tag_object(env, external, napi_dlpack_object_tag()) != napi_ok)
    return NAPI_DLPACK_ERR_NOT_INSTALLED;
  memset(&descriptor, 0, sizeof descriptor);
  descriptor.name = key;
  descriptor.value = external;
  descriptor.attributes = napi_configurable;
  if (napi_define_properties(env, object, 1, &descriptor) != napi_ok)
    return NAPI_DLPACK_ERR_NOT_INSTALLED;
  return NAPI_DLPACK_OK;
}

/*
 * Consumer: what `value` lends through, with one property lookup (none when
 * `value` is itself a NAPI_DLPACK_OBJECT_TAG external, as Tensor.native gives).
 * NAPI_DLPACK_OK with *api set, and *object set to the per-object data when
 * the property held a NAPI_DLPACK_OBJECT_TAG external (borrow it with
 * napi_dlpack_exchange_api_object_borrow(*api) when that is non-NULL), NULL
 * when it held the table itself. NAPI_DLPACK_ERR_NO_EXCHANGE when the value
 * has neither (primitives, plain objects: fall back to a capsule or
 * __dlpack__); NAPI_DLPACK_ERR_VERSION when the table (and every older one it
 * chains to) has an unknown major; NAPI_DLPACK_ERR_NAPI when a Node-API call
 * failed (a getter may have thrown: an exception is then pending). `key` is
 * the exchange symbol (napi_dlpack_exchange_key's, kept by the caller), or
 * NULL to make it here.
 */
static inline napi_dlpack_status napi_dlpack_exchange_find_by_key(
    napi_env env, napi_value value, napi_value key,
    const napi_dlpack_exchange_api** api, void** object) {
  napi_valuetype type;
  napi_value property;
  bool tagged = false;
  void* data = NULL;
  const napi_dlpack_exchange_api_header* header;
  const napi_dlpack_exchange_api* found;
  uint64_t id;
  napi_value global;
  if (env == NULL || value == NULL || api == NULL || object == NULL)
    return NAPI_DLPACK_ERR_INVALID_ARG;
  *object = NULL;
  /* A handle id (a number, or an id external) names no table: its producer is
   * the environment's default importer, whose table takes the id as `value`. */
  if (napi_dlpack_handle_id(env, value, &id) == NAPI_DLPACK_OK) {
    if (napi_get_global(env, &global) != napi_ok) return NAPI_DLPACK_ERR_NAPI;
    return napi_dlpack_exchange_find_by_key(env, global, key, api, object);
  }
  if (napi_typeof(env, value, &type) != napi_ok) return NAPI_DLPACK_ERR_NAPI;
  if (type == napi_external) {
    /* A per-object external passed as the value itself (napi-dlpack's
     * Tensor.native): no lookup. Only that kind lends; any other external (a
     * capsule) is NAPI_DLPACK_ERR_NO_EXCHANGE. */
    property = value;
  } else if (type != napi_object && type != napi_function) {
    return NAPI_DLPACK_ERR_NO_EXCHANGE;
  } else {
    if (key == NULL && napi_dlpack_exchange_key(env, &key) != NAPI_DLPACK_OK)
      return NAPI_DLPACK_ERR_NAPI;
    if (napi_get_property(env, value, key, &property) != napi_ok)
      return NAPI_DLPACK_ERR_NAPI;
  }
  /* Anything but an external (undefined when absent) fails here without
   * throwing; the tag checks below must not see a primitive (they throw). */
  if (napi_get_value_external(env, property, &data) != napi_ok || data == NULL)
    return NAPI_DLPACK_ERR_NO_EXCHANGE;
  if (napi_check_object_type_tag(env, property, napi_dlpack_object_tag(),
                                 &tagged) != napi_ok)
    return NAPI_DLPACK_ERR_NAPI;
  if (tagged) {
    header = ((const napi_dlpack_object*)data)->api;
    if (header == NULL) return NAPI_DLPACK_ERR_NO_EXCHANGE;
  } else {
    /* A table is found under the key, never passed as the value. */
    if (type == napi_external) return NAPI_DLPACK_ERR_NO_EXCHANGE;
    if (napi_check_object_type_tag(env, property,
                                   napi_dlpack_exchange_api_tag(),
                                   &tagged) != napi_ok)
      return NAPI_DLPACK_ERR_NAPI;
    if (!tagged) return NAPI_DLPACK_ERR_NO_EXCHANGE;
    header = (const napi_dlpack_exchange_api_header*)data;
    data = NULL;
  }
  found = napi_dlpack_exchange_api_select(header);
  if (found == NULL) return NAPI_DLPACK_ERR_VERSION;
  *api = found;
  *object = data;
  return NAPI_DLPACK_OK;
}

/* Consumer: napi_dlpack_exchange_find_by_key, making the key. */
static inline napi_dlpack_status napi_dlpack_exchange_find(
    napi_env env, napi_value value, const napi_dlpack_exchange_api** api,
    void** object) {
  return napi_dlpack_exchange_find_by_key(env, value, NULL, api, object);
}

/* Consumer: the table of `value` (napi_dlpack_exchange_find without the
 * per-object data). */
static inline napi_dlpack_status napi_dlpack_exchange_api_find(
    napi_env env, napi_value value, const napi_dlpack_exchange_api** api) {
  void* object = NULL;
  return napi_dlpack_exchange_find(env, value, api, &object);
}

/* A borrow in progress: what napi_dlpack_exchange_borrow fills and
 * napi_dlpack_exchange_release ends. */
typedef struct napi_dlpack_borrow {
  DLTensor tensor;
  uint64_t flags; /* DLPACK_FLAG_BITMASK_READ_ONLY, ..IS_COPIED, ..IS_SUBBYTE_TYPE_PADDED:
                     pass them to napi_dlpack_tensor_extent */
  const napi_dlpack_exchange_api* api; /* whose release_borrow ends it */
  void* keep_alive;              /* the producer's token */
} napi_dlpack_borrow;

/*
 * Consumer: the environment's default importer (the table napi-dlpack installs
 * on globalThis), the producer of handle ids. Look it up once per environment
 * and keep it (tables live for the process); NAPI_DLPACK_ERR_NO_EXCHANGE when
 * napi-dlpack is not loaded in this environment. `key`: as for
 * napi_dlpack_exchange_borrow_by_key.
 */
static inline napi_dlpack_status napi_dlpack_exchange_default_by_key(
    napi_env env, napi_value key, const napi_dlpack_exchange_api** api) {
  napi_value global;
  void* object = NULL;
  if (env == NULL || api == NULL) return NAPI_DLPACK_ERR_INVALID_ARG;
  if (napi_get_global(env, &global) != napi_ok) return NAPI_DLPACK_ERR_NAPI;
  return napi_dlpack_exchange_find_by_key(env, global, key, api, &object);
}

/*
 * Consumer: borrows the tensor handle id `id` names (napi_dlpack_handle_id)
 * through `api` (napi_dlpack_exchange_default's, kept) into *out, and its
 * extent into *extent (may be NULL): a copy of the producer's record, for code
 * that handles every borrow as a napi_dlpack_borrow (the hottest path reads
 * the record in place: napi_dlpack_exchange_api_id_borrow(api)(env, id)). The
 * producer validated the tensor when it made the id: *extent is what
 * napi_dlpack_tensor_extent would compute, without its cost. End it with
 * napi_dlpack_exchange_release.
 * NAPI_DLPACK_ERR_NO_EXCHANGE when the table cannot borrow by id (older than
 * minor 2); NAPI_DLPACK_ERR_PRODUCER when it refused the id (stale, another
 * thread's: its coded exception is pending).
 */
static inline napi_dlpack_status napi_dlpack_exchange_borrow_id(
    napi_env env, const napi_dlpack_exchange_api* api, uint64_t id,
    napi_dlpack_borrow* out, napi_dlpack_extent* extent) {
  napi_dlpack_borrow_id_fn by_id;
  const napi_dlpack_lent_tensor* lent;
  if (out == NULL || api == NULL) return NAPI_DLPACK_ERR_INVALID_ARG;
  out->api = NULL;
  out->keep_alive = NULL;
  by_id = napi_dlpack_exchange_api_id_borrow(api);
  if (by_id == NULL) return NAPI_DLPACK_ERR_NO_EXCHANGE;
  lent = by_id(env, id);
  if (lent == NULL) return NAPI_DLPACK_ERR_PRODUCER;
  out->tensor = lent->tensor;
  out->flags = lent->flags;
  out->keep_alive = lent->keep_alive;
  out->api = api;
  if (extent != NULL) *extent = lent->extent;
  return NAPI_DLPACK_OK;
}

/*
 * Consumer: borrows the tensor of `value` into *out until
 * napi_dlpack_exchange_release(env, out), which must follow every OK return
 * exactly once (on this JS thread, while env is alive). The memory stays valid
 * until then even if JS disposes the object meanwhile. NAPI_DLPACK_ERR_PRODUCER
 * means the producer threw (pass the pending exception on by returning NULL);
 * NAPI_DLPACK_ERR_NO_EXCHANGE that the value (or its table) cannot lend.
 * Validate the result (napi_dlpack_tensor_extent) before touching data.
 * `key`: the exchange symbol kept by the caller (napi_dlpack_keys), or NULL
 * to make it here, which costs more than the borrow itself (a Symbol.for
 * call: see part 5); napi_dlpack_exchange_borrow passes NULL.
 */
static inline napi_dlpack_status napi_dlpack_exchange_borrow_by_key(
    napi_env env, napi_value value, napi_value key, napi_dlpack_borrow* out) {
  const napi_dlpack_exchange_api* api = NULL;
  void* object = NULL;
  napi_dlpack_dltensor_from_object_fn by_object;
  napi_dlpack_status st;
  int failed;
  uint64_t id;
  if (out == NULL) return NAPI_DLPACK_ERR_INVALID_ARG;
  out->api = NULL;
  out->keep_alive = NULL;
  st = napi_dlpack_exchange_find_by_key(env, value, key, &api, &object);
  if (st != NAPI_DLPACK_OK) return st;
  if (api->release_borrow == NULL) return NAPI_DLPACK_ERR_NO_EXCHANGE;
  /* A handle id: borrowed by id where the table can (minor >= 2). */
  if (object == NULL && napi_dlpack_exchange_api_id_borrow(api) != NULL &&
      napi_dlpack_handle_id(env, value, &id) == NAPI_DLPACK_OK)
    return napi_dlpack_exchange_borrow_id(env, api, id, out, NULL);
  by_object = object != NULL ? napi_dlpack_exchange_api_object_borrow(api) : NULL;
  if (by_object != NULL) {
    failed = by_object(env, value, object, &out->tensor, &out->flags,
                       &out->keep_alive);
  } else if (api->dltensor_from_value != NULL) {
    failed = api->dltensor_from_value(env, value, &out->tensor, &out->flags,
                                      &out->keep_alive);
  } else {
    return NAPI_DLPACK_ERR_NO_EXCHANGE;
  }
  if (failed != 0) return NAPI_DLPACK_ERR_PRODUCER;
  out->api = api;
  return NAPI_DLPACK_OK;
}

/* Consumer: napi_dlpack_exchange_borrow_by_key, making the key. */
static inline napi_dlpack_status napi_dlpack_exchange_borrow(
    napi_env env, napi_value value, napi_dlpack_borrow* out) {
  return napi_dlpack_exchange_borrow_by_key(env, value, NULL, out);
}

/* Consumer: ends a borrow napi_dlpack_exchange_borrow made (a no-op on one
 * that failed, or was already released). */
static inline void napi_dlpack_exchange_release(napi_env env,
                                                napi_dlpack_borrow* borrow) {
  if (borrow == NULL || borrow->api == NULL) return;
  borrow->api->release_borrow(env, borrow->keep_alive);
  borrow->api = NULL;
  borrow->keep_alive = NULL;
}

/*
 * Consumer: a new owning export of `value` in *out. Release it with
 * napi_dlpack_tensor_release(NAPI_DLPACK_KIND_VERSIONED, *out) exactly once.
 */
static inline napi_dlpack_status napi_dlpack_exchange_export_by_key(
    napi_env env, napi_value value, napi_value key,
    DLManagedTensorVersioned** out) {
  const napi_dlpack_exchange_api* api = NULL;
  void* object = NULL;
  napi_dlpack_status st;
  if (out == NULL) return NAPI_DLPACK_ERR_INVALID_ARG;
  st = napi_dlpack_exchange_find_by_key(env, value, key, &api, &object);
  if (st != NAPI_DLPACK_OK) return st;
  if (api->managed_tensor_from_value == NULL) return NAPI_DLPACK_ERR_NO_EXCHANGE;
  if (api->managed_tensor_from_value(env, value, out) != 0)
    return NAPI_DLPACK_ERR_PRODUCER;
  return NAPI_DLPACK_OK;
}

/* Consumer: napi_dlpack_exchange_export_by_key (key: see
 * napi_dlpack_exchange_borrow_by_key), making the key. */
static inline napi_dlpack_status napi_dlpack_exchange_export(
    napi_env env, napi_value value, DLManagedTensorVersioned** out) {
  return napi_dlpack_exchange_export_by_key(env, value, NULL, out);
}

/*
 * Producer side of a return value: hands `tensor` (always: on every status
 * but NAPI_DLPACK_ERR_INVALID_ARG for a NULL env/out, ownership has passed,
 * and on failure its deleter has run) to the environment's default importer
 * (napi-dlpack's table on globalThis, present when napi-dlpack is loaded in
 * this environment), which returns a napi-dlpack Tensor in *out. Without an
 * importer the tensor is released and NAPI_DLPACK_ERR_NO_EXCHANGE returned:
 * wrap it in a capsule instead (napi_dlpack_capsule_create) if you prefer.
 */
static inline napi_dlpack_status napi_dlpack_exchange_to_value_by_key(
    napi_env env, DLManagedTensorVersioned* tensor, napi_value key,
    napi_value* out) {
  napi_value global;
  const napi_dlpack_exchange_api* api = NULL;
  void* object = NULL;
  napi_dlpack_status st;
  if (env == NULL || out == NULL) return NAPI_DLPACK_ERR_INVALID_ARG;
  if (tensor == NULL) return NAPI_DLPACK_ERR_INVALID_ARG;
  if (napi_get_global(env, &global) != napi_ok) {
    napi_dlpack_tensor_release(NAPI_DLPACK_KIND_VERSIONED, tensor);
    return NAPI_DLPACK_ERR_NAPI;
  }
  st = napi_dlpack_exchange_find_by_key(env, global, key, &api, &object);
  if (st == NAPI_DLPACK_OK && api->managed_tensor_to_value == NULL)
    st = NAPI_DLPACK_ERR_NO_EXCHANGE;
  if (st != NAPI_DLPACK_OK) {
    napi_dlpack_tensor_release(NAPI_DLPACK_KIND_VERSIONED, tensor);
    return st;
  }
  if (api->managed_tensor_to_value(env, tensor, out) != 0)
    return NAPI_DLPACK_ERR_PRODUCER;
  return NAPI_DLPACK_OK;
}

/* Producer of a return value: napi_dlpack_exchange_to_value_by_key (key: see
 * napi_dlpack_exchange_borrow_by_key), making the key. */
static inline napi_dlpack_status napi_dlpack_exchange_to_value(
    napi_env env, DLManagedTensorVersioned* tensor, napi_value* out) {
  return napi_dlpack_exchange_to_value_by_key(env, tensor, NULL, out);
}

/* ---- validation of a borrowed or imported DLTensor ----------------------
 * What a consumer must check before reading a tensor it did not make, with
 * every multiplication and addition checked for overflow, so that C authors
 * do not re-derive it. The rules, their order and the codes are exactly those
 * of napi-dlpack's own import (crates/napi-dlpack/src/validation.rs); a test
 * drives both with the same random descriptors and compares every verdict
 * (crates/napi-dlpack/tests/fuzz_validation.rs). */

/* napi_dlpack_extent is declared in part 3 (the exchange table's borrow by
 * handle id fills one). */

#define NAPI_DLPACK_MAX_NDIM 64

/* a * b into *out, or 0 on int64 overflow (any signs). */
static inline int napi_dlpack_mul_i64_(int64_t a, int64_t b, int64_t* out) {
  if (a > 0) {
    if (b > 0 ? a > INT64_MAX / b : b < INT64_MIN / a) return 0;
  } else if (a < 0) {
    if (b > 0 ? a < INT64_MIN / b : (b != 0 && a < INT64_MAX / b)) return 0;
  }
  *out = a * b;
  return 1;
}

/* a + b into *out, or 0 on int64 overflow. */
static inline int napi_dlpack_add_i64_(int64_t a, int64_t b, int64_t* out) {
  if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b)) return 0;
  *out = a + b;
  return 1;
}

/* a - b into *out, or 0 on int64 overflow. */
static inline int napi_dlpack_sub_i64_(int64_t a, int64_t b, int64_t* out) {
  if ((b < 0 && a > INT64_MAX + b) || (b > 0 && a < INT64_MIN + b)) return 0;
  *out = a - b;
  return 1;
}

/* Bytes per element of a dtype napi-dlpack imports, or 0 for one it refuses
 * (ERR_DLPACK_DTYPE): scalars only (lanes 1), the (code, bits) pairs of
 * DLPack 1.3, and sub-byte floats only with
 * DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (one element per byte; packed
 * ones are not supported). Codes by value: a dlpack.h of an older version may
 * lack the names. */
static inline int64_t napi_dlpack_dtype_itemsize(DLDataType dtype,
                                                 uint64_t flags) {
  unsigned bits = dtype.bits;
  int padded = (flags & (1ULL << 2)) != 0; /* IS_SUBBYTE_TYPE_PADDED */
  if (dtype.lanes != 1) return 0;
  switch (dtype.code) {
    case 0: /* kDLInt */
    case 1: /* kDLUInt */
      return bits == 8 || bits == 16 || bits == 32 || bits == 64 ? bits / 8 : 0;
    case 2: /* kDLFloat */
      return bits == 16 || bits == 32 || bits == 64 ? bits / 8 : 0;
    case 4: /* kDLBfloat */
      return bits == 16 ? 2 : 0;
    case 5: /* kDLComplex */
      return bits == 64 || bits == 128 ? bits / 8 : 0;
    case 6:  /* kDLBool */
    case 7:  /* kDLFloat8_e3m4 ... */
    case 8:
    case 9:
    case 10:
    case 11:
    case 12:
    case 13:
    case 14: /* ... kDLFloat8_e8m0fnu */
      return bits == 8 ? 1 : 0;
    case 15: /* kDLFloat6_e2m3fn */
    case 16: /* kDLFloat6_e3m2fn */
      return bits == 6 && padded ? 1 : 0;
    case 17: /* kDLFloat4_e2m1fn */
      return bits == 4 && padded ? 1 : 0;
    default:
      return 0;
  }
}

/* Whether a device type is one of DLPack 1.3's (by value, as above). */
static inline int napi_dlpack_device_type_known(int32_t type) {
  return (type >= 1 && type <= 4) || (type >= 7 && type <= 18);
}

/* Whether `data` of this device type is an address in the process's virtual
 * address space (CPU, CUDA, CUDA host, ROCm, ROCm host, CUDA managed, oneAPI),
 * so that data + byte_offset and the element span are address arithmetic;
 * for the others (OpenCL, Metal, Vulkan, WebGPU, ...) it is an opaque handle. */
static inline int napi_dlpack_device_is_address(int32_t type) {
  return type == 1 || type == 2 || type == 3 || type == 10 || type == 11 ||
         type == 13 || type == 14;
}

/* int64_t's alignment, for the shape and strides pointers. */
typedef struct {
  char c;
  int64_t v;
} napi_dlpack_i64_align_probe_;

/*
 * Checks `t` (with its DLPack `flags`, 0 for legacy tensors) as napi-dlpack's
 * import does and computes its extent. Returns NULL when the tensor is
 * well-formed, else the stable code napi-dlpack would throw, the first that
 * applies in this order:
 *   ERR_DLPACK_DEVICE         unknown device type, negative device id
 *   ERR_DLPACK_DTYPE          lanes != 1, an unknown (code, bits), a sub-byte
 *                             type without IS_SUBBYTE_TYPE_PADDED in `flags`
 *   ERR_DLPACK_NDIM           ndim outside 0..64
 *   ERR_DLPACK_NULL_SHAPE     shape NULL with ndim > 0
 *   ERR_DLPACK_INVALID_LAYOUT shape or strides not aligned for int64_t
 *   ERR_DLPACK_BYTE_OFFSET    data + byte_offset past the address space
 *   ERR_DLPACK_SHAPE          a negative dimension (dims left to right,
 *   ERR_DLPACK_OVERFLOW         each checked, then multiplied in: an element
 *                             count, stride extent or byte span past int64 /
 *                             INTPTR_MAX)
 *   ERR_DLPACK_BYTE_OFFSET    for address devices (see
 *                             napi_dlpack_device_is_address), elements below
 *                             address 0 or past the end of the address space
 *   ERR_DLPACK_NULL_DATA      data NULL with elements
 * Strides NULL means row-major. Strides of an empty tensor, and of size-1
 * dimensions, address nothing and are not checked (INT64_MIN included).
 * For address devices, the elements then are the bytes
 * [data + byte_offset + min_offset * itemsize, + span_bytes). It cannot check
 * that the memory is really there. NULL `t` or `out`:
 * "ERR_DLPACK_INVALID_ARGUMENT".
 */
static inline const char* napi_dlpack_tensor_extent(const DLTensor* t,
                                                    uint64_t flags,
                                                    napi_dlpack_extent* out) {
  int64_t numel = 1, itemsize, min_off = 0, max_off = 0, span = 0;
  int32_t i, ndim;
  int contiguous = 1;
  uint64_t first;
  if (t == NULL || out == NULL) return "ERR_DLPACK_INVALID_ARGUMENT";
  if (!napi_dlpack_device_type_known((int32_t)t->device.device_type) ||
      t->device.device_id < 0)
    return "ERR_DLPACK_DEVICE";
  itemsize = napi_dlpack_dtype_itemsize(t->dtype, flags);
  if (itemsize == 0) return "ERR_DLPACK_DTYPE";
  ndim = t->ndim;
  if (ndim < 0 || ndim > NAPI_DLPACK_MAX_NDIM) return "ERR_DLPACK_NDIM";
  if (ndim > 0) {
    if (t->shape == NULL) return "ERR_DLPACK_NULL_SHAPE";
    if ((uintptr_t)t->shape % offsetof(napi_dlpack_i64_align_probe_, v) != 0)
      return "ERR_DLPACK_INVALID_LAYOUT";
    if (t->strides != NULL &&
        (uintptr_t)t->strides % offsetof(napi_dlpack_i64_align_probe_, v) != 0)
      return "ERR_DLPACK_INVALID_LAYOUT";
  }
  first = (uint64_t)(uintptr_t)t->data;
  if (t->byte_offset > UINT64_MAX - first ||
      first + t->byte_offset > (uint64_t)UINTPTR_MAX)
    return "ERR_DLPACK_BYTE_OFFSET";
  first += t->byte_offset;
  for (i = 0; i < ndim; i++) {
    if (t->shape[i] < 0) return "ERR_DLPACK_SHAPE";
    if (!napi_dlpack_mul_i64_(numel, t->shape[i], &numel))
      return "ERR_DLPACK_OVERFLOW";
  }
  if (numel > 0) {
    if (t->strides != NULL) {
      /* Row-major, ignoring size-1 dims: the running product stays <= numel. */
      int64_t expected = 1;
      for (i = ndim - 1; i >= 0; i--) {
        if (t->shape[i] == 1) continue;
        if (t->strides[i] != expected) {
          contiguous = 0;
          break;
        }
        expected *= t->shape[i];
      }
    }
    if (contiguous) {
      max_off = numel - 1;
    } else {
      for (i = 0; i < ndim; i++) {
        int64_t reach;
        if (!napi_dlpack_mul_i64_(t->shape[i] - 1, t->strides[i], &reach))
          return "ERR_DLPACK_OVERFLOW";
        if (!napi_dlpack_add_i64_(reach < 0 ? min_off : max_off, reach,
                                  reach < 0 ? &min_off : &max_off))
          return "ERR_DLPACK_OVERFLOW";
      }
    }
    if (!napi_dlpack_sub_i64_(max_off, min_off, &span) ||
        !napi_dlpack_add_i64_(span, 1, &span) ||
        !napi_dlpack_mul_i64_(span, itemsize, &span) ||
        (uint64_t)span > (uint64_t)INTPTR_MAX)
      return "ERR_DLPACK_OVERFLOW";
    if (napi_dlpack_device_is_address((int32_t)t->device.device_type)) {
      /* Every byte from the lowest element to the end of the highest is an
       * address: none below 0, none past the end. `below` <= span. */
      uint64_t below = ((uint64_t)0 - (uint64_t)min_off) * (uint64_t)itemsize;
      uint64_t from_first = (uint64_t)span - below;
      if (first < below || from_first > (uint64_t)UINTPTR_MAX - first)
        return "ERR_DLPACK_BYTE_OFFSET";
    }
    if (t->data == NULL) return "ERR_DLPACK_NULL_DATA";
  }
  out->numel = numel;
  out->itemsize = itemsize;
  out->min_offset = min_off;
  out->max_offset = max_off;
  out->span_bytes = (uint64_t)span;
  out->c_contiguous = numel <= 1 || contiguous;
  return NULL;
}

/* ===========================================================================
 * Part 4: the library adapter (docs/protocol.md section 6)
 * ===========================================================================
 *
 * The tensors and images of common JS libraries (ONNX Runtime and
 * transformers.js tensors, sharp's raw output, ImageData / RawImage, Apache
 * Arrow vectors, tfjs tensors, ndarray-likes) carry no exchange table, capsule
 * or __dlpack__. napi-dlpack's JS package recognises them (its fromDLPack
 * does) and, when loaded, defines on globalThis of the environment, under the
 * registered symbol Symbol.for(NAPI_DLPACK_ADAPTER_PROPERTY), a function
 * adapt(value) returning a capsule over the library's own memory (zero-copy,
 * versioned, READ_ONLY where fromDLPack would give a read-only tensor), or
 * undefined for a value it does not recognise; for a value it recognises but
 * cannot take without a copy (an Arrow column with nulls or several chunks,
 * data on a GPU) it throws fromDLPack's coded error. A consumer calls it
 * LAST, after the exchange table, capsule and __dlpack__ checks (so those
 * paths cost nothing more), and consumes the capsule like any other: check
 * it, since anything may sit under the key. Not loaded: no function, and the
 * value is refused as before.
 */

/* The registry key of the adapter's symbol: Symbol.for(this). */
#define NAPI_DLPACK_ADAPTER_PROPERTY "__dlpack_napi_adapter__"

/*
 * Consumer: *capsule = the adapter's answer for `value` (a capsule to consume
 * with napi_dlpack_capsule_consume, which also refuses anything else), or
 * NULL when napi-dlpack is not loaded in `env` or does not recognise `value`
 * (both NAPI_DLPACK_OK). NAPI_DLPACK_ERR_NAPI with a JS exception pending when
 * the adapter refused `value` (its Error has the stable `code`): return NULL
 * from your callback to pass it on.
 */
static inline napi_dlpack_status napi_dlpack_adapt_by_key(napi_env env,
                                                          napi_value value,
                                                          napi_value key,
                                                          napi_value* capsule) {
  napi_value global, adapter, result;
  napi_valuetype type;
  napi_dlpack_status st;
  if (env == NULL || value == NULL || capsule == NULL)
    return NAPI_DLPACK_ERR_INVALID_ARG;
  *capsule = NULL;
  if (key == NULL) {
    st = napi_dlpack_symbol_for_(env, NAPI_DLPACK_ADAPTER_PROPERTY, &key);
    if (st != NAPI_DLPACK_OK) return st;
  }
  if (napi_get_global(env, &global) != napi_ok ||
      napi_get_property(env, global, key, &adapter) != napi_ok ||
      napi_typeof(env, adapter, &type) != napi_ok)
    return NAPI_DLPACK_ERR_NAPI;
  if (type != napi_function) return NAPI_DLPACK_OK;
  if (napi_call_function(env, global, adapter, 1, &value, &result) != napi_ok ||
      napi_typeof(env, result, &type) != napi_ok)
    return NAPI_DLPACK_ERR_NAPI;
  if (type != napi_undefined) *capsule = result;
  return NAPI_DLPACK_OK;
}

/* Consumer: napi_dlpack_adapt_by_key, making the adapter's key. */
static inline napi_dlpack_status napi_dlpack_adapt(napi_env env,
                                                   napi_value value,
                                                   napi_value* capsule) {
  return napi_dlpack_adapt_by_key(env, value, NULL, capsule);
}

/* ===========================================================================
 * Part 5: keys kept per environment
 * ===========================================================================
 *
 * Every helper that looks a symbol up (napi_dlpack_exchange_find, _borrow,
 * _export, _to_value, napi_dlpack_adapt) makes it with a call of the global
 * Symbol.for when given no key: about 5,000 instructions, more than the borrow
 * itself. A consumer that calls them often makes the keys once per environment
 * (in its module init; the struct belongs in its instance data, since each
 * environment, a worker's included, has its own) and passes them to the
 * _by_key forms:
 *
 *   napi_dlpack_keys* keys = malloc(sizeof *keys);
 *   napi_dlpack_keys_create(env, keys);           (module init)
 *   napi_set_instance_data(env, keys, free_keys, NULL);
 *   ...
 *   napi_value exchange_key;                      (each call)
 *   napi_dlpack_keys_get(env, keys, &exchange_key, NULL);
 *   napi_dlpack_exchange_borrow_by_key(env, arg, exchange_key, &borrow);
 *
 * where free_keys calls napi_dlpack_keys_delete(env, keys) and frees it.
 */
typedef struct napi_dlpack_keys {
  napi_ref exchange; /* Symbol.for(NAPI_DLPACK_EXCHANGE_API_PROPERTY) */
  napi_ref adapter;  /* Symbol.for(NAPI_DLPACK_ADAPTER_PROPERTY) */
} napi_dlpack_keys;

/* Deletes the references of `keys` (either may be NULL); they are then NULL.
 * On the env's thread while it is alive (an instance-data finalizer is). */
static inline void napi_dlpack_keys_delete(napi_env env,
                                           napi_dlpack_keys* keys) {
  if (env == NULL || keys == NULL) return;
  if (keys->exchange != NULL) napi_delete_reference(env, keys->exchange);
  if (keys->adapter != NULL) napi_delete_reference(env, keys->adapter);
  keys->exchange = NULL;
  keys->adapter = NULL;
}

/* Makes both keys of `env` and keeps them in references (Node-API can
 * reference symbols); on failure nothing is kept. */
static inline napi_dlpack_status napi_dlpack_keys_create(
    napi_env env, napi_dlpack_keys* keys) {
  napi_value exchange, adapter;
  if (env == NULL || keys == NULL) return NAPI_DLPACK_ERR_INVALID_ARG;
  keys->exchange = NULL;
  keys->adapter = NULL;
  if (napi_dlpack_exchange_key(env, &exchange) != NAPI_DLPACK_OK ||
      napi_dlpack_symbol_for_(env, NAPI_DLPACK_ADAPTER_PROPERTY, &adapter) !=
          NAPI_DLPACK_OK ||
      napi_create_reference(env, exchange, 1, &keys->exchange) != napi_ok ||
      napi_create_reference(env, adapter, 1, &keys->adapter) != napi_ok) {
    napi_dlpack_keys_delete(env, keys);
    return NAPI_DLPACK_ERR_NAPI;
  }
  return NAPI_DLPACK_OK;
}

/* The keys of `keys` as values (each out pointer may be NULL). */
static inline napi_dlpack_status napi_dlpack_keys_get(
    napi_env env, const napi_dlpack_keys* keys, napi_value* exchange_key,
    napi_value* adapter_key) {
  if (env == NULL || keys == NULL || keys->exchange == NULL ||
      keys->adapter == NULL)
    return NAPI_DLPACK_ERR_INVALID_ARG;
  if (exchange_key != NULL &&
      napi_get_reference_value(env, keys->exchange, exchange_key) != napi_ok)
    return NAPI_DLPACK_ERR_NAPI;
  if (adapter_key != NULL &&
      napi_get_reference_value(env, keys->adapter, adapter_key) != napi_ok)
    return NAPI_DLPACK_ERR_NAPI;
  return NAPI_DLPACK_OK;
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* NAPI_DLPACK_H_ */
