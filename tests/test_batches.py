"""Positions in real batches: padding, packing and caches, for every scheme, in both faces.

A padded row (left or right) gives on its real tokens the logits of the sequence run alone;
a packed row gives each document's logits as if run alone; a left-padded batch decoded
with a cache equals each row decoded alone. Each of these has a counter-check: the bug
versions (positions = arange with a pad mask only; positions reset without the document
mask; a cache that forgets the mask) are run by patching the one rule they break, and the
test asserts they fail where they must (and which schemes are immune, and why). Then
RoBERTa's offset positions against Hugging Face, the attention-sink cache's re-rotation,
LongRoPE's switch of factors and the cache, and the errors.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import posenc.batches as rules
import posenc.keras as pk
import posenc.keras.batches as kb
import posenc.torch as pt
import posenc.torch.batches as tb
from faces import np32, same_error
from posenc.attention import POSITIONS
from posenc.interop import copy_weights

FACES = {"torch": pt, "keras": pk}
BATCHES = {"torch": tb, "keras": kb}
BOTH = ["torch", pytest.param("keras", marks=pytest.mark.keras)]
VOCAB = 23
SMALL = {"dim": 16, "depth": 2, "heads": 2, "max_len": 48}
OPTIONS = {"t5": {"num_buckets": 8, "max_distance": 16}, "shaw": {"max_distance": 4}}
# every scheme that reads a sequence (swin's grid bias is for a full patch grid: see
# test_swin_masks_keys_and_keeps_the_grid)
SEQ_SCHEMES = [s for s in POSITIONS if s != "swin"]
# the schemes whose attention reads only j - i: with contiguous real tokens, arange positions
# give the same differences as the real ones, so they are immune to the padding bug. xPos
# too: its query scale zeta^(n - c) and key scale zeta^-(m - c) meet as zeta^(n - m) in a
# score (the centre cancels); Kerple, Sandwich and the dynamic bias are functions of j - i.
RELATIVE = {"none", "shaw", "t5", "alibi", "rope", "xpos", "kerple_log", "kerple_power",
            "sandwich", "dynamic"}
# the schemes that read a token's absolute position: the tables, and FIRE, whose
# interpolation psi(i - j) / psi(max(L, i)) divides by the query's own position i once it
# passes the threshold L (a left-padded query read at its slot is interpolated wrongly)
ABSOLUTE = {"sinusoidal", "learned", "hybrid", "fire"}
# the content-dependent schemes read no position at all (FoX's gates and CoPE's counts come
# from the tokens and the mask): immune to the position bugs, not to the mask's; causal only
CONTENT = {"fox", "cope"}
RELATIVE |= CONTENT
assert RELATIVE | ABSOLUTE == set(SEQ_SCHEMES) and not RELATIVE & ABSOLUTE
# the length-extrapolation family (posenc/distance_bias.py)
EXTRAPOLATING = ["xpos", "kerple_log", "kerple_power", "sandwich", "fire", "dynamic"]
# FIRE's threshold L below the prompts' positions (randomized weights would put it near
# 0.3 * 512: every query then reads max(L, i) = L and FIRE would look relative)
FIRE_THRESHOLD = 1.5
TOL = 2e-5


def model(face, position, seed=0, **kwargs):
    m = FACES[face].Transformer(VOCAB, position=position,
                                **{**SMALL, **OPTIONS.get(position, {}), **kwargs})
    randomize(face, m, seed)
    if position == "fire":
        short_fire_threshold(face, m)
    return m


def short_fire_threshold(face, m):
    """Every FIRE layer's threshold ``L = |multiplier| * 512`` set to :data:`FIRE_THRESHOLD`
    and its ``c`` to 1, so that ``max(L, i)`` is the query's position from ``i = 2`` on; its
    output kernel times 3, a bias as large as the tables' embeddings."""
    for block in m.blocks:
        fire = block.attention.position_bias
        multiplier, c = FIRE_THRESHOLD / fire.threshold, 1.0
        if face == "torch":
            with torch.no_grad():
                fire.threshold_multiplier.fill_(multiplier)
                fire.c.fill_(c)
                fire.output_kernel.mul_(3.0)
        else:
            fire.threshold_multiplier.assign(np.float32(multiplier))
            fire.c.assign(np.float32(c))
            fire.output_kernel.assign(3.0 * np32(fire.output_kernel))


