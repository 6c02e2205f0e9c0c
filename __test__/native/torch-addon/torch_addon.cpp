// torch_addon.cpp - a Node addon that moves tensors between libtorch (Debian's
// libtorch-dev, torch 1.13, CPU) and napi-dlpack through the capsule ABI of
// include/napi_dlpack.h, using at::toDLPack / at::fromDLPack. Torch 1.13 only
// speaks the LEGACY DLManagedTensor, so this exercises napi-dlpack's legacy
// import and export paths against a real framework.
//
// One translation unit: libtorch with ATen's own <ATen/dlpack.h> (DLPack 0.6),
// then include/napi_dlpack.h, which declares only what 0.6 lacks (the versioned
// struct and the flags) and uses ATen's types for the rest (the header's
// coexistence with every dlpack.h version, in both orders, is checked by
// __test__/native/c-addon/dlpack-coexist.sh).
//
// JS API (all errors carry a `code`):
//   toCapsule(spec) -> { capsule, dataPtr, dlData, dlByteOffset, shape, strides,
//                        storageOffset, dtype, values }
//       spec = { dtype, shape, values?, offset?, step?: [dim, step],
//                transpose?: [d0, d1], contiguous? }
//       Builds a tensor (values default to 0, 1, 2, ...; complex values are
//       interleaved re, im), then views it with torch ops in this order:
//       narrow(0, offset, size0 - offset), slice(dim, 0, end, step),
//       transpose(d0, d1), contiguous(). Exports the view with at::toDLPack as
//       a legacy capsule. dataPtr is the view's data_ptr() (first element).
//       spec.dlByteOffset = n moves n bytes of the pointer into DLTensor.byte_offset
//       (data = first element - n), a layout other producers use.
//   fromCapsule(capsule) -> handle       (at::fromDLPack; legacy capsules only:
//       versioned ones are released and refused with ERR_TORCH_NEEDS_LEGACY)
//   exportHandle(handle) -> like toCapsule's result, for the handle's tensor
//       (at::toDLPack of a tensor torch imported: a full JS -> torch -> JS trip)
//   info(handle) -> { dataPtr, dlData, dlByteOffset, shape, strides,
//                     storageOffset, dtype, values }
//   sum(handle) -> number (complex: [re, im])
//   mulScalarInPlace(handle, k), addInPlace(handle, value)   (torch ops, in place)
//   release(handle)                       (drops torch's reference now)

#include <ATen/core/Tensor.h>
#include <ATen/dlpack.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/view_as_complex.h>
#include <ATen/ops/view_as_real.h>
#include <napi_dlpack.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

// Declared in <ATen/DLConvertor.h>, which includes all of <ATen/ATen.h> and
// doubles the compile time; these are the same declarations.
namespace at {
TORCH_API ScalarType toScalarType(const DLDataType& dtype);
TORCH_API DLManagedTensor* toDLPack(const Tensor& src);
TORCH_API Tensor fromDLPack(const DLManagedTensor* src);
TORCH_API DLDataType getDLDataType(const Tensor& t);
}  // namespace at

// ATen's DLPack 0.6 legacy struct, which napi_dlpack.h uses as it is, has the
// standard layout (the header asserts it too).
static_assert(sizeof(DLTensor) == 48, "DLTensor layout");
static_assert(offsetof(DLTensor, byte_offset) == 40, "DLTensor.byte_offset");
static_assert(offsetof(DLManagedTensor, manager_ctx) == 48, "DLManagedTensor.manager_ctx");
static_assert(offsetof(DLManagedTensor, deleter) == 56, "DLManagedTensor.deleter");
static_assert(sizeof(DLManagedTensor) == 64, "DLManagedTensor size");

