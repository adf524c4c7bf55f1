"""Bugs that real positional-encoding code has shipped, kept here on purpose, for teaching.

**Everything in this module and in ``posenc.torch.bugs`` / ``posenc.keras.bugs`` is wrong by
design.** Each function or class reproduces one mistake, small enough to read, so that the
debugging chapter can run it, measure its symptom and show which test of posenc's suite
catches it. Never use them in a model.

:data:`BUGS` is the registry: one :class:`Bug` per mistake, with where its wrong code lives
and the test that catches it. ``tests/test_bugs.py`` runs that test's check on the wrong code
and asserts that it fails there, and passes on posenc (mutation testing: a check that cannot
fail on a known bug guards nothing).

The framework-free bugs live here (Swin's index, the decoding cache); the bugs that live in a
face's tensor code are in ``posenc/torch/bugs.py`` and ``posenc/keras/bugs.py``, with the same
names in both.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from posenc.attention import Cache, LayerCache

__all__ = ["Bug", "BUGS", "swin_relative_index_unscaled", "OffByOneLayerCache",
           "OffByOneCache"]


@dataclass(frozen=True)
class Bug:
    """One shipped mistake.

    Attributes:
        title: what goes wrong, in a few words.
        wrong: the name of the wrong code (in this module, or in both faces' ``bugs``).
        right: the posenc code it gets wrong.
        symptom: what a user sees.
        caught_by: the test of posenc's suite whose check fails on the wrong code.
        faces: where the wrong code exists: ``("numpy",)`` for this module, or the faces.
    """

    title: str
    wrong: str
    right: str
    symptom: str
    caught_by: str
    faces: tuple = ("torch", "keras")


#: The registry: name -> :class:`Bug`. One entry per mistake.
BUGS = {
    "rope-layout": Bug(
        "a RoPE checkpoint converted between layouts as if it had one head",
        "convert_rope_layout_one_head", "convert_rope_layout",
        "a model loaded from another layout's checkpoint computes other attention scores",
        "tests/test_rotary.py::test_converted_weights_give_the_same_scores_in_the_other_layout"),
    "bfloat16-positions": Bug(
        "RoPE angles computed in bfloat16",
        "apply_rope_in_input_dtype", "apply_rope",
        "from position 257 on, neighbouring positions share an angle (runs of 16 to 32 "
        "tokens at 2,048 to 4,096, and inv_freq rounded too); near 65,536 the angles are off "
        "by hundreds of radians",
        "tests/test_rotary.py::test_bfloat16_near_65536_stays_within_005_of_float32"),
    "cache-offset": Bug(
        "cached decoding reads the offset after the new token is counted",
        "OffByOneCache", "posenc.attention.Cache",
        "token-by-token logits differ from the full pass for rope, learned and sinusoidal",
        "tests/test_attention.py::test_cached_decoding_equals_the_full_pass",
        ("numpy",)),
    "short-table": Bug(
        "a learned table read past its end without a check",
        "clamped_encoding", "LearnedEncoding.encoding",
        "every position past the table gets the last row (or zeros on some GPUs)",
        "tests/test_learned.py::test_positions_past_the_table_raise"),
    "swapped-halves": Bug(
        "sine and cosine halves swapped",
        "sinusoidal_swapped", "sinusoidal",
        "weights trained with one convention read another encoding; relative tests still pass",
        "tests/test_sinusoidal.py::test_sinusoidal_matches_reference"),
    "swin-unscaled": Bug(
        "Swin's row offset not multiplied by 2W - 1",
        "swin_relative_index_unscaled", "swin_relative_index",
        "different 2D offsets share one learned bias",
        "tests/test_bias.py::test_swin_index_has_no_collisions_and_a_symmetric_structure",
        ("numpy",)),
    "alibi-key-only": Bug(
        "ALiBi's key-only form slope * j added in bfloat16",
        "alibi_bias_key_only", "alibi_bias",
        "the bias grows with the key's position (about 2,000 at 4,096 keys for the steepest "
        "head), where bfloat16's step is 8 (16 from 2,048): the rounding swamps the scores "
        "and the attention "
        "rows move far from float32's (total variation 0.2 over eight heads at 4,096 keys)",
        "tests/test_bias.py::test_alibi_bias_added_in_bfloat16_keeps_the_attention_of_float32"),
    "starved-table": Bug(
        "the positional table cut off from the gradient",
        "starve_position_table", "LearnedEncoding",
        "detached, the table never moves from its initial values; behind a tiny scale it "
        "moves at the usual rate under Adam but its effect on the model is scaled away; "
        "either way the model learns positions elsewhere or not at all, and the gradient "
        "ratio flags both",
        "tests/test_diagnostics.py::test_learned_table_gets_a_healthy_gradient"),
}


def swin_relative_index_unscaled(window_h: int, window_w: int) -> np.ndarray:
    """WRONG on purpose: Swin's index with the row offset shifted but not multiplied by
    ``2W - 1`` (compare :func:`posenc.bias.swin_relative_index`)."""
    rows, cols = np.divmod(np.arange(window_h * window_w), window_w)
    dy = rows[:, None] - rows[None, :] + window_h - 1
    dx = cols[:, None] - cols[None, :] + window_w - 1
    return dy + dx


class OffByOneLayerCache(LayerCache):
    """WRONG on purpose: a layer cache whose ``length`` (the next chunk's offset) already
    counts the token being decoded, as when the offset is read after the new key is stored."""

    @property
    def length(self) -> int:
        return 0 if self.keys is None else int(self.keys.shape[-2]) + 1


class OffByOneCache(Cache):
    """WRONG on purpose: a Transformer cache made of :class:`OffByOneLayerCache` (pass it
    where ``model.new_cache()`` would go)."""

    def __init__(self, depth: int):
        self.layers = [OffByOneLayerCache() for _ in range(depth)]