def randomize(face, m, seed=0):
    """Weights from 0.3 N(0, 1): every table far from its initial value."""
    rng = np.random.default_rng(seed)
    if face == "torch":
        with torch.no_grad():
            for _, p in sorted(m.named_parameters()):
                p.copy_(torch.as_tensor(0.3 * rng.normal(size=tuple(p.shape))))
        m.eval()
    else:
        for w in m.weights:
            w.assign((0.3 * rng.normal(size=tuple(w.shape))).astype("float32"))


def run(face, m, toks, **kwargs):
    toks = np.asarray(toks)
    kwargs = {k: (v if v is None or not isinstance(v, np.ndarray) else
                  (torch.as_tensor(v) if face == "torch" else v)) for k, v in kwargs.items()}
    if face == "torch":
        with torch.no_grad():
            return np32(m(torch.as_tensor(toks), **kwargs))
    return np32(m(toks, **kwargs))


def prompts(seed=0, lengths=(5, 9, 2)):
    rng = np.random.default_rng(seed)
    return [rng.integers(3, VOCAB, size=n) for n in lengths]


def padded(seqs, side="left", pad=0):
    """``(tokens, mask)`` of the sequences padded to the longest, on ``side``."""
    seq = max(len(s) for s in seqs)
    toks = np.full((len(seqs), seq), pad, np.int64)
    mask = np.zeros((len(seqs), seq), np.int64)
    for i, s in enumerate(seqs):
        where = slice(seq - len(s), seq) if side == "left" else slice(0, len(s))
        toks[i, where], mask[i, where] = s, 1
    return toks, mask


def padding_gap(face, m, seqs, side):
    """Largest difference, on the real tokens, between the padded batch and each alone."""
    toks, mask = padded(seqs, side)
    out = run(face, m, toks, attention_mask=mask)
    assert np.isfinite(out).all()                       # a fully padded query row: no NaN
    gap = 0.0
    for i, s in enumerate(seqs):
        alone = run(face, m, s[None])[0]
        gap = max(gap, float(np.abs(out[i][mask[i] > 0] - alone).max()))
    return gap


def packing_gap(face, m, seqs):
    """Largest difference between each document of a packed row and the document alone."""
    toks = np.concatenate(seqs)[None]
    docs = np.concatenate([np.full(len(s), i) for i, s in enumerate(seqs)])[None]
    out = run(face, m, toks, document_ids=docs)[0]
    gap, start = 0.0, 0
    for s in seqs:
        alone = run(face, m, s[None])[0]
        gap = max(gap, float(np.abs(out[start:start + len(s)] - alone).max()))
        start += len(s)
    return gap


def arange_positions(face):
    """The bug: positions = arange(seq) whatever the mask (the pad mask alone)."""
    def wrong(attention_mask, *, offset=None):
        mask = np.asarray(np32(attention_mask))
        out = np.broadcast_to(np.arange(mask.shape[-1]), mask.shape).copy()
        return torch.as_tensor(out) if face == "torch" else out.astype("int32")
    return wrong


# --------------------------------------------------------------------------- the rules

def test_numpy_rules():
    mask = np.array([[0, 0, 1, 1, 1], [1, 1, 1, 0, 0]])
    assert rules.mask_positions(mask).tolist() == [[0, 0, 0, 1, 2], [0, 1, 2, 0, 0]]
    assert rules.mask_positions(mask, offset=[3, 1]).tolist() == [[0, 0, 3, 4, 5],
                                                                  [1, 2, 3, 0, 0]]
    docs = np.array([[0, 0, 1, 1, 1, 2]])
    assert rules.document_positions(docs).tolist() == [[0, 1, 0, 1, 2, 0]]
    allowed = rules.batch_mask(None, docs, causal=True)[0]
    assert allowed[3].tolist() == [False, False, True, True, False, False]


@pytest.mark.parametrize("face", BOTH)
def test_face_rules_equal_the_numpy_rules(face):
    rng = np.random.default_rng(1)
    mask = (rng.random((4, 11)) > 0.3).astype(np.int64)
    docs = np.sort(rng.integers(0, 3, (4, 11)), axis=-1)
    offset = rng.integers(0, 5, 4)
    b = BATCHES[face]
    t = (lambda a: torch.as_tensor(a)) if face == "torch" else (lambda a: a)
    assert (np32(b.mask_positions(t(mask), offset=t(offset)))
            == rules.mask_positions(mask, offset=offset)).all()
    assert (np32(b.document_positions(t(docs), attention_mask=t(mask)))
            == rules.document_positions(docs, attention_mask=mask)).all()
    for causal in (True, False):
        got = np32(b.batch_mask(t(mask), t(docs), causal=causal, q_len=4))
        assert (got == rules.batch_mask(mask, docs, causal=causal, q_len=4)).all()
    ids = rng.integers(0, 6, (3, 9))
    assert (np32(b.roberta_position_ids(t(ids), 1, past_length=2))
            == rules.roberta_position_ids(ids, 1, past_length=2)).all()


