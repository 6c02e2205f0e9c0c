"""Python side of test/bridge.test.mjs: arrays kept by name, so that the JS
side can ask about them (address, values, reference count) between steps."""

import gc
import sys

import numpy as np

import napi_dlpack_bridge as bridge

keep = {}


def versions():
    return {"numpy": np.__version__, "python": sys.version.split()[0], "prefix": sys.prefix}


def make(name, dtype, shape):
    """An array of `dtype` whose C-order element k holds k (bool: k odd)."""
    count = int(np.prod(shape)) if shape else 1
    values = np.arange(count)
    if dtype == "bool":
        array = (values % 2 == 1).reshape(shape)
    else:
        array = values.astype(dtype).reshape(shape)
    keep[name] = array
    return info(name)


def view(name, base, kind):
    """Non-contiguous views of `keep[base]`."""
    array = keep[base]
    if kind == "strided_transpose":
        keep[name] = array[:, ::2].T
    elif kind == "reversed":
        keep[name] = array[::-1]
    else:
        raise ValueError(kind)
    return info(name)


def set_readonly(name):
    keep[name].flags.writeable = False
    return info(name)


def info(name):
    array = keep[name]
    return {
        "address": array.ctypes.data,
        "shape": list(array.shape),
        "strides": [s // array.itemsize for s in array.strides],
        "dtype": str(array.dtype),
        "writeable": bool(array.flags.writeable),
        "hex": array.tobytes().hex(),
        "base_is_dlpack": type(array.base).__name__ == "PyCapsule",
    }


def refcount(name):
    """References to keep[name] other than this call's own."""
    return sys.getrefcount(keep[name]) - 1


def to_node(name):
    return bridge.to_node(keep[name])


def capsule_to_node(name):
    """A raw capsule (not the array) handed over."""
    return bridge.to_node(keep[name].__dlpack__(max_version=(1, 0)))


def used_capsule_to_node(name):
    capsule = keep[name].__dlpack__(max_version=(1, 0))
    np.from_dlpack(_Provider(capsule))
    return bridge.to_node(capsule)


class _Provider:
    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)


def to_node_bad(what):
    if what == "int":
        return bridge.to_node(42)
    if what == "list":
        return bridge.to_node([1, 2])
    raise ValueError(what)


def claim(name, token):
    """np.from_dlpack of the tensor JS sent."""
    keep[name] = bridge.to_numpy(token)
    return info(name)


def claim_holder(name, token):
    """The claimed tensor, not yet consumed by numpy."""
    keep[name] = bridge.from_node(token)
    return keep[name].__dlpack_device__()


def consume_holder(holder, name):
    keep[name] = np.from_dlpack(keep[holder])
    return info(name)


def consume_holder_copy(holder, name):
    keep[name] = np.from_dlpack(keep[holder], copy=True)
    return info(name)


def holder_legacy_consumer(holder, name=None):
    """A consumer of the legacy struct only (as torch 1.x): __dlpack__()
    without max_version, then numpy imports the "dltensor" capsule it got."""
    capsule = keep[holder].__dlpack__()
    kind = repr(capsule).split('"')[1]
    if name is not None:
        keep[name] = np.from_dlpack(_Provider(capsule))
        return dict(info(name), capsule=kind)
    return kind


def take_twice(token):
    bridge.from_node(token)
    bridge.from_node(token)


def write_flat(name, index, value):
    """Writes element `index` in C order (also through a non-contiguous view)."""
    keep[name].flat[index] = value
    return info(name)


def release(token):
    return bridge.release(token)


def make_and_export(name, count):
    """make() and to_node() in one call (run on a libuv thread by py.call)."""
    make(name, "float32", [count])
    return [to_node(name), keep[name].ctypes.data]


def claim_and_sum(token):
    """to_numpy() on whatever thread runs it; the array dies on return."""
    return float(bridge.to_numpy(token).sum())


def pending():
    return bridge.pending()


def collect():
    return gc.collect()


def drop(name):
    del keep[name]
    gc.collect()
    return len(keep)
