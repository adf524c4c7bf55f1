"""Multimodal RoPE: ``apply_mrope`` in both faces, ``posenc.mrope``'s positions and offsets.

Against a float64 NumPy version of the formula, against Hugging Face transformers'
Qwen2-VL (chunked) and Qwen3-VL (interleaved) rotary embeddings on the rotated q and k,
and against its ``get_rope_index`` of Qwen2-VL and Qwen2.5-VL (marker ``reference``);
the decoding offset; the errors (the same message in both faces).
"""

from __future__ import annotations

import inspect
import re
import types

import numpy as np
import pytest
import torch

import posenc.keras as pk
import posenc.torch as pt
from faces import dtype_name, numpy, same_error, tensor
from posenc import mrope as nm
from posenc import rotary as nr

FACES = {"torch": pt, "keras": pk}
SECTIONS = {"chunked": (16, 24, 24), "interleaved": (24, 20, 20)}   # Qwen2-VL's, Qwen3-VL's


def reference_mrope(x, positions, inv_freq, axes, layout="half"):
    """float64, straight from the formula: pair ``i`` turns by ``p[axes[i]] * inv_freq[i]``."""
    x = np.asarray(x, np.float64)
    p = np.asarray(positions, np.float64)            # (3, batch, seq)
    n = len(inv_freq)
    angles = np.stack([p[a] * inv_freq[i] for i, a in enumerate(axes)], -1)  # (batch, seq, n)
    angles = angles[:, None] if x.ndim == 4 else angles
    cos, sin = np.cos(angles), np.sin(angles)
    if layout == "half":
        a, b = x[..., :n], x[..., n:2 * n]
    else:
        a, b = x[..., 0:2 * n:2], x[..., 1:2 * n:2]
    ra, rb = a * cos - b * sin, b * cos + a * sin
    out = x.copy()
    if layout == "half":
        out[..., :n], out[..., n:2 * n] = ra, rb
    else:
        out[..., 0:2 * n:2], out[..., 1:2 * n:2] = ra, rb
    return out


def random_positions(rng, batch, seq, high=500):
    return rng.integers(0, high, size=(3, batch, seq))


# --------------------------------------------------------------------------- the axes

def test_mrope_axes_chunked_and_interleaved():
    assert nm.mrope_axes((16, 24, 24)).tolist() == [0] * 16 + [1] * 24 + [2] * 24
    axes = nm.mrope_axes((24, 20, 20), "interleaved")
    assert axes[:60].tolist() == [0, 1, 2] * 20 and axes[60:].tolist() == [0] * 4
    assert np.bincount(axes).tolist() == [24, 20, 20]
    # an unequal split: the height pairs stop before the width pairs
    assert nm.mrope_axes((4, 2, 3), "interleaved").tolist() == [0, 1, 2, 0, 1, 2, 0, 0, 2]


# --------------------------------------------------------------------------- the rotation

@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("arrangement", ["chunked", "interleaved"])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_text_tokens_give_exactly_apply_rope(face, arrangement, layout):
    m = FACES[face]
    rng = np.random.default_rng(0)
    inv_freq, _ = m.rope_frequencies(128, base=1e6)
    x = tensor(face, rng.normal(size=(2, 4, 37, 128)).astype(np.float32))
    text = np.stack([rng.permutation(1000)[:37], rng.permutation(1000)[:37]])   # (batch, seq)
    positions = tensor(face, np.broadcast_to(text, (3, 2, 37)).copy())
    got = m.apply_mrope(x, positions, inv_freq, sections=SECTIONS[arrangement],
                        arrangement=arrangement, layout=layout)
    want = m.apply_rope(x, tensor(face, text), inv_freq, layout=layout)
    np.testing.assert_array_equal(numpy(got), numpy(want))


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("arrangement", ["chunked", "interleaved"])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_apply_mrope_equals_the_formula(face, arrangement, layout):
    m = FACES[face]
    rng = np.random.default_rng(1)
    sections = SECTIONS[arrangement]
    inv_freq, _ = m.rope_frequencies(128, base=10000.0)
    x = rng.normal(size=(2, 3, 29, 136)).astype(np.float32)     # 8 features not rotated
    positions = random_positions(rng, 2, 29)
    got = m.apply_mrope(tensor(face, x), tensor(face, positions), inv_freq, sections=sections,
                        arrangement=arrangement, layout=layout)
    want = reference_mrope(x, positions, numpy(inv_freq), nm.mrope_axes(sections, arrangement),
                           layout)
    np.testing.assert_allclose(numpy(got), want, atol=2e-4, rtol=0)
    np.testing.assert_array_equal(numpy(got)[..., 128:], x[..., 128:])
    # the other arrangement is a different rotation (the test sees which pair reads which axis)
    other = "interleaved" if arrangement == "chunked" else "chunked"
    wrong = reference_mrope(x, positions, numpy(inv_freq), nm.mrope_axes(SECTIONS[other], other),
                            layout)
    assert np.abs(numpy(got) - wrong).max() > 0.1


@pytest.mark.parametrize("face", FACES)
def test_float_positions_and_batch_of_one(face):
    m = FACES[face]
    rng = np.random.default_rng(2)
    inv_freq, _ = m.rope_frequencies(32)
    x = rng.normal(size=(3, 2, 11, 32)).astype(np.float32)
    positions = rng.uniform(0, 50, size=(3, 1, 11)).astype(np.float32)   # one row for all
    got = m.apply_mrope(tensor(face, x), tensor(face, positions), inv_freq, sections=(4, 6, 6))
    want = reference_mrope(x, np.broadcast_to(positions, (3, 3, 11)), numpy(inv_freq),
                           nm.mrope_axes((4, 6, 6)))
    np.testing.assert_allclose(numpy(got), want, atol=3e-5, rtol=0)