# --------------------------------------------------------------------------- padding

@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("position", SEQ_SCHEMES)
@pytest.mark.parametrize("face", BOTH)
def test_a_padded_row_gives_the_logits_of_the_sequence_alone(face, position, side):
    m = model(face, position)
    assert padding_gap(face, m, prompts(), side) < TOL


@pytest.mark.parametrize("position", [s for s in SEQ_SCHEMES if s not in CONTENT])
@pytest.mark.parametrize("face", BOTH)
def test_an_encoder_ignores_its_padding(face, position):
    m = model(face, position, causal=False)
    assert padding_gap(face, m, prompts(2), "right") < TOL
    assert padding_gap(face, m, prompts(2), "left") < TOL


@pytest.mark.parametrize("position", SEQ_SCHEMES)
@pytest.mark.parametrize("face", BOTH)
def test_counter_check_arange_positions_with_a_pad_mask(face, position, monkeypatch):
    """The bug (positions = arange, pads masked) fails for the absolute schemes; the ones
    that read only j - i are immune (the real tokens are contiguous), NoPE too."""
    m = model(face, position)
    monkeypatch.setattr(BATCHES[face], "mask_positions", arange_positions(face))
    gap = padding_gap(face, m, prompts(), "left")
    if position in ABSOLUTE:
        assert gap > 1e-2
    else:
        assert gap < TOL


@pytest.mark.parametrize("face", BOTH)
def test_counter_check_no_mask_at_all(face):
    """Without the mask, the pads are attended: even NoPE and the relative schemes change."""
    for position in ("none", "alibi", "rope"):
        m = model(face, position)
        toks, mask = padded(prompts(), "left")
        out = run(face, m, toks)
        alone = run(face, m, prompts()[0][None])[0]
        assert np.abs(out[0][mask[0] > 0] - alone).max() > 1e-2


@pytest.mark.parametrize("position", ["learned", "alibi", "shaw", "rope", "t5", *EXTRAPOLATING,
                                      *sorted(CONTENT)])
@pytest.mark.keras
def test_both_faces_agree_on_a_padded_batch(position):
    t, k = model("torch", position), model("keras", position)
    copy_weights(t, k)
    toks, mask = padded(prompts(3), "left")
    a = run("torch", t, toks, attention_mask=mask)
    b = run("keras", k, toks, attention_mask=mask)
    assert np.abs(a - b).max() < 1e-4


@pytest.mark.parametrize("face", BOTH)
def test_pad_queries_get_zero_attention_not_nan(face):
    m = model(face, "alibi")
    toks, mask = padded(prompts(), "left")
    if face == "torch":
        with torch.no_grad():
            _, weights = m(torch.as_tensor(toks), attention_mask=torch.as_tensor(mask),
                           return_attention=True)
    else:
        _, weights = m(toks, attention_mask=mask, return_attention=True)
    w = np32(weights[0])
    assert np.isfinite(w).all()
    assert (w[2, :, :7] == 0).all()                 # row 2 has 7 pads: they attend nothing
    assert (w[..., mask[0] == 0][0] == 0).all()     # and no query attends a pad
    assert np.allclose(w[0, :, 4:].sum(-1), 1.0, atol=1e-5)


@pytest.mark.parametrize("face", BOTH)
def test_bfloat16_padded_row(face):
    if face == "torch":
        m = model(face, "rope").to(torch.bfloat16)
    else:
        m = pk.Transformer(VOCAB, position="rope", dtype="bfloat16", **SMALL)
        randomize(face, m)
    assert padding_gap(face, m, prompts(), "left") < 0.1


# --------------------------------------------------------------------------- packing

@pytest.mark.parametrize("position", SEQ_SCHEMES)
@pytest.mark.parametrize("face", BOTH)
def test_a_packed_row_gives_each_document_alone(face, position):
    m = model(face, position)
    assert packing_gap(face, m, prompts(4)) < TOL


