/*
 * control.node: a tiny Node-API addon that lets JavaScript tests drive the
 * fake CUDA driver (a TEST DOUBLE, see README.md) that is loaded in the same
 * process.
 *
 * It never links against libcuda. It looks for the copy that is ALREADY
 * loaded (dlopen with RTLD_NOLOAD on "libcuda.so", then "libcuda.so.1") and
 * calls the fake_cuda_* control functions through dlsym. If no fake is
 * loaded, every function except isLoaded() and load() throws.
 *
 * Build: cc -shared -fPIC -DNAPI_VERSION=8 -I/usr/include/node control.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <node_api.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

struct api {
    int (*is_fake)(void);
    void (*reset)(void);
    long long (*call_count)(const char *);
    int (*set_fault_ex)(const char *, unsigned, int, int);
    void (*set_deferred)(int);
    int (*get_deferred)(void);
    long long (*live_allocations)(void);
    long long (*live_host_allocations)(void);
    long long (*live_streams)(void);
    long long (*live_events)(void);
    long long (*host_syncs)(void);
    long long (*last_host_source)(void);
    long long (*last_host_destination)(void);
    long long (*pending_ops)(void);
    long long (*async_errors)(void);
    long long (*cross_context_frees)(void);
    unsigned (*ep_count)(void);
    const char *(*ep_name)(unsigned);
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static void *g_handle = NULL;
static struct api g_api;

enum find_result { FOUND = 0, NOT_LOADED = 1, NOT_FAKE = 2 };

#define SYM(field, name) \
    do { \
        *(void **)(&a.field) = dlsym(h, name); \
        if (!a.field) return 0; \
    } while (0)

/* Fill g_api from a handle; 0 if the library is not the (complete) fake. */
static int bind(void *h) {
    struct api a;
    memset(&a, 0, sizeof a);
    SYM(is_fake, "fake_cuda_is_fake");
    if (a.is_fake() != 1) return 0;
    SYM(reset, "fake_cuda_reset");
    SYM(call_count, "fake_cuda_call_count");
    SYM(set_fault_ex, "fake_cuda_set_fault_ex");
    SYM(set_deferred, "fake_cuda_set_deferred");
    SYM(get_deferred, "fake_cuda_get_deferred");
    SYM(live_allocations, "fake_cuda_live_allocations");
    SYM(live_host_allocations, "fake_cuda_live_host_allocations");
    SYM(live_streams, "fake_cuda_live_streams");
    SYM(live_events, "fake_cuda_live_events");
    SYM(host_syncs, "fake_cuda_host_syncs");
    SYM(last_host_source, "fake_cuda_last_host_source");
    SYM(last_host_destination, "fake_cuda_last_host_destination");
    SYM(pending_ops, "fake_cuda_pending_ops");
    SYM(async_errors, "fake_cuda_async_errors");
    SYM(cross_context_frees, "fake_cuda_cross_context_frees");
    SYM(ep_count, "fake_cuda_entry_point_count");
    SYM(ep_name, "fake_cuda_entry_point_name");
    g_api = a;
    g_handle = h;
    return 1;
}

/* Adopt a handle (takes ownership of one dlopen reference). */
static enum find_result adopt(void *h) {
    if (!h) return NOT_LOADED;
    if (!bind(h)) {
        dlclose(h);
        return NOT_FAKE;
    }
    return FOUND;
}

static enum find_result find_loaded(void) {
    enum find_result r = FOUND;
    pthread_mutex_lock(&g_lock);
    if (!g_handle) {
        const char *names[] = { "libcuda.so", "libcuda.so.1" };
        r = NOT_LOADED;
        for (int i = 0; i < 2 && r == NOT_LOADED; i++)
            r = adopt(dlopen(names[i], RTLD_NOW | RTLD_NOLOAD));
    }
    pthread_mutex_unlock(&g_lock);
    return r;
}

static void throw_find(napi_env env, enum find_result r) {
    if (r == NOT_FAKE)
        napi_throw_error(env, "ERR_FAKE_CUDA_REAL_DRIVER",
                         "fake-cuda: the libcuda loaded in this process is NOT the fake CUDA "
                         "driver (test double); a real NVIDIA driver is in use");
    else
        napi_throw_error(env, "ERR_FAKE_CUDA_NOT_LOADED",
                         "fake-cuda: the fake CUDA driver (test double) is not loaded in this "
                         "process. It is loaded by the first CUDA call when "
                         "<repo>/target/fake-cuda is on LD_LIBRARY_PATH, or by load().");
}

/* Returns 1 when the fake is available; otherwise throws and returns 0. */
static int need(napi_env env) {
    enum find_result r = find_loaded();
    if (r == FOUND) return 1;
    throw_find(env, r);
    return 0;
}