@pytest.mark.parametrize("face", FACES)
def test_bfloat16_keeps_its_dtype_with_float32_angles(face):
    m = FACES[face]
    rng = np.random.default_rng(3)
    inv_freq, _ = m.rope_frequencies(64)
    x = rng.normal(size=(2, 2, 16, 64)).astype(np.float32)
    # large positions: in bfloat16, 3000 and 3007 are the same number
    positions = 3000 + random_positions(rng, 2, 16, high=8)
    got = m.apply_mrope(tensor(face, x, "bfloat16"), tensor(face, positions), inv_freq,
                        sections=(8, 12, 12))
    assert dtype_name(got) == "bfloat16"
    x16 = numpy(tensor(face, x, "bfloat16"))
    want = reference_mrope(x16, positions, numpy(inv_freq), nm.mrope_axes((8, 12, 12)))
    # bfloat16 rounding of cos, sin and the products only (angles from bfloat16 positions
    # would be off by whole radians)
    np.testing.assert_allclose(numpy(got), want, atol=0.05, rtol=0)


@pytest.mark.keras
def test_torch_equals_keras():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(2, 4, 33, 128)).astype(np.float32)
    positions = random_positions(rng, 2, 33)
    for arrangement, sections in SECTIONS.items():
        got = [numpy(m.apply_mrope(tensor(face, x), tensor(face, positions),
                                   m.rope_frequencies(128)[0], sections=sections,
                                   arrangement=arrangement))
               for face, m in FACES.items()]
        np.testing.assert_allclose(got[0], got[1], atol=2e-5, rtol=0)


def test_the_gradient_is_the_rotation_back():
    """d<g, R(p) x>/dx = R(p)^T g = R(-p) g: the backward turns each pair back by its axis."""
    inv_freq, _ = pt.rope_frequencies(16)
    rng = np.random.default_rng(5)
    positions = torch.as_tensor(random_positions(rng, 2, 6))
    x = torch.randn(2, 3, 6, 16, requires_grad=True)
    g = torch.randn(2, 3, 6, 16)
    for arrangement, sections in (("chunked", (2, 3, 3)), ("interleaved", (4, 2, 2))):
        x.grad = None
        (pt.apply_mrope(x, positions, inv_freq, sections=sections, arrangement=arrangement)
         * g).sum().backward()
        want = pt.apply_mrope(g, -positions, inv_freq, sections=sections,
                              arrangement=arrangement)
        torch.testing.assert_close(x.grad, want, atol=1e-5, rtol=0)


# --------------------------------------------------------------------------- Hugging Face's rotation

def _hf_qwen(kind: str, head_dim: int = 128):
    """Hugging Face's text rotary embedding of Qwen2-VL (chunked) or Qwen3-VL (interleaved)
    with random-free configs, and its ``apply_rotary_pos_emb``."""
    if kind == "chunked":
        from transformers.models.qwen2_vl import modeling_qwen2_vl as module
        from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLTextConfig
        config = Qwen2VLTextConfig(hidden_size=2 * head_dim, num_attention_heads=2,
                                   rope_parameters={"rope_type": "default", "rope_theta": 1e6,
                                                    "mrope_section": [16, 24, 24]})
        return module.Qwen2VLRotaryEmbedding(config), module.apply_rotary_pos_emb, 1e6
    from transformers.models.qwen3_vl import modeling_qwen3_vl as module
    from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLTextConfig
    config = Qwen3VLTextConfig(hidden_size=2 * head_dim, num_attention_heads=2, head_dim=head_dim,
                               rope_parameters={"rope_type": "default", "rope_theta": 5e6,
                                                "mrope_section": [24, 20, 20],
                                                "mrope_interleaved": True})
    return module.Qwen3VLTextRotaryEmbedding(config), module.apply_rotary_pos_emb, 5e6


@pytest.mark.reference
@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("arrangement", ["chunked", "interleaved"])
def test_rotated_q_and_k_equal_transformers_qwen_vl(face, arrangement):
    hf, apply_rotary_pos_emb, base = _hf_qwen(arrangement)
    m = FACES[face]
    rng = np.random.default_rng(6)
    q, k = (rng.normal(size=(2, 4, 48, 128)).astype(np.float32) for _ in range(2))
    positions = random_positions(rng, 2, 48, high=300)
    tq, tk = torch.as_tensor(q), torch.as_tensor(k)
    cos, sin = hf(tq, torch.as_tensor(positions))
    want_q, want_k = (t.numpy() for t in apply_rotary_pos_emb(tq, tk, cos, sin))
    sections = SECTIONS[arrangement]
    # with Hugging Face's own float32 frequencies: the same numbers up to rounding
    hf_inv = hf.inv_freq.numpy()
    for x, want in ((q, want_q), (k, want_k)):
        got = m.apply_mrope(tensor(face, x), tensor(face, positions), hf_inv, sections=sections,
                            arrangement=arrangement)
        np.testing.assert_allclose(numpy(got), want, atol=2e-5, rtol=0)
    # with posenc's frequencies (float64 rounded once): angles a few ulp apart at 300
    inv_freq, _ = m.rope_frequencies(128, base=base)
    got = m.apply_mrope(tensor(face, q), tensor(face, positions), inv_freq, sections=sections,
                        arrangement=arrangement)
    np.testing.assert_allclose(numpy(got), want_q, atol=2e-4, rtol=0)