@pytest.mark.parametrize("position", SEQ_SCHEMES)
@pytest.mark.parametrize("face", BOTH)
def test_counter_check_reset_positions_without_the_document_mask(face, position,
                                                                 monkeypatch):
    """Positions reset but no document mask: every scheme leaks across documents."""
    m = model(face, position)
    plain = BATCHES[face].batch_mask

    def leaky(attention_mask=None, document_ids=None, **kwargs):
        return plain(attention_mask, None, **kwargs)

    monkeypatch.setattr(BATCHES[face], "batch_mask", leaky)
    assert packing_gap(face, m, prompts(4)) > 1e-2


@pytest.mark.parametrize("position", SEQ_SCHEMES)
@pytest.mark.parametrize("face", BOTH)
def test_counter_check_document_mask_without_reset(face, position, monkeypatch):
    """The document mask but arange positions: the absolute schemes fail, the relative
    ones do not (each document's tokens are contiguous)."""
    m = model(face, position)

    def no_reset(document_ids, *, attention_mask=None):
        return arange_positions(face)(np32(document_ids) * 0 + 1)

    monkeypatch.setattr(BATCHES[face], "document_positions", no_reset)
    gap = packing_gap(face, m, prompts(4))
    assert (gap > 1e-2) if position in ABSOLUTE else (gap < TOL)


# --------------------------------------------------------------------------- caches

def decode(face, m, prompt_toks, mask, steps, *, full_mask=False, forget=False):
    """Prefill the padded prompt, then feed ``steps`` (batch, n) tokens one at a time."""
    cache = m.new_cache()
    outs = [run(face, m, prompt_toks, attention_mask=mask, cache=cache)[:, -1]]
    if forget:
        for layer in cache.layers:
            layer.key_mask = layer.positions = None
    seen = mask
    for i in range(steps.shape[1]):
        kwargs = {}
        seen = np.concatenate([seen, np.ones((len(steps), 1), np.int64)], 1)
        if full_mask:
            kwargs["attention_mask"] = seen
        outs.append(run(face, m, steps[:, i:i + 1], cache=cache, **kwargs)[:, -1])
    return np.stack(outs, 1), cache


@pytest.mark.parametrize("full_mask", [False, True])
@pytest.mark.parametrize("position", ["rope", "alibi", "learned", "t5", "shaw", "sinusoidal",
                                      "none", *EXTRAPOLATING, *sorted(CONTENT)])
@pytest.mark.parametrize("face", BOTH)
def test_decoding_a_left_padded_batch_equals_each_row_alone(face, position, full_mask):
    m = model(face, position)
    seqs = prompts(5, (3, 7))
    toks, mask = padded(seqs, "left")
    steps = np.random.default_rng(6).integers(3, VOCAB, (2, 4))
    batched, cache = decode(face, m, toks, mask, steps, full_mask=full_mask)
    assert not np32(cache.layers[0].key_mask)[0, :4].any()      # the pads stay masked
    assert np32(cache.layers[-1].positions)[0, -1] == 3 + 4 - 1  # per-row offsets
    for i, s in enumerate(seqs):
        alone, _ = decode(face, m, s[None], np.ones((1, len(s)), np.int64), steps[i:i + 1])
        assert np.abs(batched[i] - alone[0]).max() < TOL
        full = run(face, m, np.concatenate([s, steps[i]])[None])[0, len(s) - 1:]
        assert np.abs(batched[i] - full).max() < TOL


@pytest.mark.parametrize("position", ["rope", "alibi", "learned", "t5", *EXTRAPOLATING,
                                      *sorted(CONTENT)])
@pytest.mark.parametrize("face", BOTH)
def test_counter_check_a_cache_that_forgets_the_mask(face, position):
    m = model(face, position)
    seqs = prompts(5, (3, 7))
    toks, mask = padded(seqs, "left")
    steps = np.random.default_rng(6).integers(3, VOCAB, (2, 4))
    batched, _ = decode(face, m, toks, mask, steps, forget=True)
    alone, _ = decode(face, m, seqs[0][None], np.ones((1, 3), np.int64), steps[:1])
    assert np.abs(batched[0, 1:] - alone[0, 1:]).max() > 1e-2


# --------------------------------------------------------------------------- RoBERTa

