"""Length-extrapolation biases (NumPy): xPos's decay, Kerple, Sandwich, FIRE, continuous biases.

The schemes of this family are built for sequences longer than the training
ones. xPos (Sun et al. 2023) is RoPE whose query and key pairs are also scaled,
by ``zeta_i^(n / scale_base)`` and ``zeta_i^(-m / scale_base)``, so a score
decays as ``zeta_i^((n - m) / scale_base)``. The others are biases on the logits,
float32 ``(1, heads, q_len, k_len)`` as in :mod:`posenc.bias`, queries being the
last ``q_len`` of the ``k_len`` positions (decoding with a cache):

* Kerple (Chi et al. 2022): ``-r1 * log(1 + r2 |i - j|)`` (``kernel="log"``) or
  ``-r1 * |i - j|^r2`` (``kernel="power"``), learned ``r1, r2 > 0`` per head;
* Sandwich (Chi et al. 2023): the inner product of two sinusoidal embeddings,
  ``sum_k cos((i - j) / 10000^(2k/d'))`` minus its value at 0, divided by
  ``8h / H`` for head ``h = 1 .. H``;
* FIRE (Li et al. 2024): an MLP of ``psi(i - j) / psi(max(L, i))``,
  ``psi(x) = log(c x + 1)``, learned ``c`` and threshold ``L``;
* x-transformers' dynamic position bias: an MLP of the signed distance ``i - j``
  (optionally ``sign(x) log(1 + |x|)``);
* Swin V2's continuous position bias: ``16 sigmoid(MLP(log-spaced 2D offsets))``
  over a window, which fits any window size.

Here are the family's argument rules and the parts that depend on integers
only (xPos's ``zeta``, Sandwich's bias, Swin V2's coordinates); the learned
parts are in the faces, ``posenc/torch/distance_bias.py`` and
``posenc/keras/distance_bias.py``.
"""

from __future__ import annotations

import math

import numpy as np

from posenc._checks import _error, check_choice, check_float, check_positive_int
from posenc.bias import check_num_heads, check_window
from posenc.positions import relative_positions

__all__ = [
    "KERPLE_KERNELS",
    "KERPLE_EPS",
    "xpos_zeta",
    "sandwich_bias",
    "swinv2_log_coords",
]

#: Kerple's kernels: ``"log"``, ``-r1 log(1 + r2 |i-j|)``, and ``"power"``, ``-r1 |i-j|^r2``.
KERPLE_KERNELS = ("log", "power")
#: The floor of Kerple's ``r1`` and ``r2`` (the authors' code clamps them to it).
KERPLE_EPS = 1e-2
#: Kerple's initialisation in the authors' code: ``r1 ~ U(0, a)``, ``r2 ~ U(0, b)`` per kernel
#: (the log kernel's coefficient and scale, the power kernel's coefficient and exponent).
_KERPLE_INIT = {"log": (2.0, 1.0), "power": (1.0, 2.0)}
#: Swin V2's gain on the sigmoid of its bias MLP.
SWINV2_GAIN = 16.0


# --------------------------------------------------------------------------- argument rules

def check_kerple_kernel(kernel, *, what: str = "") -> str:
    return check_choice("kernel", kernel, KERPLE_KERNELS, what=what,
                        fix="Kerple's log kernel (kernel='log') extrapolates best in the paper")


def check_scale_base(scale_base, *, what: str = "") -> float:
    return check_float("scale_base", scale_base, above=0.0, what=what,
                       fix="xPos uses scale_base=512")


def check_gamma(gamma, *, what: str = "") -> float:
    return check_float("gamma", gamma, above=0.0, what=what, fix="xPos uses gamma=0.4")


def check_sandwich_dim(dim, *, name: str = "dim", what: str = "") -> int:
    """Sandwich's ``d'``: an even positive int (``d'/2`` cosines)."""
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 2 or dim % 2:
        raise _error(what, f"{name} must be an even integer of at least 2 (the width d' of "
                           f"Sandwich's sinusoidal embeddings, d'/2 frequencies), got "
                           f"{name}={dim!r}", f"pass an even {name}, e.g. 64")
    return dim


def check_hidden_dim(hidden_dim, *, what: str = "") -> int:
    return check_positive_int("hidden_dim", hidden_dim, what=what,
                              fix="FIRE uses hidden_dim=32, Swin V2 hidden_dim=512")


def check_depth(depth, *, what: str = "") -> int:
    return check_positive_int("depth", depth, what=what,
                              fix="x-transformers uses depth=2 (two hidden layers)")


def check_fire_init(c, threshold, eps, *, what: str = "") -> tuple[float, float, float]:
    c = check_float("c", c, above=0.0, what=what, fix="FIRE initialises c=0.1")
    threshold = check_float("threshold", threshold, above=0.0, what=what,
                            fix="FIRE initialises the threshold L at 512 (about the training "
                                "length)")
    eps = check_float("eps", eps, above=0.0, what=what, fix="FIRE uses eps=1e-6")
    return c, threshold, eps


def check_cpb_window(window_size, pretrained_window, *, what: str = "") -> tuple:
    """A window of at least 2 x 2 (Swin V2 divides the offsets by ``window - 1``), and an
    optional pretrained window of the same kind."""
    window = check_window(window_size, what=what)
    pre = None if pretrained_window is None else check_window(
        pretrained_window, name="pretrained_window", what=what)
    for name, hw in (("window_size", window), ("pretrained_window", pre)):
        if hw is not None and min(hw) < 2:
            raise _error(what, f"{name} must be at least 2 x 2 (the offsets are divided by "
                               f"size - 1), got {name}={hw}", "Swin V2 uses windows of 8 to 24")
    return window, pre


