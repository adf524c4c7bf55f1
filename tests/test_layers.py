"""THE table of layer cases: every public class of both faces, and the generic checks
(``tests/harness.py``) each row gets.

A new scheme adds a row: the class name, its constructor arguments, a realistic
``(batch, seq, dim)`` (for an attention bias, ``bias=True`` and the scores' ``(batch, heads,
q_len, k_len)``), its per-token call arguments after ``x`` (``extras``) and its
optional ``positions`` (each an ``Arg`` that draws valid values), and how it runs
deterministically (``training``; ``stochastic=True`` for a regulariser, which then
also runs the draw-independent checks in training mode). The scheme's test file keeps
only the scheme's own properties.

Every check that uses the Keras face is marked ``keras`` (run again under
``KERAS_BACKEND=jax`` and ``KERAS_BACKEND=torch``); the PyTorch-only ones run once. The
marks are explicit, on the ``face`` parameter.
"""

from __future__ import annotations

import numpy as np
import pytest

import harness as h
from harness import Arg, Case


# --------------------------------------------------------------------------- per-token arguments

def integers(high: int) -> Arg:
    """Positions (or ids) drawn in ``0 .. high-1``."""
    return Arg("positions", lambda rng, lead: rng.integers(0, high, size=lead).astype(np.int32))


def timestamps() -> Arg:
    """Irregular, increasing float times, gaps of 0.05 to 0.5 (Time2Vec's linear channel
    wants a scale of about one)."""
    return Arg("timestamps", lambda rng, lead: np.cumsum(
        rng.uniform(0.05, 0.5, size=lead), axis=-1).astype(np.float32))


def paths(max_depth: int, max_children: int) -> Arg:
    """Valid tree paths: a random depth in ``1 .. max_depth``, then ``-1`` padding."""
    def draw(rng, lead):
        depth = rng.integers(1, max_depth + 1, size=lead)
        idx = rng.integers(0, max_children, size=(*lead, max_depth))
        return np.where(np.arange(max_depth) < depth[..., None], idx, -1).astype(np.int32)
    return Arg("paths", draw, trailing=(max_depth,))


def eigenvectors(k: int) -> Arg:
    """Rows of ``k`` eigenvector entries, one row per node: N(0, 1 / seq), the size of the
    entries of unit vectors on ``seq`` nodes."""
    return Arg("eigenvectors", lambda rng, lead: (
        rng.normal(size=(*lead, k)) / np.sqrt(lead[-1])).astype(np.float32), trailing=(k,))


def modality_ids(num_modalities: int) -> Arg:
    return Arg("modality_ids",
               lambda rng, lead: rng.integers(0, num_modalities, size=lead).astype(np.int32))


# --------------------------------------------------------------------------- the table

DIM = 32
SINUSOIDAL = Case("sinusoidal", "SinusoidalEncoding", (DIM,), shape=(4, 12, DIM),
                  positions=integers(5000))
LOW_RANK = Case("low_rank", "LowRankEncoding", (64, DIM), {"rank": 4}, shape=(4, 12, DIM),
                positions=integers(64))
LEARNED = Case("learned", "LearnedEncoding", (64, DIM), {"init_std": 0.1}, shape=(4, 12, DIM),
               positions=integers(64))

# Outputs of attention are sums of products of weights drawn at 0.5 N(0, 1): float32
# rounding in another summation order reaches 1e-6 on entries near zero.
ATTENTION_PARITY = {"rtol": 1e-5, "atol": 1e-5}