@pytest.mark.reference
@pytest.mark.parametrize("face", BOTH)
def test_roberta_position_ids_equal_hugging_face(face):
    from transformers.models.roberta.modeling_roberta import RobertaEmbeddings

    rng = np.random.default_rng(7)
    ids = rng.integers(0, 30, (4, 13))
    ids[1, 9:] = 1
    ids[2, :3] = 1          # left padding too
    for past in (0, 5):
        want = RobertaEmbeddings.create_position_ids_from_input_ids(
            torch.as_tensor(ids), 1, past).numpy()
        t = torch.as_tensor(ids) if face == "torch" else ids
        assert (np32(BATCHES[face].roberta_position_ids(t, 1, past_length=past)) == want).all()


@pytest.mark.parametrize("face", BOTH)
def test_roberta_per_row_past_length_continues_a_left_padded_batch(face):
    # two left-padded rows, then one decoding step: the step's position must continue each
    # row's own count of real tokens, not the cache's slot count (Hugging Face's offset)
    prompt = np.array([[1, 1, 1, 0, 7], [0, 5, 6, 7, 8]])
    step = np.array([[9], [9]])
    whole = rules.roberta_position_ids(np.concatenate([prompt, step], 1), 1)[:, -1:]
    real = (prompt != 1).sum(-1)
    t = (lambda a: torch.as_tensor(a)) if face == "torch" else (lambda a: a)
    got = np32(BATCHES[face].roberta_position_ids(t(step), 1, past_length=t(real)))
    assert (got == whole).all()
    assert (rules.roberta_position_ids(step, 1, past_length=real) == whole).all()
    slots = np32(BATCHES[face].roberta_position_ids(t(step), 1, past_length=prompt.shape[1]))
    assert (slots[0] != whole[0]).all() and (slots[1] == whole[1]).all()


@pytest.mark.reference
def test_roberta_table_read_with_the_offset_equals_hugging_face_and_arange_does_not():
    from transformers import RobertaConfig
    from transformers.models.roberta.modeling_roberta import RobertaEmbeddings

    config = RobertaConfig(vocab_size=30, hidden_size=8, max_position_embeddings=20,
                           pad_token_id=1, type_vocab_size=1, hidden_dropout_prob=0.0)
    torch.manual_seed(0)
    emb = RobertaEmbeddings(config).eval()
    ids = torch.tensor([[0, 7, 8, 9, 2, 1, 1], [0, 5, 6, 2, 1, 1, 1]])
    table = pt.LearnedEncoding.from_table(emb.position_embeddings.weight.detach())

    def ours(positions):
        x = emb.word_embeddings(ids) + emb.token_type_embeddings.weight[0]
        return emb.LayerNorm(table(x, positions))

    with torch.no_grad():
        want = emb(input_ids=ids)
        right = ours(tb.roberta_position_ids(ids, 1))
        wrong = ours(torch.arange(ids.shape[1]))      # the pitfall: no padding_idx + 1 offset
    assert torch.allclose(right, want, atol=1e-6)
    assert (wrong - want).abs().max() > 1e-1


# --------------------------------------------------------------------------- attention sinks

@pytest.mark.parametrize("face", BOTH)
def test_rerotated_keys_equal_keys_rotated_afresh(face):
    rng = np.random.default_rng(8)
    k = rng.normal(size=(2, 3, 10, 16)).astype(np.float32)
    pos = np.arange(4, 14)
    for layout in ("half", "interleaved"):
        inv_freq, _ = FACES[face].rope_frequencies(16)
        x = torch.as_tensor(k) if face == "torch" else k
        p = (lambda a: torch.as_tensor(a)) if face == "torch" else (lambda a: a)
        cached = FACES[face].apply_rope(x, p(pos), inv_freq, layout=layout)
        moved = BATCHES[face].rerotate_keys(cached, -4, inv_freq, layout=layout)
        fresh = FACES[face].apply_rope(x, p(pos - 4), inv_freq, layout=layout)
        assert np.abs(np32(moved) - np32(fresh)).max() < 1e-5
        stale = np.abs(np32(cached) - np32(fresh)).max()
        assert stale > 1e-1                          # not re-rotating would be wrong


@pytest.mark.reference
def test_transformers_has_no_sink_cache_any_more():
    """transformers 5 removed ``SinkCache`` (it moved to a Hub generation recipe), so the
    re-rotation is tested against R(a)R(b) = R(a + b) above, not against its code."""
    import transformers

    assert not hasattr(transformers, "SinkCache")