# --------------------------------------------------------------------------- formulas

def xpos_zeta(head_dim: int, gamma: float = 0.4) -> np.ndarray:
    """xPos's per-pair decay base ``zeta_i = (i / (d/2) + gamma) / (1 + gamma)``, float64 ``(d/2,)``.

    ``zeta_0 = gamma / (1 + gamma)`` (the fastest decay) rises to nearly 1 for
    the slowest-turning pair. With ``gamma=0.4`` this is rotary-embedding-torch's
    ``(arange(0, d, 2) + 0.4 d) / (1.4 d)``.

    Example:
        >>> xpos_zeta(8).round(4)
        array([0.2857, 0.4643, 0.6429, 0.8214])

    References:
        Sun et al., "A Length-Extrapolatable Transformer", ACL 2023 (arXiv 2212.10554),
        section 3.2.
    """
    head_dim = check_positive_int("head_dim", head_dim, what="xpos_zeta")
    gamma = check_gamma(gamma, what="xpos_zeta")
    half = head_dim // 2
    return (np.arange(half) / half + gamma) / (1.0 + gamma)


def sandwich_bias(num_heads: int, dim: int, q_len: int, k_len: int) -> np.ndarray:
    """Sandwich's bias: float32 ``(num_heads, q_len, k_len)``.

    ``(sum_{k=1}^{d'/2} cos((i - j) / 10000^(2k/d')) - d'/2) / (8h / H)`` for head
    ``h = 1 .. H``: the inner product of the sinusoidal embeddings of positions
    ``i`` and ``j`` (``d' = dim``), shifted so that the diagonal is 0, and scaled
    per head like ALiBi's slopes. It is even in ``i - j`` and falls (with
    ripples) as the distance grows. Computed in float64.

    Example:
        >>> sandwich_bias(2, 128, 1, 4).round(3)   # the second head: half the first
        array([[[-2.456, -1.3  , -0.362,  0.   ]],
        <BLANKLINE>
               [[-1.228, -0.65 , -0.181,  0.   ]]], dtype=float32)

    References:
        Chi et al., "Dissecting Transformer Length Extrapolation via the Lens of
        Receptive Field Analysis", ACL 2023 (arXiv 2212.10356), section 5.
    """
    what = "sandwich_bias"
    num_heads = check_num_heads(num_heads, what=what)
    dim = check_sandwich_dim(dim, what=what)
    return sandwich_at(num_heads, dim, relative_positions(q_len, k_len))


def sandwich_at(num_heads: int, dim: int, rel) -> np.ndarray:
    """Sandwich's bias at any integer offsets ``rel = j - i``: float32 ``(num_heads, *rel.shape)``
    (:func:`sandwich_bias` is this on a block's offsets; the faces' ``bias_at`` read it on
    every offset ``-(k - 1) .. k - 1`` of a batch's real positions). Computed in float64."""
    rel = np.asarray(rel, dtype=np.float64)
    inv_freq = 1.0 / 10000.0 ** (2.0 * np.arange(1, dim // 2 + 1) / dim)
    inner = np.cos(rel[..., None] * inv_freq).sum(-1) - dim / 2
    scale = 8.0 * np.arange(1, num_heads + 1) / num_heads
    return (inner[None] / scale.reshape(-1, *[1] * rel.ndim)).astype(np.float32)


def check_bias_positions(q_shape, k_shape, *, what: str = "") -> None:
    """``bias_at``'s positions: int ``(batch, q)`` and ``(batch, k)``, one batch."""
    for name, shape in (("q_positions", q_shape), ("k_positions", k_shape)):
        if len(shape) != 2:
            raise _error(what, f"{name} must be (batch, length) per-token positions, got "
                               f"shape {tuple(shape)}",
                         "pass a (batch, seq) int tensor, e.g. from mask_positions")
    if None not in (q_shape[0], k_shape[0]) and q_shape[0] != k_shape[0]:
        raise _error(what, f"q_positions and k_positions must have one batch, got "
                           f"{tuple(q_shape)} and {tuple(k_shape)}",
                     "pass the positions of the same rows")


def swinv2_log_coords(window_size, pretrained_window=None) -> np.ndarray:
    """Swin V2's log-spaced relative coordinates: float32 ``(2H-1, 2W-1, 2)``.

    Each offset ``(dy, dx)`` of an ``H x W`` window is divided by ``window - 1``
    (or ``pretrained_window - 1``, to reuse a bias MLP trained at another window),
    times 8, then mapped to ``sign(x) log2(1 + |x|) / log2(8)``: the offsets of
    the trained window lie in ``[-log2(9)/3, log2(9)/3]`` (about 1.06), and a larger
    window's offsets grow only logarithmically beyond.

    Example:
        >>> swinv2_log_coords(3)[:, 0, 0].round(4)   # dy of a 3 x 3 window
        array([-1.0566, -0.774 ,  0.    ,  0.774 ,  1.0566], dtype=float32)

    References:
        Liu et al., "Swin Transformer V2: Scaling Up Capacity and Resolution",
        CVPR 2022 (arXiv 2111.09883), section 3.3.
    """
    (h, w), pre = check_cpb_window(window_size, pretrained_window, what="swinv2_log_coords")
    norm = (h, w) if pre is None else pre
    dy = np.arange(-(h - 1), h, dtype=np.float32) / np.float32(norm[0] - 1)
    dx = np.arange(-(w - 1), w, dtype=np.float32) / np.float32(norm[1] - 1)
    grid = np.stack(np.meshgrid(dy, dx, indexing="ij"), axis=-1) * np.float32(8)
    return (np.sign(grid) * np.log2(np.float32(1) + np.abs(grid))
            / np.float32(math.log2(8))).astype(np.float32)
