/*
 * bridge.c - the native glue between Python's DLPack PyCapsules and the Node
 * capsule ABI of include/napi_dlpack.h, for a Node process that embeds
 * CPython (node-calls-python).
 *
 * One shared object, loaded twice into the same process: Node loads it as an
 * addon (napi_register_module_v1) and Python imports it as the extension
 * module `_napi_dlpack_bridge` (PyInit__napi_dlpack_bridge; napi_dlpack_bridge.py
 * loads it by path). dlopen of the same file returns the same handle, so both
 * halves share the one table below. It links libpython and Node-API only,
 * never napi-dlpack: everything it knows about our capsules is the documented
 * ABI of napi_dlpack.h.
 *
 * Why a table of tokens: node-calls-python converts values between the two
 * languages by copying (numbers, strings, lists, bytes). A PyCapsule reaches
 * JS as `undefined`, and a Node external reaches Python as nothing at all. So a
 * managed tensor crosses as a number: the sending side moves its DLManaged-
 * Tensor[Versioned]* into the table and gets a token, the receiving side takes
 * it out exactly once. Ownership is always in exactly one place: the producer's
 * capsule, the table, or the receiving side's capsule.
 *
 * JS (napi):   toPython(capsule) -> token, fromPython(token) -> capsule,
 *              release(token) -> boolean, pending() -> number
 * Python:      put(pycapsule) -> token, take(token) -> (pycapsule, device_type,
 *              device_id, versioned), release(token) -> bool, pending() -> int
 * Errors are JS Errors whose `code` is a stable string (the header's codes);
 * Python errors are BufferError / ValueError whose message starts with it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h> /* first, as the Python C API requires */

#include <pthread.h>
#include <stdint.h>

#include "napi_dlpack.h"

/* ------------------------------------------------------------------------ */
/* The token table: shared by both halves, any thread (node-calls-python's    */
/* async calls run Python on libuv worker threads), so guarded by a mutex.   */
/* No deleter and no Python or Node call ever runs while the lock is held.   */

typedef struct bridge_entry {
  uint64_t token;
  uint32_t kind; /* NAPI_DLPACK_KIND_* */
  void* tensor;  /* owned DLManagedTensor[Versioned]* */
  struct bridge_entry* next;
} bridge_entry;

/* Tokens stay below 2^53 so that they are exact as JS numbers. */
#define BRIDGE_MAX_TOKEN ((uint64_t)1 << 53)

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static bridge_entry* g_entries = NULL;
static uint64_t g_next_token = 0; /* 0: not started; 0 is never a token */
static uint64_t g_pending = 0;

/* The first token: 1, or NAPI_DLPACK_BRIDGE_FIRST_TOKEN (tests start near 2^53 to check that
 * tokens stay exact in JS and that running out is handled). Called with the lock held. */
static void table_start_locked(void) {
  const char* first;
  unsigned long long value;
  char* end = NULL;
  if (g_next_token != 0) return;
  g_next_token = 1;
  first = getenv("NAPI_DLPACK_BRIDGE_FIRST_TOKEN");
  if (first == NULL || *first == '\0') return;
  value = strtoull(first, &end, 10);
  if (end != NULL && *end == '\0' && value >= 1 && value <= BRIDGE_MAX_TOKEN)
    g_next_token = (uint64_t)value;
}

typedef enum {
  TABLE_OK = 0,
  TABLE_NO_MEMORY,  /* put: ownership stays with the caller */
  TABLE_EXHAUSTED,  /* put: 2^53 tokens issued; ownership stays with the caller */
  TABLE_TAKEN,      /* take: the token was issued and has been taken */
  TABLE_UNKNOWN     /* take: no such token was ever issued */
} table_status;

static table_status table_put(uint32_t kind, void* tensor, uint64_t* token) {
  bridge_entry* entry = (bridge_entry*)malloc(sizeof(bridge_entry));
  if (entry == NULL) return TABLE_NO_MEMORY;
  pthread_mutex_lock(&g_lock);
  table_start_locked();
  if (g_next_token >= BRIDGE_MAX_TOKEN) {
    pthread_mutex_unlock(&g_lock);
    free(entry);
    return TABLE_EXHAUSTED;
  }
  entry->token = g_next_token++;
  entry->kind = kind;
  entry->tensor = tensor;
  entry->next = g_entries;
  g_entries = entry;
  g_pending++;
  *token = entry->token;
  pthread_mutex_unlock(&g_lock);
  return TABLE_OK;
}