@pytest.mark.parametrize("face", BOTH)
def test_a_sink_cache_equals_a_fresh_pass_over_the_kept_tokens(face):
    """One layer: the keys and values depend only on the tokens, so a query attending the
    sinks and the window at their places in the cache equals a fresh pass over them."""
    m = model(face, "rope", depth=1)
    sink, window = 2, 5
    cache = BATCHES[face].sink_cache(m, sink=sink, window=window)
    stream = np.random.default_rng(9).integers(3, VOCAB, 16)
    gaps = []
    for t, tok in enumerate(stream):
        out = run(face, m, np.array([[tok]]), cache=cache)[0, -1]
        kept = stream[:t + 1] if t < sink + window else np.concatenate(
            [stream[:sink], stream[t + 1 - window:t + 1]])
        gaps.append(float(np.abs(out - run(face, m, kept[None])[0, -1]).max()))
        assert cache.length == min(t + 1, sink + window - 1)
    assert max(gaps) < 1e-4
    assert cache.layers[0].evicted == len(stream) - (sink + window - 1)


@pytest.mark.parametrize("face", BOTH)
def test_counter_check_a_sink_cache_without_rerotation(face, monkeypatch):
    m = model(face, "rope", depth=1)
    monkeypatch.setattr(BATCHES[face], "rerotate_keys", lambda keys, *a, **k: keys)
    cache = BATCHES[face].sink_cache(m, sink=2, window=5)
    stream = np.random.default_rng(9).integers(3, VOCAB, 12)
    for tok in stream:
        out = run(face, m, np.array([[tok]]), cache=cache)[0, -1]
    kept = np.concatenate([stream[:2], stream[-5:]])
    assert np.abs(out - run(face, m, kept[None])[0, -1]).max() > 1e-3


@pytest.mark.parametrize("face", BOTH)
def test_a_bfloat16_sink_cache_turns_each_key_once_and_does_not_drift(face):
    """A key that stays in the cache a whole window is not turned once per slide (each turn
    a rounding: in bfloat16 the error would pass the key's own size within a few hundred
    slides) but once, from its rotation at entry, to its place now."""
    # a long window in PyTorch; a shorter one in Keras, where JAX compiles each new length
    sink, window, head_dim = 4, (300 if face == "torch" else 48), 64
    steps = window + 200 if face == "torch" else 2 * window
    m = FACES[face].Transformer(VOCAB, dim=head_dim, heads=1, depth=1, position="rope")
    layer = BATCHES[face].sink_cache(m, sink=sink, window=window).layers[0]
    inv_freq = m.blocks[0].attention.rotary._inv_freq
    raw = np.random.default_rng(3).normal(size=(1, 1, steps, head_dim)).astype(np.float32)
    if face == "torch":
        conv, cast = torch.as_tensor, (lambda x: x.to(torch.bfloat16))
        concat = lambda t: torch.cat(t, dim=-2)          # noqa: E731
    else:
        from keras import ops

        conv, cast = ops.convert_to_tensor, (lambda x: ops.cast(x, "bfloat16"))
        concat = lambda t: ops.concatenate(t, axis=-2)   # noqa: E731
    ids, worst = [], 0.0
    for t in range(steps):
        key = FACES[face].apply_rope(conv(raw[..., t:t + 1, :]), conv(np.array([layer.length])),
                                     inv_freq)
        keys, _ = layer.append(cast(key), cast(conv(raw[..., t:t + 1, :])), concat)
        ids.append(t)
        want = FACES[face].apply_rope(conv(raw[..., ids, :]), conv(np.arange(len(ids))), inv_freq)
        worst = max(worst, float(np.abs(np32(keys) - np32(want)).max()))
        evicted, _ = rules.sink_plan(len(ids), sink, window)
        ids = ids[:sink] + ids[sink + evicted:]
    assert layer.evicted == steps - (sink + window - 1)
    assert worst < 0.05 * np.abs(raw).max()      # bfloat16's rounding of one or two turns


# --------------------------------------------------------------------------- LongRoPE

LONGROPE = {"rope_type": "longrope", "short_factor": [1.0, 1.0, 1.0, 1.0],
            "long_factor": [1.0, 4.0, 16.0, 64.0], "original_max_position_embeddings": 6,
            "factor": 4.0}