CASES = [
    SINUSOIDAL,
    Case("sinusoidal_concat", "SinusoidalEncoding", (DIM,), {"base": 300.0, "layout": "concat"},
         shape=(2, 50, DIM), positions=integers(100_000)),
    LEARNED,
    Case("hybrid", "HybridEncoding", (64, DIM),
         {"base": 200.0, "layout": "concat", "scale": 0.7}, shape=(4, 12, DIM),
         positions=integers(64)),
    LOW_RANK,
    # Regularisers: the identity in inference mode (deterministic); stochastic=True also
    # runs the draw-independent checks in training mode with these rates.
    Case("encoding_dropout", "EncodingDropout", (0.3,), {"seed": 0}, shape=(4, 12, DIM),
         stochastic=True),
    Case("channel_dropout", "ChannelDropout", (0.3,), {"seed": 1}, shape=(4, 12, DIM),
         stochastic=True),
    Case("gaussian_noise", "GaussianNoise", (0.5,), {"seed": 2}, shape=(4, 12, DIM),
         stochastic=True),
    Case("regularized_sinusoidal", "RegularizedEncoding", (SINUSOIDAL,),
         {"dropout": 0.1, "channel_dropout": 0.1, "noise_std": 0.1, "seed": 0},
         shape=(4, 12, DIM), positions=integers(5000), stochastic=True),
    Case("regularized_low_rank", "RegularizedEncoding", (LOW_RANK,),
         {"dropout": 0.1, "channel_dropout": 0.1, "noise_std": 0.1, "seed": 0},
         shape=(4, 12, DIM), positions=integers(64), stochastic=True),
    # Deterministic in training mode: every rate 0.
    Case("regularized_learned_rates_0", "RegularizedEncoding", (LEARNED,),
         {"dropout": 0.0, "channel_dropout": 0.0, "noise_std": 0.0, "seed": 5},
         shape=(4, 12, DIM), positions=integers(64), training=True),
    Case("continuous_time", "ContinuousTimeEncoding", (DIM,), {"time_scale": 0.5},
         shape=(4, 12, DIM), extras=(timestamps(),)),
    Case("time2vec", "Time2Vec", (DIM,), shape=(4, 12, DIM), extras=(timestamps(),)),
    Case("hierarchical", "HierarchicalEncoding", (3, 4, DIM), shape=(4, 12, DIM),
         extras=(paths(3, 4),)),
    *[Case(f"multimodal_{mode}", "MultimodalEncoding", (DIM,),
           {"num_modalities": 3, "max_len": 64, "mode": mode}, shape=(4, 12, DIM),
           extras=(modality_ids(3),), positions=integers(64))
      for mode in ("shared", "per_modality", "shared_offset")],
    # Signs of the eigenvectors drawn at random in training: the identity on them otherwise.
    Case("laplacian", "LaplacianEncoding", (4, DIM), {"seed": 0}, shape=(4, 12, DIM),
         extras=(eigenvectors(4),), stochastic=True),
    # Attention biases: x holds scores (batch, heads, q_len, k_len), the output is
    # softmax(x + bias) (harness.attend). q_len < k_len: decoding with a cache.
    Case("alibi_causal", "ALiBiBias", (4,), shape=(3, 4, 6, 20), bias=True),
    Case("alibi_symmetric", "ALiBiBias", (6,), {"causal": False}, shape=(2, 6, 12, 12),
         bias=True),
    Case("t5_bidirectional", "T5RelativeBias", (4,), {"num_buckets": 16, "max_distance": 20},
         shape=(3, 4, 30, 30), bias=True),
    Case("t5_causal", "T5RelativeBias", (4,), {"bidirectional": False}, shape=(2, 4, 5, 40),
         bias=True),
    Case("swin", "SwinRelativeBias", (3, (3, 4)), shape=(2, 3, 12, 12), bias=True, empty=False),
    # The length-extrapolation family (posenc/*/distance_bias.py).
    Case("kerple_log", "KerpleBias", (4,), shape=(3, 4, 6, 20), bias=True),
    Case("kerple_power", "KerpleBias", (4,), {"kernel": "power"}, shape=(2, 4, 12, 12),
         bias=True),
    Case("sandwich", "SandwichBias", (4, 16), shape=(3, 4, 5, 30), bias=True),
    # hidden_dim=32: a hidden unit whose ReLU does not bend over the distances adds a constant
    # per head, which the softmax ignores (its bias would get no gradient).
    # threshold: the draws put its multiplier near 0.03, and L = |multiplier| * threshold must
    # exceed the queries' positions for L to get a gradient.
    Case("fire", "FireBias", (4,), {"threshold": 5000.0}, shape=(3, 4, 6, 20),
         bias=True),
    Case("dynamic_log", "DynamicPositionBias", (4,), {"hidden_dim": 8, "log_distance": True},
         shape=(3, 4, 6, 20), bias=True),
    Case("dynamic_depth_3", "DynamicPositionBias", (2,), {"hidden_dim": 4, "depth": 3},
         shape=(2, 2, 9, 9), bias=True),
    Case("continuous_swinv2", "ContinuousPositionBias", (3, (3, 4)),
         {"hidden_dim": 16, "pretrained_window": (2, 3)}, shape=(2, 3, 12, 12), bias=True,
         empty=False),
    Case("xpos_interleaved", "XPosEmbedding", (16,), {"scale_base": 64.0},
         shape=(3, 10, 16), positions=integers(256), rotary=True),
    Case("xpos_half_centred", "XPosEmbedding", (8,), {"layout": "half", "center": 100},
         shape=(2, 20, 8), positions=integers(200), rotary=True),
    # Relative attention: x -> an x-shaped output; the positions are the distances within x.
    # A small width: the weights are drawn at 0.5 N(0, 1), and wider projections give logits
    # so large that bfloat16 weights flip the softmax.
    Case("shaw_skew_causal", "ShawRelativeAttention", (8, 2, 3), {"causal": True},
         shape=(3, 10, 8), parity=ATTENTION_PARITY),
    Case("shaw_naive", "ShawRelativeAttention", (8, 2, 2), {"method": "naive"},
         shape=(3, 10, 8), parity=ATTENTION_PARITY),
    # Multi-head attention with a scheme: x -> an x-shaped output, as for Shaw's layer.
    Case("mha_none", "MultiHeadAttention", (8, 2), shape=(3, 10, 8), parity=ATTENTION_PARITY),
    Case("mha_rope_causal", "MultiHeadAttention", (8, 2),
         {"position": "rope", "causal": True, "rope_layout": "interleaved"}, shape=(3, 10, 8),
         parity=ATTENTION_PARITY),
    Case("mha_alibi_causal", "MultiHeadAttention", (8, 2), {"position": "alibi", "causal": True},
         shape=(3, 10, 8), parity=ATTENTION_PARITY),
    Case("mha_t5", "MultiHeadAttention", (8, 2),
         {"position": "t5", "num_buckets": 8, "max_distance": 16}, shape=(3, 10, 8),
         parity=ATTENTION_PARITY),
    Case("mha_shaw_causal", "MultiHeadAttention", (8, 2),
         {"position": "shaw", "causal": True, "max_distance": 3}, shape=(3, 10, 8),
         parity=ATTENTION_PARITY),
    Case("mha_swin", "MultiHeadAttention", (8, 2), {"position": "swin", "grid": (2, 5)},
         shape=(3, 10, 8), parity=ATTENTION_PARITY, empty=False),
    # Multi-head latent attention (DeepSeek): a low-rank query, a rotated slice under YaRN.
    Case("latent_yarn_causal", "LatentAttention", (8, 2),
         {"kv_lora_rank": 4, "q_lora_rank": 6, "qk_rope_head_dim": 4, "qk_nope_head_dim": 2,
          "v_head_dim": 3, "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                                            "original_max_position_embeddings": 16,
                                            "mscale": 1.0, "mscale_all_dim": 0.5}},
         shape=(3, 10, 8), positions=integers(5000), parity=ATTENTION_PARITY),
    # (fire is left out: its bias is the same in both precisions, but Keras' bfloat16
    # attention on these random weights misses the bfloat16 tolerance by 0.06 on one entry;
    # FireBias has its own row and the Transformer's tests run position="fire")
    *[Case(f"mha_{position}_causal", "MultiHeadAttention", (8, 2),
           {"position": position, "causal": True, "max_len": 16}, shape=(3, 10, 8),
           parity=ATTENTION_PARITY)
      for position in ("xpos", "kerple_log", "kerple_power", "sandwich", "dynamic")],
    # Rotary: x is q (and, features reversed, k) as (batch, seq, head_dim); the output is
    # q_rot + k_rot (harness.rotate_pair). A cache of 8 rows grows during the calls.
    Case("rotary_half_partial", "RotaryEmbedding", (16,), {"rotary_dim": 12, "max_len": 8},
         shape=(3, 10, 16), positions=integers(5000), rotary=True),
    Case("rotary_interleaved_yarn", "RotaryEmbedding", (16,),
         {"layout": "interleaved", "scaling": {"rope_type": "yarn", "factor": 4.0,
                                               "original_max_position_embeddings": 64}},
         shape=(2, 20, 16), positions=integers(100_000), rotary=True),
    Case("rotary_dynamic", "RotaryEmbedding", (8,),
         {"scaling": {"type": "dynamic", "factor": 4.0, "original_max_position_embeddings": 8}},
         shape=(2, 20, 8), positions=integers(1000), rotary=True),
    Case("rotary_longrope_exact", "RotaryEmbedding", (8,),
         {"exact": True, "scaling": {"rope_type": "longrope", "short_factor": [1.0, 1.5, 2.0, 3.0],
                                     "long_factor": [1.0, 4.0, 8.0, 16.0],
                                     "original_max_position_embeddings": 16}},
         shape=(2, 20, 8), positions=integers(100_000), rotary=True),
    # Axial 2D: the sequence is a 3 x 4 grid of patches (so no empty sequence).
    Case("rotary_2d", "RotaryEmbedding2D", (16, (3, 4)), shape=(2, 12, 16), rotary=True,
         empty=False),
    Case("rotary_2d_interleaved", "RotaryEmbedding2D", (24, (4, 5)),
         {"base": 100.0, "layout": "interleaved"}, shape=(3, 20, 24), rotary=True, empty=False),
    # Vision RoPE: a CLS token before a 3 x 4 grid rescaled onto a 2 x 2 reference grid; a
    # 4 x 5 grid in torchtune's convention; RoPE-Mixed's learned frequencies (2 layers).
    Case("vision_rope", "VisionRotaryEmbedding", (16,),
         {"grid": (3, 4), "prefix_tokens": 1, "ref_grid": (2, 2)}, shape=(2, 13, 16),
         rotary=True, empty=False),
    Case("vision_rope_half", "VisionRotaryEmbedding", (24,),
         {"grid": (4, 5), "layout": "half", "axis_order": "wh", "offset": 1.0, "base": 100.0},
         shape=(3, 20, 24), rotary=True, empty=False),
    Case("mixed_rope", "MixedRotaryEmbedding", (16, 1),
         {"grid": (3, 4), "prefix_tokens": 1, "depth": 2, "seed": 0}, shape=(2, 13, 16),
         rotary=True, empty=False),
]