static napi_value undefined(napi_env env) {
    napi_value v;
    napi_get_undefined(env, &v);
    return v;
}

static napi_value number(napi_env env, long long x) {
    napi_value v;
    napi_create_int64(env, x, &v);
    return v;
}

static napi_value boolean(napi_env env, int b) {
    napi_value v;
    napi_get_boolean(env, b != 0, &v);
    return v;
}

/* Read argument i as a string into buf; throws and returns 0 on error. */
static int arg_string(napi_env env, napi_value *argv, size_t argc, size_t i, char *buf, size_t len) {
    napi_valuetype t = napi_undefined;
    if (i < argc) napi_typeof(env, argv[i], &t);
    if (t != napi_string) {
        napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "fake-cuda: expected an entry point name (string)");
        return 0;
    }
    size_t got = 0;
    napi_get_value_string_utf8(env, argv[i], buf, len, &got);
    if (got + 1 >= len) {
        napi_throw_range_error(env, "ERR_OUT_OF_RANGE", "fake-cuda: entry point name too long");
        return 0;
    }
    return 1;
}

static int arg_number(napi_env env, napi_value *argv, size_t argc, size_t i, double *out) {
    napi_valuetype t = napi_undefined;
    if (i < argc) napi_typeof(env, argv[i], &t);
    if (t != napi_number) {
        napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "fake-cuda: expected a number");
        return 0;
    }
    napi_get_value_double(env, argv[i], out);
    return 1;
}

#define ARGS(n) \
    size_t argc = n; \
    napi_value argv[n]; \
    napi_get_cb_info(env, info, &argc, argv, NULL, NULL)

static napi_value js_is_loaded(napi_env env, napi_callback_info info) {
    (void)info;
    return boolean(env, find_loaded() == FOUND);
}

/* load([path]): dlopen the fake (by path, or "libcuda.so" via the normal
 * library search) so that faults can be set before the first CUDA call. */
static napi_value js_load(napi_env env, napi_callback_info info) {
    ARGS(1);
    char path[4096] = "libcuda.so";
    napi_valuetype t = napi_undefined;
    if (argc > 0) napi_typeof(env, argv[0], &t);
    if (t != napi_undefined && !arg_string(env, argv, argc, 0, path, sizeof path)) return NULL;
    enum find_result r = find_loaded();
    if (r == NOT_LOADED) {
        pthread_mutex_lock(&g_lock);
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            char msg[4600];
            snprintf(msg, sizeof msg, "fake-cuda: cannot load %s: %s", path, dlerror());
            pthread_mutex_unlock(&g_lock);
            napi_throw_error(env, "ERR_FAKE_CUDA_NOT_LOADED", msg);
            return NULL;
        }
        r = adopt(h);
        pthread_mutex_unlock(&g_lock);
    }
    if (r != FOUND) {
        throw_find(env, r);
        return NULL;
    }
    return boolean(env, 1);
}

static napi_value js_reset(napi_env env, napi_callback_info info) {
    (void)info;
    if (!need(env)) return NULL;
    g_api.reset();
    return undefined(env);
}

static napi_value js_call_count(napi_env env, napi_callback_info info) {
    ARGS(1);
    char name[256];
    if (!need(env) || !arg_string(env, argv, argc, 0, name, sizeof name)) return NULL;
    long long n = g_api.call_count(name);
    if (n < 0) {
        char msg[320];
        snprintf(msg, sizeof msg, "fake-cuda: '%s' is not an entry point of the fake driver", name);
        napi_throw_type_error(env, "ERR_FAKE_CUDA_UNKNOWN_ENTRY_POINT", msg);
        return NULL;
    }
    return number(env, n);
}

/* setFault(name, nth, result[, persistent]) */
static napi_value js_set_fault(napi_env env, napi_callback_info info) {
    ARGS(4);
    char name[256];
    double nth = 0, result = 0;
    if (!need(env) || !arg_string(env, argv, argc, 0, name, sizeof name) ||
        !arg_number(env, argv, argc, 1, &nth) || !arg_number(env, argv, argc, 2, &result))
        return NULL;
    bool persistent = false;
    napi_valuetype t = napi_undefined;
    if (argc > 3) napi_typeof(env, argv[3], &t);
    if (t == napi_boolean) napi_get_value_bool(env, argv[3], &persistent);
    if (nth < 0 || nth > 4294967295.0 || nth != (double)(unsigned)nth) {
        napi_throw_range_error(env, "ERR_OUT_OF_RANGE", "fake-cuda: nth must be an integer >= 0 (0 clears)");
        return NULL;
    }
    int rc = g_api.set_fault_ex(name, (unsigned)nth, (int)result, persistent);
    if (rc == -1) {
        char msg[320];
        snprintf(msg, sizeof msg, "fake-cuda: '%s' is not an entry point of the fake driver", name);
        napi_throw_type_error(env, "ERR_FAKE_CUDA_UNKNOWN_ENTRY_POINT", msg);
        return NULL;
    }
    if (rc == -2 || result != (double)(int)result) {
        napi_throw_range_error(env, "ERR_OUT_OF_RANGE",
                               "fake-cuda: result must be a non-zero CUresult of the CUDA 12.8 headers");
        return NULL;
    }
    return undefined(env);
}