static table_status table_take(uint64_t token, uint32_t* kind, void** tensor) {
  bridge_entry** link;
  bridge_entry* found = NULL;
  table_status status;
  pthread_mutex_lock(&g_lock);
  table_start_locked();
  for (link = &g_entries; *link != NULL; link = &(*link)->next) {
    if ((*link)->token == token) {
      found = *link;
      *link = found->next;
      g_pending--;
      break;
    }
  }
  if (found != NULL) {
    status = TABLE_OK;
  } else {
    status = token != 0 && token < g_next_token ? TABLE_TAKEN : TABLE_UNKNOWN;
  }
  pthread_mutex_unlock(&g_lock);
  if (found == NULL) return status;
  *kind = found->kind;
  *tensor = found->tensor;
  free(found);
  return TABLE_OK;
}

static uint64_t table_pending(void) {
  uint64_t pending;
  pthread_mutex_lock(&g_lock);
  pending = g_pending;
  pthread_mutex_unlock(&g_lock);
  return pending;
}

/* For a versioned tensor only `version`, `manager_ctx` and `deleter` may be
 * read before its major is known to be 1 (the header's rule). */
static int major_understood(uint32_t kind, void* tensor) {
  return kind != NAPI_DLPACK_KIND_VERSIONED ||
         ((DLManagedTensorVersioned*)tensor)->version.major ==
             DLPACK_MAJOR_VERSION;
}

static const char* table_code(table_status status) {
  switch (status) {
    case TABLE_OK: return "OK";
    case TABLE_NO_MEMORY: return "ERR_DLPACK_NO_MEMORY";
    case TABLE_EXHAUSTED: return "ERR_DLPACK_NO_MEMORY";
    case TABLE_TAKEN: return "ERR_DLPACK_CAPSULE_CONSUMED";
    case TABLE_UNKNOWN: return "ERR_DLPACK_INVALID_ARGUMENT";
  }
  return "ERR_DLPACK_INVALID_ARGUMENT";
}

static const char* table_message(table_status status) {
  switch (status) {
    case TABLE_OK: return "ok";
    case TABLE_NO_MEMORY: return "out of memory for the bridge's token table";
    case TABLE_EXHAUSTED: return "the bridge has issued 2^53 tokens";
    case TABLE_TAKEN: return "this token was already claimed or released";
    case TABLE_UNKNOWN: return "no tensor was ever handed over with this token";
  }
  return "bad token";
}

/* ======================================================================== */
/* Python half                                                               */
/* ======================================================================== */

static const char kVersionedName[] = "dltensor_versioned";
static const char kVersionedUsedName[] = "used_dltensor_versioned";
static const char kLegacyName[] = "dltensor";
static const char kLegacyUsedName[] = "used_dltensor";

/* Raises `type` with a message that starts with the stable code. */
static PyObject* py_raise(PyObject* type, const char* code,
                          const char* message) {
  PyErr_Format(type, "%s: %s", code, message);
  return NULL;
}

/* The token argument: an int in [0, 2^53), or a float holding one.
 * node-calls-python passes a JS number that does not fit in an int32 as a
 * Python float, so tokens past 2^31 arrive as floats. */
static int py_token(PyObject* arg, uint64_t* token) {
  unsigned long long value;
  if (PyFloat_Check(arg)) {
    double number = PyFloat_AsDouble(arg);
    if (!(number >= 0 && number < 9007199254740992.0) ||
        number != (double)(uint64_t)number) {
      PyErr_SetString(PyExc_ValueError,
                      "ERR_DLPACK_INVALID_ARGUMENT: a token is an integer in "
                      "[1, 2**53)");
      return -1;
    }
    *token = (uint64_t)number;
    return 0;
  }
  if (!PyLong_Check(arg)) {
    PyErr_SetString(PyExc_TypeError,
                    "ERR_DLPACK_INVALID_ARGUMENT: a token is an integer in "
                    "[1, 2**53)");
    return -1;
  }
  value = PyLong_AsUnsignedLongLong(arg);
  if ((value == (unsigned long long)-1 && PyErr_Occurred()) ||
      value >= BRIDGE_MAX_TOKEN) {
    PyErr_Clear();
    PyErr_SetString(PyExc_ValueError,
                    "ERR_DLPACK_INVALID_ARGUMENT: a token is an integer in "
                    "[1, 2**53)");
    return -1;
  }
  *token = (uint64_t)value;
  return 0;
}

