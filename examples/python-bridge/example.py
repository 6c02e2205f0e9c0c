"""The Python side of example.mjs: numpy works on Node's memory in place, and
hands back an array of its own, both without copying."""

import numpy as np

import napi_dlpack_bridge as bridge


def normalise(token):
    """Scales the image Node sent to [0, 1] in place; returns its address."""
    image = bridge.to_numpy(token)  # float32, same memory as the Node tensor
    image /= image.max()
    return image.ctypes.data


def histogram(token, bins):
    """A numpy-made result for Node: [token, address]."""
    image = bridge.to_numpy(token)
    counts, _edges = np.histogram(image, bins=bins, range=(0.0, 1.0))
    counts = counts.astype(np.int32)
    return [bridge.to_node(counts), counts.ctypes.data]