static napi_value js_set_deferred(napi_env env, napi_callback_info info) {
    ARGS(1);
    if (!need(env)) return NULL;
    bool on = false;
    napi_valuetype t = napi_undefined;
    if (argc > 0) napi_typeof(env, argv[0], &t);
    if (t != napi_boolean) {
        napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "fake-cuda: setDeferred expects a boolean");
        return NULL;
    }
    napi_get_value_bool(env, argv[0], &on);
    g_api.set_deferred(on);
    return undefined(env);
}

static napi_value js_is_deferred(napi_env env, napi_callback_info info) {
    (void)info;
    if (!need(env)) return NULL;
    return boolean(env, g_api.get_deferred());
}

#define COUNTER_FN(js_name, field) \
    static napi_value js_name(napi_env env, napi_callback_info info) { \
        (void)info; \
        if (!need(env)) return NULL; \
        return number(env, g_api.field()); \
    }
COUNTER_FN(js_live_allocations, live_allocations)
COUNTER_FN(js_live_host_allocations, live_host_allocations)
COUNTER_FN(js_live_streams, live_streams)
COUNTER_FN(js_live_events, live_events)
COUNTER_FN(js_host_syncs, host_syncs)
COUNTER_FN(js_last_host_source, last_host_source)
COUNTER_FN(js_last_host_destination, last_host_destination)
COUNTER_FN(js_pending_ops, pending_ops)
COUNTER_FN(js_async_errors, async_errors)
COUNTER_FN(js_cross_context_frees, cross_context_frees)

/* counts(): { entryPointName: calls } for every non-zero counter */
static napi_value js_counts(napi_env env, napi_callback_info info) {
    (void)info;
    if (!need(env)) return NULL;
    napi_value obj;
    napi_create_object(env, &obj);
    unsigned n = g_api.ep_count();
    for (unsigned i = 0; i < n; i++) {
        const char *name = g_api.ep_name(i);
        long long c = name ? g_api.call_count(name) : 0;
        if (c > 0) napi_set_named_property(env, obj, name, number(env, c));
    }
    return obj;
}

NAPI_MODULE_INIT() {
    napi_property_descriptor props[] = {
        { "isLoaded", NULL, js_is_loaded, NULL, NULL, NULL, napi_enumerable, NULL },
        { "load", NULL, js_load, NULL, NULL, NULL, napi_enumerable, NULL },
        { "reset", NULL, js_reset, NULL, NULL, NULL, napi_enumerable, NULL },
        { "callCount", NULL, js_call_count, NULL, NULL, NULL, napi_enumerable, NULL },
        { "counts", NULL, js_counts, NULL, NULL, NULL, napi_enumerable, NULL },
        { "setFault", NULL, js_set_fault, NULL, NULL, NULL, napi_enumerable, NULL },
        { "setDeferred", NULL, js_set_deferred, NULL, NULL, NULL, napi_enumerable, NULL },
        { "isDeferred", NULL, js_is_deferred, NULL, NULL, NULL, napi_enumerable, NULL },
        { "liveAllocations", NULL, js_live_allocations, NULL, NULL, NULL, napi_enumerable, NULL },
        { "liveHostAllocations", NULL, js_live_host_allocations, NULL, NULL, NULL, napi_enumerable, NULL },
        { "liveStreams", NULL, js_live_streams, NULL, NULL, NULL, napi_enumerable, NULL },
        { "liveEvents", NULL, js_live_events, NULL, NULL, NULL, napi_enumerable, NULL },
        { "hostSyncs", NULL, js_host_syncs, NULL, NULL, NULL, napi_enumerable, NULL },
        { "lastHostSource", NULL, js_last_host_source, NULL, NULL, NULL, napi_enumerable, NULL },
        { "lastHostDestination", NULL, js_last_host_destination, NULL, NULL, NULL, napi_enumerable, NULL },
        { "pendingOps", NULL, js_pending_ops, NULL, NULL, NULL, napi_enumerable, NULL },
        { "asyncErrors", NULL, js_async_errors, NULL, NULL, NULL, napi_enumerable, NULL },
        { "crossContextFrees", NULL, js_cross_context_frees, NULL, NULL, NULL, napi_enumerable, NULL },
    };
    napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
    return exports;
}