/* put(capsule) -> token. Takes ownership of an unused "dltensor_versioned" or
 * "dltensor" capsule's tensor, as a DLPack consumer does: the tensor is moved
 * into the table first, and only then is the capsule renamed to "used_..."
 * (from which point its destructor leaves the tensor alone). Any failure
 * before the rename leaves the capsule as it was, still owning its tensor. */
static PyObject* py_put(PyObject* self, PyObject* capsule) {
  const char* name;
  const char* used_name;
  uint32_t kind;
  void* tensor;
  uint64_t token = 0;
  table_status status;
  (void)self;
  if (!PyCapsule_CheckExact(capsule)) {
    PyErr_SetString(PyExc_TypeError,
                    "ERR_DLPACK_NOT_A_CAPSULE: expected a DLPack PyCapsule "
                    "(what __dlpack__ returns)");
    return NULL;
  }
  name = PyCapsule_GetName(capsule);
  if (name == NULL && PyErr_Occurred()) return NULL;
  if (name != NULL && strcmp(name, kVersionedName) == 0) {
    kind = NAPI_DLPACK_KIND_VERSIONED;
    used_name = kVersionedUsedName;
  } else if (name != NULL && strcmp(name, kLegacyName) == 0) {
    kind = NAPI_DLPACK_KIND_LEGACY;
    used_name = kLegacyUsedName;
  } else if (name != NULL && (strcmp(name, kVersionedUsedName) == 0 ||
                              strcmp(name, kLegacyUsedName) == 0)) {
    return py_raise(PyExc_BufferError, "ERR_DLPACK_CAPSULE_CONSUMED",
                    "this DLPack capsule was already consumed");
  } else {
    return py_raise(PyExc_TypeError, "ERR_DLPACK_NOT_A_CAPSULE",
                    "the PyCapsule is not named \"dltensor_versioned\" or "
                    "\"dltensor\"");
  }
  tensor = PyCapsule_GetPointer(capsule, name);
  if (tensor == NULL) return NULL; /* a NULL pointer is an invalid capsule */
  status = table_put(kind, tensor, &token);
  if (status != TABLE_OK) {
    return py_raise(PyExc_MemoryError, table_code(status),
                    table_message(status));
  }
  if (PyCapsule_SetName(capsule, used_name) != 0) {
    /* Not renamed: the capsule still owns the tensor, so take it back out. */
    uint32_t ignored_kind;
    void* ignored_tensor;
    (void)table_take(token, &ignored_kind, &ignored_tensor);
    return NULL;
  }
  return PyLong_FromUnsignedLongLong((unsigned long long)token);
}

/* Destructor of the capsules `take` makes: releases the tensor unless a
 * consumer renamed the capsule to "used_..." (then the consumer owns it). It
 * keeps any exception in flight (a capsule can die while one propagates). */
static void py_capsule_destructor(PyObject* capsule) {
  PyObject *type, *value, *traceback;
  void* tensor;
  uint32_t kind;
  if (PyCapsule_IsValid(capsule, kVersionedUsedName) ||
      PyCapsule_IsValid(capsule, kLegacyUsedName))
    return;
  PyErr_Fetch(&type, &value, &traceback);
  if (PyCapsule_IsValid(capsule, kVersionedName)) {
    kind = NAPI_DLPACK_KIND_VERSIONED;
    tensor = PyCapsule_GetPointer(capsule, kVersionedName);
  } else {
    kind = NAPI_DLPACK_KIND_LEGACY;
    tensor = PyCapsule_GetPointer(capsule, kLegacyName);
  }
  if (tensor == NULL) {
    PyErr_WriteUnraisable(capsule);
  } else {
    napi_dlpack_tensor_release(kind, tensor);
  }
  PyErr_Restore(type, value, traceback);
}