# --------------------------------------------------------------------------- the positions

TEXT, IMAGE, VIDEO = 0, 1, 2


def sequence(*parts):
    """Token types of a prompt from ``("text", n)``, ``("image", tokens)``, ... parts."""
    return [kind for name, n in parts for kind in [nm.TOKEN_TYPES[name]] * n]


def _hf_get_rope_index(model: str, merge: int, tokens_per_second=None):
    """Hugging Face's ``get_rope_index`` called on an object holding only what it reads (the
    vision config's merge size and tokens per second): no weights, no download."""
    if model == "qwen2_vl":
        from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLModel as cls
    else:
        from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VLModel as cls
    vision = types.SimpleNamespace(spatial_merge_size=merge, tokens_per_second=tokens_per_second)
    owner = types.SimpleNamespace(config=types.SimpleNamespace(vision_config=vision))
    owner.get_vision_position_ids = (
        lambda *args, **kwargs: cls.get_vision_position_ids(owner, *args, **kwargs))
    return lambda *args, **kwargs: cls.get_rope_index(owner, *args, **kwargs)


# Two rows, left-padded to one length: row 0 a text, an image, text, a video, text; row 1
# text, two images, text.
ROW0 = sequence(("text", 3), ("image", 6), ("text", 2), ("video", 8), ("text", 4))
ROW1 = sequence(("text", 5), ("image", 12), ("text", 1), ("image", 4), ("text", 2))
IMAGES = [[1, 4, 6], [1, 6, 8], [1, 4, 4]]          # before the 2 x 2 merge
VIDEOS = [[2, 4, 4]]


def _batch(pad_left=True):
    length = max(len(ROW0), len(ROW1)) + 2
    types_, mask = np.zeros((2, length), np.int64), np.zeros((2, length), np.int64)
    for b, row in enumerate((ROW0, ROW1)):
        where = slice(length - len(row), length) if pad_left else slice(0, len(row))
        types_[b, where], mask[b, where] = row, 1
    return types_, mask


@pytest.mark.reference
@pytest.mark.parametrize("pad_left", [True, False])
def test_positions_equal_transformers_qwen2_vl_get_rope_index(pad_left):
    types_, mask = _batch(pad_left)
    hf = _hf_get_rope_index("qwen2_vl", 2)
    want, want_deltas = hf(torch.zeros_like(torch.as_tensor(types_)), torch.as_tensor(types_),
                           image_grid_thw=torch.as_tensor(IMAGES),
                           video_grid_thw=torch.as_tensor(VIDEOS),
                           attention_mask=torch.as_tensor(mask))
    for text_start in ("max", "grid"):   # a 2-step video in a 2 x 2 grid: the rules agree
        got, deltas = nm.mrope_positions(types_, image_grid_thw=IMAGES, video_grid_thw=VIDEOS,
                                         spatial_merge_size=2, attention_mask=mask,
                                         text_start=text_start)
        np.testing.assert_array_equal(got, want.numpy())
        np.testing.assert_array_equal(deltas, want_deltas.numpy().reshape(-1))


def _long_video_batch():
    """A long video (4 grid steps in a 2 x 2 grid) after an image, left-padded beside ROW1:
    ``(video_grid_thw, token types, attention mask)``."""
    row0 = sequence(("text", 3), ("image", 6), ("text", 2), ("video", 16), ("text", 4))
    length = max(len(row0), len(ROW1)) + 2
    types_, mask = np.zeros((2, length), np.int64), np.zeros((2, length), np.int64)
    for b, row in enumerate((row0, ROW1)):
        types_[b, length - len(row):], mask[b, length - len(row):] = row, 1
    return [[4, 4, 4]], types_, mask


@pytest.mark.reference
def test_a_long_video_is_where_transformers_5_leaves_the_paper():
    # 4 grid steps in a 2 x 2 grid: the temporal positions run past max(h, w) = 2
    long_videos, types_, mask = _long_video_batch()
    hf = _hf_get_rope_index("qwen2_vl", 2)
    want, want_deltas = hf(torch.zeros_like(torch.as_tensor(types_)), torch.as_tensor(types_),
                           image_grid_thw=torch.as_tensor(IMAGES),
                           video_grid_thw=torch.as_tensor(long_videos),
                           attention_mask=torch.as_tensor(mask))
    kwargs = dict(image_grid_thw=IMAGES, video_grid_thw=long_videos, spatial_merge_size=2,
                  attention_mask=mask)
    grid, grid_deltas = nm.mrope_positions(types_, text_start="grid", **kwargs)
    np.testing.assert_array_equal(grid, want.numpy())
    np.testing.assert_array_equal(grid_deltas, want_deltas.numpy().reshape(-1))
    paper, paper_deltas = nm.mrope_positions(types_, **kwargs)
    video = np.flatnonzero(types_[0] == VIDEO)
    assert paper[0, 0, video[-1] + 1] == paper[0, 0, video].max() + 1
    assert grid[0, 0, video[-1] + 1] <= grid[0, 0, video].max()   # inside the video's times
    assert paper_deltas[0] - grid_deltas[0] == 2 and paper_deltas[1] == grid_deltas[1]


