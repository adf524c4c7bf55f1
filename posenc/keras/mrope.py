"""Multimodal RoPE (Keras face): RoPE whose pairs read a token's temporal, height or width position.

:func:`apply_mrope` rotates ``x`` as :func:`posenc.keras.rotary.apply_rope`
does, with the angles and the rotation of that module (only ``keras.ops``,
float32 angles whatever the dtype policy): the angles of the three positions
are computed once each, then pair ``i`` keeps the angle of its axis
(:func:`posenc.mrope.mrope_axes`). The positions of a mixed sequence come from
:func:`posenc.mrope.mrope_positions`; the PyTorch face mirrors this module
name for name.
"""

from __future__ import annotations

import keras  # noqa: F401  (the docstring's example)
import numpy as np
from keras import ops

from posenc import mrope as numpy_mrope
from posenc.keras._util import as_positions
from posenc.keras.rotary import _angles, _batched, _check_x, _inv_freq, _rotate
from posenc.rotary import check_rope_layout

__all__ = ["apply_mrope"]


def _per_pair(cos3, sin3, axes):
    """``(3, ..., n)`` angles of the three axes -> ``(..., n)``, pair ``i`` from ``axes[i]``."""
    height, width = np.asarray(axes) == 1, np.asarray(axes) == 2

    def pick(a):
        return ops.where(width, a[2], ops.where(height, a[1], a[0]))

    return pick(cos3), pick(sin3)


def apply_mrope(x, positions, inv_freq, *, sections, arrangement: str = "chunked",
                layout: str = "half"):
    """Multimodal RoPE: pair ``i`` of ``x`` turns by ``positions[axis(i)] * inv_freq[i]``.

    Each token has three positions, temporal, height and width (Qwen2-VL's
    M-RoPE); ``sections = (s_t, s_h, s_w)`` pairs read each of them, in the
    ``arrangement`` of :func:`posenc.mrope.mrope_axes`: ``"chunked"``
    (Qwen2-VL, Qwen2.5-VL: contiguous blocks) or ``"interleaved"`` (Qwen3-VL:
    ``t, h, w`` at stride 3). Text tokens, with ``t = h = w``, get exactly
    :func:`apply_rope`. The angles are float32; the result has ``x``'s
    dtype; features past ``2 * len(inv_freq)`` pass unchanged.

    Args:
        x: tensor ``(batch, ..., seq, head_dim)``, e.g. ``(batch, heads, seq, head_dim)``.
        positions: int or float ``(3, batch, seq)`` (``batch`` may be 1), the
            temporal, height and width positions
            (:func:`posenc.mrope.mrope_positions`).
        inv_freq: ``(n,)`` frequencies with ``2n <= head_dim`` (:func:`rope_frequencies`).
        sections: three non-negative ints summing to ``n``: the pairs of the
            temporal, height and width axes (Hugging Face's ``mrope_section``,
            e.g. ``(16, 24, 24)`` for Qwen2-VL's 128-wide heads).
        arrangement: ``"chunked"`` (default) or ``"interleaved"`` (stride 3:
            at most ``(n + 1) // 3`` height and ``n // 3`` width pairs).
        layout: ``"half"`` (default; Qwen's, Hugging Face's ``rotate_half``) or
            ``"interleaved"``: how features pair up, as in :func:`apply_rope`.

    Returns:
        Tensor of the shape and dtype of ``x``.

    Example:
        >>> from posenc.keras import rope_frequencies, apply_rope
        >>> inv_freq, _ = rope_frequencies(16)
        >>> q = keras.random.normal((2, 4, 5, 16), seed=0)
        >>> t = np.broadcast_to(np.arange(5), (3, 2, 5))          # text: t = h = w
        >>> bool(ops.all(apply_mrope(q, t, inv_freq, sections=(2, 3, 3))
        ...              == apply_rope(q, t[0], inv_freq)))
        True

    References:
        Wang et al., "Qwen2-VL: Enhancing Vision-Language Model's Perception of
        the World at Any Resolution", arXiv 2409.12191, 2024, section 2.1.
    """
    what = "apply_mrope"
    layout = check_rope_layout(layout, what=what)
    inv_freq = _inv_freq(inv_freq, what)
    axes = numpy_mrope.mrope_setup(sections, inv_freq.shape[0], arrangement, what=what)
    x = ops.convert_to_tensor(x)
    _check_x(x, inv_freq.shape[0], name="x", what=what)
    positions = as_positions(positions, what=what)
    numpy_mrope.check_mrope_positions(positions.shape, x.shape, what=what)
    cos, sin = _per_pair(*_angles(positions, inv_freq, 1.0), axes)
    cos, sin = _batched(cos, sin, positions[0], x)
    return _rotate(x, cos, sin, layout)