#: Classes whose call is not ``x -> x``-shaped: their generic checks are in their own test
#: file (the Transformer reads token ids: tests/test_attention.py).
NOT_IN_TABLE = {"Transformer"}
# Positions that depend on the content read x (or q, k) and return logits (batch, heads, q, k):
# tests/test_content.py holds their generic checks (parity, configs, state dicts, jit).
NOT_IN_TABLE |= {"ForgetGateBias", "CoPE"}

ROWS = [pytest.param(c, id=c.id) for c in CASES]
WITH_PER_TOKEN = [pytest.param(c, id=c.id) for c in CASES if c.extras or c.positions]
WITH_POSITIONS = [pytest.param(c, id=c.id) for c in CASES if c.positions]
WITH_INDICES = [pytest.param(c, id=c.id) for c in CASES if h.integer_args(c)]
WITH_EMPTY = [pytest.param(c, id=c.id) for c in CASES if c.empty]
FACES = ["torch", pytest.param("keras", marks=pytest.mark.keras)]


@pytest.mark.keras
def test_every_public_class_has_a_row():
    import inspect

    import posenc.keras as pk
    import posenc.torch as pt

    classes = {n for n in pt.__all__ if inspect.isclass(getattr(pt, n))}
    classes |= {n for n in pk.__all__ if inspect.isclass(getattr(pk, n))}
    assert classes - NOT_IN_TABLE == {c.cls for c in CASES}, \
        "add a row to CASES for each new class"