namespace {

// ---- errors -----------------------------------------------------------------

struct JsError {
  std::string code;
  std::string message;
};

struct NapiFailed {};  // a Node-API call failed; an exception may be pending

void check(napi_status status) {
  if (status != napi_ok) throw NapiFailed{};
}

// Runs `body`, turning C++ exceptions into JS exceptions with a `code`.
template <typename F>
napi_value guarded(napi_env env, F body) {
  try {
    return body();
  } catch (const JsError& error) {
    napi_throw_error(env, error.code.c_str(), error.message.c_str());
  } catch (const NapiFailed&) {
    bool pending = false;
    napi_is_exception_pending(env, &pending);
    if (!pending) {
      const napi_extended_error_info* info = nullptr;
      napi_get_last_error_info(env, &info);
      napi_throw_error(env, "ERR_TORCH_ADDON_NAPI",
                       info && info->error_message ? info->error_message : "a Node-API call failed");
    }
  } catch (const std::exception& error) {  // c10::Error and friends
    // Only the first line: torch appends a C++ backtrace to its messages.
    std::string message = error.what();
    size_t newline = message.find('\n');
    if (newline != std::string::npos) message.resize(newline);
    napi_throw_error(env, "ERR_TORCH", message.c_str());
  }
  return nullptr;
}

// ---- JS value helpers -----------------------------------------------------------

std::vector<napi_value> args(napi_env env, napi_callback_info info, size_t want) {
  std::vector<napi_value> argv(want);
  size_t argc = want;
  check(napi_get_cb_info(env, info, &argc, argv.data(), nullptr, nullptr));
  if (argc < want) throw JsError{"ERR_TORCH_ADDON_ARGUMENT", "missing arguments"};
  return argv;
}

napi_valuetype type_of(napi_env env, napi_value value) {
  napi_valuetype type;
  check(napi_typeof(env, value, &type));
  return type;
}

// A property, or nullptr when it is absent, undefined or null.
napi_value optional_property(napi_env env, napi_value object, const char* name) {
  napi_value value;
  check(napi_get_named_property(env, object, name, &value));
  napi_valuetype type = type_of(env, value);
  return type == napi_undefined || type == napi_null ? nullptr : value;
}

double to_double(napi_env env, napi_value value, const char* what) {
  if (type_of(env, value) != napi_number) throw JsError{"ERR_TORCH_ADDON_ARGUMENT", std::string(what) + " must be a number"};
  double out;
  check(napi_get_value_double(env, value, &out));
  return out;
}

int64_t to_int(napi_env env, napi_value value, const char* what) {
  double d = to_double(env, value, what);
  if (d != std::floor(d)) throw JsError{"ERR_TORCH_ADDON_ARGUMENT", std::string(what) + " must be an integer"};
  return static_cast<int64_t>(d);
}

std::vector<double> to_doubles(napi_env env, napi_value value, const char* what) {
  bool is_array = false;
  check(napi_is_array(env, value, &is_array));
  if (!is_array) throw JsError{"ERR_TORCH_ADDON_ARGUMENT", std::string(what) + " must be an array of numbers"};
  uint32_t length;
  check(napi_get_array_length(env, value, &length));
  std::vector<double> out(length);
  for (uint32_t i = 0; i < length; i++) {
    napi_value element;
    check(napi_get_element(env, value, i, &element));
    out[i] = to_double(env, element, what);
  }
  return out;
}

std::vector<int64_t> to_ints(napi_env env, napi_value value, const char* what) {
  std::vector<double> doubles = to_doubles(env, value, what);
  std::vector<int64_t> out;
  for (double d : doubles) {
    if (d != std::floor(d)) throw JsError{"ERR_TORCH_ADDON_ARGUMENT", std::string(what) + " must hold integers"};
    out.push_back(static_cast<int64_t>(d));
  }
  return out;
}

template <typename T>
napi_value number_array(napi_env env, const T* values, size_t count) {
  napi_value array;
  check(napi_create_array_with_length(env, count, &array));
  for (size_t i = 0; i < count; i++) {
    napi_value element;
    check(napi_create_double(env, static_cast<double>(values[i]), &element));
    check(napi_set_element(env, array, static_cast<uint32_t>(i), element));
  }
  return array;
}

napi_value bigint(napi_env env, uint64_t value) {
  napi_value out;
  check(napi_create_bigint_uint64(env, value, &out));
  return out;
}

napi_value number(napi_env env, double value) {
  napi_value out;
  check(napi_create_double(env, value, &out));
  return out;
}

napi_value string(napi_env env, const char* value) {
  napi_value out;
  check(napi_create_string_utf8(env, value, NAPI_AUTO_LENGTH, &out));
  return out;
}

void set(napi_env env, napi_value object, const char* name, napi_value value) {
  check(napi_set_named_property(env, object, name, value));
}

napi_value undefined(napi_env env) {
  napi_value out;
  check(napi_get_undefined(env, &out));
  return out;
}

// ---- dtypes ---------------------------------------------------------------------

struct DTypeName {
  const char* name;
  at::ScalarType type;
};

const DTypeName kDTypes[] = {
    {"bool", at::kBool},         {"uint8", at::kByte},           {"int8", at::kChar},
    {"int16", at::kShort},       {"int32", at::kInt},            {"int64", at::kLong},
    {"float16", at::kHalf},      {"bfloat16", at::kBFloat16},    {"float32", at::kFloat},
    {"float64", at::kDouble},    {"complex32", at::kComplexHalf}, {"complex64", at::kComplexFloat},
    {"complex128", at::kComplexDouble},
};

at::ScalarType parse_dtype(const std::string& name) {
  for (const DTypeName& entry : kDTypes)
    if (name == entry.name) return entry.type;
  throw JsError{"ERR_TORCH_ADDON_ARGUMENT", "torch 1.13 has no dtype " + name};
}

const char* dtype_name(at::ScalarType type) {
  for (const DTypeName& entry : kDTypes)
    if (type == entry.type) return entry.name;
  return c10::toString(type);
}

// ---- torch tensor handles -------------------------------------------------------

// What a handle external owns: torch's reference to the tensor, and the raw
// DLPack fields it was imported from (to check what our side sent).
struct TorchHandle {
  at::Tensor tensor;
  uint64_t dl_data = 0;
  uint64_t dl_byte_offset = 0;
};

const napi_type_tag kHandleTag = {0x3d1f0c9a7e52b4a1ULL, 0x8b6e2f4d90c3a715ULL};

void finalize_handle(napi_env, void* data, void*) {
  delete static_cast<TorchHandle*>(data);  // may run the DLPack deleter of our side
}

TorchHandle& handle_of(napi_env env, napi_value value) {
  bool tagged = false;
  if (type_of(env, value) == napi_external) check(napi_check_object_type_tag(env, value, &kHandleTag, &tagged));
  if (!tagged) throw JsError{"ERR_TORCH_ADDON_ARGUMENT", "expected a handle from fromCapsule"};
  void* data = nullptr;
  check(napi_get_value_external(env, value, &data));
  TorchHandle& handle = *static_cast<TorchHandle*>(data);
  if (!handle.tensor.defined()) throw JsError{"ERR_TORCH_RELEASED", "the torch tensor has been released"};
  return handle;
}

// Shape, strides, pointers and logical values of a torch tensor, as JS.
napi_value describe(napi_env env, const at::Tensor& tensor, uint64_t dl_data, uint64_t dl_byte_offset) {
  napi_value out;
  check(napi_create_object(env, &out));
  set(env, out, "dataPtr", bigint(env, reinterpret_cast<uintptr_t>(tensor.data_ptr())));
  set(env, out, "dlData", bigint(env, dl_data));
  set(env, out, "dlByteOffset", number(env, static_cast<double>(dl_byte_offset)));
  set(env, out, "shape", number_array(env, tensor.sizes().data(), tensor.dim()));
  set(env, out, "strides", number_array(env, tensor.strides().data(), tensor.dim()));
  set(env, out, "storageOffset", number(env, static_cast<double>(tensor.storage_offset())));
  set(env, out, "dtype", string(env, dtype_name(tensor.scalar_type())));
  // Logical (row-major) order, as doubles; complex as interleaved re, im.
  at::Tensor flat = tensor.is_complex() ? at::view_as_real(tensor.contiguous()) : tensor;
  flat = flat.to(at::kDouble).contiguous().reshape({-1});
  set(env, out, "values", number_array(env, flat.data_ptr<double>(), static_cast<size_t>(flat.numel())));
  return out;
}

at::Scalar scalar_for(const at::Tensor& tensor, double value) {
  // Integer tensors take integer scalars (a double scalar would make the result float).
  if (!at::isFloatingType(tensor.scalar_type()) && !at::isComplexType(tensor.scalar_type()) &&
      value == std::floor(value))
    return at::Scalar(static_cast<int64_t>(value));
  return at::Scalar(value);
}

// ---- exported functions ---------------------------------------------------------

// at::toDLPack(tensor) wrapped in a legacy capsule, plus what describe() says.
// `shift` > 0 moves that many bytes from `data` into `byte_offset` (same first
// element; torch itself always exports byte_offset 0).
napi_value export_tensor(napi_env env, const at::Tensor& tensor, const std::string& dtype_text,
                         uint64_t shift = 0) {
  // Refuse dtypes torch cannot describe before exporting, with our own code.
  try {
    (void)at::getDLDataType(tensor);
  } catch (const std::exception& error) {
    std::string message = error.what();
    message.resize(std::min(message.find('\n'), message.size()));
    throw JsError{"ERR_TORCH_DTYPE", "at::toDLPack refuses " + dtype_text + ": " + message};
  }
  DLManagedTensor* managed = at::toDLPack(tensor);
  if (shift != 0) {
    managed->dl_tensor.data = static_cast<char*>(managed->dl_tensor.data) - shift;
    managed->dl_tensor.byte_offset += shift;
  }
  napi_value capsule;
  napi_dlpack_status status = napi_dlpack_capsule_create(env, NAPI_DLPACK_KIND_LEGACY, managed, &capsule);
  if (status != NAPI_DLPACK_OK) {
    if (managed->deleter) managed->deleter(managed);
    throw JsError{napi_dlpack_status_code(status), "napi_dlpack_capsule_create failed"};
  }
  napi_value out = describe(env, tensor, reinterpret_cast<uintptr_t>(managed->dl_tensor.data),
                            managed->dl_tensor.byte_offset);
  set(env, out, "capsule", capsule);
  return out;
}

// Drops torch warnings (complex32 prints "ComplexHalf support is experimental"
// through glog on every tensor made).
struct QuietWarnings : c10::WarningHandler {
  void process(const c10::SourceLocation&, const std::string&, const bool) override {}
};

napi_value ToCapsule(napi_env env, napi_callback_info info) {
  return guarded(env, [&]() -> napi_value {
    QuietWarnings quiet;
    c10::Warning::WarningHandlerGuard quiet_guard(&quiet);
    napi_value spec = args(env, info, 1)[0];
    if (type_of(env, spec) != napi_object) throw JsError{"ERR_TORCH_ADDON_ARGUMENT", "spec must be an object"};

    napi_value dtype_value = optional_property(env, spec, "dtype");
    std::string dtype_text = "float32";
    if (dtype_value != nullptr) {
      size_t length = 0;
      char buffer[32];
      check(napi_get_value_string_utf8(env, dtype_value, buffer, sizeof buffer, &length));
      dtype_text.assign(buffer, length);
    }
    at::ScalarType dtype = parse_dtype(dtype_text);
    napi_value shape_value = optional_property(env, spec, "shape");
    if (shape_value == nullptr) throw JsError{"ERR_TORCH_ADDON_ARGUMENT", "spec.shape is required"};
    std::vector<int64_t> shape = to_ints(env, shape_value, "spec.shape");
    int64_t numel = 1;
    for (int64_t dim : shape) numel *= dim;

    const bool complex = at::isComplexType(dtype);
    const int64_t count = complex ? 2 * numel : numel;
    std::vector<double> values;
    if (napi_value values_value = optional_property(env, spec, "values")) {
      values = to_doubles(env, values_value, "spec.values");
      if (static_cast<int64_t>(values.size()) != count)
        throw JsError{"ERR_TORCH_ADDON_ARGUMENT", "spec.values must hold " + std::to_string(count) + " numbers"};
    } else {
      values.resize(count);
      for (int64_t i = 0; i < count; i++) values[i] = complex ? (i % 2 ? -(i / 2) : i / 2) : i;
    }

    // Build in float64, then convert (exact for every value the tests use).
    at::Tensor staging = at::empty({count}, at::kDouble);
    std::memcpy(staging.data_ptr<double>(), values.data(), values.size() * sizeof(double));
    at::Tensor tensor;
    if (complex) {
      tensor = at::view_as_complex(staging.reshape({numel, 2})).to(dtype).reshape(shape);
    } else {
      tensor = staging.to(dtype).reshape(shape);
    }

    if (napi_value offset = optional_property(env, spec, "offset")) {
      int64_t start = to_int(env, offset, "spec.offset");
      tensor = tensor.narrow(0, start, tensor.size(0) - start);
    }
    if (napi_value step_value = optional_property(env, spec, "step")) {
      std::vector<int64_t> step = to_ints(env, step_value, "spec.step");
      if (step.size() != 2) throw JsError{"ERR_TORCH_ADDON_ARGUMENT", "spec.step must be [dim, step]"};
      tensor = tensor.slice(step[0], 0, std::numeric_limits<int64_t>::max(), step[1]);
    }
    if (napi_value transpose_value = optional_property(env, spec, "transpose")) {
      std::vector<int64_t> dims = to_ints(env, transpose_value, "spec.transpose");
      if (dims.size() != 2) throw JsError{"ERR_TORCH_ADDON_ARGUMENT", "spec.transpose must be [d0, d1]"};
      tensor = tensor.transpose(dims[0], dims[1]);
    }
    if (napi_value contiguous = optional_property(env, spec, "contiguous")) {
      bool yes = false;
      check(napi_get_value_bool(env, contiguous, &yes));
      if (yes) tensor = tensor.contiguous();
    }

    uint64_t shift = 0;
    if (napi_value shift_value = optional_property(env, spec, "dlByteOffset")) {
      int64_t bytes = to_int(env, shift_value, "spec.dlByteOffset");
      if (bytes < 0 || bytes > tensor.storage_offset() * static_cast<int64_t>(tensor.element_size()))
        throw JsError{"ERR_TORCH_ADDON_ARGUMENT", "spec.dlByteOffset must lie within the storage offset"};
      shift = static_cast<uint64_t>(bytes);
    }
    return export_tensor(env, tensor, dtype_text, shift);
  });
}

napi_value FromCapsule(napi_env env, napi_callback_info info) {
  return guarded(env, [&]() -> napi_value {
    napi_value capsule = args(env, info, 1)[0];
    uint32_t kind = 0;
    void* taken = nullptr;
    napi_dlpack_status status = napi_dlpack_capsule_consume(env, capsule, &kind, &taken);
    if (status != NAPI_DLPACK_OK) throw JsError{napi_dlpack_status_code(status), "cannot consume the capsule"};
    // From here on we own `taken` and must release it exactly once.
    if (kind == NAPI_DLPACK_KIND_VERSIONED) {
      napi_dlpack_tensor_release(NAPI_DLPACK_KIND_VERSIONED, taken);
      throw JsError{"ERR_TORCH_NEEDS_LEGACY",
                    "torch 1.13's at::fromDLPack takes only the legacy DLManagedTensor; export with "
                    "__dlpack__({ maxVersion: [0, 8] })"};
    }
    DLManagedTensor* managed = static_cast<DLManagedTensor*>(taken);
    if (managed->dl_tensor.device.device_type != kDLCPU) {
      napi_dlpack_tensor_release(NAPI_DLPACK_KIND_LEGACY, managed);
      throw JsError{"ERR_TORCH_DEVICE", "this libtorch is CPU-only"};
    }
    // Torch has no negative strides, and at::fromDLPack does not refuse them
    // cleanly: its storage-size check throws a c10::Error that no try/catch
    // gets to see; libtorch 1.13 std::terminate()s the process (a plain C++
    // program calling at::fromDLPack inside try/catch aborts the same way).
    const DLTensor& dl = managed->dl_tensor;
    for (int32_t axis = 0; dl.strides != nullptr && axis < dl.ndim; axis++) {
      if (dl.strides[axis] < 0) {
        napi_dlpack_tensor_release(NAPI_DLPACK_KIND_LEGACY, managed);
        throw JsError{"ERR_TORCH_NEGATIVE_STRIDES", "torch tensors cannot have negative strides"};
      }
    }
    std::unique_ptr<TorchHandle> handle(new TorchHandle());
    handle->dl_data = reinterpret_cast<uintptr_t>(managed->dl_tensor.data);
    handle->dl_byte_offset = managed->dl_tensor.byte_offset;
    // at::fromDLPack throws on dtypes it does not know BEFORE it adopts the
    // deleter, which would leak the tensor: check first, release on refusal.
    try {
      (void)at::toScalarType(managed->dl_tensor.dtype);
    } catch (const std::exception& error) {
      napi_dlpack_tensor_release(NAPI_DLPACK_KIND_LEGACY, managed);
      std::string message = error.what();
      message.resize(std::min(message.find('\n'), message.size()));
      throw JsError{"ERR_TORCH_DTYPE", "at::fromDLPack refuses this dtype: " + message};
    }
    handle->tensor = at::fromDLPack(managed);  // owns the deleter from now on
    napi_value external;
    check(napi_create_external(env, handle.get(), finalize_handle, nullptr, &external));
    (void)handle.release();  // the external's finalizer frees it from now on
    check(napi_type_tag_object(env, external, &kHandleTag));
    return external;
  });
}

napi_value ExportHandle(napi_env env, napi_callback_info info) {
  return guarded(env, [&]() -> napi_value {
    TorchHandle& handle = handle_of(env, args(env, info, 1)[0]);
    return export_tensor(env, handle.tensor, dtype_name(handle.tensor.scalar_type()));
  });
}

napi_value Info(napi_env env, napi_callback_info info) {
  return guarded(env, [&]() -> napi_value {
    TorchHandle& handle = handle_of(env, args(env, info, 1)[0]);
    return describe(env, handle.tensor, handle.dl_data, handle.dl_byte_offset);
  });
}

napi_value Sum(napi_env env, napi_callback_info info) {
  return guarded(env, [&]() -> napi_value {
    TorchHandle& handle = handle_of(env, args(env, info, 1)[0]);
    if (handle.tensor.is_complex()) {
      at::Tensor total = at::view_as_real(handle.tensor.sum().to(at::kComplexDouble).reshape({1}));
      return number_array(env, total.data_ptr<double>(), 2);
    }
    return number(env, handle.tensor.sum().to(at::kDouble).item().toDouble());
  });
}

napi_value MulScalarInPlace(napi_env env, napi_callback_info info) {
  return guarded(env, [&]() -> napi_value {
    std::vector<napi_value> argv = args(env, info, 2);
    TorchHandle& handle = handle_of(env, argv[0]);
    handle.tensor.mul_(scalar_for(handle.tensor, to_double(env, argv[1], "k")));
    return undefined(env);
  });
}

napi_value AddInPlace(napi_env env, napi_callback_info info) {
  return guarded(env, [&]() -> napi_value {
    std::vector<napi_value> argv = args(env, info, 2);
    TorchHandle& handle = handle_of(env, argv[0]);
    handle.tensor.add_(scalar_for(handle.tensor, to_double(env, argv[1], "value")));
    return undefined(env);
  });
}

napi_value Release(napi_env env, napi_callback_info info) {
  return guarded(env, [&]() -> napi_value {
    TorchHandle& handle = handle_of(env, args(env, info, 1)[0]);
    handle.tensor = at::Tensor();  // torch's last reference: runs the DLPack deleter
    return undefined(env);
  });
}

}  // namespace

NAPI_MODULE_INIT() {
  const napi_property_descriptor properties[] = {
      {"toCapsule", nullptr, ToCapsule, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"fromCapsule", nullptr, FromCapsule, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"exportHandle", nullptr, ExportHandle, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"info", nullptr, Info, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"sum", nullptr, Sum, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"mulScalarInPlace", nullptr, MulScalarInPlace, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"addInPlace", nullptr, AddInPlace, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"release", nullptr, Release, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
  };
  if (napi_define_properties(env, exports, sizeof properties / sizeof properties[0], properties) != napi_ok)
    return nullptr;
  return exports;
}
