// The Node-API routes from a JS value to a native pointer that a borrowed tensor argument could
// take, each as an otherwise empty native function, so benches/callgrind/lookup-routes.mjs can
// count what each route adds to a native call (issue 13's borrowed-path goal: 50 ns per
// tensor). Every route checks what a consumer must check before trusting the pointer, except
// `viaUnwrapOnly`, measured as the lower bound of a wrapped object (napi_unwrap alone cannot
// tell our wrap from another addon's). Each successful lookup is counted, so the script can
// check that every call took the route it times rather than an early return.
#include <node_api.h>
#include <stdint.h>

static const napi_type_tag kTag = {0x6e6170692d646c70ULL, 0x61636b2d62656e63ULL};
static napi_ref symbol_ref;
static int payload;
static uint64_t lookups;

static napi_value first_arg(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value arg = NULL;
  napi_get_cb_info(env, info, &argc, &arg, NULL, NULL);
  return arg;
}

static void found(void* pointer) {
  if (pointer == &payload) lookups++;
}

// The floor: a native call of the same arity that looks at nothing.
static napi_value Floor(napi_env env, napi_callback_info info) {
  (void)first_arg(env, info);
  return NULL;
}

// The floors of 3 and 8 arguments (benches/typed-args*.mjs compare calls of those arities).
static napi_value Floor3(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value args[3];
  napi_get_cb_info(env, info, &argc, args, NULL, NULL);
  return NULL;
}

static napi_value Floor8(napi_env env, napi_callback_info info) {
  size_t argc = 8;
  napi_value args[8];
  napi_get_cb_info(env, info, &argc, args, NULL, NULL);
  return NULL;
}

static napi_value tagged_external(napi_env env, napi_value external) {
  napi_valuetype type;
  if (napi_typeof(env, external, &type) != napi_ok || type != napi_external) return NULL;
  bool tagged = false;
  if (napi_check_object_type_tag(env, external, &kTag, &tagged) != napi_ok || !tagged) return NULL;
  void* pointer = NULL;
  if (napi_get_value_external(env, external, &pointer) == napi_ok) found(pointer);
  return NULL;
}

// Today's route (table minor 1): a tagged external stored under a registered symbol.
static napi_value ViaSymbol(napi_env env, napi_callback_info info) {
  napi_value object = first_arg(env, info), symbol, external;
  if (napi_get_reference_value(env, symbol_ref, &symbol) != napi_ok) return NULL;
  if (napi_get_property(env, object, symbol, &external) != napi_ok) return NULL;
  return tagged_external(env, external);
}

// The object itself type-tagged and wrapped.
static napi_value ViaTagUnwrap(napi_env env, napi_callback_info info) {
  napi_value object = first_arg(env, info);
  napi_valuetype type;
  if (napi_typeof(env, object, &type) != napi_ok || type != napi_object) return NULL;
  bool tagged = false;
  if (napi_check_object_type_tag(env, object, &kTag, &tagged) != napi_ok || !tagged) return NULL;
  void* pointer = NULL;
  if (napi_unwrap(env, object, &pointer) == napi_ok) found(pointer);
  return NULL;
}

// napi_unwrap alone (not enough to trust the pointer: the lower bound of wrapping).
static napi_value ViaUnwrapOnly(napi_env env, napi_callback_info info) {
  void* pointer = NULL;
  if (napi_unwrap(env, first_arg(env, info), &pointer) == napi_ok) found(pointer);
  return NULL;
}

// The tagged external passed as the argument itself (JS would pass `t.native`, not `t`).
static napi_value ViaExternalArg(napi_env env, napi_callback_info info) {
  return tagged_external(env, first_arg(env, info));
}

// setup(object, symbol): wraps and tags `object`, stores a tagged external under `symbol`,
// and returns the external.
static napi_value Setup(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value args[2], external;
  napi_get_cb_info(env, info, &argc, args, NULL, NULL);
  napi_wrap(env, args[0], &payload, NULL, NULL, NULL);
  napi_type_tag_object(env, args[0], &kTag);
  napi_create_external(env, &payload, NULL, NULL, &external);
  napi_type_tag_object(env, external, &kTag);
  napi_set_property(env, args[0], args[1], external);
  if (symbol_ref == NULL) napi_create_reference(env, args[1], 1, &symbol_ref);
  return external;
}

static napi_value Lookups(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value count;
  napi_create_double(env, (double)lookups, &count);
  return count;
}

NAPI_MODULE_INIT() {
  napi_property_descriptor properties[] = {
      {"floor", NULL, Floor, NULL, NULL, NULL, napi_default, NULL},
      {"floor3", NULL, Floor3, NULL, NULL, NULL, napi_default, NULL},
      {"floor8", NULL, Floor8, NULL, NULL, NULL, napi_default, NULL},
      {"viaSymbol", NULL, ViaSymbol, NULL, NULL, NULL, napi_default, NULL},
      {"viaTagUnwrap", NULL, ViaTagUnwrap, NULL, NULL, NULL, napi_default, NULL},
      {"viaUnwrapOnly", NULL, ViaUnwrapOnly, NULL, NULL, NULL, napi_default, NULL},
      {"viaExternalArg", NULL, ViaExternalArg, NULL, NULL, NULL, napi_default, NULL},
      {"setup", NULL, Setup, NULL, NULL, NULL, napi_default, NULL},
      {"lookups", NULL, Lookups, NULL, NULL, NULL, napi_default, NULL},
  };
  napi_define_properties(env, exports, sizeof properties / sizeof properties[0], properties);
  return exports;
}
