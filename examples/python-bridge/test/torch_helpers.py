"""Python side of test/torch_child.mjs: torch 1.13 (Debian's python3-torch), a
DLPack library that only knows the legacy struct: its __dlpack__ takes no
max_version and its from_dlpack calls __dlpack__() without one."""

import gc

import torch

import napi_dlpack_bridge as bridge

keep = {}


def version():
    return torch.__version__


def make(name):
    keep[name] = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    return keep[name].data_ptr()


def to_node(name):
    return bridge.to_node(keep[name])


def values(name):
    return keep[name].reshape(-1).tolist()


def claim(name, token):
    keep[name] = torch.from_dlpack(bridge.from_node(token))
    return {"address": keep[name].data_ptr(), "shape": list(keep[name].shape), "values": keep[name].reshape(-1).tolist()}


def write(name, index, value):
    keep[name].view(-1)[index] = value


def collect():
    return gc.collect()


def drop(name):
    del keep[name]
    gc.collect()
