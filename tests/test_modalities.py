"""Several modalities in one sequence (modality_positions, MultimodalEncoding): the modes
and their registry."""

import keras
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc.keras as ks
import posenc.torch as ts
from posenc.keras.sinusoidal import sinusoidal_2d as k_sinusoidal_2d
from posenc.torch.sinusoidal import sinusoidal_2d as t_sinusoidal_2d
from faces import np32, same_error, tensor
import reference as ref

FACES = {"torch": ts, "keras": ks}


# --------------------------------------------------------------------------- helpers

def ref_modality_positions(ids):
    ids = np.asarray(ids)
    out = np.zeros_like(ids)
    for index in np.ndindex(ids.shape[:-1]):
        seen = {}
        for i, m in enumerate(ids[index]):
            out[index + (i,)] = seen.get(m, 0)
            seen[m] = seen.get(m, 0) + 1
    return out


# --------------------------------------------------------------------------- modalities

@settings(max_examples=25, deadline=None)
@given(lead=st.lists(st.integers(1, 3), min_size=0, max_size=2), seq=st.integers(1, 12),
       num_modalities=st.integers(1, 4), seed=st.integers(0, 2**16))
@pytest.mark.keras
def test_modality_positions_count_within_each_modality(lead, seq, num_modalities, seed):
    ids = np.random.default_rng(seed).integers(0, num_modalities, size=(*lead, seq))
    expected = ref_modality_positions(ids)
    for face in FACES:
        for kwargs in ({}, {"num_modalities": num_modalities}):
            out = FACES[face].modality_positions(tensor(face, ids), **kwargs)
            assert tuple(out.shape) == ids.shape
            np.testing.assert_array_equal(np.asarray(np32(out), dtype=np.int64), expected)


@pytest.mark.parametrize("face", FACES)
def test_modality_positions_example(face):
    fn = FACES[face].modality_positions
    ids = tensor(face, np.array([0, 0, 1, 1, 1, 0]))
    np.testing.assert_array_equal(np32(fn(ids)), [0, 1, 0, 1, 2, 2])
    np.testing.assert_array_equal(np32(fn(tensor(face, np.array([7, -3, 7])))), [0, 0, 1])


@pytest.mark.parametrize("face", FACES)
def test_multimodal_modes(face):
    mod = FACES[face]
    rng = np.random.default_rng(0)
    ids = np.array([[0, 0, 1, 1, 2, 0], [2, 2, 2, 1, 0, 0]])
    pos = ref_modality_positions(ids)
    x = rng.normal(size=(2, 6, 8)).astype(np.float32)
    sin = ref.sinusoidal(pos, 8)
    shared = mod.MultimodalEncoding(8, num_modalities=3, max_len=4, mode="shared")
    np.testing.assert_allclose(np32(shared(tensor(face, x), tensor(face, ids), tensor(face, pos))),
                               x + sin, atol=1e-6)
    # the default positions are 0 .. seq-1 over the whole sequence, whatever the modality
    # (the ids are unused in this mode, so P has the positions' shape)
    np.testing.assert_allclose(np32(shared.encoding(tensor(face, ids))),
                               ref.sinusoidal(np.arange(6), 8), atol=1e-6)

    per = mod.MultimodalEncoding(8, num_modalities=3, max_len=4, mode="per_modality")
    table = np32(per.modality_tables)
    np.testing.assert_allclose(np32(per.encoding(tensor(face, ids), tensor(face, pos))),
                               table[ids, pos], atol=1e-7)

    offset = mod.MultimodalEncoding(8, num_modalities=3, max_len=4)
    emb = np32(offset.modality_embedding)
    np.testing.assert_allclose(np32(offset.encoding(tensor(face, ids), tensor(face, pos))),
                               sin + emb[ids], atol=1e-6)