@pytest.mark.reference
def test_decode_positions_equal_transformers_5_on_a_left_padded_batch():
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLModel

    types_, mask = _batch(pad_left=True)
    hf = _hf_get_rope_index("qwen2_vl", 2)
    _, hf_deltas = hf(torch.zeros_like(torch.as_tensor(types_)), torch.as_tensor(types_),
                      image_grid_thw=torch.as_tensor(IMAGES),
                      video_grid_thw=torch.as_tensor(VIDEOS), attention_mask=torch.as_tensor(mask))
    # transformers 5's decoding step: the cached prompt and one new token in every row
    owner = types.SimpleNamespace(rope_deltas=hf_deltas)
    cache = types.SimpleNamespace(get_seq_length=lambda: types_.shape[1])
    next_mask = torch.as_tensor(np.concatenate([mask, np.ones((2, 1), np.int64)], axis=1))
    # the cache's keyword is the one the installed transformers names: `cache` in 5.25 (which
    # still takes `past_key_values`, deprecated), `past_key_values` in 5.23
    cache_keyword = ("cache" if "cache" in inspect.signature(
        Qwen2VLModel.compute_3d_position_ids).parameters else "past_key_values")
    hf_step = Qwen2VLModel.compute_3d_position_ids(
        owner, None, torch.zeros(2, 1, 8), attention_mask=next_mask, **{cache_keyword: cache})
    _, deltas = nm.mrope_positions(types_, image_grid_thw=IMAGES, video_grid_thw=VIDEOS,
                                   spatial_merge_size=2, attention_mask=mask)
    ours = nm.mrope_decode_positions(deltas, mask.sum(-1, keepdims=True))
    np.testing.assert_array_equal(ours[..., 0], hf_step[..., -1].numpy())
    # and both equal the full pass over the prompt and the new text token
    full, _ = nm.mrope_positions(np.concatenate([types_, np.zeros((2, 1), np.int64)], axis=1),
                                 image_grid_thw=IMAGES, video_grid_thw=VIDEOS,
                                 spatial_merge_size=2, attention_mask=next_mask.numpy())
    np.testing.assert_array_equal(ours[..., 0], full[..., -1])
    # the padded length in place of the real tokens (transformers 4.x's cache_position with
    # transformers 5's deltas) is off by each row's padding
    padding = (mask == 0).sum(-1)
    assert padding.min() > 0
    wrong = nm.mrope_decode_positions(deltas, types_.shape[1])
    np.testing.assert_array_equal(wrong[0, :, 0] - ours[0, :, 0], padding)


@pytest.mark.reference
@pytest.mark.parametrize("seconds", [[0.5], [2.0], [1.25]])
def test_positions_equal_transformers_qwen2_5_vl_absolute_time(seconds):
    types_, mask = _batch()
    hf = _hf_get_rope_index("qwen2_5_vl", 2, tokens_per_second=4)
    want, want_deltas = hf(torch.zeros_like(torch.as_tensor(types_)), torch.as_tensor(types_),
                           image_grid_thw=torch.as_tensor(IMAGES),
                           video_grid_thw=torch.as_tensor(VIDEOS),
                           second_per_grid_ts=torch.as_tensor(seconds),
                           attention_mask=torch.as_tensor(mask))
    got, deltas = nm.mrope_positions(types_, image_grid_thw=IMAGES, video_grid_thw=VIDEOS,
                                     spatial_merge_size=2, tokens_per_second=4,
                                     second_per_grid_t=seconds, attention_mask=mask,
                                     text_start="grid")
    np.testing.assert_array_equal(got, want.numpy())
    np.testing.assert_array_equal(deltas, want_deltas.numpy().reshape(-1))
    # the video's temporal positions are its times in quarter seconds
    video = np.flatnonzero(types_[0] == VIDEO)
    times = got[0, 0, video] - got[0, 0, video[0]]
    assert sorted(set(times.tolist())) == [0, int(4 * seconds[0])]
    # the paper's rule starts the text after the video one past its last time
    paper, _ = nm.mrope_positions(types_, image_grid_thw=IMAGES, video_grid_thw=VIDEOS,
                                  spatial_merge_size=2, tokens_per_second=4,
                                  second_per_grid_t=seconds, attention_mask=mask)
    after = video[-1] + 1
    assert paper[0, 0, after] == got[:, 0, video].max() + 1
    if int(4 * seconds[0]) >= 2:     # the video's times reach past its 2 x 2 grid: the
        assert got[0, 0, after] <= got[0, 0, video].max()   # text overlaps them (transformers 5)


@pytest.mark.reference
def test_qwen2_5_vl_without_seconds_spaces_frames_by_tokens_per_second():
    types_ = [sequence(("text", 2), ("video", 12), ("text", 1))]
    hf = _hf_get_rope_index("qwen2_5_vl", 2, tokens_per_second=4)
    t = torch.as_tensor(types_)
    want, _ = hf(torch.zeros_like(t), t, video_grid_thw=torch.as_tensor([[3, 4, 4]]))
    got, _ = nm.mrope_positions(types_, video_grid_thw=[[3, 4, 4]], spatial_merge_size=2,
                                tokens_per_second=4, text_start="grid")
    np.testing.assert_array_equal(got, want.numpy())


# A frozen copy of transformers 4.x's ``get_rope_index`` of Qwen2-VL and Qwen2.5-VL, the Qwen
# team's reference for the paper's rule (``st_idx = llm_pos_ids_list[-1].max() + 1``), cut to
# what the positions need: src/transformers/models/qwen2_5_vl/modeling_qwen2_5_vl.py at
# https://github.com/huggingface/transformers/blob/00b676f8f0489b88652a31d70751cc540dd06305/
# (Qwen2-VL's is the same loop without the times). Token ids are the token types, with a
# vision-start token before each grid, as the processor writes them.
_V4_START, _V4_IMAGE, _V4_VIDEO = 7, 1, 2


