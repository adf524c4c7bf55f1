"""Positional-encoding bugs, wrong on purpose, for teaching; most of them shipped in real code.

**Everything in this module and in ``posenc.torch.bugs`` / ``posenc.keras.bugs`` is wrong by
design.** Each function or class reproduces one mistake, small enough to read, so that the
debugging chapter can run it, measure its symptom and show which test of posenc's suite
catches it. Never use them in a model.

:data:`BUGS` is the registry: one :class:`Bug` per mistake, with where its wrong code lives,
the test that catches it and where the mistake shipped (the public threads that report or fix
it; none for a mistake that is only plausible). The test named in ``caught_by`` runs on the
wrong code too, as a strict ``xfail`` (``tests/mutants.py``): the suite fails if that test
ever passes on the bug; ``tests/test_bugs.py`` checks that every bug has such a case.

The framework-free bugs live here (Swin's index, the decoding cache); the bugs that live in a
face's tensor code are in ``posenc/torch/bugs.py`` and ``posenc/keras/bugs.py``, with the same
names in both.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from posenc.attention import Cache, LayerCache

__all__ = ["Bug", "BUGS", "thread_name", "swin_relative_index_unscaled", "OffByOneLayerCache",
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
        shipped: addresses of public threads where the mistake was reported or fixed, or,
            for a form no thread reports as a bug, where it was added (empty for a mistake
            that is only plausible).
        how_shipped: how the shipped form differs from the wrong code here ("" when it is
            the same).
    """

    title: str
    wrong: str
    right: str
    symptom: str
    caught_by: str
    faces: tuple = ("torch", "keras")
    shipped: tuple = ()
    how_shipped: str = ""


GH = "https://github.com/"

