"""Python half of the napi-dlpack bridge: DLPack tensors between numpy (or any
DLPack producer/consumer) and Node, in one process, without copying.

A tensor crosses node-calls-python as a token (an int): `to_node(array)` moves
the array's DLPack capsule into the bridge and returns the token for JS's
`bridge.fromPython(token)`; `from_node(token)` claims a tensor JS sent with
`bridge.toPython(x)`, as an object `np.from_dlpack` (or `torch.from_dlpack`)
consumes. Every tensor is claimed at most once, and its deleter runs exactly
once: when the consumer lets go, or at `release(token)` for a token nobody
claimed.

The native half is the same shared object Node loaded (build/
napi_dlpack_bridge.node, made by build.sh), so both sides share one table.
"""

import importlib.machinery
import importlib.util
import os
import types

__all__ = ["to_node", "from_node", "to_numpy", "release", "pending", "FromNode"]


def _load_native():
    path = os.environ.get("NAPI_DLPACK_BRIDGE_NATIVE") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "build", "napi_dlpack_bridge.node"
    )
    # The file is a Node addon and a Python extension module at once; its
    # name does not end in an extension suffix, so it is loaded by path.
    loader = importlib.machinery.ExtensionFileLoader("_napi_dlpack_bridge", path)
    spec = importlib.util.spec_from_file_location("_napi_dlpack_bridge", path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


_native = _load_native()

# The DLPack version napi-dlpack consumes (its MAX_VERSION); producers answer
# with any 1.x, which the Node side validates.
MAX_VERSION = (1, 3)

_DEVICE_CPU = 1

# types.CapsuleType exists from Python 3.13 on; before, any capsule's type.
_CapsuleType = getattr(types, "CapsuleType", None) or type(
    __import__("datetime").datetime_CAPI
)


def to_node(obj):
    """Hands `obj` (a numpy array, a torch tensor, anything with `__dlpack__`,
    or an unused DLPack PyCapsule) to Node without copying; returns the token
    for `bridge.fromPython(token)` in JS.

    Asks for a versioned capsule (`max_version`), so that the read-only flag
    travels: numpy refuses to export a read-only array any other way. A
    producer that predates `max_version` raises TypeError and is asked again
    without it (a legacy capsule: it cannot say read-only, which is why numpy
    exports only writeable arrays that way).
    """
    if isinstance(obj, _CapsuleType):
        capsule = obj
    else:
        dlpack = getattr(obj, "__dlpack__", None)
        if dlpack is None:
            raise TypeError(
                "ERR_DLPACK_INVALID_ARGUMENT: to_node() takes an object with __dlpack__ "
                f"or a DLPack capsule, not {type(obj).__name__}"
            )
        try:
            capsule = dlpack(max_version=MAX_VERSION)
        except TypeError:
            # A pre-2023 producer without the keyword (the array API's
            # recommended fallback). Retry only the keyword-free call.
            capsule = dlpack()
    return _native.put(capsule)


class FromNode:
    """A tensor claimed from Node, consumable once by `np.from_dlpack(x)` or
    `torch.from_dlpack(x)`. Dropped unconsumed, it releases the tensor."""

    __slots__ = ("_capsule", "_device", "_versioned")

    def __init__(self, token):
        capsule, device_type, device_id, versioned = _native.take(token)
        self._capsule = capsule
        self._device = (device_type, device_id)
        self._versioned = versioned

    def __dlpack_device__(self):
        return self._device

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if self._capsule is None:
            raise BufferError("ERR_DLPACK_CAPSULE_CONSUMED: this tensor was already consumed")
        if dl_device is not None and tuple(dl_device) != self._device:
            raise BufferError(
                f"ERR_DLPACK_DEVICE: the tensor lives on {self._device}, not {tuple(dl_device)}"
            )
        if self._device[0] == _DEVICE_CPU and stream is not None:
            raise ValueError("ERR_DLPACK_STREAM: stream must be None for CPU tensors")
        legacy = self._versioned and (max_version is None or max_version[0] < 1)
        if legacy:
            # A consumer of the pre-1.0 struct only (torch before 2.x, ...): a
            # writable tensor is handed over as a legacy struct; a read-only
            # one is refused (BufferError, ERR_DLPACK_READ_ONLY) rather than
            # handed over without its flag. The capsule stays ours on refusal.
            legacy_capsule = _native.as_legacy(self._capsule)
            self._capsule = None
            return legacy_capsule
        capsule, self._capsule = self._capsule, None
        if copy is True:
            # The consumer wants its own memory: numpy makes the copy (and marks it
            # IS_COPIED); Node's tensor is released as soon as it is copied.
            import numpy

            shared = numpy.from_dlpack(_Once(capsule, self._device))
            return shared.__dlpack__(max_version=max_version, copy=True)
        return capsule


class _Once:
    """A capsule already claimed, for numpy.from_dlpack inside FromNode."""

    __slots__ = ("_capsule", "_device")

    def __init__(self, capsule, device):
        self._capsule = capsule
        self._device = device

    def __dlpack_device__(self):
        return self._device

    def __dlpack__(self, **_options):
        capsule, self._capsule = self._capsule, None
        return capsule


def from_node(token):
    """Claims the tensor JS sent with `bridge.toPython(x)` (exactly once)."""
    return FromNode(token)


def to_numpy(token):
    """`np.from_dlpack(from_node(token))`: a numpy array over Node's memory
    (read-only when the tensor was)."""
    import numpy

    return numpy.from_dlpack(FromNode(token))


def release(token):
    """Releases a tensor handed over and never claimed; False if it was."""
    return _native.release(token)


def pending():
    """How many handed-over tensors are not yet claimed (either way)."""
    return _native.pending()