def _v4_get_rope_index(input_ids, image_grid_thw=None, video_grid_thw=None,
                       second_per_grid_ts=None, attention_mask=None, *, spatial_merge_size=2,
                       tokens_per_second=None):
    mrope_position_deltas = []
    total_input_ids = input_ids
    if attention_mask is None:
        attention_mask = torch.ones_like(total_input_ids)
    position_ids = torch.ones(3, input_ids.shape[0], input_ids.shape[1], dtype=input_ids.dtype)
    image_index, video_index = 0, 0
    for i, input_ids in enumerate(total_input_ids):
        input_ids = input_ids[attention_mask[i] == 1]
        vision_start_indices = torch.argwhere(input_ids == _V4_START).squeeze(1)
        vision_tokens = input_ids[vision_start_indices + 1]
        image_nums = (vision_tokens == _V4_IMAGE).sum()
        video_nums = (vision_tokens == _V4_VIDEO).sum()
        input_tokens = input_ids.tolist()
        llm_pos_ids_list: list = []
        st = 0
        remain_images, remain_videos = image_nums, video_nums
        for _ in range(image_nums + video_nums):
            if _V4_IMAGE in input_tokens and remain_images > 0:
                ed_image = input_tokens.index(_V4_IMAGE, st)
            else:
                ed_image = len(input_tokens) + 1
            if _V4_VIDEO in input_tokens and remain_videos > 0:
                ed_video = input_tokens.index(_V4_VIDEO, st)
            else:
                ed_video = len(input_tokens) + 1
            if ed_image < ed_video:
                t, h, w = image_grid_thw[image_index]
                second_per_grid_t = 0
                image_index += 1
                remain_images -= 1
                ed = ed_image
            else:
                t, h, w = video_grid_thw[video_index]
                second_per_grid_t = (second_per_grid_ts[video_index]
                                     if second_per_grid_ts is not None else 1.0)
                video_index += 1
                remain_videos -= 1
                ed = ed_video
            llm_grid_t, llm_grid_h, llm_grid_w = (
                t.item(), h.item() // spatial_merge_size, w.item() // spatial_merge_size)
            text_len = ed - st
            st_idx = llm_pos_ids_list[-1].max() + 1 if len(llm_pos_ids_list) > 0 else 0
            llm_pos_ids_list.append(torch.arange(text_len).view(1, -1).expand(3, -1) + st_idx)
            range_tensor = torch.arange(llm_grid_t).view(-1, 1)
            expanded_range = range_tensor.expand(-1, llm_grid_h * llm_grid_w)
            if tokens_per_second is None:                    # Qwen2-VL: grid steps
                t_index = expanded_range.flatten()
            else:                                            # Qwen2.5-VL: seconds
                second_per_grid_t = torch.as_tensor(second_per_grid_t, dtype=range_tensor.dtype)
                t_index = (expanded_range * second_per_grid_t * tokens_per_second).long().flatten()
            h_index = torch.arange(llm_grid_h).view(1, -1, 1).expand(llm_grid_t, -1, llm_grid_w).flatten()
            w_index = torch.arange(llm_grid_w).view(1, 1, -1).expand(llm_grid_t, llm_grid_h, -1).flatten()
            llm_pos_ids_list.append(torch.stack([t_index, h_index, w_index]) + text_len + st_idx)
            st = ed + llm_grid_t * llm_grid_h * llm_grid_w
        if st < len(input_tokens):
            st_idx = llm_pos_ids_list[-1].max() + 1 if len(llm_pos_ids_list) > 0 else 0
            text_len = len(input_tokens) - st
            llm_pos_ids_list.append(torch.arange(text_len).view(1, -1).expand(3, -1) + st_idx)
        llm_positions = torch.cat(llm_pos_ids_list, dim=1).reshape(3, -1)
        position_ids[..., i, attention_mask[i] == 1] = llm_positions
        mrope_position_deltas.append(llm_positions.max() + 1 - len(total_input_ids[i]))
    return position_ids, torch.tensor(mrope_position_deltas).unsqueeze(1)


def _v4_ids(types_):
    """Token ids for the frozen copy: the types, with the text token before each run of
    vision tokens made a vision-start token."""
    ids = np.where(np.asarray(types_) == 0, 3, types_)
    starts = (np.asarray(types_)[:, 1:] > 0) & (np.asarray(types_)[:, :-1] == 0)
    ids[:, :-1][starts] = _V4_START
    return torch.as_tensor(ids)


@pytest.mark.reference
@pytest.mark.parametrize("time", ["frames", "seconds"])
def test_text_start_max_equals_transformers_4_where_the_rules_diverge(time):
    # a long video (4 grid steps in a 2 x 2 grid, or 2 s per grid at 2 positions per second)
    # after an image, left-padded beside a row of two images: the rules differ here
    long_videos, types_, mask = _long_video_batch()
    timing = {} if time == "frames" else dict(tokens_per_second=2)
    seconds = None if time == "frames" else [2.0]
    want, want_deltas = _v4_get_rope_index(
        _v4_ids(types_), torch.as_tensor(IMAGES), torch.as_tensor(long_videos),
        second_per_grid_ts=None if seconds is None else torch.as_tensor(seconds),
        attention_mask=torch.as_tensor(mask), **timing)
    kwargs = dict(image_grid_thw=IMAGES, video_grid_thw=long_videos, spatial_merge_size=2,
                  attention_mask=mask, **timing)
    if seconds is not None:
        kwargs["second_per_grid_t"] = seconds
    got, deltas = nm.mrope_positions(types_, **kwargs)
    real = mask == 1
    np.testing.assert_array_equal(got[:, real], want.numpy()[:, real])
    # 4.x measured the delta against the padded length; ours counts the real tokens
    np.testing.assert_array_equal(deltas - (~real).sum(-1), want_deltas.numpy().reshape(-1))
    assert (want.numpy()[:, ~real] == 1).all() and (got[:, ~real] == 0).all()   # padding
    grid, _ = nm.mrope_positions(types_, text_start="grid", **kwargs)
    assert not np.array_equal(grid[:, real], got[:, real])      # where "grid" leaves them


@pytest.mark.reference
@pytest.mark.parametrize("tokens_per_second", [2, 25])
def test_absolute_time_equals_transformers_on_non_dyadic_intervals(tokens_per_second):
    # frame rates whose seconds per grid (2 / fps) have no exact binary form: transformers
    # truncates the times in float32, and so does mrope_positions
    hf = _hf_get_rope_index("qwen2_5_vl", 2, tokens_per_second=tokens_per_second)
    for fps in (0.6, 0.75, 1.2, 1.5, 3.0, 6.0, 7.0, 12.0, 24.0):
        for steps in (7, 23, 41):
            row = sequence(("text", 2), ("video", steps * 4), ("text", 1))
            t = torch.as_tensor([row])
            want, want_deltas = hf(torch.zeros_like(t), t,
                                   video_grid_thw=torch.as_tensor([[steps, 4, 4]]),
                                   second_per_grid_ts=torch.as_tensor([2 / fps]))
            got, deltas = nm.mrope_positions([row], video_grid_thw=[[steps, 4, 4]],
                                             spatial_merge_size=2,
                                             tokens_per_second=tokens_per_second,
                                             second_per_grid_t=[2 / fps], text_start="grid")
            np.testing.assert_array_equal(got, want.numpy())
            np.testing.assert_array_equal(deltas, want_deltas.numpy().reshape(-1))


def test_positions_of_a_mixed_sequence_by_hand():
    # text (2), a 1 x 2 x 3 image, text (1), a 2 x 2 x 2 video, text (1)
    row = sequence(("text", 2), ("image", 6), ("text", 1), ("video", 8), ("text", 1))
    positions, deltas = nm.mrope_positions([row], image_grid_thw=[[1, 2, 3]],
                                           video_grid_thw=[[2, 2, 2]])
    t, h, w = positions[:, 0].tolist()
    assert t == [0, 1, 2, 2, 2, 2, 2, 2, 5, 6, 6, 6, 6, 7, 7, 7, 7, 8]
    assert h == [0, 1, 2, 2, 2, 3, 3, 3, 5, 6, 6, 7, 7, 6, 6, 7, 7, 8]
    assert w == [0, 1, 2, 3, 4, 2, 3, 4, 5, 6, 7, 6, 7, 6, 7, 6, 7, 8]
    assert deltas.tolist() == [9 - 18]
    # pure text: the positions are 0 .. n-1 on every axis, no offset
    positions, deltas = nm.mrope_positions([[0] * 5])
    assert positions.tolist() == [[[0, 1, 2, 3, 4]]] * 3 and deltas.tolist() == [0]


def test_consecutive_grids_are_read_one_after_the_other():
    row = sequence(("text", 1), ("image", 4), ("image", 2), ("text", 1))
    positions, _ = nm.mrope_positions([row], image_grid_thw=[[1, 2, 2], [1, 1, 2]])
    assert positions[0, 0].tolist() == [0, 1, 1, 1, 1, 3, 3, 5]
    assert positions[2, 0].tolist() == [0, 1, 2, 1, 2, 3, 4, 5]


def test_padding_gives_the_positions_of_the_row_alone():
    types_, mask = _batch(pad_left=True)
    batch, deltas = nm.mrope_positions(types_, image_grid_thw=IMAGES, video_grid_thw=VIDEOS,
                                       spatial_merge_size=2, attention_mask=mask)
    for b, (row, images) in enumerate(((ROW0, IMAGES[:1]), (ROW1, IMAGES[1:]))):
        alone, delta = nm.mrope_positions([row], image_grid_thw=images,
                                          video_grid_thw=VIDEOS if b == 0 else None,
                                          spatial_merge_size=2)
        np.testing.assert_array_equal(batch[:, b, mask[b] == 1], alone[:, 0])
        assert (batch[:, b, mask[b] == 0] == 0).all() and deltas[b] == delta[0]


# --------------------------------------------------------------------------- decoding

def test_decode_positions_continue_the_prompt():
    types_, mask = _batch(pad_left=True)
    _, deltas = nm.mrope_positions(types_, image_grid_thw=IMAGES, video_grid_thw=VIDEOS,
                                   spatial_merge_size=2, attention_mask=mask)
    # the prompt followed by 3 generated (text) tokens, in one full pass
    full_types = np.concatenate([types_, np.zeros((2, 3), np.int64)], 1)
    full_mask = np.concatenate([mask, np.ones((2, 3), np.int64)], 1)
    full, _ = nm.mrope_positions(full_types, image_grid_thw=IMAGES, video_grid_thw=VIDEOS,
                                 spatial_merge_size=2, attention_mask=full_mask)
    real = mask.sum(-1, keepdims=True)                     # each row's real tokens
    steps = nm.mrope_decode_positions(deltas, real + np.arange(3))
    np.testing.assert_array_equal(steps, full[:, :, -3:])
    one = nm.mrope_decode_positions(deltas[:, None], real)            # (batch, 1) deltas
    np.testing.assert_array_equal(one, full[:, :, -3:-2])
    assert nm.mrope_decode_positions([0, 0], 4).shape == (3, 2, 1)
    assert nm.mrope_decode_positions([-3, 2], np.arange(2)).tolist()[0] == [[-3, -2], [2, 3]]


@pytest.mark.parametrize("face", FACES)
def test_decoding_with_a_stale_offset_differs_from_the_full_pass(face):
    """One new token's query against the cached keys of an image prompt: with
    ``cache_position + rope_deltas`` its scores are the full pass's; without the offset
    (the stale-offset bug) they are not."""
    m = FACES[face]
    rng = np.random.default_rng(7)
    row = sequence(("text", 4), ("image", 48), ("text", 3))        # an 6 x 8 image
    prompt_types, grids = [row], [[1, 12, 16]]
    full, _ = nm.mrope_positions([row + [TEXT]], image_grid_thw=grids, spatial_merge_size=2)
    _, deltas = nm.mrope_positions(prompt_types, image_grid_thw=grids, spatial_merge_size=2)
    assert deltas.tolist() == [int(full.max()) - len(row)]
    inv_freq, _ = m.rope_frequencies(64)
    q, k = (rng.normal(size=(1, 2, len(row) + 1, 64)).astype(np.float32) for _ in range(2))

    def scores(q_positions):
        qr = m.apply_mrope(tensor(face, q[:, :, -1:]), tensor(face, q_positions), inv_freq,
                           sections=(8, 12, 12))
        kr = m.apply_mrope(tensor(face, k), tensor(face, full), inv_freq, sections=(8, 12, 12))
        return numpy(qr) @ np.swapaxes(numpy(kr), -1, -2)

    want = scores(full[:, :, -1:])
    fixed = scores(nm.mrope_decode_positions(deltas, len(row)))
    stale = scores(np.full((3, 1, 1), len(row)))                   # cache_position alone
    np.testing.assert_allclose(fixed, want, atol=1e-4, rtol=0)
    assert np.abs(stale - want).max() > 1.0


# --------------------------------------------------------------------------- errors

INV = np.array([1.0, 0.1, 0.01, 0.001, 1e-4, 1e-5], np.float32)   # 6 pairs


def call(x_shape=(1, 2, 5, 12), positions_shape=(3, 1, 5), inv=INV, **kwargs):
    kwargs.setdefault("sections", (2, 2, 2))

    def run(face):
        m = FACES[face]
        return m.apply_mrope(tensor(face, np.zeros(x_shape, np.float32)),
                             tensor(face, np.zeros(positions_shape, np.int64)),
                             inv, **kwargs)
    return run


APPLY_ERRORS = [
    pytest.param(call(sections=(2, 2, 1)), "sections must sum to len(inv_freq)=6, the number of "
                 "frequency pairs, got sections=(2, 2, 1) (sum 5); give each of the 6 frequency "
                 "pairs to one axis, e.g. sections=(2, 2, 2)", id="bad-sum"),
    pytest.param(call(sections=(3, 3)), "sections must hold three non-negative integers, the "
                 "frequency pairs of the temporal, height and width axes, got sections=(3, 3)",
                 id="two-sections"),
    pytest.param(call(sections=(2.0, 2, 2)), "got sections=(2.0, 2, 2)", id="float-section"),
    pytest.param(call(sections=(1, 3, 2), arrangement="interleaved"),
                 "arrangement='interleaved' cycles t, h, w at stride 3, so 6 pairs hold at most "
                 "2 height and 2 width pairs, got sections=(1, 3, 2); give the height and the "
                 "width at most a third of the pairs each, e.g. sections=(2, 2, 2)", id="interleaved-too-many-height"),
    pytest.param(call(arrangement="stride"), "arrangement must be one of 'chunked', "
                 "'interleaved', got arrangement='stride'", id="arrangement"),
    pytest.param(call(positions_shape=(1, 5)), "apply_mrope: positions must be (3, batch, seq): "
                 "the temporal, height and width position of each token, got "
                 "positions.shape=(1, 5); build them with posenc.mrope.mrope_positions",
                 id="positions-rank-2"),
    pytest.param(call(positions_shape=(2, 1, 5)), "got positions.shape=(2, 1, 5)",
                 id="positions-two-axes"),
    pytest.param(call(positions_shape=(3, 1, 4)), "positions must have shape (seq,) or "
                 "(batch, seq) matching x's", id="positions-seq"),
    pytest.param(call(x_shape=(1, 2, 5, 10)), "inv_freq has 6 frequencies, which rotate 12 "
                 "features, but x has only head_dim=10", id="x-too-narrow"),
    pytest.param(call(layout="neox"), "layout must be one of 'half', 'interleaved'",
                 id="layout"),
]


@pytest.mark.parametrize("run, expected", APPLY_ERRORS)
@pytest.mark.keras
def test_apply_mrope_errors(run, expected):
    message = same_error(FACES, run)
    assert message.startswith("apply_mrope: ") and expected in message, message


ROW = sequence(("text", 2), ("image", 6), ("text", 1))
POSITION_ERRORS = [
    pytest.param(dict(token_types=ROW), r"token_types must have rank 2, got shape \(9,\); pass "
                 r"\(batch, seq\) ints", id="rank-1"),
    pytest.param(dict(token_types=[[0, 3]]), r"token_types must be 0 \(text\), 1 \(image\) or 2 "
                 r"\(video\), got 3", id="type-3"),
    pytest.param(dict(token_types=[ROW]), r"token_types hold more image tokens than "
                 r"image_grid_thw's 0 grids give \(row 0\)", id="no-grid"),
    pytest.param(dict(token_types=[ROW], image_grid_thw=[[1, 4, 6]]),
                 r"a run of 6 image tokens \(row 0\) does not match its grids, which hold 24 "
                 r"tokens; each grid \(t, h, w\) takes t \* h \* w / spatial_merge_size\^2",
                 id="merge-forgotten"),
    pytest.param(dict(token_types=[ROW], image_grid_thw=[[1, 2, 3], [1, 2, 2]]),
                 r"image_grid_thw has 2 grids but token_types hold the tokens of 1",
                 id="extra-grid"),
    pytest.param(dict(token_types=[ROW], image_grid_thw=[[1, 3, 6]], spatial_merge_size=2),
                 r"h and w multiples of spatial_merge_size=2, got \(t, h, w\)=\(1, 3, 6\)",
                 id="odd-grid"),
    pytest.param(dict(token_types=[ROW], image_grid_thw=[1, 2, 3]),
                 r"image_grid_thw must have rank 2, got shape \(3,\)", id="grid-rank-1"),
    pytest.param(dict(token_types=[ROW], image_grid_thw=[[1, 2, 3]], second_per_grid_t=[1.0]),
                 r"second_per_grid_t needs tokens_per_second", id="seconds-without-rate"),
    pytest.param(dict(token_types=[sequence(("video", 6))], video_grid_thw=[[1, 2, 3]],
                      tokens_per_second=2, second_per_grid_t=[1.0, 2.0]),
                 r"second_per_grid_t must hold one positive number per video \(1\), got "
                 r"second_per_grid_t=\[1.0, 2.0\]", id="seconds-count"),
    pytest.param(dict(token_types=[ROW], image_grid_thw=[[1, 2, 3]], tokens_per_second=0),
                 r"tokens_per_second must be a finite number greater than 0", id="rate-zero"),
    pytest.param(dict(token_types=[ROW], image_grid_thw=[[1, 2, 3]], attention_mask=[[1] * 8]),
                 r"attention_mask must have the shape of token_types \(1, 9\), got "
                 r"attention_mask.shape=\(1, 8\)", id="mask-shape"),
    pytest.param(dict(token_types=[ROW], image_grid_thw=[[1, 2, 3]], spatial_merge_size=0),
                 r"spatial_merge_size must be a positive integer, got spatial_merge_size=0",
                 id="merge-zero"),
    pytest.param(dict(token_types=[ROW], image_grid_thw=[[1, 2, 3]], text_start="last"),
                 r"text_start must be one of 'max', 'grid', got text_start='last'",
                 id="text-start"),
]


@pytest.mark.parametrize("kwargs, expected", POSITION_ERRORS)
def test_mrope_positions_errors(kwargs, expected):
    kwargs = dict(kwargs)
    with pytest.raises(ValueError, match=r"^mrope_positions: ") as error:
        nm.mrope_positions(kwargs.pop("token_types"), **kwargs)
    assert re.search(expected, str(error.value)), str(error.value)


def test_decode_positions_errors():
    with pytest.raises(ValueError, match=r"rope_deltas must be \(batch,\) or \(batch, 1\)"):
        nm.mrope_decode_positions(np.zeros((2, 3), np.int64), 4)
    with pytest.raises(ValueError, match=r"cache_position \(batch, seq\) must have the batch "
                                         r"of rope_deltas \(2\)"):
        nm.mrope_decode_positions([0, 0], np.zeros((3, 1), np.int64))
    with pytest.raises(ValueError, match="cache_position must hold integers"):
        nm.mrope_decode_positions([0], np.array([1.5]))


def test_mrope_axes_errors():
    with pytest.raises(ValueError, match=r"^mrope_axes: sections must hold three"):
        nm.mrope_axes((1, -1, 2))
    with pytest.raises(ValueError, match=r"^mrope_axes: arrangement must be one of"):
        nm.mrope_axes((1, 1, 1), "chunk")
    assert nr.ROPE_LAYOUTS == ("half", "interleaved")     # the layouts apply_mrope shares


# --------------------------------------------------------------------------- the teaching versions

@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("arrangement", ["chunked", "interleaved"])
def test_the_teaching_versions_equal_the_package(face, arrangement):
    import posenc.keras.scratch as sk
    import posenc.torch.scratch as st

    scratch = st if face == "torch" else sk
    m = FACES[face]
    sections = SECTIONS[arrangement]
    axes = scratch.mrope_axes(sections, interleaved=arrangement == "interleaved")
    np.testing.assert_array_equal(numpy(axes), nm.mrope_axes(sections, arrangement))
    rng = np.random.default_rng(8)
    x = rng.normal(size=(2, 21, 128)).astype(np.float32)
    positions = random_positions(rng, 1, 21)[:, 0]                      # (3, seq)
    inv_freq = scratch.rope_inv_freq(128)
    got = scratch.mrope_half(tensor(face, x), tensor(face, positions), inv_freq, axes)
    want = m.apply_mrope(tensor(face, x), tensor(face, positions[:, None]), inv_freq,
                         sections=sections, arrangement=arrangement)
    np.testing.assert_allclose(numpy(got), numpy(want), atol=1e-5, rtol=0)