def test_ids_are_unique():
    assert len({c.id for c in CASES}) == len(CASES)


# --------------------------------------------------------------------------- the checks

@pytest.mark.keras
@pytest.mark.parametrize("case", ROWS)
def test_parity_on_the_same_weights(case):
    h.check_parity(case)


@pytest.mark.keras
@pytest.mark.parametrize("case", ROWS)
def test_keras_config_round_trip(case):
    h.check_keras_config_round_trip(case)


@pytest.mark.keras
@pytest.mark.parametrize("case", ROWS)
def test_keras_save_and_load(case, tmp_path):
    h.check_keras_save_and_load(case, tmp_path)


@pytest.mark.parametrize("case", ROWS)
def test_torch_state_dict_round_trip(case):
    h.check_torch_state_dict_round_trip(case)


@pytest.mark.keras
@pytest.mark.parametrize("case", ROWS)
def test_keras_symbolic_shapes(case):
    h.check_keras_symbolic_shapes(case)


@pytest.mark.parametrize("case", ROWS)
def test_torch_training_step(case):
    h.check_torch_training_step(case)


@pytest.mark.keras
@pytest.mark.parametrize("case", ROWS)
def test_keras_training_step(case):
    h.check_keras_training_step(case)


@pytest.mark.parametrize("case", ROWS)
def test_torch_mixed_precision(case):
    h.check_torch_mixed_precision(case)