@pytest.mark.parametrize("face", FACES)
def test_multimodal_weights_per_mode(face):
    def names(layer):
        if face == "torch":
            return {n: tuple(p.shape) for n, p in layer.named_parameters()}
        return {w.path.split("/")[-1]: tuple(w.shape) for w in layer.weights}

    def make_mm(mode):
        return FACES[face].MultimodalEncoding(8, num_modalities=3, max_len=5, mode=mode)

    assert names(make_mm("shared")) == {}
    assert names(make_mm("per_modality")) == {"modality_tables": (3, 5, 8)}
    assert names(make_mm("shared_offset")) == {"modality_embedding": (3, 8)}


@pytest.mark.parametrize("face", FACES)
def test_per_modality_mode_takes_an_odd_dim(face):
    # no sinusoid in this mode, so nothing needs sine/cosine pairs
    enc = FACES[face].MultimodalEncoding(7, num_modalities=2, max_len=4, mode="per_modality")
    ids = np.array([0, 1, 1])
    out = np32(enc(tensor(face, np.zeros((1, 3, 7), np.float32)), tensor(face, ids)))
    np.testing.assert_array_equal(out[0], np32(enc.modality_tables)[ids, np.arange(3)])


@pytest.mark.parametrize("face", FACES)
def test_multimodal_text_and_image_example(face):
    """The docstring's recipe: patches carry a 2D code and share one 1D offset."""
    dim, rows, cols = 16, 3, 4
    rng = np.random.default_rng(0)
    text = rng.normal(size=(2, 5, dim)).astype(np.float32)
    patches = rng.normal(size=(2, rows * cols, dim)).astype(np.float32)
    grid = np32((t_sinusoidal_2d if face == "torch" else k_sinusoidal_2d)(rows, cols, dim))
    x = np.concatenate((text, patches + grid), axis=1)
    ids = np.array([0] * 5 + [1] * rows * cols)
    positions = np.where(ids == 0, np32(FACES[face].modality_positions(tensor(face, ids))), 0)
    enc = FACES[face].MultimodalEncoding(dim, num_modalities=2, max_len=64)
    out = np32(enc(tensor(face, x), tensor(face, ids), tensor(face, positions.astype(np.int64))))
    emb = np32(enc.modality_embedding)
    added = out - x
    np.testing.assert_allclose(added[:, :5], np.broadcast_to(
        ref.sinusoidal(np.arange(5), dim) + emb[0], (2, 5, dim)), atol=1e-6)
    np.testing.assert_allclose(added[:, 5:], np.broadcast_to(ref.sinusoidal(np.asarray(0), dim) + emb[1],
                                                             (2, rows * cols, dim)), atol=1e-6)
    # so the patches differ only by their content and their 2D code
    np.testing.assert_allclose(out[:, 6:] - out[:, 5:6],
                               (patches + grid)[:, 1:] - (patches + grid)[:, :1], atol=1e-5)


# --------------------------------------------------------------------------- the registry of modes

def test_multimodal_modes_come_from_one_registry(monkeypatch):
    from posenc.modalities import MULTIMODAL_MODES, MultimodalMode

    for face in FACES:
        for mode, spec in MULTIMODAL_MODES.items():
            enc = FACES[face].MultimodalEncoding(8, num_modalities=3, max_len=4, mode=mode)
            names = ([n for n, _ in enc.named_parameters()] if face == "torch"
                     else [w.path.split("/")[-1] for w in enc.weights])
            assert names == ([spec.table] if spec.table else []), (face, mode)
    # a new mode is one entry: a learned vector per modality, no sinusoid, any dim
    monkeypatch.setitem(MULTIMODAL_MODES, "offset_only", MultimodalMode(
        sinusoid=False, table="modality_embedding",
        table_shape=lambda m, n, d: (m, d), row=lambda ids, pos, max_len: ids))
    ids = np.array([[0, 2, 1]])
    message = same_error(list(FACES), lambda f: FACES[f].MultimodalEncoding(
        8, num_modalities=3, max_len=4, mode="unknown"))
    assert "'offset_only'" in message
    outs = {}
    for face in FACES:
        enc = FACES[face].MultimodalEncoding(7, num_modalities=3, max_len=4, mode="offset_only")
        table = np32(enc.modality_embedding)
        outs[face] = np32(enc.encoding(tensor(face, ids)))
        np.testing.assert_array_equal(outs[face], table[ids])
