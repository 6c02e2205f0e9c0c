"""Python side of bench.mjs."""

import numpy as np

import napi_dlpack_bridge as bridge

arrays = {}


def make(name, nbytes):
    arrays[name] = np.arange(nbytes, dtype=np.uint8)
    return nbytes


def nothing():
    return 0


def export(name):
    """The bridge: a token for fromPython."""
    return bridge.to_node(arrays[name])


def as_bytes(name):
    """The fastest route without the bridge: bytes, which node-calls-python copies into an ArrayBuffer."""
    return arrays[name].tobytes()


def as_list(name):
    """What returning the array itself does: node-calls-python iterates it into a JS array."""
    return arrays[name]


def first_of_token(token):
    """The bridge the other way: numpy over Node's memory."""
    return int(bridge.to_numpy(token)[0])


def first_of_bytes(data):
    """Without the bridge: node-calls-python copied the TypedArray into bytes."""
    return int(np.frombuffer(data, dtype=np.uint8)[0])
