"""Bad input gets the same error in both faces: the same type (ValueError) and the same
message, which names the argument and the value it got.

One table: each row is a call that builds its inputs in the face it is given, and the
strings its message must contain. Every row goes through ``faces.same_error``, the one
cross-face error check. (Wrongly shaped positions for each layer are in the layer table,
``tests/test_layers.py``.)
"""

from __future__ import annotations

import numpy as np
import pytest

import posenc.keras as pk
import posenc.torch as pt
from faces import same_error, tensor

FACES = {"torch": pt, "keras": pk}
pytestmark = pytest.mark.keras  # every row calls the Keras face too


class On:
    """What a row's call gets: the face's module (``on.m``), tensors made in the face
    (``on.t``), a float32 ``x`` of a shape (``on.x``), and the call that runs a layer."""

    def __init__(self, face: str):
        self.face, self.m = face, FACES[face]

    def t(self, array, dtype=None):
        return tensor(self.face, np.asarray(array), dtype)

    def x(self, *shape):
        return self.t(np.zeros(shape, np.float32))


def row(id_, call, *expected):
    return pytest.param(call, expected, id=id_)


def sinusoidal(**kw):
    return lambda on: on.m.sinusoidal(4, 8, **kw)


def layer(name, *args, **kwargs):
    return lambda on: getattr(on.m, name)(*args, **kwargs)


def learned_call(name, args, x_shape, positions=None, **kwargs):
    def call(on):
        enc = getattr(on.m, name)(*args, **kwargs)
        x = on.x(*x_shape)
        return enc(x) if positions is None else enc(x, positions=on.t(positions))
    return call


BASES = [None, "abc", 1.0, 0.5, -2.0, float("inf"), float("nan")]

