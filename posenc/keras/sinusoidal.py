"""Sinusoidal encodings (Keras face): functions and the layer that adds them."""

from __future__ import annotations

import math

import keras
import numpy as np
from keras import ops

from posenc._checks import check_base, check_even_dim, check_layout, check_numeric_dtype
from posenc.keras._util import (
    AdditiveEncoding,
    as_positions,
    dtype_of,
    on_host,
    result_dtype,
    wide_dtype,
)
from posenc.sinusoidal import (
    check_coordinate_scale,
    check_coordinate_width,
    check_coordinates,
    grid_coordinates,
    sinusoidal_inv_freq,
)

__all__ = ["sinusoidal", "sinusoidal_2d", "SinusoidalEncoding", "coordinate_encoding"]


def sinusoidal(positions, dim: int, *, base: float = 10000.0, layout: str = "interleaved"):
    """Sinusoidal positional encoding of Vaswani et al. (2017) for any positions.

    ``PE[p, 2i] = sin(p * w_i)`` and ``PE[p, 2i+1] = cos(p * w_i)`` with
    ``w_i = base ** (-2i / dim)``. Positions may be integers or floats of any
    shape; there is no maximum length. The angles are computed in float64
    (in NumPy on JAX without x64; inside ``jax.jit`` there, in float32, which
    is off by up to about ``position * 6e-8``), so the result stays accurate at
    positions near a million, then cast to the positions' dtype (float32 for
    integer positions).

    Args:
        positions: an int ``n`` (meaning ``0 .. n-1``) or a tensor of positions
            of any shape. Pass integer or float32 positions: float16 and
            bfloat16 cannot hold every integer above 2048 and 256.
        dim: even feature dimension.
        base: wavelength base. Default ``10000.0``.
        layout: ``"interleaved"`` (sin, cos, sin, cos, ...: the paper, d2l,
            keras-hub) or ``"concat"`` (all sines, then all cosines:
            TensorFlow's tutorial, x-transformers). Default ``"interleaved"``.

    Returns:
        Tensor of shape ``(*positions.shape, dim)``.

    Example:
        >>> tuple(sinusoidal(4, 8).shape)
        (4, 8)

    References:
        Vaswani et al., "Attention Is All You Need", NeurIPS 2017, section 3.5.
    """
    dim = check_even_dim(dim)
    layout = check_layout(layout, what="sinusoidal")
    base = check_base(base, what="sinusoidal")
    pos = as_positions(positions, what="sinusoidal")
    host = on_host(pos if isinstance(positions, int) else positions)
    if host is not None:  # JAX without x64: the float64 angles in NumPy
        angles = host[0][..., None] * sinusoidal_inv_freq(dim, base)
        sin, cos = np.sin(angles), np.cos(angles)
        out = (np.stack((sin, cos), axis=-1).reshape(*sin.shape[:-1], dim)
               if layout == "interleaved" else np.concatenate((sin, cos), axis=-1))
        return ops.cast(ops.convert_to_tensor(out.astype(np.float32)), result_dtype(pos))
    wide = wide_dtype()
    inv_freq = ops.convert_to_tensor(sinusoidal_inv_freq(dim, base).astype(wide))
    angles = ops.expand_dims(ops.cast(pos, wide), -1) * inv_freq
    sin, cos = ops.sin(angles), ops.cos(angles)
    if layout == "interleaved":
        out = ops.stack((sin, cos), axis=-1)
        out = ops.reshape(out, (*ops.shape(sin)[:-1], dim))
    else:
        out = ops.concatenate((sin, cos), axis=-1)
    return ops.cast(out, result_dtype(pos))