#: The registry: name -> :class:`Bug`. One entry per mistake.
BUGS = {
    "rope-layout": Bug(
        "a RoPE checkpoint converted between layouts as if it had one head",
        "convert_rope_layout_one_head", "convert_rope_layout",
        "a model loaded from another layout's checkpoint computes other attention scores",
        "tests/test_rotary.py::test_converted_weights_give_the_same_scores_in_the_other_layout"),
    "rope-layout-gqa": Bug(
        "a RoPE checkpoint converted with the query heads' count for the keys (GQA)",
        "convert_qk_with_query_heads", "convert_rope_layout",
        "the checkpoint converts and loads without an error, and every key head is permuted "
        "at the wrong rows; right by construction when there are as many key heads as query "
        "heads, so a multi-head test passes",
        "tests/test_rotary.py::test_converted_weights_give_the_same_scores_in_the_other_layout",
        shipped=(GH + "ggml-org/llama.cpp/issues/2376", GH + "ggml-org/llama.cpp/pull/2427",
                 GH + "ggml-org/llama.cpp/pull/3364", GH + "Dao-AILab/flash-attention/pull/546"),
        how_shipped="in llama.cpp's conversion script, which permuted the key projection of "
                    "Llama-2 70B with the query heads' count (#2376), then with n_head // "
                    "n_head_kv, right only when that equals the key heads' count (64 // 8 = 8 "
                    "for 70B, not TinyLlama's 32 // 4, #3364); the converted models produced "
                    "gibberish"),
    "bfloat16-positions": Bug(
        "RoPE angles computed in bfloat16",
        "apply_rope_in_input_dtype", "apply_rope",
        "from position 257 on, neighbouring positions share an angle (runs of 15 to 17 "
        "tokens from 2,048 and of 31 to 33 from 4,096, and inv_freq rounded too); by 4,096 "
        "the angles are off by more than 2 pi (8 radians), so the highest-frequency pairs' "
        "rotations are arbitrary",
        "tests/test_rotary.py::test_bfloat16_rope_stays_within_005_of_float64",
        shipped=(GH + "huggingface/transformers/pull/29285",
                 GH + "huggingface/transformers/issues/29496",
                 GH + "keras-team/keras-hub/pull/1508", GH + "vllm-project/vllm/issues/863",
                 GH + "KellerJordan/modded-nanogpt/issues/39",
                 GH + "huggingface/diffusers/issues/13920"),
        how_shipped="as angles, inv_freq or the cached cos and sin in the model's bfloat16 "
                    "(under autocast, after a cast of the whole model, or stored that way)"),
    "cache-offset": Bug(
        "cached decoding reads the offset after the new token is counted",
        "OffByOneCache", "posenc.attention.Cache",
        "token-by-token logits differ from the full pass for rope, learned and sinusoidal",
        "tests/test_attention.py::test_cached_decoding_equals_the_full_pass",
        ("numpy",),
        shipped=(GH + "fla-org/flash-linear-attention/issues/766",
                 GH + "microsoft/onnxruntime-genai/pull/2354"),
        how_shipped="as a seen-token count committed by the first layer before the upper "
                    "layers read it, and as a decode step's past length that already counted "
                    "the new token"),
    "short-table": Bug(
        "a learned table read past its end without a check",
        "clamped_encoding", "LearnedEncoding.encoding",
        "every position past the table gets the last row (a clamping gather), zeros "
        "(TensorFlow's gather on a GPU) or NaN (jax.numpy.take)",
        "tests/test_learned.py::test_positions_past_the_table_raise",
        shipped=(GH + "huggingface/transformers/pull/19102",
                 GH + "huggingface/transformers/pull/33903",
                 GH + "tensorflow/tensorflow/issues/5260",
                 GH + "tensorflow/tensorflow/issues/13642"),
        how_shipped="on TensorFlow GPUs, where the gather returns zeros instead of raising"),
    "swapped-halves": Bug(
        "sine and cosine halves swapped",
        "sinusoidal_swapped", "sinusoidal",
        "weights trained with one convention read another encoding; relative tests still pass",
        "tests/test_sinusoidal.py::test_sinusoidal_matches_reference",
        shipped=(GH + "flashinfer-ai/flashinfer/pull/3819",
                 GH + "huggingface/diffusers/pull/1369"),
        how_shipped="in diffusion models' timestep embeddings, whose checkpoints fix the order"),
    "swin-unscaled": Bug(
        "Swin's row offset not multiplied by 2W - 1",
        "swin_relative_index_unscaled", "swin_relative_index",
        "different 2D offsets share one learned bias",
        "tests/test_bias.py::test_swin_index_has_no_collisions_and_a_symmetric_structure",
        ("numpy",),
        shipped=(GH + "282857341/nnFormer/issues/8", GH + "282857341/nnFormer/issues/46",
                 GH + "282857341/nnFormer/pull/88"),
        how_shipped="in a 3D extension whose scale was too small (3W - 1 instead of "
                    "(2W - 1)^2), not missing: offsets collided in the same way"),
    "alibi-key-only": Bug(
        "ALiBi's key-only form slope * j added in bfloat16",
        "alibi_bias_key_only", "alibi_bias",
        "the bias grows with the key's position (about 2,000 at 4,096 keys for the steepest "
        "head), where bfloat16's step is 8 (16 from 2,048): the rounding swamps the scores "
        "and the attention "
        "rows move far from float64's (total variation 0.2 over eight heads at 4,096 keys)",
        "tests/test_bias.py::test_alibi_bias_added_in_bfloat16_keeps_the_attention_of_float64",
        shipped=(GH + "bigscience-workshop/Megatron-DeepSpeed/pull/101",
                 GH + "huggingface/transformers/pull/17474"),
        how_shipped="as the form itself, from the ALiBi authors' reference code: BigScience's "
                    "Megatron-DeepSpeed port cast it to the half-precision parameter dtype "
                    "and BLOOM's build_alibi_tensor casts it to the model's dtype; no thread "
                    "reports its rounding as a bug"),
    "starved-table": Bug(
        "the positional table cut off from the gradient",
        "starve_position_table", "LearnedEncoding",
        "detached, the table never moves from its initial values; behind a tiny scale it "
        "moves at the usual rate under Adam but its effect on the model is scaled away; "
        "either way the model learns positions elsewhere or not at all; the gradient ratio "
        "flags the detached table, and a scaled one once its ratio falls below the range",
        "tests/test_diagnostics.py::test_learned_table_gets_a_healthy_gradient",
        shipped=(GH + "d2l-ai/d2l-en/pull/2121",),
        how_shipped="as the table's .data read in the forward pass, detached from the graph"),
}


def thread_name(url: str) -> str:
    """``owner/repo#number`` for the address of a GitHub issue or pull request.

    Example:
        >>> thread_name("https://github.com/ggml-org/llama.cpp/pull/3364")
        'ggml-org/llama.cpp#3364'
    """
    owner, repo, _, number = url.removeprefix(GH).split("/")[:4]
    return f"{owner}/{repo}#{number}"


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