/* take(token) -> (capsule, device_type, device_id, versioned): the tensor
 * handed over
 * from JS, as an unused DLPack PyCapsule that owns it. A versioned tensor of
 * another major version is released (only its deleter is used) and refused. */
static PyObject* py_take(PyObject* self, PyObject* arg) {
  uint64_t token;
  uint32_t kind = 0;
  void* tensor = NULL;
  table_status status;
  DLDevice device;
  PyObject* capsule;
  PyObject* result;
  (void)self;
  if (py_token(arg, &token) != 0) return NULL;
  status = table_take(token, &kind, &tensor);
  if (status != TABLE_OK) {
    return py_raise(PyExc_ValueError, table_code(status),
                    table_message(status));
  }
  if (!major_understood(kind, tensor)) {
    napi_dlpack_tensor_release(kind, tensor);
    return py_raise(PyExc_BufferError, "ERR_DLPACK_VERSION",
                    "the tensor's DLPack major version is not 1");
  }
  device = kind == NAPI_DLPACK_KIND_VERSIONED
               ? ((DLManagedTensorVersioned*)tensor)->dl_tensor.device
               : ((DLManagedTensor*)tensor)->dl_tensor.device;
  capsule = PyCapsule_New(
      tensor, kind == NAPI_DLPACK_KIND_VERSIONED ? kVersionedName : kLegacyName,
      py_capsule_destructor);
  if (capsule == NULL) {
    napi_dlpack_tensor_release(kind, tensor);
    return NULL;
  }
  /* From here the capsule owns the tensor: dropping it on an error below
   * releases the tensor through the destructor. */
  result = Py_BuildValue("(NiiN)", capsule, (int)device.device_type,
                         (int)device.device_id,
                         PyBool_FromLong(kind == NAPI_DLPACK_KIND_VERSIONED));
  return result; /* "N" steals the capsule reference, also on failure */
}

/* A legacy DLManagedTensor presenting a versioned tensor to a consumer that
 * only knows the pre-1.0 struct (torch before 2.x, old CuPy and JAX). The
 * DLTensor is copied; its shape and strides still point into the versioned
 * tensor, which lives until this wrapper's deleter releases it. */
typedef struct {
  DLManagedTensor legacy;
  DLManagedTensorVersioned* inner;
} legacy_wrapper;

static void legacy_wrapper_deleter(DLManagedTensor* self) {
  legacy_wrapper* wrapper = (legacy_wrapper*)self->manager_ctx;
  DLManagedTensorVersioned* inner = wrapper->inner;
  free(wrapper);
  if (inner->deleter != NULL) inner->deleter(inner);
}

/* as_legacy(capsule) -> capsule: an unused "dltensor_versioned" capsule (of
 * major version 1, not read-only, no padded sub-byte elements: a legacy struct
 * cannot say either) turned into an unused "dltensor" capsule over the same
 * memory. The versioned capsule is renamed "used_..." (the new one owns the
 * tensor); on any failure nothing changes hands. */