ROWS = [
    # dim
    row("sinusoidal-odd-dim", lambda on: on.m.sinusoidal(4, 7), "dim=7", "use dim=8"),
    row("sinusoidal-zero-dim", lambda on: on.m.sinusoidal(4, 0), "dim=0"),
    row("sinusoidal-float-dim", lambda on: on.m.sinusoidal(4, 8.0), "dim=8.0"),
    row("sinusoidal_2d-dim-6", lambda on: on.m.sinusoidal_2d(2, 2, 6), "multiple of 4", "dim=6"),
    row("SinusoidalEncoding-odd-dim", layer("SinusoidalEncoding", 7), "dim=7"),
    row("HybridEncoding-odd-dim", layer("HybridEncoding", 16, 5), "dim=5"),
    row("ContinuousTimeEncoding-odd-dim", layer("ContinuousTimeEncoding", 7), "dim=7"),
    row("MultimodalEncoding-odd-dim",
        layer("MultimodalEncoding", 7, num_modalities=2, max_len=4, mode="shared"), "dim=7"),
    row("Time2Vec-zero-dim", layer("Time2Vec", 0), "dim=0"),
    row("hierarchical-dim", lambda on: on.m.hierarchical(on.t([[0, 1, -1]]), 9, max_depth=3),
        "dim=9", "max_depth"),
    # base
    *[row(f"sinusoidal-base={b!r}", sinusoidal(base=b), f"base={b!r}") for b in BASES],
    *[row(f"SinusoidalEncoding-base={b!r}", layer("SinusoidalEncoding", 8, base=b),
          f"base={b!r}") for b in BASES],
    *[row(f"sinusoidal_2d-base={b!r}", lambda on, b=b: on.m.sinusoidal_2d(2, 2, 8, base=b),
          f"base={b!r}") for b in (None, "abc", 1.0)],
    *[row(f"HybridEncoding-base={b!r}", layer("HybridEncoding", 16, 4, base=b), f"base={b!r}")
      for b in (None, "abc", 1.0)],
    *[row(f"ContinuousTimeEncoding-base={b!r}", layer("ContinuousTimeEncoding", 8, base=b),
          f"base={b!r}") for b in (None, "abc", 1.0)],
    row("hierarchical-base=None",
        lambda on: on.m.hierarchical(on.t([[0, 1, -1]]), 12, max_depth=3, base=None),
        "base=None"),
    # layouts and modes
    row("sinusoidal-layout", sinusoidal(layout="half"), "layout='half'"),
    row("sinusoidal_2d-layout", lambda on: on.m.sinusoidal_2d(2, 2, 8, layout="half"),
        "layout='half'"),
    row("SinusoidalEncoding-layout", layer("SinusoidalEncoding", 8, layout="half"),
        "layout='half'"),
    row("HybridEncoding-layout", layer("HybridEncoding", 16, 4, layout="half"), "layout='half'"),
    row("ContinuousTimeEncoding-layout", layer("ContinuousTimeEncoding", 8, layout="half"),
        "layout='half'"),
    row("resize_table-mode", lambda on: on.m.resize_table(on.x(17, 4), 5, mode="bicubic"),
        "mode='bicubic'"),
    row("resize_table_2d-mode",
        lambda on: on.m.resize_table_2d(on.x(17, 4), (4, 4), (5, 5), prefix_tokens=1,
                                        mode="linear"), "mode='linear'"),
    row("MultimodalEncoding-mode",
        layer("MultimodalEncoding", 8, num_modalities=2, max_len=4, mode="concat"),
        "mode='concat'"),
    # lengths that are not positive integers
    *[row(f"sinusoidal-positions={n!r}", lambda on, n=n: on.m.sinusoidal(n, 8),
          f"positions={n!r}") for n in (0, -3)],
    *[row(f"sinusoidal_2d-height={n!r}", lambda on, n=n: on.m.sinusoidal_2d(n, 2, 8),
          f"height={n!r}") for n in (0, -1, 2.5, "2")],
    row("sinusoidal_2d-width=0", lambda on: on.m.sinusoidal_2d(2, 0, 8), "width=0"),
    *[row(f"LearnedEncoding-max_len={n!r}", layer("LearnedEncoding", n, 4), f"max_len={n!r}")
      for n in (0, -2, 8.0, "8")],
    row("LearnedEncoding-dim=-1", layer("LearnedEncoding", 8, -1), "dim=-1"),
    row("HybridEncoding-max_len=-2", layer("HybridEncoding", -2, 4), "max_len=-2"),
    row("LowRankEncoding-max_len=2.5", layer("LowRankEncoding", 2.5, 4, rank=1), "max_len=2.5"),
    row("MultimodalEncoding-max_len=0",
        layer("MultimodalEncoding", 8, num_modalities=2, max_len=0), "max_len=0"),
    row("MultimodalEncoding-num_modalities=0",
        layer("MultimodalEncoding", 8, num_modalities=0, max_len=4), "num_modalities=0"),
    row("HierarchicalEncoding-max_children=0", layer("HierarchicalEncoding", 2, 0, 8),
        "max_children=0"),
    *[row(f"resize_table-new_length={n!r}",
          lambda on, n=n: on.m.resize_table(on.x(17, 4), n), f"new_length={n!r}")
      for n in (0, -4, 5.0)],
    row("resize_table_2d-new_hw", lambda on: on.m.resize_table_2d(on.x(17, 4), (4, 4), (0, 5),
                                                                  prefix_tokens=1),
        "new_hw=(0, 5)"),
    row("resize_table_2d-prefix_tokens", lambda on: on.m.resize_table_2d(
        on.x(17, 4), (4, 4), (5, 5), prefix_tokens=-1), "prefix_tokens=-1"),
    row("LearnedEncoding.encoding-0", lambda on: on.m.LearnedEncoding(8, 4).encoding(0),
        "positions=0"),
    # other constructor arguments
    *[row(f"LearnedEncoding-init_std={v!r}", layer("LearnedEncoding", 8, 4, init_std=v),
          f"init_std={v!r}") for v in (0.0, -0.02, float("nan"))],
    row("HybridEncoding-scale=nan", layer("HybridEncoding", 16, 4, scale=float("nan")),
        "scale=nan"),
    *[row(f"LowRankEncoding-rank={r!r}", layer("LowRankEncoding", 32, 16, rank=r),
          f"rank={r!r}") for r in (0, 17, 2.0)],
    *[row(f"ContinuousTimeEncoding-time_scale={v!r}",
          layer("ContinuousTimeEncoding", 8, time_scale=v), f"time_scale={v!r}")
      for v in (0.0, -1.0, float("inf"))],
    # rates
    *[row(f"{cls}-rate={r!r}", layer(cls, r), f"rate={r!r}")
      for cls in ("EncodingDropout", "ChannelDropout") for r in (-0.1, 1.0, 1.5, "0.1")],
    row("GaussianNoise-std=-0.1", layer("GaussianNoise", -0.1), "std=-0.1"),
    row("EncodingDropout-seed=1.5", layer("EncodingDropout", 0.1, seed=1.5), "seed=1.5"),
    *[row(f"RegularizedEncoding-{name}={value!r}",
          lambda on, name=name, value=value: on.m.RegularizedEncoding(
              on.m.SinusoidalEncoding(8), **{name: value}), f"{name}={value!r}")
      for name, value in (("dropout", -0.1), ("channel_dropout", 1.0), ("noise_std", -1.0),
                          ("seed", -1))],
    # ranks and widths of x
    row("SinusoidalEncoding-rank-1-x", lambda on: on.m.SinusoidalEncoding(8)(on.x(8)),
        "x.shape=(8,)", "rank 1"),
    row("LearnedEncoding-rank-1-x", lambda on: on.m.LearnedEncoding(8, 4)(on.x(4)),
        "x.shape=(4,)"),
    row("SinusoidalEncoding-width", lambda on: on.m.SinusoidalEncoding(8)(on.x(2, 3, 6)),
        "dim=8", "x.shape=(2, 3, 6)"),
    row("LowRankEncoding-width", lambda on: on.m.LowRankEncoding(8, 16, rank=2)(on.x(1, 3, 8)),
        "dim=16", "x.shape=(1, 3, 8)"),
    row("EncodingDropout-rank-1", lambda on: _train(on, on.m.EncodingDropout(0.1), on.x(4)),
        "shape (4,)"),
    row("resize_table-rank-1", lambda on: on.m.resize_table(on.x(17), 5), "shape (17,)"),
    row("resize_table_2d-rank-3", lambda on: on.m.resize_table_2d(on.x(4, 4, 4), (4, 4), (5, 5)),
        "rank 2"),
    row("resize_table_2d-rows", lambda on: on.m.resize_table_2d(on.x(17, 4), (4, 4), (5, 5)),
        "17 rows", "prefix_tokens=0"),
    row("hierarchical-depth", lambda on: on.m.hierarchical(on.t([[0, 1]]), 12, max_depth=3),
        "max_depth"),
    # sequences longer than a table, positions outside it
    row("LearnedEncoding-too-long", learned_call("LearnedEncoding", (20, 4), (2, 21, 4)),
        "sequence length 21", "max_len=20"),
    row("HybridEncoding-too-long", learned_call("HybridEncoding", (16, 4), (1, 17, 4)),
        "sequence length 17", "max_len=16"),
    row("LowRankEncoding-too-long", learned_call("LowRankEncoding", (8, 16), (1, 9, 16), rank=2),
        "sequence length 9", "max_len=8"),
    row("MultimodalEncoding-too-long", lambda on: on.m.MultimodalEncoding(
        8, num_modalities=2, max_len=4, mode="per_modality")(on.x(1, 5, 8), on.t(np.zeros(5, np.int32))),
        "sequence length 5", "max_len=4"),
    row("LearnedEncoding.encoding-too-long", lambda on: on.m.LearnedEncoding(20, 4).encoding(30),
        "sequence length 30", "max_len=20"),
    row("LearnedEncoding-position-20", learned_call("LearnedEncoding", (20, 4), (1, 2, 4),
                                                    positions=[2, 20]), "20", "max_len=20"),
    row("LearnedEncoding-position--1", lambda on: on.m.LearnedEncoding(20, 4).encoding(
        on.t([[-1, 3]])), "-1"),
    row("LowRankEncoding-position-8", lambda on: on.m.LowRankEncoding(8, 16, rank=2).encoding(
        on.t([0, 8])), "8"),
    row("HierarchicalEncoding-child", lambda on: on.m.HierarchicalEncoding(2, 3, 8)(
        on.x(1, 2, 8), on.t([[0, 3], [1, -1]])), "child index 3", "max_children=3"),
    row("MultimodalEncoding-ids", lambda on: on.m.MultimodalEncoding(
        8, num_modalities=2, max_len=4, mode="per_modality")(on.x(1, 3, 8), on.t([0, 1, 2])),
        "modality_ids", "num_modalities=3"),
    # positions and indices of the wrong dtype
    row("sinusoidal-bool-positions", lambda on: on.m.sinusoidal(on.t([True, False, True]), 8),
        "dtype bool"),
    *[row(f"{cls}-bool-positions", lambda on, cls=cls, args=args, kw=kw: getattr(on.m, cls)(
        *args, **kw)(on.x(1, 3, 8), positions=on.t([True, False, True])), "dtype bool")
      for cls, args, kw in (("SinusoidalEncoding", (8,), {}), ("LearnedEncoding", (8, 8), {}),
                            ("HybridEncoding", (8, 8), {}), ("LowRankEncoding", (4, 8),
                                                              {"rank": 2}))],
    row("RegularizedEncoding-bool-positions", lambda on: on.m.RegularizedEncoding(
        on.m.SinusoidalEncoding(8))(on.x(1, 3, 8), positions=on.t([True, False, True])),
        "dtype bool"),
    *[row(f"{cls}-bool-timestamps", lambda on, cls=cls: getattr(on.m, cls)(8)(
        on.x(1, 3, 8), on.t([True, False, True])), "timestamps", "dtype bool")
      for cls in ("ContinuousTimeEncoding", "Time2Vec")],
    row("HierarchicalEncoding-bool-paths", lambda on: on.m.HierarchicalEncoding(3, 2, 8)(
        on.x(1, 3, 8), on.t(np.ones((3, 3), bool))), "paths", "dtype bool"),
    row("MultimodalEncoding-bool-ids", lambda on: on.m.MultimodalEncoding(
        8, num_modalities=3, max_len=4)(on.x(1, 3, 8), on.t([True, False, True])),
        "modality_ids", "dtype bool"),
    row("LearnedEncoding-float-positions", learned_call("LearnedEncoding", (8, 4), (1, 2, 4),
                                                        positions=np.float32([0.0, 1.0])),
        "positions", "dtype float32"),
    row("MultimodalEncoding-float-positions", lambda on: on.m.MultimodalEncoding(
        8, num_modalities=2, max_len=4, mode="per_modality")(
        on.x(1, 3, 8), on.t([0, 1, 1]), on.t(np.float32([0, 1, 2]))), "positions",
        "dtype float32"),
    row("resize_table-int-table", lambda on: on.m.resize_table(on.t(np.arange(8).reshape(4, 2),
                                                                    "int32"), 6),
        "dtype int32"),
    *[row(f"{cls}-int-encoding", lambda on, cls=cls: _train(
        on, getattr(on.m, cls)(0.5, seed=0), on.t(np.ones((2, 3, 4), np.int32))), "dtype int32")
      for cls in ("EncodingDropout", "ChannelDropout", "GaussianNoise")],
    # odd values of the right names
    row("sinusoidal-dim=True", lambda on: on.m.sinusoidal(4, True), "dim=True"),
    row("sinusoidal-layout=None", sinusoidal(layout=None), "layout=None"),
    row("resize_table-mode=None", lambda on: on.m.resize_table(on.x(17, 4), 5, mode=None),
        "mode=None"),
    row("resize_table_2d-prefix_tokens=1.5", lambda on: on.m.resize_table_2d(
        on.x(17, 4), (4, 4), (5, 5), prefix_tokens=1.5), "prefix_tokens=1.5"),
    row("MultimodalEncoding-mode=None",
        layer("MultimodalEncoding", 8, num_modalities=2, max_len=4, mode=None), "mode=None"),
    row("GaussianNoise-std=nan", layer("GaussianNoise", float("nan")), "std=nan"),
    row("GaussianNoise-std='0.1'", layer("GaussianNoise", "0.1"), "std='0.1'"),
    *[row(f"EncodingDropout-seed={v!r}", layer("EncodingDropout", 0.1, seed=v), f"seed={v!r}")
      for v in (True, -1)],
    row("ContinuousTimeEncoding-time_scale='1'", layer("ContinuousTimeEncoding", 8,
                                                       time_scale="1"), "time_scale='1'"),
    row("HierarchicalEncoding-max_depth=0", layer("HierarchicalEncoding", 0, 2, 8), "max_depth=0"),
    row("LowRankEncoding-rank=None", layer("LowRankEncoding", 8, 16, rank=None), "rank=None"),
    row("Time2Vec-dim=8.0", layer("Time2Vec", 8.0), "dim=8.0"),
    row("hierarchical-max_depth=0", lambda on: on.m.hierarchical(on.t([[0]]), 12, max_depth=0),
        "max_depth=0"),
    row("modality_positions-num_modalities=0", lambda on: on.m.modality_positions(
        on.t([0, 1]), num_modalities=0), "num_modalities=0"),
    row("LearnedEncoding.encoding-float", lambda on: on.m.LearnedEncoding(8, 4).encoding(2.5),
        "dtype float32"),
    # wrapping something that has no encoding
    row("RegularizedEncoding-not-absolute", lambda on: on.m.RegularizedEncoding(
        _not_an_encoding(on.face)), "encoding must be an absolute"),
]


def _train(on, layer, value):
    if on.face == "torch":
        return layer.train()(value)
    return layer(value, training=True)


def _not_an_encoding(face):
    if face == "torch":
        import torch
        return torch.nn.Identity()
    import keras
    return keras.layers.Identity()


@pytest.mark.parametrize("call, expected", ROWS)
def test_same_error_in_both_faces(call, expected):
    message = same_error(FACES, lambda face: call(On(face)))
    for text in expected:
        assert text in message, f"{text!r} is not in the message: {message}"


def test_row_ids_are_unique():
    ids = [p.id for p in ROWS]
    assert len(ids) == len(set(ids))
