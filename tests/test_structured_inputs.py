"""Inputs at the edges for the encodings of times, trees, modalities: small index dtypes,
the torch data checks, per-token arguments that do not match x. (The generic checks,
parity, round trips, shapes, training, precision and compilers, are in
tests/test_layers.py.)"""

import re

import keras
import numpy as np
import pytest
import torch

import posenc.keras as ks
import posenc.torch as ts
from posenc.interop import copy_weights
from posenc.torch._util import can_inspect
from faces import np32, same_error, tensor

FACES = {"torch": ts, "keras": ks}


# --------------------------------------------------------------------------- cases

DIM = 12


CASES = {
    "continuous_time": ("ContinuousTimeEncoding", (DIM,), {"time_scale": 0.5}),
    "time2vec": ("Time2Vec", (DIM,), {}),
    "hierarchical": ("HierarchicalEncoding", (3, 4, DIM), {}),
    "multimodal_shared": ("MultimodalEncoding", (DIM,),
                          {"num_modalities": 3, "max_len": 8, "mode": "shared"}),
    "multimodal_per_modality": ("MultimodalEncoding", (DIM,),
                                {"num_modalities": 3, "max_len": 8, "mode": "per_modality"}),
    "multimodal_shared_offset": ("MultimodalEncoding", (DIM,),
                                 {"num_modalities": 3, "max_len": 8}),
}


def make(face, case):
    name, args, kwargs = CASES[case]
    return getattr(FACES[face], name)(*args, **kwargs)


def run(face, layer, x, extras):
    return layer(tensor(face, x), *[tensor(face, e) for e in extras])


# --------------------------------------------------------------------------- inputs at the edges

INDEX_DTYPES = ["uint8", "int8", "int16", "uint32", "int32", "int64"]


def _index_calls(face, signed):
    """Every call that indexes with integer tensors: name -> (function of a dtype)."""
    mod = FACES[face]
    pad = -1 if signed else 2
    # max_depth * max_children > 255: the flat row index overflows a small dtype
    paths = np.array([[2, 99, pad], [1, 0, 3], [0, pad, pad] if signed else [0, 5, 7]])
    tree = mod.HierarchicalEncoding(3, 100, 6)
    low_rank = mod.LowRankEncoding(300, 6, rank=2)
    per = mod.MultimodalEncoding(6, num_modalities=3, max_len=8, mode="per_modality")
    offset = mod.MultimodalEncoding(6, num_modalities=3, max_len=8)
    ids, pos = np.array([1, 0, 2]), np.array([1, 0, 7])
    x = tensor(face, np.zeros((1, 3, 6), np.float32))

    def t(array, dtype):
        return tensor(face, array, dtype)

    return {
        "hierarchical": lambda d: mod.hierarchical(t(paths, d), 6, max_depth=3),
        "HierarchicalEncoding": lambda d: tree(x, t(paths, d)),
        "LowRankEncoding": lambda d: low_rank(x, t(np.array([100, 0, 127] if signed
                                                            else [200, 0, 255]), d)),
        "modality_positions": lambda d: mod.modality_positions(t(ids, d), num_modalities=3),
        "per_modality": lambda d: per(x, t(ids, d), t(pos, d)),
        "shared_offset": lambda d: offset(x, t(ids, d), t(pos, d)),
    }


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("signed", [True, False])
def test_small_integer_index_dtypes_pick_the_same_rows(face, signed):
    # uint8 must not be read as a boolean mask (torch), int8/uint8 must not overflow the
    # flat row index, and every backend gathers with every integer dtype.
    calls = _index_calls(face, signed)
    for name, call in calls.items():
        want = np32(call("int64"))
        for dtype in INDEX_DTYPES:
            if dtype.startswith("u") == signed:  # -1 padding needs a signed dtype
                continue
            np.testing.assert_array_equal(np32(call(dtype)), want, err_msg=f"{name} {dtype}")


@pytest.mark.keras
def test_faces_agree_on_small_integer_indices():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 3, 6)).astype(np.float32)
    pairs = [(ts.LowRankEncoding(300, 6, rank=2), ks.LowRankEncoding(300, 6, rank=2),
              [np.array([[3, 200, 255], [0, 1, 2]], np.uint8)]),
             (ts.HierarchicalEncoding(3, 100, 6), ks.HierarchicalEncoding(3, 100, 6),
              [np.array([[2, 99, -1], [1, 0, 3], [0, -1, -1]], np.int8)])]
    for source, target, extras in pairs:
        copy_weights(source, target)
        np.testing.assert_allclose(np32(run("torch", source, x, extras)),
                                   np32(run("keras", target, x, extras)), atol=1e-6)


def test_torch_data_checks_read_cpu_tensors_only():
    # reading a min/max back from an accelerator stops the host at every forward
    from types import SimpleNamespace

    on_gpu = SimpleNamespace(numel=lambda: 3, device=torch.device("cuda"))
    assert not can_inspect(on_gpu)
    assert can_inspect(torch.zeros(3))
    assert not can_inspect(torch.zeros(0))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_torch_forward_on_cuda_never_syncs():
    dev = torch.device("cuda")
    x = torch.zeros(2, 3, 12, device=dev)
    ids = torch.tensor([0, 1, 2], device=dev)
    paths = torch.tensor([[0, -1, -1], [1, 2, -1], [3, 0, 1]], device=dev)
    times = torch.tensor([0.0, 0.5, 2.0], device=dev)
    calls = [(ts.ContinuousTimeEncoding(12), (times,)), (ts.Time2Vec(12), (times,)),
             (ts.HierarchicalEncoding(3, 4, 12), (paths,)),
             (ts.MultimodalEncoding(12, num_modalities=3, max_len=8, mode="per_modality"),
              (ids, ids)),
             (ts.MultimodalEncoding(12, num_modalities=3, max_len=8), (ids, ids)),
             (ts.LowRankEncoding(8, 12, rank=2), ()), (ts.LowRankEncoding(8, 12, rank=2), (ids,))]
    for module, extras in calls:
        module.to(dev)
        module(x, *extras)                       # warm-up (caches, lazy init)
        torch.cuda.set_sync_debug_mode("error")
        try:
            out = module(x, *extras)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        assert out.device.type == "cuda"


BAD_SHAPES = {
    "continuous_time": ("timestamps", "float32", [(4,), (3, 3), (2, 1), (2, 3, 1), (1, 2, 3)]),
    "time2vec": ("timestamps", "float32", [(4,), (3, 3), (2, 1), (2, 3, 1)]),
    "hierarchical": ("paths", "int32", [(4, 3), (3, 3, 3), (2, 1, 3), (3,)]),
    "multimodal_shared": ("modality_ids", "int32", [(4,), (3, 3), (2, 1), (1, 2, 3)]),
    "multimodal_per_modality": ("modality_ids", "int32", [(4,), (3, 3), (2, 1)]),
    "multimodal_shared_offset": ("modality_ids", "int32", [(4,), (3, 3), (2, 1)]),
}


@pytest.mark.parametrize("case", sorted(BAD_SHAPES))
@pytest.mark.keras
def test_per_token_arguments_must_match_x(case):
    name, dtype, shapes = BAD_SHAPES[case]
    x = np.zeros((2, 3, DIM), np.float32)
    for shape in shapes:
        arg = np.zeros(shape, dtype)
        message = same_error(FACES, lambda face: make(face, case)(tensor(face, x), tensor(face, arg)))
        assert re.search(rf"{name} must have shape .* matching x's \(\.\.\., seq, dim\), got "
                         + re.escape(f"{name}.shape={shape} for x.shape=(2, 3, {DIM})"), message)