static PyObject* py_as_legacy(PyObject* self, PyObject* capsule) {
  DLManagedTensorVersioned* inner;
  legacy_wrapper* wrapper;
  PyObject* result;
  (void)self;
  if (!PyCapsule_IsValid(capsule, kVersionedName)) {
    return py_raise(PyExc_TypeError, "ERR_DLPACK_NOT_A_CAPSULE",
                    "as_legacy() takes an unused \"dltensor_versioned\" "
                    "capsule");
  }
  inner = (DLManagedTensorVersioned*)PyCapsule_GetPointer(capsule,
                                                          kVersionedName);
  if (inner == NULL) return NULL;
  if (inner->version.major != DLPACK_MAJOR_VERSION) {
    return py_raise(PyExc_BufferError, "ERR_DLPACK_VERSION",
                    "the tensor's DLPack major version is not 1");
  }
  if ((inner->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0) {
    return py_raise(PyExc_BufferError, "ERR_DLPACK_READ_ONLY",
                    "a read-only tensor cannot be exported as a legacy "
                    "DLPack tensor (it cannot say it is read-only)");
  }
  if ((inner->flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED) != 0) {
    return py_raise(PyExc_BufferError, "ERR_DLPACK_DTYPE",
                    "padded sub-byte elements cannot be exported as a "
                    "legacy DLPack tensor");
  }
  wrapper = (legacy_wrapper*)malloc(sizeof(legacy_wrapper));
  if (wrapper == NULL) return PyErr_NoMemory();
  wrapper->inner = inner;
  wrapper->legacy.dl_tensor = inner->dl_tensor;
  wrapper->legacy.manager_ctx = wrapper;
  wrapper->legacy.deleter = legacy_wrapper_deleter;
  /* Hand over first: from the rename on, the wrapper owns the tensor. */
  if (PyCapsule_SetName(capsule, kVersionedUsedName) != 0) {
    free(wrapper);
    return NULL;
  }
  result = PyCapsule_New(&wrapper->legacy, kLegacyName, py_capsule_destructor);
  if (result == NULL) legacy_wrapper_deleter(&wrapper->legacy);
  return result;
}

/* release(token) -> bool: drops a tensor nobody claimed (its deleter runs
 * now); False if the token was already claimed or released. */
static PyObject* py_release(PyObject* self, PyObject* arg) {
  uint64_t token;
  uint32_t kind = 0;
  void* tensor = NULL;
  table_status status;
  (void)self;
  if (py_token(arg, &token) != 0) return NULL;
  status = table_take(token, &kind, &tensor);
  if (status == TABLE_UNKNOWN) {
    return py_raise(PyExc_ValueError, table_code(status),
                    table_message(status));
  }
  if (status != TABLE_OK) Py_RETURN_FALSE;
  napi_dlpack_tensor_release(kind, tensor);
  Py_RETURN_TRUE;
}

static PyObject* py_pending(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  return PyLong_FromUnsignedLongLong((unsigned long long)table_pending());
}

static PyMethodDef kPyMethods[] = {
    {"put", py_put, METH_O,
     "put(capsule) -> token: move a DLPack PyCapsule's tensor to Node"},
    {"take", py_take, METH_O,
     "take(token) -> (capsule, device_type, device_id, versioned): claim a "
     "tensor from Node"},
    {"as_legacy", py_as_legacy, METH_O,
     "as_legacy(capsule) -> capsule: a writable versioned tensor as a legacy "
     "one, for consumers of the pre-1.0 struct"},
    {"release", py_release, METH_O,
     "release(token) -> bool: release a tensor nobody claimed"},
    {"pending", py_pending, METH_NOARGS,
     "pending() -> int: tensors handed over and not yet claimed"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef kPyModule = {
    PyModuleDef_HEAD_INIT, "_napi_dlpack_bridge",
    "Native half of napi_dlpack_bridge (see bridge.c)", -1, kPyMethods,
    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__napi_dlpack_bridge(void) {
  return PyModule_Create(&kPyModule);
}

/* ======================================================================== */
/* Node half                                                                 */
/* ======================================================================== */

static napi_value js_throw(napi_env env, const char* code,
                           const char* message) {
  napi_throw_error(env, code, message);
  return NULL;
}

static napi_value js_throw_status(napi_env env, napi_dlpack_status status,
                                  const char* message) {
  return js_throw(env, napi_dlpack_status_code(status), message);
}

/* The token argument: an integral number in [1, 2^53). */
static int js_token(napi_env env, napi_callback_info info, uint64_t* token) {
  size_t argc = 1;
  napi_value argv[1];
  napi_valuetype type;
  double value;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok)
    return -1;
  if (argc < 1 || napi_typeof(env, argv[0], &type) != napi_ok ||
      type != napi_number ||
      napi_get_value_double(env, argv[0], &value) != napi_ok ||
      !(value >= 0 && value < 9007199254740992.0) ||
      value != (double)(uint64_t)value) {
    js_throw(env, "ERR_DLPACK_INVALID_ARGUMENT",
             "a token is an integer in [1, 2**53)");
    return -1;
  }
  *token = (uint64_t)value;
  return 0;
}

/* toPython(capsule) -> token: consumes a Node capsule and parks its tensor
 * for Python's take(). */
static napi_value js_to_python(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], result;
  uint32_t kind = 0;
  void* tensor = NULL;
  uint64_t token = 0;
  napi_dlpack_status status;
  table_status put;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok)
    return js_throw_status(env, NAPI_DLPACK_ERR_NAPI, "napi_get_cb_info");
  if (argc < 1)
    return js_throw_status(env, NAPI_DLPACK_ERR_NOT_A_CAPSULE,
                           "toPython(capsule): no capsule given");
  status = napi_dlpack_capsule_consume(env, argv[0], &kind, &tensor);
  if (status != NAPI_DLPACK_OK) {
    return js_throw_status(
        env, status,
        status == NAPI_DLPACK_ERR_NOT_A_CAPSULE
            ? "toPython: expected a DLPack capsule (x.__dlpack__())"
            : status == NAPI_DLPACK_ERR_CONSUMED
                  ? "toPython: the capsule was already consumed"
                  : "toPython: the capsule could not be consumed");
  }
  /* We own the tensor from here: every failure path releases it. */
  if (!major_understood(kind, tensor)) {
    napi_dlpack_tensor_release(kind, tensor);
    return js_throw_status(env, NAPI_DLPACK_ERR_VERSION,
                           "toPython: the tensor's DLPack major version is "
                           "not 1");
  }
  put = table_put(kind, tensor, &token);
  if (put != TABLE_OK) {
    napi_dlpack_tensor_release(kind, tensor);
    return js_throw(env, table_code(put), table_message(put));
  }
  if (napi_create_double(env, (double)token, &result) != napi_ok) {
    uint32_t k;
    void* t;
    if (table_take(token, &k, &t) == TABLE_OK) napi_dlpack_tensor_release(k, t);
    return js_throw_status(env, NAPI_DLPACK_ERR_NAPI, "napi_create_double");
  }
  return result;
}

/* fromPython(token) -> capsule: the tensor Python's put() parked, as a new
 * Node capsule that owns it. */
static napi_value js_from_python(napi_env env, napi_callback_info info) {
  uint64_t token;
  uint32_t kind = 0;
  void* tensor = NULL;
  table_status taken;
  napi_dlpack_status status;
  napi_value capsule;
  if (js_token(env, info, &token) != 0) return NULL;
  taken = table_take(token, &kind, &tensor);
  if (taken != TABLE_OK)
    return js_throw(env, table_code(taken), table_message(taken));
  status = napi_dlpack_capsule_create(env, kind, tensor, &capsule);
  if (status != NAPI_DLPACK_OK) {
    /* On failure ownership stayed with us (the header's contract). */
    napi_dlpack_tensor_release(kind, tensor);
    return js_throw_status(env, status,
                           "fromPython: the capsule could not be made");
  }
  return capsule;
}

static napi_value js_release(napi_env env, napi_callback_info info) {
  uint64_t token;
  uint32_t kind = 0;
  void* tensor = NULL;
  table_status taken;
  napi_value result;
  if (js_token(env, info, &token) != 0) return NULL;
  taken = table_take(token, &kind, &tensor);
  if (taken == TABLE_UNKNOWN)
    return js_throw(env, table_code(taken), table_message(taken));
  if (taken == TABLE_OK) napi_dlpack_tensor_release(kind, tensor);
  if (napi_get_boolean(env, taken == TABLE_OK, &result) != napi_ok)
    return js_throw_status(env, NAPI_DLPACK_ERR_NAPI, "napi_get_boolean");
  return result;
}

static napi_value js_pending(napi_env env, napi_callback_info info) {
  napi_value result;
  (void)info;
  if (napi_create_double(env, (double)table_pending(), &result) != napi_ok)
    return js_throw_status(env, NAPI_DLPACK_ERR_NAPI, "napi_create_double");
  return result;
}

NAPI_MODULE_INIT() {
  napi_property_descriptor properties[] = {
      {"toPython", NULL, js_to_python, NULL, NULL, NULL, napi_enumerable,
       NULL},
      {"fromPython", NULL, js_from_python, NULL, NULL, NULL, napi_enumerable,
       NULL},
      {"release", NULL, js_release, NULL, NULL, NULL, napi_enumerable, NULL},
      {"pending", NULL, js_pending, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  if (napi_define_properties(env, exports,
                             sizeof(properties) / sizeof(properties[0]),
                             properties) != napi_ok)
    return NULL;
  return exports;
}