def longrope_steps(face, m, stream, fix):
    """Logits of each step of cached decoding, with ``fix`` at the switch (None, "rerotate",
    "recompute"), and the last logits of a fresh pass over each prefix."""
    cache = m.new_cache()
    original = LONGROPE["original_max_position_embeddings"]
    got, fresh = [], []
    for t in range(len(stream)):
        if t == original and fix == "rerotate":
            BATCHES[face].rerotate_cache(m, cache, from_length=original, to_length=t + 1)
        if t == original and fix == "recompute":       # all tokens again, the new one too:
            cache = m.new_cache()                       # a length past the switch
            got.append(run(face, m, stream[None, :t + 1], cache=cache)[0, -1])
        else:
            got.append(run(face, m, stream[None, t:t + 1], cache=cache)[0, -1])
        fresh.append(run(face, m, stream[None, :t + 1])[0, -1])
    return np.abs(np.array(got) - np.array(fresh)).max(-1)


@pytest.mark.parametrize("face", BOTH)
def test_longrope_cache_goes_stale_at_the_switch_and_the_fixes(face):
    stream = np.random.default_rng(10).integers(3, VOCAB, 11)
    original = LONGROPE["original_max_position_embeddings"]
    one = model(face, "rope", depth=1, rope_scaling=LONGROPE)
    stale = longrope_steps(face, one, stream, None)
    assert stale[:original].max() < TOL                 # short factors: cache = fresh pass
    assert stale[original:].min() > 10 * TOL            # past the switch: stale keys
    assert longrope_steps(face, one, stream, "rerotate").max() < 1e-4
    two = model(face, "rope", depth=2, rope_scaling=LONGROPE)
    # two layers: the second layer's keys came from first-layer outputs computed with the
    # short factors; re-rotating them is not enough, encoding the tokens again is exact
    deep = longrope_steps(face, two, stream, "rerotate")[original:].max()
    recomputed = longrope_steps(face, two, stream, "recompute").max()
    assert recomputed < TOL and deep > max(1e-5, 30 * recomputed)


# --------------------------------------------------------------------------- errors

@pytest.mark.keras
def test_bad_masks_raise_in_both_faces():
    def call(face, **kwargs):
        m = FACES[face].Transformer(VOCAB, **SMALL)
        toks = np.ones((2, 5), np.int64)
        conv = {k: (torch.as_tensor(v) if face == "torch" else v) for k, v in kwargs.items()}
        run(face, m, toks, **conv)

    msg = same_error(FACES, lambda f: call(f, attention_mask=np.ones((2, 4), np.int64)))
    assert "attention_mask" in msg and "(2, 4)" in msg and "one entry per token" in msg
    msg = same_error(FACES, lambda f: call(f, attention_mask=np.ones((2, 5, 1), np.int64)))
    assert "attention_mask" in msg
    msg = same_error(FACES, lambda f: call(f, attention_mask=np.full((2, 5), 2, np.int64)))
    assert "attention_mask" in msg and "2" in msg and "0 for padding" in msg
    msg = same_error(FACES, lambda f: call(f, document_ids=np.zeros((2, 5), np.float32)))
    assert "document_ids" in msg and "float32" in msg
    msg = same_error(FACES, lambda f: call(f, document_ids=np.zeros((2, 4), np.int64)))
    assert "document_ids" in msg and "(2, 4)" in msg


@pytest.mark.keras
def test_cache_mismatches_raise_in_both_faces():
    def call(face, what):
        m = FACES[face].Transformer(VOCAB, **SMALL)
        cache = m.new_cache()
        run(face, m, np.ones((2, 5), np.int64), attention_mask=np.ones((2, 5), np.int64),
            cache=cache)
        if what == "batch":
            run(face, m, np.ones((3, 1), np.int64), cache=cache)
        elif what == "mask":
            run(face, m, np.ones((2, 1), np.int64), attention_mask=np.ones((2, 3), np.int64),
                cache=cache)
        else:
            run(face, m, np.ones((2, 1), np.int64), document_ids=np.ones((2, 1), np.int64),
                cache=cache)

    msg = same_error(FACES, lambda f: call(f, "batch"))
    assert "cache holds 2 rows" in msg and "batch 3" in msg
    msg = same_error(FACES, lambda f: call(f, "mask"))
    assert "(2, 1) or (2, 6)" in msg and "cache of 5" in msg
    msg = same_error(FACES, lambda f: call(f, "documents"))
    assert "document_ids" in msg and "cache" in msg