def sinusoidal_2d(height: int, width: int, dim: int, *, base: float = 10000.0,
                  layout: str = "interleaved", trained_hw=None):
    """2D sinusoidal encoding of a row-major ``height x width`` grid of patches.

    The first ``dim/2`` channels encode the row with :func:`sinusoidal`, the
    last ``dim/2`` the column. Fixed 2D tables like this are used by MoCo v3
    and MAE; check a checkpoint's convention before loading it (MAE's released
    code puts the column first and uses the concatenated layout).

    With ``trained_hw = (h0, w0)`` the cells sit at fractional coordinates
    of an ``h0 x w0`` grid stretched to ``height x width``: cell ``(i, j)`` at
    ``((i + 0.5) * h0 / height - 0.5, (j + 0.5) * w0 / width - 0.5)``, the
    points where ``resize_table_2d`` (``align_corners=False``) samples a
    trained table. ``sinusoidal_2d(24, 24, dim, trained_hw=(14, 14))`` is what
    a model trained on a 14 x 14 grid sees when its sinusoidal table is
    stretched to 24 x 24 (see :func:`posenc.sinusoidal.grid_coordinates`).

    Args:
        height: number of rows (patches down).
        width: number of columns (patches across).
        dim: feature dimension, a multiple of 4.
        base: wavelength base. Default ``10000.0``.
        layout: ``"interleaved"`` or ``"concat"``, within each half.
        trained_hw: optional ``(h0, w0)``: place the cells on this grid,
            stretched. Default ``None``: the integer grid; ``(height, width)``
            gives the same table.

    Returns:
        float32 tensor of shape ``(height * width, dim)``.

    Example:
        >>> tuple(sinusoidal_2d(2, 3, 8).shape)
        (6, 8)
    """
    rows, cols = grid_coordinates(height, width, trained_hw)
    dim = check_even_dim(dim, multiple=4, what="sinusoidal_2d")
    return ops.cast(ops.concatenate(
        (sinusoidal(ops.convert_to_tensor(rows), dim // 2, base=base, layout=layout),
         sinusoidal(ops.convert_to_tensor(cols), dim // 2, base=base, layout=layout)),
        axis=-1,
    ), "float32")


@keras.saving.register_keras_serializable(package="posenc")
class SinusoidalEncoding(AdditiveEncoding):
    """Adds the fixed sinusoidal encoding to token embeddings.

    ``call(x)`` returns ``x + sinusoidal(positions, dim)`` in the layer's
    compute dtype. Weightless; no maximum length.

    Args:
        dim: even feature dimension; must equal ``x.shape[-1]``.
        base: wavelength base. Default ``10000.0``.
        layout: ``"interleaved"`` or ``"concat"``. Default ``"interleaved"``.

    Call arguments:
        x: ``(batch, seq, dim)`` (any leading shape) embeddings.
        positions: optional ``(seq,)`` or ``(batch, seq)`` positions (int or
            float); default ``0 .. seq-1``.

    Example:
        >>> enc = SinusoidalEncoding(16)
        >>> tuple(enc(keras.ops.zeros((2, 5, 16))).shape)
        (2, 5, 16)
    """

    def __init__(self, dim: int, *, base: float = 10000.0, layout: str = "interleaved",
                 **kwargs):
        # autocast off: float positions must not be rounded to a bf16 compute dtype.
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        self.dim = check_even_dim(dim, what="SinusoidalEncoding")
        self.layout = check_layout(layout, what="SinusoidalEncoding")
        self.base = check_base(base, what="SinusoidalEncoding")
        self.built = True

    def encoding(self, positions):
        """The encoding alone for ``positions`` (an int n or a tensor).

        float32 for an int or integer positions; float positions keep their dtype.
        """
        return sinusoidal(as_positions(positions, what="SinusoidalEncoding"), self.dim,
                          base=self.base, layout=self.layout)

    def get_config(self):
        config = super().get_config()
        config.update({"dim": self.dim, "base": self.base, "layout": self.layout})
        return config


# --------------------------------------------------------------------------- coordinates

def coordinate_encoding(coords, dim: int, *, scale=2 * math.pi, base: float = 10000.0,
                        layout: str = "interleaved"):
    """Sinusoidal encoding of real coordinates: one sinusoid per coordinate, concatenated.

    DETR (Carion et al., 2020) encodes the position of a feature-map cell by its
    coordinates normalised to ``[0, 1]`` and multiplied by ``2 pi``, with the
    sinusoid of Vaswani et al. applied to each axis and the two halves
    concatenated, ``y`` first. Conditional DETR and DAB-DETR encode reference
    points ``(x, y)`` and anchor boxes ``(x, y, w, h)`` of their object queries
    the same way. For ``coords`` of shape ``(..., k)`` the result is
    ``concat_c sinusoidal(scale_c * coords[..., c], dim // k)``: pass the
    coordinates in the order you want their blocks (``(y, x)`` for DETR).

    Args:
        coords: float (or int) tensor ``(..., k)``, e.g. ``(y, x)`` in ``[0, 1]``.
        dim: feature dimension, a multiple of ``2 * k``.
        scale: positive number multiplying every coordinate, or one per
            coordinate (e.g. ``1 / hop`` for seconds). Default ``2 * pi``.
        base: wavelength base (DETR's ``temperature``). Default ``10000.0``.
        layout: ``"interleaved"`` (DETR) or ``"concat"`` within each block.

    Returns:
        Tensor ``(..., dim)``: float32 for integer coordinates, else the
        coordinates' dtype.

    Example:
        >>> centres = keras.ops.convert_to_tensor([[0.5, 0.25], [0.1, 0.9]])   # (y, x)
        >>> tuple(coordinate_encoding(centres, 256).shape)
        (2, 256)

    References:
        Carion et al., "End-to-End Object Detection with Transformers", ECCV 2020.
        Liu et al., "DAB-DETR: Dynamic Anchor Boxes are Better Queries for DETR",
        ICLR 2022.
    """
    what = "coordinate_encoding"
    coords = ops.convert_to_tensor(coords)
    check_numeric_dtype("coords", dtype_of(coords), what=what)
    num = check_coordinates(coords.shape, what=what)
    width = check_coordinate_width(dim, num, what=what)
    scales = check_coordinate_scale(scale, num, what=what)
    base, layout = check_base(base, what=what), check_layout(layout, what=what)
    host = on_host(coords)  # JAX without x64: the float64 scaling in NumPy
    wide = host[0] if host is not None else ops.cast(coords, wide_dtype())
    blocks = [sinusoidal(wide[..., c] * scales[c], width, base=base, layout=layout)
              for c in range(num)]
    return ops.cast(ops.concatenate(blocks, axis=-1), result_dtype(coords))
