"""Bad input gets the same error in both faces: the same type (ValueError) and the same
message, which names the argument, the value it got and the fix.

One table: each row is a call that builds its inputs in the face it is given, and what
its message must hold (plain substrings, or ``rx(...)`` regular expressions). Every row
goes through ``faces.same_error``, the one cross-face error check. (Wrongly shaped
positions for every layer are in the layer table, ``tests/test_layers.py``.)
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import posenc.keras as pk
import posenc.torch as pt
from faces import same_error, tensor

FACES = {"torch": pt, "keras": pk}
pytestmark = pytest.mark.keras  # every row calls the Keras face too


class rx(str):
    """A regular expression the message must match (``re.search``)."""


class On:
    """What a row's call gets: the face's module (``on.m``), tensors made in the face
    (``on.t``) and zero float32 embeddings of a shape (``on.x``)."""

    def __init__(self, face: str):
        self.face, self.m = face, FACES[face]

    def t(self, array, dtype=None):
        return tensor(self.face, np.asarray(array), dtype)

    def x(self, *shape):
        return self.t(np.zeros(shape, np.float32))

    def train(self, layer, value):
        """Call a regulariser in training mode, as each face does it."""
        if self.face == "torch":
            return layer.train()(value)
        return layer(value, training=True)

    def not_an_encoding(self):
        """A module/layer with no ``encoding(positions)`` method, of the same class name in both."""
        if self.face == "torch":
            import torch

            class Projection(torch.nn.Linear):
                pass

            return Projection(8, 8)
        import keras

        class Projection(keras.layers.Dense):
            pass

        return Projection(8)


def row(id_, call, *expected):
    return pytest.param(call, expected, id=id_)


def make(name, *args, **kwargs):
    """The call that builds ``name(*args, **kwargs)`` in the face."""
    return lambda on: getattr(on.m, name)(*args, **kwargs)


def run(name, args, x_shape, *extras, positions=None, **kwargs):
    """The call that builds ``name`` and runs it on zeros of ``x_shape`` (NumPy extras and
    positions are made in the face)."""
    def call(on):
        enc = getattr(on.m, name)(*args, **kwargs)
        more = {} if positions is None else {"positions": on.t(positions)}
        return enc(on.x(*x_shape), *[on.t(e) for e in extras], **more)
    return call


def encoding(name, args, *values, **kwargs):
    """The call ``name(*args, **kwargs).encoding(*values)``, tensors made in the face (an
    int value stays an int)."""
    def call(on):
        enc = getattr(on.m, name)(*args, **kwargs)
        return enc.encoding(*[v if isinstance(v, int) else on.t(v) for v in values])
    return call


def fn(name, *args, **kwargs):
    """The call ``name(*args, **kwargs)`` of a function; NumPy arrays are made in the face."""
    return lambda on: getattr(on.m, name)(
        *[on.t(a) if isinstance(a, np.ndarray) else a for a in args], **kwargs)


def table(*shape, dtype="float32"):
    return np.zeros(shape, dtype)


BASES = [None, "abc", 1.0, 0.5, -2.0, float("inf"), float("nan")]


def base_error(base):
    """What a bad ``base`` message says: a number refused for its value is not finite or not
    above 1; anything else is not a number."""
    if isinstance(base, float):
        return "base must be a finite number greater than 1"
    return rx(r"base must be a (finite )?number greater than 1")


BOOL = np.array([True, False, True])
PATHS = np.array([[0, 1, -1]])

SINUSOIDAL = [
    row("sinusoidal-odd-dim", fn("sinusoidal", 4, 7),
        rx(r"dim must be a multiple of 2 .*got dim=7; use dim=8")),
    row("sinusoidal-zero-dim", fn("sinusoidal", 4, 0), "dim must be a positive integer, got dim=0"),
    row("sinusoidal-negative-dim", fn("sinusoidal", 4, -3),
        "dim must be a positive integer, got dim=-3"),
    row("sinusoidal-float-dim", fn("sinusoidal", 4, 8.0), "dim=8.0"),
    row("sinusoidal-dim=True", fn("sinusoidal", 4, True), "dim=True"),
    row("SinusoidalEncoding-odd-dim", make("SinusoidalEncoding", 7),
        "dim must be a multiple of 2", "dim=7"),
    row("sinusoidal_2d-dim-6", fn("sinusoidal_2d", 2, 2, 6),
        rx(r"sinusoidal_2d: dim must be a multiple of 4 .*got dim=6")),
    *[row(f"sinusoidal-base={b!r}", fn("sinusoidal", 4, 8, base=b), base_error(b),
          f"base={b!r}") for b in BASES],
    *[row(f"SinusoidalEncoding-base={b!r}", make("SinusoidalEncoding", 8, base=b), base_error(b),
          f"base={b!r}") for b in BASES],
    *[row(f"sinusoidal_2d-base={b!r}", fn("sinusoidal_2d", 2, 2, 8, base=b), base_error(b),
          f"base={b!r}") for b in (None, "abc", 1.0)],
    row("sinusoidal-layout", fn("sinusoidal", 4, 8, layout="half"),
        "layout must be one of 'interleaved', 'concat', got layout='half'"),
    row("sinusoidal-layout=None", fn("sinusoidal", 4, 8, layout=None), "layout=None"),
    row("sinusoidal_2d-layout", fn("sinusoidal_2d", 2, 2, 8, layout="half"),
        "layout must be one of", "layout='half'"),
    row("SinusoidalEncoding-layout", make("SinusoidalEncoding", 8, layout="half"),
        "layout must be one of", "layout='half'"),
    *[row(f"sinusoidal-positions={n!r}", fn("sinusoidal", n, 8),
          f"positions must be a positive integer, got positions={n}") for n in (0, -3)],
    *[row(f"sinusoidal_2d-height={n!r}", fn("sinusoidal_2d", n, 2, 8),
          f"height must be a positive integer, got height={n!r}") for n in (0, -3, 2.5, "2")],
    *[row(f"sinusoidal_2d-width={n!r}", fn("sinusoidal_2d", 2, n, 8),
          f"width must be a positive integer, got width={n}") for n in (0, -3)],
    row("sinusoidal-bool-positions", fn("sinusoidal", BOOL, 8),
        "positions must be integers or floats, got dtype bool; a boolean tensor is a mask"),
    row("SinusoidalEncoding-bool-positions", run("SinusoidalEncoding", (8,), (1, 3, 8),
                                                 positions=BOOL),
        "got dtype bool; a boolean tensor is a mask"),
    row("SinusoidalEncoding-rank-1-x", lambda on: on.m.SinusoidalEncoding(8)(on.x(8)),
        "got x.shape=(8,) (rank 1); add a sequence axis"),
    row("SinusoidalEncoding-width", run("SinusoidalEncoding", (8,), (2, 3, 6)),
        "x must be (..., seq, dim) with dim=8, got x.shape=(2, 3, 6); build the encoding with "
        "dim=6"),
]

LEARNED = [
    row("resize_table-rank-1", fn("resize_table", table(17), 5),
        "resize_table: table must have rank 2, got shape (17,) (rank 1); a table is (length, dim)"),
    *[row(f"resize_table-new_length={n!r}", fn("resize_table", table(17, 4), n),
          f"new_length must be a positive integer, got new_length={n}") for n in (0, -4, 5.0)],
    row("resize_table-mode", fn("resize_table", table(17, 4), 5, mode="bicubic"),
        "resize_table: mode must be one of 'linear', 'nearest', 'cubic', got mode='bicubic'; "
        "'bicubic' is a mode of resize_table_2d"),
    row("resize_table-mode=None", fn("resize_table", table(17, 4), 5, mode=None), "mode=None"),
    row("resize_table-int-table", fn("resize_table", table(4, 2, dtype="int32"), 6),
        "resize_table: table must be a floating-point tensor, got dtype int32"),
    row("resize_table_2d-int-table", fn("resize_table_2d", table(4, 2, dtype="int32"), (2, 2),
                                        (3, 3)),
        "resize_table_2d: table must be a floating-point tensor, got dtype int32"),
    row("resize_table_2d-mode", fn("resize_table_2d", table(17, 4), (4, 4), (5, 5),
                                   prefix_tokens=1, mode="linear"),
        rx(r"resize_table_2d: mode must be one of .*got mode='linear'")),
    row("resize_table_2d-rows", fn("resize_table_2d", table(17, 4), (4, 4), (5, 5)),
        rx(r"the table has 17 rows but prefix_tokens=0 plus old_hw=\(4, 4\) make 16; .*CLS "
           r"token\): prefix_tokens=1 would fit old_hw=\(4, 4\)\.$")),
    row("resize_table_2d-rows-both-fixes", fn("resize_table_2d", table(17, 4), (3, 3), (5, 5),
                                              prefix_tokens=1),
        rx(r"the table has 17 rows but prefix_tokens=1 plus old_hw=\(3, 3\) make 10; "
           r".*prefix_tokens=8 would fit old_hw=\(3, 3\); old_hw=\(4, 4\) would fit "
           r"prefix_tokens=1")),
    row("resize_table_2d-new_hw", fn("resize_table_2d", table(17, 4), (4, 4), (0, 5),
                                     prefix_tokens=1),
        "new_hw must be a (height, width) pair of positive integers, got new_hw=(0, 5)"),
    row("resize_table_2d-old_hw", fn("resize_table_2d", table(17, 4), (16,), (5, 5),
                                     prefix_tokens=1),
        "old_hw must be a (height, width) pair"),
    row("resize_table_2d-prefix_tokens=-1", fn("resize_table_2d", table(17, 4), (4, 4), (5, 5),
                                               prefix_tokens=-1),
        "prefix_tokens must be a non-negative integer, got prefix_tokens=-1"),
    row("resize_table_2d-prefix_tokens=1.5", fn("resize_table_2d", table(17, 4), (4, 4), (5, 5),
                                                prefix_tokens=1.5), "prefix_tokens=1.5"),
    row("resize_table_2d-rank-3", fn("resize_table_2d", table(4, 4, 4), (4, 4), (5, 5)),
        "resize_table_2d: table must have rank 2"),
    row("resize_table_2d-antialias", fn("resize_table_2d", table(17, 4), (4, 4), (5, 5),
                                        prefix_tokens=1, antialias="yes"),
        "resize_table_2d: antialias must be True or False, got antialias='yes'."),
    *[row(f"LearnedEncoding-max_len={n!r}", make("LearnedEncoding", n, 4),
          f"max_len must be a positive integer, got max_len={n!r}") for n in (0, -2, 8.0, "8")],
    row("LearnedEncoding-dim=-1", make("LearnedEncoding", 8, -1),
        "dim must be a positive integer, got dim=-1"),
    *[row(f"LearnedEncoding-init_std={v!r}", make("LearnedEncoding", 8, 4, init_std=v),
          "init_std must be a finite number greater than 0", f"init_std={v!r}")
      for v in (0.0, -0.02, float("nan"))],
    row("LearnedEncoding-width", run("LearnedEncoding", (8, 4), (1, 3, 5)),
        "LearnedEncoding: x must be (..., seq, dim) with dim=4, got x.shape=(1, 3, 5)"),
    row("LearnedEncoding-rank-1-x", lambda on: on.m.LearnedEncoding(8, 4)(on.x(4)),
        "x.shape=(4,)"),
    row("LearnedEncoding-too-long", run("LearnedEncoding", (20, 4), (2, 21, 4)),
        "LearnedEncoding: sequence length 21 exceeds the table's max_len=20; build it with a "
        "larger max_len, or stretch a trained table with enc.resized(21)"),
    row("LearnedEncoding.encoding-too-long", encoding("LearnedEncoding", (20, 4), 30),
        "sequence length 30 exceeds the table's max_len=20"),
    row("LearnedEncoding-position-20", run("LearnedEncoding", (20, 4), (1, 2, 4),
                                           positions=np.array([2, 20])),
        rx(r"positions must lie in 0 \.\. 19, got 20 \(max_len=20\); .*enc.resized\(21\)"
           r".*enc.extended\(21\)")),
    row("LearnedEncoding.encoding-negative", encoding("LearnedEncoding", (20, 4),
                                                      np.array([[-1, 3]])),
        "positions must lie in 0 .. 19, got -1 (max_len=20)"),
    row("LearnedEncoding.encoding-negative-int8", lambda on: on.m.LearnedEncoding(40, 8).encoding(
        on.t([-1, 3], "int8")), "positions must lie in 0 .. 39, got -1 (max_len=40)"),
    row("LearnedEncoding-float-positions", run("LearnedEncoding", (8, 4), (1, 2, 4),
                                               positions=np.float32([0.0, 1.0])),
        "LearnedEncoding: positions index a table, so they must be integers, got dtype float32; "
        "round them to integers"),
    row("LearnedEncoding.encoding-float", encoding("LearnedEncoding", (8, 4), np.float32(2.5)),
        "dtype float32"),
    row("LearnedEncoding.encoding-0", encoding("LearnedEncoding", (8, 4), 0),
        "positions must be a positive integer, got positions=0"),
    row("LearnedEncoding-bool-positions", run("LearnedEncoding", (8, 8), (1, 3, 8), positions=BOOL),
        "dtype bool"),
    row("HybridEncoding-odd-dim", make("HybridEncoding", 16, 5),
        rx(r"HybridEncoding: dim must be a multiple of 2 .*dim=5")),
    *[row(f"HybridEncoding-base={b!r}", make("HybridEncoding", 16, 4, base=b), base_error(b),
          f"base={b!r}") for b in (None, "abc", 1.0)],
    row("HybridEncoding-layout", make("HybridEncoding", 16, 4, layout="half"),
        "layout must be one of", "layout='half'"),
    row("HybridEncoding-scale=nan", make("HybridEncoding", 16, 4, scale=float("nan")),
        "scale must be a finite number, got scale=nan"),
    row("HybridEncoding-max_len=-2", make("HybridEncoding", -2, 4),
        "max_len must be a positive integer, got max_len=-2"),
    row("HybridEncoding-too-long", run("HybridEncoding", (16, 4), (1, 17, 4)),
        "HybridEncoding: sequence length 17 exceeds the table's max_len=16; build it with a "
        "larger max_len, or stretch a trained offset table with resize_table(enc.offset, 17)"),
    row("HybridEncoding.encoding-position-16", encoding("HybridEncoding", (16, 4), np.array([16])),
        "HybridEncoding: positions must lie in 0 .. 15"),
    row("HybridEncoding-width", run("HybridEncoding", (16, 4), (1, 3, 8)),
        "HybridEncoding: x must be (..., seq, dim) with dim=4"),
    row("HybridEncoding-bool-positions", run("HybridEncoding", (8, 8), (1, 3, 8), positions=BOOL),
        "dtype bool"),
]

REGULARIZATION = [
    *[row(f"{cls}-rate={r!r}", make(cls, r),
          rx(rf"{cls}: rate must be a finite number in \[0, 1\).*got rate={r}.*0 to switch it off"))
      for cls in ("EncodingDropout", "ChannelDropout") for r in (1.0, 1.5, -0.1)],
    *[row(f"{cls}-rate='0.1'", make(cls, "0.1"), "rate must be a finite number in [0, 1)", "rate='0.1'")
      for cls in ("EncodingDropout", "ChannelDropout")],
    *[row(f"{cls}-rate=nan", make(cls, float("nan")), "rate must be a finite number in [0, 1)", "rate=nan")
      for cls in ("EncodingDropout", "ChannelDropout")],
    row("GaussianNoise-std=-0.1", make("GaussianNoise", -0.1),
        rx(r"GaussianNoise: std must be a finite number >= 0.*got std=-0.1")),
    row("GaussianNoise-std=nan", make("GaussianNoise", float("nan")), "std=nan"),
    row("GaussianNoise-std='0.1'", make("GaussianNoise", "0.1"), "std='0.1'"),
    *[row(f"EncodingDropout-seed={v!r}", make("EncodingDropout", 0.1, seed=v),
          f"seed must be None or a non-negative integer, got seed={v!r}") for v in (1.5, True, -1)],
    row("EncodingDropout-rank-1", lambda on: on.train(on.m.EncodingDropout(0.1), on.x(4)),
        "the encoding must be (..., seq, dim)", "shape (4,)"),
    *[row(f"{cls}-int-encoding", lambda on, cls=cls: on.train(
        getattr(on.m, cls)(0.5, seed=0), on.t(np.ones((2, 3, 4), np.int32))),
        f"{cls}: the encoding must be a floating-point tensor, got dtype int32")
      for cls in ("EncodingDropout", "ChannelDropout", "GaussianNoise")],
    *[row(f"RegularizedEncoding-{name}={value!r}",
          lambda on, name=name, value=value: on.m.RegularizedEncoding(
              on.m.SinusoidalEncoding(8), **{name: value}),
          rx(rf"RegularizedEncoding: {name} must be .*got {name}={value}"))
      for name, value in (("dropout", 1.0), ("dropout", -0.1), ("channel_dropout", -1.0),
                          ("channel_dropout", 1.0), ("noise_std", -1.0), ("seed", -1))],
    row("RegularizedEncoding-not-absolute",
        lambda on: on.m.RegularizedEncoding(on.not_an_encoding()),
        rx(r"encoding must be an absolute .* encoding\(positions\) method.*got Projection")),
    row("RegularizedEncoding-bool-positions", lambda on: on.m.RegularizedEncoding(
        on.m.SinusoidalEncoding(8))(on.x(1, 3, 8), positions=on.t(BOOL)), "dtype bool"),
]

STRUCTURED = [
    *[row(f"ContinuousTimeEncoding-time_scale={v!r}",
          make("ContinuousTimeEncoding", 8, time_scale=v),
          rx(r"time_scale must be a finite number greater than 0.*time_scale="), f"time_scale={v!r}")
      for v in (0.0, -1.0)],
    row("ContinuousTimeEncoding-time_scale=inf",
        make("ContinuousTimeEncoding", 8, time_scale=float("inf")), "time_scale must be a finite number greater than 0", "time_scale=inf"),
    row("ContinuousTimeEncoding-time_scale='1'",
        make("ContinuousTimeEncoding", 8, time_scale="1"), "time_scale='1'"),
    row("ContinuousTimeEncoding-odd-dim", make("ContinuousTimeEncoding", 7),
        "dim must be a multiple of 2", "dim=7"),
    *[row(f"ContinuousTimeEncoding-base={b!r}", make("ContinuousTimeEncoding", 8, base=b),
          base_error(b), f"base={b!r}") for b in (None, "abc", 1.0)],
    row("ContinuousTimeEncoding-layout", make("ContinuousTimeEncoding", 8, layout="half"),
        "layout='half'"),
    row("ContinuousTimeEncoding-times-per-token", run("ContinuousTimeEncoding", (8,), (2, 4, 8),
                                                      np.zeros(5, np.float32)),
        "one time per token"),
    row("ContinuousTimeEncoding-timestamps-rank", run("ContinuousTimeEncoding", (8,), (2, 4, 8),
                                                      np.zeros((2, 4, 1), np.float32)),
        "timestamps must have shape (seq,) or (batch, seq)"),
    row("ContinuousTimeEncoding-width", run("ContinuousTimeEncoding", (8,), (2, 4, 6),
                                            np.zeros(4, np.float32)),
        "x must be (..., seq, dim) with dim=8"),
    row("Time2Vec-zero-dim", make("Time2Vec", 0), "dim must be a positive integer", "dim=0"),
    row("Time2Vec-dim=8.0", make("Time2Vec", 8.0), "dim=8.0"),
    *[row(f"{cls}-bool-timestamps", run(cls, (8,), (1, 3, 8), BOOL),
          rx(rf"{cls}: timestamps must be integers or floats, got dtype bool"))
      for cls in ("ContinuousTimeEncoding", "Time2Vec")],
    row("hierarchical-dim=9", fn("hierarchical", PATHS, 9, max_depth=3),
        rx(r"dim must be a multiple of 2 \* max_depth = 6.*dim=9"), "is odd"),
    row("hierarchical-dim=12-depth-5", fn("hierarchical", np.array([[0, 1, -1, -1, -1]]), 12,
                                          max_depth=5),
        rx(r"dim must be a multiple of 2 \* max_depth = 10.*dim=12")),
    row("hierarchical-short-paths", fn("hierarchical", np.array([[0, 1]]), 12, max_depth=3),
        rx(r"paths must have shape \(\.\.\., max_depth\).*pad")),
    row("hierarchical-long-paths", fn("hierarchical", np.array([[0, 1, 2, 3]]), 12, max_depth=3),
        "build it with max_depth=4"),
    row("hierarchical-value-2", fn("hierarchical", np.array([[0, -2, -1]]), 12, max_depth=3),
        "got the value -2"),
    row("hierarchical-gap", fn("hierarchical", np.array([[0, -1, 4]]), 12, max_depth=3),
        "child index after a -1"),
    row("hierarchical-float-paths", fn("hierarchical", np.float32([[0.0, 1.0, -1.0]]), 12,
                                       max_depth=3),
        "must be integers, got dtype float32"),
    row("hierarchical-max_depth=0", fn("hierarchical", np.array([[0]]), 12, max_depth=0),
        "max_depth=0"),
    row("hierarchical-base=None", fn("hierarchical", PATHS, 12, max_depth=3, base=None),
        base_error(None), "base=None"),
    row("HierarchicalEncoding-child", run("HierarchicalEncoding", (2, 3, 8), (1, 2, 8),
                                          np.array([[0, 3], [1, -1]])),
        rx(r"child index 3 is out of range for max_children=3.*max_children=4")),
    row("HierarchicalEncoding-depth", run("HierarchicalEncoding", (2, 3, 8), (1, 2, 8),
                                          np.array([[0, 1, 1], [1, -1, -1]])),
        "max_depth=2, got paths.shape=(2, 3)"),
    row("HierarchicalEncoding-max_children=0", make("HierarchicalEncoding", 2, 0, 8),
        "max_children must be a positive integer", "max_children=0"),
    row("HierarchicalEncoding-max_depth=0", make("HierarchicalEncoding", 0, 2, 8), "max_depth=0"),
    row("HierarchicalEncoding-bool-paths", run("HierarchicalEncoding", (3, 2, 8), (1, 3, 8),
                                               np.ones((3, 3), bool)),
        rx(r"paths index a table.*got dtype bool")),
    row("modality_positions-ids", fn("modality_positions", np.array([0, 2]), num_modalities=2),
        "modality_ids must lie in 0 .. 1, got 2"),
    row("modality_positions-float-ids", fn("modality_positions", np.float32([0.0, 1.0])),
        "must be integers"),
    row("modality_positions-num_modalities=0", fn("modality_positions", np.array([0, 1]),
                                                  num_modalities=0), "num_modalities=0"),
    row("MultimodalEncoding-mode", make("MultimodalEncoding", 8, num_modalities=2, max_len=4,
                                        mode="concat"),
        "mode must be one of 'shared', 'per_modality', 'shared_offset', got mode='concat'"),
    row("MultimodalEncoding-mode=None", make("MultimodalEncoding", 8, num_modalities=2,
                                             max_len=4, mode=None), "mode=None"),
    row("MultimodalEncoding-odd-dim", make("MultimodalEncoding", 7, num_modalities=2, max_len=4,
                                           mode="shared"),
        "MultimodalEncoding(mode='shared'): dim must be a multiple of 2", "dim=7"),
    row("MultimodalEncoding-max_len=0", make("MultimodalEncoding", 8, num_modalities=2,
                                             max_len=0), "max_len=0"),
    row("MultimodalEncoding-num_modalities=0", make("MultimodalEncoding", 8, num_modalities=0,
                                                    max_len=4), "num_modalities=0"),
    row("MultimodalEncoding-ids", run("MultimodalEncoding", (8,), (1, 3, 8), np.array([0, 1, 2]),
                                      num_modalities=2, max_len=4, mode="per_modality"),
        rx(r"modality_ids must lie in 0 \.\. 1, got 2.*num_modalities=3")),
    row("MultimodalEncoding-negative-ids", run("MultimodalEncoding", (8,), (1, 3, 8),
                                               np.array([0, -1, 1]), num_modalities=3, max_len=4),
        "modality_ids must lie in 0 .. 2, got -1"),
    row("MultimodalEncoding-position-4", run("MultimodalEncoding", (8,), (1, 3, 8),
                                             np.array([0, 1, 1]), positions=np.array([0, 1, 4]),
                                             num_modalities=2, max_len=4, mode="per_modality"),
        rx(r"positions must lie in 0 \.\. 3, got 4.*max_len")),
    row("MultimodalEncoding-too-long", run("MultimodalEncoding", (8,), (1, 5, 8),
                                           np.zeros(5, np.int32), num_modalities=2, max_len=4,
                                           mode="per_modality"),
        "sequence length 5 exceeds the table's max_len=4"),
    row("MultimodalEncoding-float-positions", run("MultimodalEncoding", (8,), (1, 3, 8),
                                                  np.array([0, 1, 1]),
                                                  positions=np.float32([0, 1, 2]),
                                                  num_modalities=2, max_len=4,
                                                  mode="per_modality"),
        "positions index a table, so they must be integers", "dtype float32"),
    row("MultimodalEncoding-ids-rank", run("MultimodalEncoding", (8,), (1, 3, 8),
                                           np.zeros((1, 1, 3), np.int32), num_modalities=2,
                                           max_len=4, mode="per_modality"),
        "modality_ids must have shape (seq,) or (batch, seq)"),
    row("MultimodalEncoding-bool-ids", run("MultimodalEncoding", (8,), (1, 3, 8), BOOL,
                                           num_modalities=3, max_len=4),
        "modality_ids index a table, so they must be integers, got dtype bool"),
    row("MultimodalEncoding-float-ids", run("MultimodalEncoding", (8,), (1, 3, 8),
                                            np.float32([0, 1, 1]), num_modalities=3, max_len=4),
        rx(r"modality_ids index a table.*got dtype float32")),
    row("LowRankEncoding-rank=0", make("LowRankEncoding", 32, 16, rank=0),
        rx(r"rank must be at least 1, got rank=0.*min\(max_len, dim\)=16")),
    row("LowRankEncoding-rank=17", make("LowRankEncoding", 32, 16, rank=17),
        rx(r"rank=17 exceeds min\(max_len, dim\)=16.*rank <= 16")),
    row("LowRankEncoding-rank=9", make("LowRankEncoding", 8, 16, rank=9),
        "rank=9 exceeds min(max_len, dim)=8"),
    row("LowRankEncoding-rank=2.0", make("LowRankEncoding", 32, 16, rank=2.0),
        "rank must be an integer", "rank=2.0"),
    row("LowRankEncoding-rank=None", make("LowRankEncoding", 8, 16, rank=None), "rank=None"),
    row("LowRankEncoding-max_len=2.5", make("LowRankEncoding", 2.5, 4, rank=1), "max_len=2.5"),
    row("LowRankEncoding-too-long", run("LowRankEncoding", (8, 16), (1, 9, 16), rank=2),
        "sequence length 9 exceeds the table's max_len=8"),
    row("LowRankEncoding.encoding-position-8", encoding("LowRankEncoding", (8, 16),
                                                       np.array([0, 8]), rank=2),
        "positions must lie in 0 .. 7, got 8"),
    row("LowRankEncoding.encoding-position--1", encoding("LowRankEncoding", (8, 16),
                                                        np.array([-1, 2]), rank=2),
        "positions must lie in 0 .. 7, got -1"),
    row("LowRankEncoding-width", run("LowRankEncoding", (8, 16), (1, 3, 8), rank=2),
        "dim=16", "x.shape=(1, 3, 8)"),
    row("LowRankEncoding-bool-positions", run("LowRankEncoding", (4, 8), (1, 3, 8),
                                              positions=BOOL, rank=2),
        "positions must be integers or floats, got dtype bool; a boolean tensor is a mask"),
]

PATH_4 = np.eye(4, k=1) + np.eye(4, k=-1)          # 0 - 1 - 2 - 3
TWO_COMPONENTS = np.zeros((7, 7))                    # a path of 3 nodes and a cycle of 4
TWO_COMPONENTS[:3, :3] = np.eye(3, k=1) + np.eye(3, k=-1)
TWO_COMPONENTS[3:, 3:] = np.roll(np.eye(4), 1, 0) + np.roll(np.eye(4), -1, 0)
EIGENVECTORS = np.zeros((6, 3), np.float32)          # 6 nodes, k = 3

COORDINATES_AND_GRAPHS = [
    row("coordinate_encoding-dim=8-k=3", fn("coordinate_encoding", np.zeros((2, 3)), 8),
        "coordinate_encoding: each of the k=3 coordinates gets dim // k channels of sine/cosine "
        "pairs, so dim must be a multiple of 2 * k = 6; got dim=8 (8 is not divisible by k=3); "
        "use dim=12 or dim=6."),
    row("coordinate_encoding-dim=0", fn("coordinate_encoding", np.zeros((2, 2)), 0),
        "dim must be a positive integer, got dim=0"),
    row("coordinate_encoding-scale-length", fn("coordinate_encoding", np.zeros((2, 2)), 8,
                                               scale=(1.0, 2.0, 3.0)),
        "scale must be one number or one per coordinate, got 3 values for k=2 coordinates"),
    *[row(f"coordinate_encoding-scale={v!r}", fn("coordinate_encoding", np.zeros((2, 2)), 8,
                                                 scale=v),
          "coordinate_encoding: scale must be a finite number greater than 0 (coordinates are "
          "multiplied by it)", "use 2 * pi for coordinates normalised to [0, 1]")
      for v in (-1.0, 0.0, float("nan"), "2", (1.0, -2.0))],
    row("coordinate_encoding-no-coordinate", fn("coordinate_encoding", np.zeros((2, 0)), 8),
        "coords must be (..., k) with at least one coordinate on the last axis, got "
        "coords.shape=(2, 0)"),
    row("coordinate_encoding-scalar", fn("coordinate_encoding", np.array(0.5), 8),
        "coords must be (..., k), got a scalar; use coords[..., None]"),
    row("coordinate_encoding-bool", fn("coordinate_encoding", np.ones((2, 2), bool), 8),
        "coords must be integers or floats, got dtype bool"),
    row("coordinate_encoding-base=1.0", fn("coordinate_encoding", np.zeros((2, 2)), 8, base=1.0),
        "coordinate_encoding: base must be a finite number greater than 1", "base=1.0"),
    row("coordinate_encoding-layout", fn("coordinate_encoding", np.zeros((2, 2)), 8,
                                         layout="half"),
        "coordinate_encoding: layout must be one of", "layout='half'"),
    row("laplacian_positions-not-square", fn("laplacian_positions", np.ones((3, 4)), 1),
        "laplacian_positions: adjacency must be a square (nodes, nodes) matrix, got "
        "adjacency.shape=(3, 4)"),
    row("laplacian_positions-directed", fn("laplacian_positions",
                                           np.array([[0, 1, 0], [0, 0, 1], [0, 1, 0]]), 1),
        "adjacency must be symmetric (an undirected graph), got adjacency[0, 1]=1.0 but "
        "adjacency[1, 0]=0.0; use np.maximum(A, A.T)"),
    row("laplacian_positions-negative", fn("laplacian_positions", np.array([[0, -1], [-1, 0]]), 1),
        "adjacency must hold non-negative edge weights, got adjacency[0, 1]=-1.0"),
    row("laplacian_positions-nan", fn("laplacian_positions",
                                      np.array([[0, np.nan], [np.nan, 0]]), 1),
        "adjacency must be finite"),
    row("laplacian_positions-k=4", fn("laplacian_positions", PATH_4, 4),
        "k=4 is too large for a graph of 4 nodes", "use k <= 3"),
    *[row(f"laplacian_positions-k={k!r}", fn("laplacian_positions", PATH_4, k),
          f"laplacian_positions: k must be a positive integer, got k={k!r}")
      for k in (0, 2.0, True)],
    row("laplacian_positions-single-node", fn("laplacian_positions", np.zeros((1, 1)), 1),
        "adjacency has a single node", "at least 2 nodes"),
    row("laplacian_positions-components", fn("laplacian_positions", TWO_COMPONENTS, 6),
        "k=6 exceeds the 5 non-trivial eigenvectors of this graph (7 nodes, 2 connected "
        "components", "use k <= 5, or connect the graph"),
    row("laplacian_positions-normalized", fn("laplacian_positions", PATH_4, 1, normalized="no"),
        "normalized must be True or False, got normalized='no'"),
    row("laplacian-directed", fn("laplacian", np.array([[0.0, 2.0], [1.0, 0.0]])),
        "laplacian: adjacency must be symmetric"),
    row("laplacian-normalized", fn("laplacian", PATH_4, normalized=1),
        "laplacian: normalized must be True or False, got normalized=1"),
    row("LaplacianEncoding-k=0", make("LaplacianEncoding", 0, 8),
        "LaplacianEncoding: k must be a positive integer, got k=0"),
    row("LaplacianEncoding-dim=-1", make("LaplacianEncoding", 2, -1),
        "dim must be a positive integer, got dim=-1"),
    row("LaplacianEncoding-sign_flip", make("LaplacianEncoding", 2, 8, sign_flip="yes"),
        "LaplacianEncoding: sign_flip must be True or False, got sign_flip='yes'"),
    row("LaplacianEncoding-seed=-1", make("LaplacianEncoding", 2, 8, seed=-1),
        "seed must be None or a non-negative integer, got seed=-1"),
    row("LaplacianEncoding-k", run("LaplacianEncoding", (3, 8), (1, 6, 8), np.zeros((6, 4),
                                                                                   np.float32)),
        "LaplacianEncoding: eigenvectors must have shape (nodes, k) or (batch, nodes, k) with "
        "k=3, got eigenvectors.shape=(6, 4); pass laplacian_positions(adjacency, 3)"),
    row("LaplacianEncoding-rank-1", run("LaplacianEncoding", (3, 8), (1, 6, 8),
                                        np.zeros(3, np.float32)),
        "eigenvectors.shape=(3,)"),
    row("LaplacianEncoding-nodes", run("LaplacianEncoding", (3, 8), (1, 6, 8),
                                       np.zeros((7, 3), np.float32)),
        "LaplacianEncoding: eigenvectors must have shape (seq, k) or (batch, seq, k) matching "
        "x's (..., seq, dim), got eigenvectors.shape=(7, 3) for x.shape=(1, 6, 8)"),
    row("LaplacianEncoding-width", run("LaplacianEncoding", (3, 8), (1, 6, 9), EIGENVECTORS),
        "LaplacianEncoding: x must be (..., seq, dim) with dim=8, got x.shape=(1, 6, 9)"),
    row("LaplacianEncoding-int-eigenvectors", run("LaplacianEncoding", (3, 8), (1, 6, 8),
                                                  EIGENVECTORS.astype(np.int32)),
        "LaplacianEncoding: eigenvectors must be a floating-point tensor, got dtype int32"),
    row("LaplacianEncoding.encoding-k", encoding("LaplacianEncoding", (3, 8),
                                                 np.zeros((6, 2), np.float32)),
        "with k=3, got eigenvectors.shape=(6, 2)"),
]

BIAS_CLASSES = ("ALiBiBias", "T5RelativeBias")


def bias_call(name, args, *lengths, **kwargs):
    """The call ``name(*args, **kwargs)(*lengths)`` of a bias class."""
    return lambda on: getattr(on.m, name)(*args, **kwargs)(*lengths)


BIAS = [
    *[row(f"{name}-num_heads={n!r}", make(name, n),
          f"{name}: num_heads must be a positive integer, got num_heads={n!r}; pass the "
          "attention layer's head count")
      for name in ("ALiBiBias", "T5RelativeBias") for n in (0, -2, 2.0)],
    row("SwinRelativeBias-num_heads=0", make("SwinRelativeBias", 0, 7),
        "SwinRelativeBias: num_heads must be a positive integer, got num_heads=0"),
    row("alibi_slopes-num_heads=0", fn("alibi_slopes", 0),
        "alibi_slopes: num_heads must be a positive integer, got num_heads=0"),
    row("alibi_bias-num_heads=-1", fn("alibi_bias", -1, 2, 4),
        "alibi_bias: num_heads must be a positive integer, got num_heads=-1"),
    row("alibi_bias-q_len>k_len", fn("alibi_bias", 8, 5, 3),
        "alibi_bias: q_len must be at most k_len (the queries are the last q_len of the k_len "
        "key positions), got q_len=5, k_len=3; pass k_len >= 5"),
    row("alibi_bias-q_len=-1", fn("alibi_bias", 8, -1, 3),
        "alibi_bias: q_len must be a non-negative integer, got q_len=-1"),
    row("alibi_bias-causal", fn("alibi_bias", 8, 2, 3, causal="yes"),
        "alibi_bias: causal must be True or False, got causal='yes'"),
    *[row(f"{name}-q_len>k_len", bias_call(name, (4,), 6, 2),
          f"{name}: q_len must be at most k_len", "got q_len=6, k_len=2")
      for name in BIAS_CLASSES],
    *[row(f"{name}-k_len=2.5", bias_call(name, (4,), 2, 2.5),
          f"{name}: k_len must be a non-negative integer, got k_len=2.5")
      for name in BIAS_CLASSES],
    row("ALiBiBias-causal", make("ALiBiBias", 4, causal=1),
        "ALiBiBias: causal must be True or False, got causal=1"),
    row("t5_buckets-odd", fn("t5_buckets", np.arange(3), num_buckets=31),
        "t5_buckets: num_buckets must be even when bidirectional=True (half of the buckets for "
        "each direction), got num_buckets=31; use num_buckets=32 or 30, or bidirectional=False "
        "for a decoder"),
    row("T5RelativeBias-odd", make("T5RelativeBias", 4, num_buckets=7),
        "T5RelativeBias: num_buckets must be even when bidirectional=True",
        "got num_buckets=7"),
    row("T5RelativeBias-odd-causal-ok-but-one", make("T5RelativeBias", 4, num_buckets=1,
                                                     bidirectional=False),
        "num_buckets must be at least 2 (bidirectional=False", "got num_buckets=1"),
    row("t5_buckets-two-bidirectional", fn("t5_buckets", np.arange(3), num_buckets=2),
        "num_buckets must be at least 4 (bidirectional=True", "got num_buckets=2"),
    row("t5_buckets-num_buckets=0", fn("t5_buckets", np.arange(3), num_buckets=0),
        "t5_buckets: num_buckets must be a positive integer, got num_buckets=0"),
    *[row(f"t5_buckets-max_distance={d!r}", fn("t5_buckets", np.arange(3), max_distance=d),
          "t5_buckets: max_distance must be an integer greater than the 8 exact distances "
          f"(num_buckets=32, bidirectional=True), got max_distance={d!r}; T5 uses "
          "max_distance=128")
      for d in (-5, 0, 8, 100.0)],
    row("T5RelativeBias-max_distance", make("T5RelativeBias", 4, bidirectional=False,
                                            max_distance=16),
        "max_distance must be an integer greater than the 16 exact distances "
        "(num_buckets=32, bidirectional=False), got max_distance=16"),
    row("t5_buckets-float", fn("t5_buckets", np.array([0.5, 1.0], np.float32)),  # any backend
        "t5_buckets: relative_position index a table, so they must be integers, got dtype "
        "float"),
    row("t5_buckets-bidirectional", fn("t5_buckets", np.arange(3), bidirectional=None),
        "t5_buckets: bidirectional must be True or False, got bidirectional=None"),
    *[row(f"swin_relative_index-{h}x{w}", fn("swin_relative_index", h, w),
          "swin_relative_index: (window_h, window_w) must be a positive integer or a (height, "
          f"width) pair of positive integers, got (window_h, window_w)=({h}, {w}); a window "
          "holds at least one patch")
      for h, w in ((0, 3), (3, -1))],
    *[row(f"SwinRelativeBias-window={w!r}", make("SwinRelativeBias", 2, w),
          f"SwinRelativeBias: window_size must be a positive integer or a (height, width) pair "
          f"of positive integers, got window_size={w!r}")
      for w in (0, (7, 0), (7,), "7", 7.0)],
    row("SwinRelativeBias-lengths", bias_call("SwinRelativeBias", (2, (3, 4)), 10),
        "SwinRelativeBias: q_len and k_len must both be window_h * window_w = 12 (window 3x4), "
        "got q_len=10, k_len=10; pass q_len=12"),
    row("SwinRelativeBias-k_len", bias_call("SwinRelativeBias", (2, 3), 9, 12),
        "got q_len=9, k_len=12"),
    row("resize_swin_bias_table-rows", fn("resize_swin_bias_table", table(24, 3), 3, 5),
        "resize_swin_bias_table: table must be ((2*3-1) * (2*3-1), num_heads) = (25, num_heads) "
        "for the window 3x3, got table.shape=(24, 3); pass the window the table was trained "
        "for as old_window"),
    row("resize_swin_bias_table-new_window", fn("resize_swin_bias_table", table(25, 3), 3, 0),
        "resize_swin_bias_table: new_window must be a positive integer or a (height, width) "
        "pair of positive integers, got new_window=0"),
    row("resize_swin_bias_table-int", fn("resize_swin_bias_table",
                                         table(25, 3, dtype="int32"), 3, 5),
        "resize_swin_bias_table: table must be a floating-point tensor, got dtype int32"),
]

def qkv(q_len=3, k_len=3, heads=2, head_dim=4):
    """Zero queries, keys and values ``(1, heads, len, head_dim)`` as NumPy arrays."""
    return (table(1, heads, q_len, head_dim), table(1, heads, k_len, head_dim),
            table(1, heads, k_len, head_dim))


SHAW_TABLES = (table(5, 4), table(5, 4))    # max_distance=2, head_dim=4

SHAW = [
    *[row(f"ShawRelativeAttention-num_heads={n!r}", make("ShawRelativeAttention", 8, n, 2),
          f"ShawRelativeAttention: num_heads must be a positive integer, got num_heads={n!r}",
          "use at least one attention head")
      for n in (0, -2, 2.0)],
    row("ShawRelativeAttention-heads-do-not-divide", make("ShawRelativeAttention", 10, 4, 2),
        "ShawRelativeAttention: num_heads must divide dim (each head gets dim // num_heads "
        "features), got dim=10 and num_heads=4; use num_heads=2 or num_heads=5, or a dim that "
        "is a multiple of 4"),
    row("ShawRelativeAttention-dim=0", make("ShawRelativeAttention", 0, 1, 2),
        "ShawRelativeAttention: dim must be a positive integer, got dim=0"),
    *[row(f"ShawRelativeAttention-max_distance={k!r}", make("ShawRelativeAttention", 8, 2, k),
          f"ShawRelativeAttention: max_distance must be a non-negative integer, got "
          f"max_distance={k!r}", "Shaw et al. found k >= 2 enough")
      for k in (-1, 1.5, None)],
    row("ShawRelativeAttention-method", make("ShawRelativeAttention", 8, 2, 2, method="fast"),
        "ShawRelativeAttention: method must be one of 'naive', 'skew', got method='fast'"),
    row("ShawRelativeAttention-causal", make("ShawRelativeAttention", 8, 2, 2, causal="yes"),
        "ShawRelativeAttention: causal must be True or False, got causal='yes'"),
    row("ShawRelativeAttention-width", run("ShawRelativeAttention", (8, 2, 2), (1, 3, 6)),
        "ShawRelativeAttention: x must be (..., seq, dim) with dim=8, got x.shape=(1, 3, 6)"),
    row("ShawRelativeAttention-rank-4", run("ShawRelativeAttention", (8, 2, 2), (1, 1, 3, 8)),
        "ShawRelativeAttention: x must have rank 3, got shape (1, 1, 3, 8) (rank 4); pass "
        "(batch, seq, dim) embeddings"),
    row("shaw_relative_index-q_len>k_len", fn("shaw_relative_index", 5, 3, 2),
        "shaw_relative_index: q_len must be at most k_len (the queries are the last q_len of "
        "the k_len key positions), got q_len=5, k_len=3; pass k_len >= 5: the cached keys plus "
        "the new ones"),
    row("shaw_relative_index-max_distance=-1", fn("shaw_relative_index", 3, 3, -1),
        "shaw_relative_index: max_distance must be a non-negative integer, got max_distance=-1"),
    row("shaw_relative_index-k_len=-1", fn("shaw_relative_index", 0, -1, 2),
        "shaw_relative_index: k_len must be a non-negative integer, got k_len=-1"),
    row("shaw_attention-q_len>k_len", fn("shaw_attention", *qkv(5, 3), *SHAW_TABLES, 2),
        "shaw_attention: q_len must be at most k_len", "got q_len=5, k_len=3"),
    row("shaw_attention-max_distance=-1", fn("shaw_attention", *qkv(), *SHAW_TABLES, -1),
        "shaw_attention: max_distance must be a non-negative integer, got max_distance=-1"),
    row("shaw_attention-key_table-rows", fn("shaw_attention", *qkv(), table(4, 4), table(5, 4), 2),
        "shaw_attention: key_table must have shape (2 * max_distance + 1, head_dim) = (5, 4) "
        "for max_distance=2, got key_table.shape=(4, 4); build the table with one row per "
        "relative position -2 .. 2, or pass the max_distance it was built for"),
    row("shaw_attention-value_table-head_dim", fn("shaw_attention", *qkv(), table(5, 4),
                                                  table(5, 8), 2),
        "shaw_attention: value_table must have shape (2 * max_distance + 1, head_dim) = (5, 4) "
        "for max_distance=2, got value_table.shape=(5, 8)"),
    row("shaw_attention-table-rank-1", fn("shaw_attention", *qkv(), table(5), table(5, 4), 2),
        "key_table.shape=(5,)"),
    row("shaw_attention-method", fn("shaw_attention", *qkv(), *SHAW_TABLES, 2, method="fast"),
        "shaw_attention: method must be one of 'naive', 'skew', got method='fast'"),
    row("shaw_attention-dropout", fn("shaw_attention", *qkv(), *SHAW_TABLES, 2, dropout=1.0),
        "shaw_attention: dropout must be a finite number", "got dropout=1.0"),
    row("shaw_attention-return_weights", fn("shaw_attention", *qkv(), *SHAW_TABLES, 2,
                                            return_weights="yes"),
        "shaw_attention: return_weights must be True or False, got return_weights='yes'"),
    row("shaw_attention-causal", fn("shaw_attention", *qkv(), *SHAW_TABLES, 2, causal=1),
        "shaw_attention: causal must be True or False, got causal=1"),
    row("shaw_attention-rank-3", fn("shaw_attention", table(2, 3, 4), *qkv()[1:], *SHAW_TABLES, 2),
        "shaw_attention: q must have rank 4, got shape (2, 3, 4) (rank 3); lay attention "
        "tensors out as (batch, heads, seq, head_dim)"),
    row("shaw_attention-heads", fn("shaw_attention", *qkv(heads=2)[:2], table(1, 3, 3, 4),
                                   *SHAW_TABLES, 2),
        "shaw_attention: q, k and v must be (batch, heads, seq, head_dim) with the same batch, "
        "heads and head_dim, and k and v the same seq, got q.shape=(1, 2, 3, 4), "
        "k.shape=(1, 2, 3, 4), v.shape=(1, 3, 3, 4)"),
    *[row(f"windowed_attention-window={w!r}", fn("windowed_attention", *qkv(), w),
          f"windowed_attention: window must be a non-negative integer, got window={w!r}; "
          "window counts the keys each query sees on each side, so a negative window is empty")
      for w in (-1, 1.5, None)],
    row("windowed_attention-key_table", lambda on: on.m.windowed_attention(
        *[on.t(a) for a in qkv()], 1, key_table=on.t(table(5, 4))),
        "windowed_attention: key_table must have shape (2 * window + 1, head_dim) = (3, 4) for "
        "window=1, got key_table.shape=(5, 4); build the table with one row per relative "
        "position -1 .. 1, or pass the window it was built for"),
    row("windowed_attention-q_len>k_len", fn("windowed_attention", *qkv(4, 2), 1),
        "windowed_attention: q_len must be at most k_len", "got q_len=4, k_len=2"),
]

def tokens(*shape, dtype="int32"):
    return np.zeros(shape, dtype)


def model_call(*args, toks=None, cache=False, **kwargs):
    """The call that builds ``Transformer(*args, **kwargs)`` and runs it on ``toks``
    (with a fresh cache, or with the cache of a causal twin when ``cache`` is set)."""
    def call(on):
        m = on.m.Transformer(*args, **kwargs)
        more = {}
        if cache:
            more["cache"] = on.m.Transformer(*args, **{**kwargs, "causal": True}).new_cache()
        return m(on.t(toks), **more)
    return call


ATTENTION = [
    row("MultiHeadAttention-position", make("MultiHeadAttention", 8, 2, position="nope"),
        "MultiHeadAttention: position must be one of 'none', 'sinusoidal', 'learned', 'hybrid', "
        "'shaw', 't5', 'alibi', 'swin', 'rope', 'xpos', 'kerple_log', 'kerple_power', "
        "'sandwich', 'fire', 'dynamic', 'fox', 'cope', got position='nope'; see "
        "posenc.attention.POSITIONS"),
    row("Transformer-position", make("Transformer", 10, position="RoPE"),
        "Transformer: position must be one of", "got position='RoPE'"),
    row("MultiHeadAttention-heads-do-not-divide", make("MultiHeadAttention", 10, 4),
        "MultiHeadAttention: heads must divide dim (each head gets dim // heads features), got "
        "dim=10 and heads=4; use heads=2 or heads=5, or a dim that is a multiple of 4"),
    row("Transformer-heads-do-not-divide", make("Transformer", 10, dim=24, heads=5),
        "Transformer: heads must divide dim", "got dim=24 and heads=5; use heads=4 or heads=6"),
    row("Transformer-heads=0", make("Transformer", 10, heads=0),
        "Transformer: heads must be a positive integer, got heads=0"),
    row("Transformer-vocab_size", make("Transformer", 0),
        "Transformer: vocab_size must be a positive integer, got vocab_size=0; pass the number "
        "of distinct token ids"),
    row("Transformer-depth", make("Transformer", 10, depth=0),
        "Transformer: depth must be a positive integer, got depth=0"),
    row("Transformer-dropout", make("Transformer", 10, dropout=1.5),
        "Transformer: dropout must be a finite number", "got dropout=1.5"),
    row("Transformer-causal", make("Transformer", 10, causal="yes"),
        "Transformer: causal must be True or False, got causal='yes'"),
    row("Transformer-option-not-used", make("Transformer", 10, position="alibi", max_distance=8),
        "Transformer: max_distance is not an option of position='alibi' (its options: none), "
        "got max_distance=8; drop max_distance, or pick a position that uses it"),
    row("MultiHeadAttention-option-not-used", make("MultiHeadAttention", 8, 2, position="rope",
                                                   grid=(2, 2)),
        "MultiHeadAttention: grid is not an option of position='rope' (its options: base, "
        "rope_scaling, rope_layout), got grid=(2, 2)"),
    row("Transformer-swin-without-grid", make("Transformer", 10, position="swin", causal=False),
        "Transformer: position='swin' needs grid, got grid=None; pass grid=(height, width)"),
    row("Transformer-swin-causal", make("Transformer", 10, position="swin", grid=(2, 2)),
        "Transformer: position='swin' is an encoder scheme", "got causal=True; pass "
        "causal=False"),
    row("Transformer-grid", make("Transformer", 10, position="swin", causal=False, grid=(2, 0)),
        "Transformer: grid must be a (height, width) pair of positive integers, got grid=(2, 0)"),
    row("Transformer-grid-does-not-match-seq",
        model_call(10, dim=8, position="swin", causal=False, grid=(2, 3), toks=tokens(1, 5)),
        "Transformer: grid must match the sequence (height * width tokens), got grid=(2, 3) "
        "(6 patches) for seq=5; pass 6 tokens, or build the model with a grid of "
        "height * width = 5"),
    row("MultiHeadAttention-grid-does-not-match-seq",
        run("MultiHeadAttention", (8, 2), (1, 5, 8), position="swin", grid=(2, 3)),
        "MultiHeadAttention: grid must match the sequence", "for seq=5"),
    row("Transformer-rope_layout", make("Transformer", 10, rope_layout="neox"),
        "Transformer: rope_layout must be one of 'half', 'interleaved', got rope_layout='neox'"),
    row("Transformer-rope-odd-head_dim", make("Transformer", 10, dim=6, heads=2),
        "Transformer: dim // heads must be even (RoPE rotates the features in pairs), got "
        "dim // heads=3"),
    row("Transformer-rope_scaling-factor", make("Transformer", 10, rope_scaling={
        "rope_type": "linear"}),
        "Transformer: rope_scaling['factor'] must be a finite number >= 1", "got "
        "rope_scaling['factor']=None"),
    row("Transformer-rope_scaling-type", make("Transformer", 10, rope_scaling={
        "type": "longer", "factor": 2.0}),
        "Transformer: rope_scaling['rope_type'] must be one of"),
    row("Transformer-sinusoidal-odd-dim", make("Transformer", 10, position="sinusoidal",
                                                       dim=9, heads=3),
        "Transformer: dim must be a multiple of 2 (sines and cosines come in pairs), got dim=9"),
    row("Transformer-t5-odd-buckets", make("Transformer", 10, position="t5", causal=False,
                                           num_buckets=7),
        "Transformer: num_buckets must be even when bidirectional=True"),
    row("Transformer-shaw-max_distance", make("Transformer", 10, position="shaw",
                                              max_distance=-1),
        "Transformer: max_distance must be a non-negative integer, got max_distance=-1"),
    row("Transformer-sinusoidal-base", make("Transformer", 10, position="sinusoidal", base=1.0),
        "Transformer: base must be a finite number greater than 1, got base=1.0"),
    row("Transformer-cache-on-an-encoder", lambda on: on.m.Transformer(
        10, dim=8, causal=False).new_cache(),
        "Transformer: cache is for causal decoding, got a cache for causal=False (an encoder "
        "attends to every position at once); build the model with causal=True, or call it "
        "without cache"),
    row("Transformer-cache-passed-to-an-encoder",
        model_call(10, dim=8, causal=False, toks=tokens(1, 3), cache=True),
        "Transformer: cache is for causal decoding"),
    row("MultiHeadAttention-cache-on-an-encoder", lambda on: on.m.MultiHeadAttention(
        8, 2).new_cache(), "MultiHeadAttention: cache is for causal decoding"),
    row("Transformer-tokens-rank-1", model_call(10, dim=8, toks=tokens(3)),
        "Transformer: tokens must have rank 2, got shape (3,) (rank 1); pass (batch, seq) "
        "integer token ids, e.g. tokens[None] for one sequence"),
    row("Transformer-tokens-rank-3", model_call(10, dim=8, toks=tokens(1, 3, 8)),
        "Transformer: tokens must have rank 2, got shape (1, 3, 8) (rank 3)"),
    row("Transformer-float-tokens", model_call(10, dim=8, toks=tokens(1, 3, dtype="float32")),
        "Transformer: tokens index a table, so they must be integers, got dtype float32"),
    row("MultiHeadAttention-rank-4", run("MultiHeadAttention", (8, 2), (1, 1, 3, 8)),
        "MultiHeadAttention: x must have rank 3, got shape (1, 1, 3, 8) (rank 4); pass "
        "(batch, seq, dim) embeddings"),
    row("MultiHeadAttention-width", run("MultiHeadAttention", (8, 2), (1, 3, 6)),
        "MultiHeadAttention: x must be (..., seq, dim) with dim=8, got x.shape=(1, 3, 6)"),
    row("Transformer-learned-too-short", model_call(10, dim=8, position="learned", max_len=4,
                                                    toks=tokens(1, 6)),
        "LearnedEncoding: ", "max_len=4"),
]


def rope(args, q_shape, k_shape=None, positions=None, offset=0, **kwargs):
    """The call ``RotaryEmbedding(*args, **kwargs)(q, k, offset=..., positions=...)`` on
    zeros."""
    def call(on):
        layer = on.m.RotaryEmbedding(*args, **kwargs)
        more = {"offset": offset} if positions is None else {"positions": on.t(positions)}
        return layer(on.x(*q_shape), on.x(*(k_shape or q_shape)), **more)
    return call


INV_FREQ = np.ones(4, np.float32)      # rotates 8 features

ROTARY = [
    *[row(f"rope_frequencies-head_dim={d!r}", fn("rope_frequencies", d),
          f"rope_frequencies: head_dim must be even (RoPE rotates the features in pairs), got "
          f"head_dim={d}; use head_dim={d + 1} or head_dim={d - 1}")
      for d in (63, 7)],
    row("rope_frequencies-head_dim=0", fn("rope_frequencies", 0),
        "rope_frequencies: head_dim must be a positive integer, got head_dim=0"),
    row("RotaryEmbedding-head_dim=65", make("RotaryEmbedding", 65),
        "RotaryEmbedding: head_dim must be even (RoPE rotates the features in pairs), got "
        "head_dim=65; use head_dim=66 or head_dim=64"),
    row("RotaryEmbedding-rotary_dim=10>8", make("RotaryEmbedding", 8, rotary_dim=10),
        "RotaryEmbedding: inv_freq has 5 frequencies, which rotate 10 features, but q has only "
        "head_dim=8; pass at most 4 frequencies"),
    row("rope_frequencies-rope_type", fn("rope_frequencies", 64, scaling={"rope_type": "ntk2"}),
        "rope_frequencies: scaling['rope_type'] must be one of 'default', 'linear', 'ntk', "
        "'dynamic', 'yarn', 'llama3', 'longrope', 'proportional', got "
        "scaling['rope_type']='ntk2'; Hugging Face's rope_scaling vocabulary"),
    row("RotaryEmbedding-rope_type", make("RotaryEmbedding", 64, scaling={"type": "su"}),
        "RotaryEmbedding: scaling['rope_type'] must be one of", "got scaling['rope_type']='su'"),
    row("rope_frequencies-unknown-key",
        fn("rope_frequencies", 8, scaling={"rope_type": "yarn", "factor": 4.0,
                                           "original_max_position_embeddings": 64,
                                           "beta_fst": 2.0}),
        "rope_frequencies: scaling['beta_fst'] is not a key of rope_type='yarn' (its keys: "
        "rope_type, rope_theta, partial_rotary_factor, factor, original_max_position_embeddings, "
        "beta_fast, beta_slow, attention_factor, mscale, mscale_all_dim, truncate), got "
        "scaling['beta_fst']=2.0; remove it or correct its spelling"),
    row("RotaryEmbedding-key-of-another-type",
        make("RotaryEmbedding", 8, scaling={"rope_type": "linear", "factor": 2.0,
                                            "beta_fast": 16}),
        "RotaryEmbedding: scaling['beta_fast'] is not a key of rope_type='linear' (its keys: "
        "rope_type, rope_theta, partial_rotary_factor, factor), got scaling['beta_fast']=16"),
    row("rope_frequencies-base-and-rope_theta",
        fn("rope_frequencies", 8, base=500000.0, scaling={"rope_theta": 10000.5}),
        "rope_frequencies: base and scaling['rope_theta'] disagree, got base=500000.0 and "
        "scaling['rope_theta']=10000.5; give the base once"),
    row("RotaryEmbedding-rotary_dim-and-partial",
        make("RotaryEmbedding", 16, rotary_dim=8, scaling={"partial_rotary_factor": 0.25}),
        "RotaryEmbedding: rotary_dim and scaling['partial_rotary_factor'] disagree, got "
        "rotary_dim=8 for int(head_dim * partial_rotary_factor)=4"),
    row("rope_frequencies-partial-odd",
        fn("rope_frequencies", 12, scaling={"partial_rotary_factor": 0.25}),
        "rope_frequencies: int(head_dim * partial_rotary_factor) must be even (RoPE rotates the "
        "features in pairs), got int(head_dim * partial_rotary_factor)=3"),
    row("rope_frequencies-longrope-factors",
        fn("rope_frequencies", 8, scaling={"rope_type": "longrope", "short_factor": [1.0] * 3,
                                           "long_factor": [2.0] * 4,
                                           "original_max_position_embeddings": 64}),
        "rope_frequencies: scaling['short_factor'] must be a list of 4 positive numbers (one "
        "per rotated pair of features), got scaling['short_factor']=[1.0, 1.0, 1.0]"),
    row("rope_frequencies-scaling-not-a-dict", fn("rope_frequencies", 64, scaling="linear"),
        "rope_frequencies: scaling must be None or a dict", "got scaling='linear'"),
    *[row(f"rope_frequencies-factor={f!r}",
          fn("rope_frequencies", 64, scaling={"rope_type": "linear", "factor": f}),
          f"rope_frequencies: scaling['factor'] must be a finite number >= 1 (how many times "
          f"longer the context becomes), got scaling['factor']={f!r}; a factor below 1 would "
          "shrink the context")
      for f in (0.5, 0, None, "2")],
    row("rope_frequencies-dynamic-without-seq_len",
        fn("rope_frequencies", 64, scaling={"rope_type": "dynamic", "factor": 2.0,
                                            "original_max_position_embeddings": 512}),
        "rope_frequencies: rope_type='dynamic' needs seq_len (its base grows with the sequence), "
        "got seq_len=None; pass seq_len="),
    row("rope_frequencies-yarn-without-original",
        fn("rope_frequencies", 64, scaling={"rope_type": "yarn", "factor": 2.0}),
        "rope_frequencies: scaling['original_max_position_embeddings'] must be a positive "
        "integer, got scaling['original_max_position_embeddings']=None"),
    row("rope_frequencies-llama3-high<=low",
        fn("rope_frequencies", 64, scaling={"rope_type": "llama3", "factor": 8.0,
                                            "original_max_position_embeddings": 8192,
                                            "low_freq_factor": 4.0, "high_freq_factor": 1.0}),
        "rope_frequencies: scaling['high_freq_factor'] must be a finite number >= 4"),
    row("apply_rope-inv_freq-too-long", fn("apply_rope", table(2, 5, 6), 5, INV_FREQ),
        "apply_rope: inv_freq has 4 frequencies, which rotate 8 features, but x has only "
        "head_dim=6; pass at most 3 frequencies (rope_frequencies(6))"),
    row("apply_rope-inv_freq-rank-2", fn("apply_rope", table(2, 5, 8), 5, table(2, 2)),
        "apply_rope: inv_freq must have rank 1, got shape (2, 2) (rank 2); pass the "
        "(head_dim // 2,) frequencies of rope_frequencies"),
    *[row(f"apply_rope-positions-{shape}", fn("apply_rope", table(2, 3, 5, 8),
                                               np.zeros(shape, np.int32), INV_FREQ),
          f"apply_rope: positions must have shape (seq,) or (batch, seq) matching x's "
          f"(batch, ..., seq, head_dim), got positions.shape={shape} for x.shape=(2, 3, 5, 8); "
          "pass one position per token")
      for shape in ((4,), (3, 5), (2, 4), (1, 2, 5))],
    row("RotaryEmbedding-positions-length", rope((8,), (2, 3, 5, 8), positions=np.arange(6)),
        "RotaryEmbedding: positions must have shape (seq,) or (batch, seq) matching q's "
        "(batch, ..., seq, head_dim), got positions.shape=(6,) for q.shape=(2, 3, 5, 8)"),
    row("RotaryEmbedding-k-length", rope((8,), (2, 3, 5, 8), (2, 3, 4, 8)),
        "RotaryEmbedding: positions must have shape (seq,) or (batch, seq) matching k's",
        "got positions.shape=(5,) for k.shape=(2, 3, 4, 8)"),
    row("apply_rope-positions-bool", fn("apply_rope", table(5, 8), np.ones(5, bool), INV_FREQ),
        "apply_rope: positions must be integers or floats, got dtype bool"),
    *[row(f"apply_rope-layout={v!r}", fn("apply_rope", table(5, 8), 5, INV_FREQ, layout=v),
          f"apply_rope: layout must be one of 'half', 'interleaved', got layout={v!r}; \"half\" "
          "pairs feature i with i + r/2 (GPT-NeoX, Hugging Face), \"interleaved\" pairs 2i "
          "with 2i+1 (GPT-J, Meta)")
      for v in ("concat", None)],
    row("RotaryEmbedding-layout", make("RotaryEmbedding", 8, layout="neox"),
        "RotaryEmbedding: layout must be one of 'half', 'interleaved', got layout='neox'"),
    row("RotaryEmbedding-offset=-1", rope((8,), (1, 5, 8), offset=-1),
        "RotaryEmbedding: offset must be a non-negative integer, got offset=-1; pass the number "
        "of cached tokens before q"),
    row("apply_rope-attention_factor=0", fn("apply_rope", table(5, 8), 5, INV_FREQ,
                                            attention_factor=0.0),
        "apply_rope: attention_factor must be a finite number greater than 0, got "
        "attention_factor=0.0"),
    row("convert_rope_layout-to", fn("convert_rope_layout", table(16, 4), 2, to="neox"),
        "convert_rope_layout: to must be one of 'half', 'interleaved', got to='neox'"),
    row("convert_rope_layout-rows", fn("convert_rope_layout", table(15, 4), 2, to="half"),
        "convert_rope_layout: weight must be (num_heads * head_dim, in_features) with "
        "num_heads=2, got weight.shape=(15, 4)"),
    row("convert_rope_layout-odd-head_dim", fn("convert_rope_layout", table(14, 4), 2, to="half"),
        "convert_rope_layout: head_dim must be even (RoPE rotates the features in pairs), got "
        "head_dim=7"),
    row("apply_rope_2d-grid", fn("apply_rope_2d", table(1, 12, 8), 3, 5, np.ones(2, np.float32)),
        "apply_rope_2d: x must hold one token per patch of the grid, got 12 tokens "
        "(x.shape=(1, 12, 8)) for grid=(3, 5), which has 15 patches; pass 15 tokens"),
    row("apply_rope_2d-features", fn("apply_rope_2d", table(1, 12, 6), 3, 4, np.ones(2, np.float32)),
        "apply_rope_2d: inv_freq has 4 frequencies, which rotate 8 features, but x has only "
        "head_dim=6"),
    row("RotaryEmbedding-q-width", rope((8,), (2, 3, 5, 16)),
        "RotaryEmbedding: q must be (..., seq, head_dim) with head_dim=8, got "
        "q.shape=(2, 3, 5, 16); build the layer with head_dim=16, or split the heads first"),
    row("RotaryEmbedding-k-width", rope((8,), (2, 3, 5, 8), (2, 3, 5, 6)),
        "RotaryEmbedding: k must be (..., seq, head_dim) with head_dim=8, got "
        "k.shape=(2, 3, 5, 6)"),
    row("RotaryEmbedding2D-q-width", lambda on: on.m.RotaryEmbedding2D(16, (3, 4))(
        on.x(2, 12, 32), on.x(2, 12, 32)),
        "RotaryEmbedding2D: q must be (..., seq, head_dim) with head_dim=16, got "
        "q.shape=(2, 12, 32)"),
    row("RotaryEmbedding2D-head_dim=18", make("RotaryEmbedding2D", 18, (3, 4)),
        "RotaryEmbedding2D: head_dim must be a multiple of 4 (pairs of features for the rows "
        "and as many for the columns), got head_dim=18; use head_dim=20 or head_dim=16"),
    row("RotaryEmbedding2D-grid", make("RotaryEmbedding2D", 16, (3, 0)),
        "RotaryEmbedding2D: grid must be a (height, width) pair of positive integers, got "
        "grid=(3, 0)"),
    row("RotaryEmbedding2D-patches", lambda on: on.m.RotaryEmbedding2D(16, (3, 4))(
        on.x(2, 10, 16), on.x(2, 10, 16)),
        "RotaryEmbedding2D: x must hold one token per patch of the grid, got 10 tokens "
        "(x.shape=(2, 10, 16)) for grid=(3, 4), which has 12 patches; pass 12 tokens"),
]

ROWS = [*SINUSOIDAL, *LEARNED, *REGULARIZATION, *STRUCTURED, *COORDINATES_AND_GRAPHS, *BIAS,
        *SHAW, *ROTARY, *ATTENTION]


@pytest.mark.parametrize("call, expected", ROWS)
def test_same_error_in_both_faces(call, expected):
    message = same_error(FACES, lambda face: call(On(face)))
    for text in expected:
        found = re.search(text, message) if isinstance(text, rx) else text in message
        assert found, f"{text!r} is not in the message: {message}"


def test_row_ids_are_unique():
    ids = [p.id for p in ROWS]
    assert len(ids) == len(set(ids))