@pytest.mark.parametrize("face", BOTH)
def test_swin_masks_keys_and_keeps_the_grid(face):
    """Swin's bias belongs to the patch grid: a mask of ones changes nothing, and a masked
    patch is never attended (its own output aside)."""
    m = FACES[face].Transformer(VOCAB, position="swin", grid=(3, 4), causal=False, **SMALL)
    randomize(face, m)
    toks = np.random.default_rng(11).integers(3, VOCAB, (2, 12))
    ones = np.ones((2, 12), np.int64)
    assert np.abs(run(face, m, toks, attention_mask=ones) - run(face, m, toks)).max() < TOL
    mask = ones.copy()
    mask[:, 5] = 0
    changed = toks.copy()
    changed[:, 5] = 4
    a = run(face, m, toks, attention_mask=mask)
    b = run(face, m, changed, attention_mask=mask)
    assert np.abs(np.delete(a - b, 5, axis=1)).max() < TOL


@pytest.mark.keras
def test_errors_name_the_class_called():
    def call(face, cls):
        if cls == "Transformer":
            run(face, FACES[face].Transformer(VOCAB, **SMALL), np.ones((1, 3), np.int64),
                attention_mask=np.ones((1, 2), np.int64))
        else:
            layer = FACES[face].MultiHeadAttention(8, 2, causal=True)
            x = np.zeros((1, 3, 8), np.float32)
            x = torch.as_tensor(x) if face == "torch" else x
            mask = np.array([[1, 0, 3]])
            layer(x, attention_mask=torch.as_tensor(mask) if face == "torch" else mask)

    assert same_error(FACES, lambda f: call(f, "Transformer")).startswith("Transformer:")
    msg = same_error(FACES, lambda f: call(f, "MultiHeadAttention"))
    assert msg.startswith("MultiHeadAttention:") and "value 3" in msg


# --------------------------------------------------------------------------- stacks
def _stacks():
    """Stacks whose layers differ, small enough for a prompt of 9 tokens to cross their
    windows, chunks and temperature steps."""
    from posenc.stacks import gemma3_stack, llama4_stack

    return {"gemma3": gemma3_stack(4, window=3, local_base=100.0, global_base=10_000.0,
                                   global_factor=2.0, pattern=2),
            "llama4": llama4_stack(4, nope_every=2, base=100.0, rope_layout="half", chunk=4,
                                   qk_norm=True, floor_scale=2.0, attn_scale=0.5)}


@pytest.mark.parametrize("stack", ["gemma3", "llama4"])
@pytest.mark.parametrize("face", BOTH)
def test_stacks_read_the_real_positions_of_padded_packed_and_cached_rows(face, stack):
    m = model(face, "rope", depth=4, stack=_stacks()[stack])
    seqs = prompts(7, (9, 4))
    assert padding_gap(face, m, seqs, "left") < TOL      # windows, chunks and temperature
    assert padding_gap(face, m, seqs, "right") < TOL     # on the real positions
    assert packing_gap(face, m, seqs) < TOL
    toks, mask = padded(seqs, "left")
    steps = np.random.default_rng(8).integers(3, VOCAB, (2, 3))
    batched, _ = decode(face, m, toks, mask, steps)
    for i, s in enumerate(seqs):
        full = run(face, m, np.concatenate([s, steps[i]])[None])[0, len(s) - 1:]
        assert np.abs(batched[i] - full).max() < TOL


@pytest.mark.parametrize("face", BOTH)
def test_counter_check_chunks_on_the_padded_indices(face, monkeypatch):
    """The bug: a stack's chunks counted on the row's indices, pads included. A window only
    reads differences, which contiguous real tokens keep, but chunks start at multiples of
    the chunk: the short left-padded row's chunks then cut it elsewhere than alone."""
    import posenc.stacks as stacks

    m = model(face, "rope", depth=4, stack=_stacks()["llama4"])
    seqs = prompts(7, (9, 4))
    assert padding_gap(face, m, seqs, "left") < TOL
    if face == "torch":
        import posenc.torch.attention as attention

        def on_indices(q_positions, k_positions, rule):
            k_len = k_positions.shape[-1]
            index = torch.arange(k_len)[None].expand(k_positions.shape[0], -1)
            return stacks.position_mask(index[:, k_len - q_positions.shape[-1]:], index, rule)
        monkeypatch.setattr(attention, "position_mask", on_indices)
        assert padding_gap(face, m, seqs, "left") > 1e-3