@pytest.mark.keras
@pytest.mark.parametrize("case", ROWS)
def test_keras_mixed_precision(case):
    h.check_keras_mixed_precision(case)


@pytest.mark.parametrize("dtype", h.FLOAT_DTYPES)
@pytest.mark.parametrize("case", ROWS)
def test_torch_input_dtypes(case, dtype):
    h.check_torch_dtypes(case, dtype)


@pytest.mark.keras
@pytest.mark.parametrize("dtype", h.FLOAT_DTYPES)
@pytest.mark.parametrize("case", ROWS)
def test_keras_input_dtypes(case, dtype):
    h.check_keras_dtypes(case, dtype)


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("case", WITH_INDICES)
def test_int32_and_int64_indices_agree(case, face):
    h.check_index_dtypes(case, face)


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("case", WITH_EMPTY)
def test_empty_sequence_returns_x_unchanged(case, face):
    h.check_empty_sequence(case, face)


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("case", WITH_PER_TOKEN)
def test_per_token_arguments_of_every_accepted_shape(case, face):
    h.check_per_token_shapes(case, face)


@pytest.mark.keras
@pytest.mark.parametrize("case", WITH_POSITIONS)
def test_positions_of_a_wrong_shape_same_error(case):
    for shape in h.wrong_position_shapes(case):
        h.check_wrong_positions_shape(case, shape)


@pytest.mark.parametrize("case", ROWS)
def test_torch_compile_fullgraph(case):
    h.check_torch_compile(case)


@pytest.mark.keras
@pytest.mark.parametrize("case", ROWS)
def test_keras_jit_compile(case):
    if h.keras.backend.backend() != "tensorflow":
        pytest.skip("jit_compile=True means XLA on TensorFlow; on the PyTorch backend it is "
                    "torch.compile with code generation (minutes), and the torch face's "
                    "fullgraph check already catches graph breaks")
    h.check_keras_jit_compile(case)
