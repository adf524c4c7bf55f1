"""Diagnostics: similarity, the position probe, hidden states, attention maps, gradient monitors.

The analysis (posenc.diagnostics) is NumPy; each face collects hidden states, attention weights
and gradient norms. Small stand-in models below follow the lab Transformer's call interface
(``return_hidden``, ``return_attention``, ``position_weights()``).
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
import torch
from keras import ops
from torch import nn

import posenc.keras as pk
import posenc.keras.diagnostics as kd
import posenc.torch as pt
import posenc.torch.diagnostics as td
from posenc import diagnostics as dg
from posenc import tasks
from posenc.keras.tasks import LagModel as KerasLagModel
from posenc.keras.tasks import lag_loss as keras_lag_loss
from posenc.keras.tasks import lag_weights as keras_lag_weights
from posenc.keras.tasks import load_lag_weights as keras_load_lag_weights
from posenc.torch.tasks import LagModel, lag_loss, lag_weights
from mutants import and_the_bugs, wrong_code


# --------------------------------------------------------------------------- similarity


def test_similarity_cosine_and_dot():
    table = np.random.default_rng(0).normal(size=(12, 8))
    dot = dg.similarity(table, kind="dot")
    np.testing.assert_allclose(dot, table @ table.T)
    cos = dg.similarity(table)
    np.testing.assert_allclose(np.diag(cos), 1.0)
    np.testing.assert_allclose(cos, cos.T)
    norms = np.linalg.norm(table, axis=1)
    np.testing.assert_allclose(cos, dot / norms[:, None] / norms[None, :])
    zero = dg.similarity(np.vstack([table, np.zeros(8)]))
    assert np.all(zero[-1] == 0)


def test_sinusoidal_similarity_depends_only_on_the_offset():
    table = pt.sinusoidal(40, 32).numpy()
    sim = dg.similarity(table, kind="dot")
    offsets, means = dg.mean_by_offset(sim)
    rel = np.arange(40)[None, :] - np.arange(40)[:, None]
    np.testing.assert_allclose(sim, means[rel + 39], atol=1e-5)
    # the diagonal is dim / 2 (each sin^2 + cos^2 pair gives 1) and the profile is even
    np.testing.assert_allclose(means[39], 16.0, atol=1e-5)
    np.testing.assert_allclose(means, means[::-1], atol=1e-5)
    # and a random table does not have that structure
    random = dg.similarity(np.random.default_rng(1).normal(size=(40, 32)), kind="dot")
    assert np.abs(random - dg.mean_by_offset(random)[1][rel + 39]).max() > 1.0


def test_mean_by_offset_skips_the_masked_future():
    bias = pt.alibi_bias(4, 6, 6).numpy()
    offsets, means = dg.mean_by_offset(bias[1])
    assert offsets.tolist() == list(range(-5, 6))
    slope = pt.alibi_slopes(4).numpy()[1]
    np.testing.assert_allclose(means[:6], slope * offsets[:6], rtol=1e-6)
    assert np.all(np.isnan(means[6:]))


def test_mean_by_offset_of_a_rectangle_uses_the_last_queries():
    matrix = np.arange(6.0).reshape(2, 3)   # queries at positions 1 and 2 of 3
    offsets, means = dg.mean_by_offset(matrix)
    assert offsets.tolist() == [-2, -1, 0, 1, 2]
    np.testing.assert_allclose(means[2], (1 + 5) / 2)           # (1, 1) and (2, 2)
    np.testing.assert_allclose(means[1], (0 + 4) / 2)           # (1, 0) and (2, 1)
    np.testing.assert_allclose(means[0], 3.0)                   # (2, 0)
    np.testing.assert_allclose(means[3], 2.0)                   # (1, 2)
    assert np.isnan(means[4])


@pytest.mark.parametrize("seq, head_dim, base", [(16, 8, 10000.0), (33, 32, 500.0)])
def test_rope_scores_are_rotated_dot_products(seq, head_dim, base):
    inv_freq = pt.sinusoidal(1, head_dim).numpy()  # noqa: F841 (the face is importable)
    scores = dg.rope_scores(seq, head_dim, base=base)
    # rotate an all-ones query/key pair by m * theta_i (interleaved pairs) and take dot products
    theta = base ** (-np.arange(0, head_dim, 2) / head_dim)
    angles = np.arange(seq)[:, None] * theta
    x = np.ones(head_dim)
    rot = np.empty((seq, head_dim))
    rot[:, 0::2] = x[0::2] * np.cos(angles) - x[1::2] * np.sin(angles)
    rot[:, 1::2] = x[0::2] * np.sin(angles) + x[1::2] * np.cos(angles)
    np.testing.assert_allclose(scores, rot @ rot.T / head_dim, atol=1e-12)
    # and it is the sinusoidal table's PE PE^T, divided by head_dim / 2
    table = pt.sinusoidal(seq, head_dim, base=base).double().numpy()
    np.testing.assert_allclose(scores, dg.similarity(table, kind="dot") / (head_dim / 2),
                               atol=1e-5)


@pytest.mark.parametrize("call, message", [
    (lambda: dg.similarity(np.zeros(4)), "similarity: table must have rank 2"),
    (lambda: dg.similarity(np.ones((3, 2)), kind="cos"), "kind must be one of 'cosine', 'dot'"),
    (lambda: dg.similarity([[np.nan, 1.0]]), "table must be finite"),
    (lambda: dg.similarity("abc"), "table must be a numeric array"),
    (lambda: dg.mean_by_offset(np.ones(3)), "mean_by_offset: matrix must have rank 2"),
    (lambda: dg.rope_scores(0, 8), "rope_scores: seq_len must be a positive integer"),
    (lambda: dg.fit_probe(np.ones((1, 4, 2))), "fit_probe: hidden must hold at least 2"),
    (lambda: dg.fit_probe(np.ones((4, 2))), "fit_probe: hidden must have rank 3"),
    (lambda: dg.fit_probe(np.ones((4, 4, 2)), ridge=-1.0), "ridge must be a finite number >= 0"),
    (lambda: dg.fit_probe(np.ones((4, 4, 2)), test_fraction=1.0),
     r"test_fraction must be a finite number greater than 0"),
])
def test_diagnostics_errors_name_argument_and_value(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# --------------------------------------------------------------------------- the probe


def _positional_states(batch=12, seq=20, dim=16, noise=0.3, seed=0):
    rng = np.random.default_rng(seed)
    table = pt.sinusoidal(seq, dim).numpy()
    return table[None] + noise * rng.normal(size=(batch, seq, dim))


def test_probe_reads_position_from_a_linear_code():
    rng = np.random.default_rng(0)
    direction = rng.normal(size=8)
    hidden = (np.arange(10)[None, :, None] * direction
              + 0.01 * rng.normal(size=(6, 10, 8)))
    result = dg.fit_probe(hidden, ridge=0.0)
    assert result.r2 > 0.999 and result.accuracy == 1.0 and result.mean_abs_error < 0.1


def test_probe_finds_nothing_in_position_free_states():
    hidden = np.random.default_rng(1).normal(size=(16, 20, 16))
    result = dg.fit_probe(hidden)
    assert result.r2 < 0.1 and result.accuracy < 0.2
    # the fit itself may find a little on the training sequences, never on held-out ones
    assert result.train_r2 > result.r2


def test_probe_on_sinusoidal_states_and_noise():
    clean = dg.fit_probe(_positional_states(noise=0.05))
    noisy = dg.fit_probe(_positional_states(noise=2.0))
    assert clean.r2 > 0.9
    assert noisy.r2 < clean.r2


def test_probe_holds_out_whole_sequences():
    # sequences made of one repeated random vector per sequence: a probe that saw a sequence's
    # tokens could memorise them; held-out sequences share nothing with the training ones
    rng = np.random.default_rng(2)
    hidden = np.repeat(rng.normal(size=(10, 1, 30)), 8, axis=1)
    positions = np.tile(np.arange(8), (10, 1))
    result = dg.fit_probe(hidden, positions)
    assert result.r2 < 0.05


def test_probe_layers_uses_one_split_and_custom_positions():
    hidden = _positional_states()
    positions = np.arange(20) + 100
    a, b = dg.probe_layers([hidden, hidden], positions, seed=3)
    assert a.r2 == b.r2
    assert abs(a.intercept - 109.5) < 1.0
    other = dg.fit_probe(hidden, positions, seed=4)
    assert other.r2 != a.r2     # a different split


# --------------------------------------------------------------------------- stand-in models


class TorchStandIn(nn.Module):
    """Embedding (+ learned table), causal attention blocks; the lab Transformer's interface."""

    def __init__(self, vocab=12, dim=16, depth=2, heads=2, max_len=24, position="learned",
                 scale=1.0, detach=False):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.position = position
        self.scale, self.detach = scale, detach
        if position == "learned":
            self.table = nn.Parameter(torch.randn(max_len, dim))
        self.blocks = nn.ModuleList(nn.MultiheadAttention(dim, heads, batch_first=True)
                                    for _ in range(depth))
        self.readout = nn.Linear(dim, vocab)

    def position_weights(self):
        return [self.table] if self.position == "learned" else []

    def forward(self, tokens, return_hidden=False, return_attention=False):
        seq = tokens.shape[1]
        h = self.embed(tokens)
        if self.position == "learned":
            table = self.table.detach() if self.detach else self.table
            h = h + self.scale * table[:seq]
        elif self.position == "sinusoidal":
            h = h + pt.sinusoidal(seq, h.shape[-1])
        hidden, attention = [h], []
        mask = torch.triu(torch.ones(seq, seq, dtype=torch.bool), 1)
        for block in self.blocks:
            out, weights = block(h, h, h, attn_mask=mask, need_weights=return_attention,
                                 average_attn_weights=False)
            h = h + out
            hidden.append(h)
            attention.append(weights)
        logits = self.readout(h)
        if return_hidden:
            return logits, hidden
        if return_attention:
            return logits, attention
        return logits


def test_torch_hidden_states_and_attention_maps():
    torch.manual_seed(0)
    model = TorchStandIn().train()
    tokens = torch.randint(0, 12, (3, 10))
    hidden = td.hidden_states(model, tokens)
    assert len(hidden) == 3 and all(h.shape == (3, 10, 16) for h in hidden)
    assert all(h.dtype == np.float32 for h in hidden)
    assert model.training                       # restored
    attention = td.attention_maps(model, tokens)
    assert len(attention) == 2 and attention[0].shape == (3, 2, 10, 10)
    np.testing.assert_allclose(attention[0].sum(-1), 1.0, atol=1e-5)
    assert np.all(np.triu(attention[1][0, 0], 1) == 0)   # causal


def test_probe_on_a_model_sees_the_encoding():
    torch.manual_seed(0)
    tokens = torch.from_numpy(tasks.lag_tokens(32, 20, vocab=12, seed=0))
    r2 = {}
    for position in ("none", "sinusoidal"):
        model = TorchStandIn(position=position)
        r2[position] = dg.probe_layers(td.hidden_states(model, tokens))[0].r2
    assert r2["sinusoidal"] > 0.9
    assert r2["none"] < 0.1


# --------------------------------------------------------------------------- gradients

# Keras's GradientMonitor refuses the JAX backend (its gradients need a stateless call of the model).


def test_gradient_log_ratio_is_per_weight_rms():
    log = dg.GradientLog()
    log.add(2.0, 4.0, 4, 16)      # rms 1 and 1
    log.add(0.0, 4.0, 4, 16)
    np.testing.assert_allclose(log.ratios, [1.0, 0.0])
    assert log.steps == 2
    with pytest.raises(ValueError, match="position_count changed between steps"):
        log.add(1.0, 1.0, 5, 16)
    with pytest.raises(ValueError, match="rest_count must be a positive integer"):
        dg.GradientLog().add(1.0, 1.0, 4, 0)
    assert dg.GradientLog().health() == "none"
    empty = dg.GradientLog()
    empty.add(0.0, 1.0, 0, 10)
    assert empty.health() == "none"      # a model without positional weights


@pytest.mark.parametrize("ratio, verdict", [
    (1.0, "healthy"), (dg.GRADIENT_RATIO_RANGE[0] * 1.01, "healthy"),
    (dg.GRADIENT_RATIO_RANGE[0] * 0.99, "starved"), (0.0, "starved"),
    (dg.GRADIENT_RATIO_RANGE[1] * 1.01, "dominant"), (float("nan"), "none"),
])
def test_gradient_health(ratio, verdict):
    assert dg.gradient_health(ratio) == verdict


def _lag_batches(steps, batch=32, length=16, vocab=12, seed=0):
    data = tasks.lag_tokens(steps * batch, length, vocab=vocab, seed=seed)
    return np.split(data, steps)


def _train_torch(model, steps=30, lr=3e-3, **monitor_options):
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    monitor = td.GradientMonitor(model, **monitor_options)
    for batch in _lag_batches(steps):
        tokens = torch.from_numpy(batch)
        logits = model(tokens)
        loss = nn.functional.cross_entropy(logits[:, 1:].reshape(-1, logits.shape[-1]),
                                           tokens[:, :-1].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    monitor.remove()
    return monitor


def test_torch_monitor_norms_equal_the_gradients():
    torch.manual_seed(0)
    model = TorchStandIn()
    monitor = td.GradientMonitor(model, auto_step=False)
    tokens = torch.from_numpy(_lag_batches(1)[0])
    model(tokens).logsumexp(-1).mean().backward()
    monitor.step()
    position = float(model.table.grad.norm())
    rest = float(torch.sqrt(sum(p.grad.pow(2).sum() for n, p in model.named_parameters()
                                if n != "table" and p.grad is not None)))
    np.testing.assert_allclose(monitor.log.position_norms, [position], rtol=1e-5)
    np.testing.assert_allclose(monitor.log.rest_norms, [rest], rtol=1e-5)
    assert monitor.log.position_count == model.table.numel()
    monitor.remove()
    assert not monitor._handles


def test_torch_monitor_steps_itself_in_a_plain_loop():
    torch.manual_seed(0)
    monitor = _train_torch(TorchStandIn(), steps=7)
    assert monitor.log.steps == 7


def test_torch_monitor_healthy_and_starved_tables():
    verdicts, medians = {}, {}
    for name, options in {"learned": {}, "scaled": {"scale": 1e-4},
                          "detached": {"detach": True}}.items():
        torch.manual_seed(0)
        monitor = _train_torch(TorchStandIn(**options))
        verdicts[name], medians[name] = monitor.health(), float(np.median(monitor.ratios))
    assert verdicts == {"learned": "healthy", "scaled": "starved", "detached": "starved"}, medians
    low, high = dg.GRADIENT_RATIO_RANGE
    assert low < medians["learned"] < high
    assert medians["detached"] == 0.0
    assert medians["scaled"] < 1e-3 * medians["learned"]


def test_torch_monitor_refuses_foreign_weights():
    model = TorchStandIn()
    with pytest.raises(ValueError, match="GradientMonitor: position_weights must be "
                                         "trainable weights of the model, got 1 that are not"):
        td.GradientMonitor(model, position_weights=[nn.Parameter(torch.zeros(2))])



def lab_table_health(face: str, prepare=None, steps: int = 12) -> str:
    """The gradient monitor's verdict on the learned table of a small lab Transformer trained
    for ``steps`` steps on the lag task; ``prepare(model)`` may change the model first."""
    if face == "torch":
        torch.manual_seed(0)
        model = pt.Transformer(12, dim=16, depth=1, heads=2, position="learned", max_len=16)
        model = (prepare or (lambda m: m))(model)
        return _train_torch(model, steps=steps).health()
    keras.utils.set_random_seed(0)
    model = pk.Transformer(12, dim=16, depth=1, heads=2, position="learned", max_len=16)
    model(np.zeros((1, 16), "int32"))
    model = (prepare or (lambda m: m))(model)
    return _train_keras(model, steps=steps).health()


@pytest.mark.parametrize("face", ["torch", pytest.param("keras", marks=pytest.mark.keras)])
@and_the_bugs("starved-table")
def test_learned_table_gets_a_healthy_gradient(face, impl):
    prepare = None if impl == "posenc" else wrong_code(impl, face)
    assert lab_table_health(face, prepare) == "healthy"


# --------------------------------------------------------------------------- the Keras face


class KerasStandIn(keras.Model):
    """The Keras twin of TorchStandIn (learned table or none)."""

    def __init__(self, vocab=12, dim=16, depth=2, heads=2, max_len=24, position="learned",
                 scale=1.0, **kwargs):
        super().__init__(**kwargs)
        self.embed = keras.layers.Embedding(vocab, dim)
        self.position, self.scale = position, scale
        self.blocks = [keras.layers.MultiHeadAttention(heads, dim // heads)
                       for _ in range(depth)]
        self.readout = keras.layers.Dense(vocab)
        self.max_len, self.dim = max_len, dim

    def build(self, input_shape):
        self.table = self.add_weight(shape=(self.max_len, self.dim), initializer=keras.initializers.RandomNormal(stddev=1.0),
                                     name="table") if self.position == "learned" else None
        super().build(input_shape)

    def position_weights(self):
        return [self.table] if self.table is not None else []

    def call(self, tokens, return_hidden=False, return_attention=False, training=False):
        seq = ops.shape(tokens)[1]
        h = self.embed(tokens)
        if self.table is not None:
            h = h + self.scale * self.table[:seq]
        hidden, attention = [h], []
        for block in self.blocks:
            out, weights = block(h, h, use_causal_mask=True, return_attention_scores=True)
            h = h + out
            hidden.append(h)
            attention.append(weights)
        logits = self.readout(h)
        if return_hidden:
            return logits, hidden
        if return_attention:
            return logits, attention
        return logits


def _keras_model(**options):
    keras.utils.set_random_seed(0)
    model = KerasStandIn(**options)
    model(np.zeros((1, 8), "int32"))
    return model


@pytest.mark.keras
def test_keras_hidden_states_attention_maps_and_probe():
    model = _keras_model()
    tokens = tasks.lag_tokens(32, 12, vocab=12, seed=0).astype("int32")
    hidden = kd.hidden_states(model, tokens)
    assert len(hidden) == 3 and all(h.shape == (32, 12, 16) for h in hidden)
    attention = kd.attention_maps(model, tokens)
    assert attention[0].shape == (32, 2, 12, 12)
    np.testing.assert_allclose(attention[0].sum(-1), 1.0, atol=1e-5)
    assert np.all(np.triu(attention[1][0, 0], 1) == 0)
    # 12 unit-variance rows in 16 dimensions: a linear map reads the position off them;
    # without a table there is nothing to read
    assert dg.fit_probe(hidden[0]).r2 > 0.9
    none = kd.hidden_states(_keras_model(position="none"), tokens)
    assert dg.fit_probe(none[0]).r2 < 0.1


def _train_keras(model, steps=30, lr=3e-3):
    opt = keras.optimizers.Adam(lr)
    monitor = kd.GradientMonitor(model)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    for batch in _lag_batches(steps):
        batch = batch.astype("int32")
        grads = monitor.gradients(lambda: loss_fn(batch[:, :-1], model(batch)[:, 1:]))
        opt.apply(grads, model.trainable_variables)
    return monitor


@pytest.mark.keras
def test_keras_monitor_healthy_and_starved_tables():
    healthy = _train_keras(_keras_model())
    starved = _train_keras(_keras_model(scale=1e-4))
    assert healthy.log.steps == 30
    assert healthy.health() == "healthy", np.median(healthy.ratios)
    assert starved.health() == "starved", np.median(starved.ratios)


@pytest.mark.keras
def test_keras_monitor_gives_zero_for_an_unreached_weight():
    model = _keras_model()
    monitor = kd.GradientMonitor(model)
    tokens = np.zeros((2, 6), "int32")
    grads = monitor.gradients(lambda: ops.mean(model.readout(model.embed(tokens))))
    assert monitor.log.position_norms == [0.0] and monitor.health() == "starved"
    assert len(grads) == len(model.trainable_variables)
    assert float(ops.convert_to_numpy(ops.sum(ops.abs(grads[0 if model.trainable_variables[0]
                                                               is model.table else -1])))) >= 0


@pytest.mark.keras
def test_both_faces_monitor_the_same_norms():
    """The lag model with a learned table, the same weights and batch in both faces."""
    length, dim, vocab, lag = 16, 16, 12, 2
    torch_model = LagModel(pt.LearnedEncoding(length, dim), vocab=vocab, dim=dim)
    keras_model = KerasLagModel(pk.LearnedEncoding(length, dim), vocab=vocab, dim=dim)
    keras_load_lag_weights(keras_model, lag_weights(torch_model))
    tokens = tasks.lag_tokens(8, length, vocab=vocab, seed=0)
    t_monitor = td.GradientMonitor(torch_model,
                                   position_weights=torch_model.position.parameters())
    lag_loss(torch_model, torch.from_numpy(tokens), lag=lag).backward()
    t_monitor.step()
    k_monitor = kd.GradientMonitor(keras_model,
                                   position_weights=keras_model.position.trainable_weights)
    k_monitor.gradients(lambda: keras_lag_loss(keras_model, tokens.astype("int32"), lag=lag))
    assert k_monitor.log.position_count == t_monitor.log.position_count == length * dim
    assert k_monitor.log.rest_count == t_monitor.log.rest_count
    np.testing.assert_allclose(k_monitor.log.position_norms, t_monitor.log.position_norms,
                               rtol=1e-4)
    np.testing.assert_allclose(k_monitor.log.rest_norms, t_monitor.log.rest_norms, rtol=1e-4)
    assert keras_lag_weights(keras_model).keys() == lag_weights(torch_model).keys()


@pytest.mark.keras
def test_keras_monitor_refuses_foreign_weights():
    model = _keras_model()
    with pytest.raises(ValueError, match="GradientMonitor: position_weights must be trainable"):
        kd.GradientMonitor(model, position_weights=[keras.Variable(np.zeros(2))])



@pytest.mark.keras
def test_both_monitors_take_the_positional_weights_by_one_name():
    import inspect

    names = [list(inspect.signature(face.GradientMonitor).parameters) for face in (td, kd)]
    assert names[0][:2] == names[1][:2] == ["model", "position_weights"]



def _torch_accumulating(monitor_kwargs, steps=3, micro_batches=4):
    """``steps`` optimiser steps of ``micro_batches`` backward passes each; returns the
    monitor and the norms of the accumulated gradients the optimiser applied."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(8, 4), nn.Linear(4, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    kwargs = {"optimizer": opt} if monitor_kwargs == "optimizer" else monitor_kwargs
    monitor = td.GradientMonitor(model, position_weights=[model[0].weight], **kwargs)
    want = []
    for _ in range(steps):
        opt.zero_grad()
        for micro in range(micro_batches):
            model.train()(torch.tensor([micro, micro + 1, 7])).sum().backward()
        rest = sum(float(p.grad.pow(2).sum()) for p in model[1].parameters())
        want.append((float(model[0].weight.grad.norm()), rest ** 0.5))
        if monitor_kwargs == {"auto_step": False}:
            monitor.step()
        opt.step()
    monitor.remove()
    return monitor, np.array(want)


@pytest.mark.parametrize("how", ["optimizer", "manual"])
def test_torch_monitor_records_optimiser_steps_under_gradient_accumulation(how):
    """3 optimiser steps of 4 micro-batches are 3 records, each the norm of the summed
    gradients (not the root of the micro-batches' summed squares)."""
    monitor, want = _torch_accumulating("optimizer" if how == "optimizer"
                                        else {"auto_step": False})
    assert monitor.log.steps == 3
    np.testing.assert_allclose(monitor.log.position_norms, want[:, 0], rtol=1e-5)
    np.testing.assert_allclose(monitor.log.rest_norms, want[:, 1], rtol=1e-5)


def test_torch_monitor_without_optimizer_records_each_backward():
    monitor, _ = _torch_accumulating({})
    assert monitor.log.steps == 12     # documented: micro-batches, hence optimizer=


def _keras_accumulating(steps=3, micro_batches=4):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), keras.layers.Dense(1)])
    monitor = kd.GradientMonitor(model, position_weights=[model.layers[0].kernel],
                                 auto_step=False)
    opt = keras.optimizers.SGD(0.1)
    x = np.arange(24, dtype="float32").reshape(6, 4) / 10
    want = []
    for _ in range(steps):
        total = None
        for micro in range(micro_batches):
            grads = monitor.gradients(lambda: ops.mean(model(x[micro:micro + 2]) ** 2))
            total = grads if total is None else [a + b for a, b in zip(total, grads)]
        monitor.step()
        norms = [float(np.sum(np.square(ops.convert_to_numpy(g)))) for g in total]
        want.append((norms[0] ** 0.5, sum(norms[1:]) ** 0.5))
        opt.apply(total, model.trainable_variables)
    return monitor, np.array(want)


@pytest.mark.keras
def test_keras_monitor_records_optimiser_steps_under_gradient_accumulation():
    monitor, want = _keras_accumulating()
    assert monitor.log.steps == 3
    np.testing.assert_allclose(monitor.log.position_norms, want[:, 0], rtol=1e-5)
    np.testing.assert_allclose(monitor.log.rest_norms, want[:, 1], rtol=1e-5)


_JAX_MONITOR = """
import json, numpy as np, keras
from keras import ops
from posenc.keras.diagnostics import GradientMonitor
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), keras.layers.Dropout(0.5),
                          keras.layers.Dense(1)])
rng = np.random.default_rng(0)
for w in model.weights:
    w.assign(rng.normal(size=tuple(w.shape)).astype("float32"))
monitor = GradientMonitor(model, position_weights=[model.layers[0].kernel])
x = np.arange(12, dtype="float32").reshape(3, 4) / 10
grads = monitor.gradients(lambda: ops.mean(model(x) ** 2))
masks = [monitor.gradients(lambda: ops.mean(model(x, training=True) ** 2))[0] for _ in "ab"]
print(json.dumps({"position": monitor.log.position_norms[0], "rest": monitor.log.rest_norms[0],
                  "steps": monitor.log.steps, "backend": keras.backend.backend(),
                  "seeds_move": bool(np.any(ops.convert_to_numpy(masks[0] - masks[1])))}))
"""


@pytest.mark.keras
def test_keras_monitor_runs_on_the_jax_backend():
    """The same norms on JAX as on this process's backend, and dropout's seeds advance."""
    pytest.importorskip("jax")
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "KERAS_BACKEND": "jax"}
    out = subprocess.run([sys.executable, "-c", _JAX_MONITOR], env=env, capture_output=True,
                         text=True, timeout=300, check=True).stdout
    jax_run = json.loads(out.strip().splitlines()[-1])
    assert jax_run["backend"] == "jax" and jax_run["steps"] == 3 and jax_run["seeds_move"]
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), keras.layers.Dense(1)])
    rng = np.random.default_rng(0)
    for w in model.weights:
        w.assign(rng.normal(size=tuple(w.shape)).astype("float32"))
    monitor = kd.GradientMonitor(model, position_weights=[model.layers[0].kernel])
    x = np.arange(12, dtype="float32").reshape(3, 4) / 10
    monitor.gradients(lambda: ops.mean(model(x) ** 2))
    np.testing.assert_allclose([jax_run["position"], jax_run["rest"]],
                               [monitor.log.position_norms[0], monitor.log.rest_norms[0]],
                               rtol=1e-5)


# --------------------------------------------------------------------------- plots


def test_plots_draw_tables_heads_and_layers():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from posenc import plotting

    plotting.use_style()
    table = pt.sinusoidal(20, 8).numpy()
    fig, (a, b, c) = plt.subplots(1, 3)
    image = plotting.encoding_heatmap(a, table)
    assert image.get_array().shape == (8, 20)                 # channels down, positions across
    assert a.get_xlabel() == "position" and a.get_ylabel() == "channel"
    lo, hi = image.get_clim()
    assert lo == -hi                                          # centred on zero
    plotting.similarity_heatmap(b, dg.similarity(table))
    assert b.get_xlabel() == "key position"
    plotting.frequency_plot(c, table, [0, 6], labels=["fast", "slow"])
    assert [t.get_text() for t in c.get_legend().get_texts()] == ["fast", "slow"]
    assert len(c.get_lines()) == 2
    plt.close(fig)

    bias = pt.alibi_bias(6, 10, 10).numpy()                   # -inf above the diagonal
    fig, axes = plotting.head_grid(bias, xlabel="key", ylabel="query", symmetric=True)
    assert len(axes) == 6 and axes[0].get_title() == "head 0"
    assert axes[4].get_xlabel() == "key" and axes[1].get_ylabel() == ""
    assert len(fig.axes) == 8 + 1                             # 2 rows of 4 panels (2 off), a bar
    plt.close(fig)

    attention = np.full((2, 3, 5, 5), 0.2)
    fig, grid = plotting.attention_grid(attention, tokens=list("hello"))
    assert grid.shape == (2, 3) and grid[1, 2].get_title() == "layer 1, head 2"
    assert [t.get_text() for t in grid[0, 0].get_xticklabels()] == list("hello")
    plt.close(fig)
    with pytest.raises(ValueError, match="attention_grid: attention must have rank 4"):
        plotting.attention_grid(attention[0])
    with pytest.raises(ValueError, match="head_grid: maps must have rank 3"):
        plotting.head_grid(bias[0], xlabel="", ylabel="")


# --------------------------------------------------------------------------- the experiments

TINY_LAB = ["--train-len", "8", "--steps", "3", "--batch-size", "4", "--dim", "16",
            "--depth", "1", "--heads", "2", "--no-progress"]


def test_probe_and_gradients_are_registered():
    from posenc.experiments import EXPERIMENTS, experiment

    for name in ("probe", "gradients"):
        assert name in EXPERIMENTS
        module = experiment(name)
        assert callable(module.add_arguments) and callable(module.run)


def test_healthy_range_rule():
    from posenc.experiments.gradients import healthy_range

    assert healthy_range([0.05, 0.1, 6.0]) == (1e-3, 1e2)
    assert healthy_range([0.5, 2.0]) == (1e-2, 1e2)
    assert healthy_range([0.0, np.nan, 0.5, 0.5]) == (1e-2, 1e1)   # zeros and nan left out


def test_offset_probe_reads_a_bias_that_grows_with_the_offset():
    # ALiBi's bias enters every logit difference as -slope * (i - j): the offset probe reads it
    rng = np.random.default_rng(0)
    bias = pt.alibi_bias(4, 16, 16).numpy()
    logits = bias[None] + 0.1 * rng.normal(size=(12, 4, 16, 16))
    weights = np.where(np.isfinite(bias), np.exp(logits - logits.max(-1, keepdims=True)), 0.0)
    weights /= weights.sum(-1, keepdims=True)
    features, offsets = dg.offset_features(weights)
    assert features.shape == (12, 16 * 15 // 2, 4) and offsets.min() == 1
    exact = np.where(np.isfinite(bias), np.exp(bias - bias.max(-1, keepdims=True)), 0.0)
    exact /= exact.sum(-1, keepdims=True)
    clean, _ = dg.offset_features(exact[None])
    slopes = pt.alibi_slopes(4).numpy()
    np.testing.assert_allclose(clean[0], -offsets[:, None] * slopes, atol=1e-6)
    assert dg.probe_offsets([weights])[0].r2 > 0.95
    # uniform causal attention has no offset in its scores: the control reads nothing
    uniform = np.tril(np.ones((16, 16)))
    uniform = np.broadcast_to(uniform / uniform.sum(-1, keepdims=True), (12, 4, 16, 16))
    noisy = uniform * np.exp(0.1 * rng.normal(size=uniform.shape))
    assert abs(dg.probe_offsets([noisy])[0].r2) < 0.05
    with pytest.raises(ValueError, match=r"offset_features: attention must be square"):
        dg.offset_features(np.ones((1, 1, 3, 4)))


def test_validate_scores_held_out_runs_with_pooled_and_per_scheme_bands():
    from posenc.experiments.gradients import validate

    def rows(scheme, seed, values):
        return [{"scheme": scheme, "seed": seed, "ratio": v} for v in values]

    derive = rows("learned", 0, [3.0, 4.0, 6.0]) + rows("t5", 0, [0.1, 0.2, 0.3])
    test = (rows("learned", 3, [4.0]) + rows("t5", 3, [0.05])
            + rows("learned-scaled-1e-2", 3, [0.04]) + rows("learned-boosted", 3, [4e4]))
    got = validate(derive, test)
    assert got["pooled"] == (1e-2, 1e2) and got["bands"] == {"learned": (0.1, 1e2),
                                                              "t5": (1e-2, 10.0)}
    runs = {r["scheme"]: r for r in got["runs"]}
    assert runs["learned"]["pooled"] == runs["learned"]["per_scheme"] == "healthy"
    assert runs["t5"]["expected"] == "healthy" and runs["t5"]["per_scheme"] == "healthy"
    # a table cut 100x: the pooled range misses it, the learned table's own band flags it
    assert runs["learned-scaled-1e-2"]["expected"] == "starved"
    assert (runs["learned-scaled-1e-2"]["pooled"], runs["learned-scaled-1e-2"]["per_scheme"]) \
        == ("healthy", "starved")
    assert runs["learned-boosted"]["expected"] == "dominant"
    assert runs["learned-boosted"]["pooled"] == "dominant"


def test_boosted_control_scales_only_the_gradient():
    from posenc.experiments.gradients import boost
    from posenc.experiments.runners import make_model

    tokens = torch.randint(0, 10, (2, 8))
    plain = make_model("learned", 10, dim=16, depth=1, heads=2, max_len=8)
    boosted = make_model("learned", 10, dim=16, depth=1, heads=2, max_len=8)
    boosted.load_state_dict(plain.state_dict())
    boost(boosted, 1e4)
    torch.testing.assert_close(boosted(tokens), plain(tokens))         # forward unchanged
    for model in (plain, boosted):
        model(tokens).logsumexp(-1).mean().backward()
    grad = boosted.position_encoding.parametrizations.table.original.grad
    torch.testing.assert_close(grad, plain.position_encoding.table.grad * 1e4)


@pytest.mark.slow
def test_gradients_experiment_flags_the_starved_controls(tmp_path):
    from posenc.experiments.cli import main
    from posenc.experiments.records import read_results

    assert main(["gradients", "--schemes", "learned", "t5", "learned-scaled", "learned-detached",
                 "learned-boosted", "--out", str(tmp_path), *TINY_LAB]) == 0
    got = read_results(tmp_path / "gradients" / "results.json")
    assert got["meta"]["partial"] is False
    verdicts = got["meta"]["verdicts"]
    assert verdicts == {"learned/0": "healthy", "t5/0": "healthy",
                        "learned-scaled/0": "starved", "learned-detached/0": "starved",
                        "learned-boosted/0": "dominant"}
    assert got["meta"]["expected"] == verdicts
    rows = got["rows"]
    assert len(rows) == 5 * 3
    assert all(r["position_norm"] == 0.0 for r in rows if r["scheme"] == "learned-detached")
    assert all(r["rest_norm"] > 0 for r in rows)


@pytest.mark.slow
@pytest.mark.keras
def test_gradients_experiment_in_keras(tmp_path):
    from posenc.experiments.cli import main
    from posenc.experiments.records import read_results

    assert main(["gradients", "--framework", "keras", "--schemes", "learned",
                 "--out", str(tmp_path), *TINY_LAB]) == 0
    got = read_results(tmp_path / "gradients" / "results-keras.json")
    assert got["meta"]["verdicts"] == {"learned/0": "healthy"}
    assert [r["step"] for r in got["rows"]] == [0, 1, 2]


@pytest.mark.slow
def test_probe_experiment_rows_and_pictures(tmp_path):
    from posenc.experiments.cli import main
    from posenc.experiments.records import read_results

    assert main(["probe", "--schemes", "learned", "alibi", "t5", "--probe-windows", "8",
                 "--sentence-len", "6", "--out", str(tmp_path), *TINY_LAB]) == 0
    got = read_results(tmp_path / "probe" / "results.json")
    rows = got["rows"]
    # schemes x stages x (embedding + 1 block, 1 block's scores, the control task's 2 layers)
    assert len(rows) == 3 * 2 * 5
    assert {(r["scheme"], r["stage"], r["probe"], r["layer"]) for r in rows} == {
        (s, t, p, layer) for s in ("learned", "alibi", "t5") for t in ("init", "trained")
        for p, layer in (("position", 0), ("position", 1), ("offset", 1), ("permuted", 0),
                         ("permuted", 1))}
    assert all("final_loss" in r for r in rows if r["stage"] == "trained")
    for r in rows:   # the range over other splits of the windows, for the two real probes
        if r["probe"] != "permuted":
            assert -np.inf < r["r2_split_low"] <= r["r2_split_high"] <= 1.0
    meta = got["meta"]
    bias = np.asarray(meta["t5_first_layer_bias"])
    assert bias.shape == (2, 6, 6) and np.all(np.isfinite(np.tril(bias)))
    assert meta["partial"] is False
    assert np.asarray(meta["attention"]["alibi"]).shape == (1, 2, 6, 6)
    assert len(meta["sentence"]) == 6
    profile = meta["learned_table_similarity_by_offset"]["0"]
    assert profile["offsets"] == list(range(8)) and profile["before"][0] == pytest.approx(1.0)
    # alibi adds nothing to the embeddings: its embedding layer carries no position
    alibi = [r for r in rows if r["scheme"] == "alibi" and r["layer"] == 0]
    assert all(r["r2"] < 0.2 for r in alibi)


def _committed(name, framework="torch", tag=None):
    from posenc.experiments import load_results, results_path

    if not results_path(name, framework=framework, tag=tag).exists():
        pytest.skip(f"no committed {name} results (tag {tag})")
    return load_results(name, framework=framework, tag=tag)


def test_committed_gradients_give_the_stated_healthy_range():
    from posenc.experiments.gradients import (CONTROLS, DERIVE_SEEDS, EXPECTED, HELD_OUT_SEEDS,
                                              healthy_range, validate)

    derive = [r for seed in DERIVE_SEEDS
              for r in _committed("gradients", tag=f"seed{seed}")["rows"]]
    held_out = [r for seed in HELD_OUT_SEEDS
                for r in _committed("gradients", tag=f"seed{seed}")["rows"]]
    assert {r["seed"] for r in derive} == set(DERIVE_SEEDS)
    assert {r["seed"] for r in held_out} == set(HELD_OUT_SEEDS)
    healthy = [r["ratio"] for r in derive if r["scheme"] not in CONTROLS]
    assert healthy_range(healthy) == dg.GRADIENT_RATIO_RANGE
    # every detached / 1e-4 / boosted control of a held-out seed is caught by the pooled range
    got = validate(derive, held_out)
    assert got["pooled"] == dg.GRADIENT_RATIO_RANGE
    for run in got["runs"]:
        if run["scheme"] in ("learned-detached", "learned-scaled", "learned-boosted"):
            assert run["pooled"] == EXPECTED[run["scheme"]], run


def test_committed_probe_results():
    got = _committed("probe", tag="seed0")
    rows = got["rows"]
    r2 = {(r["scheme"], r["stage"], r["layer"]): r["r2"] for r in rows
          if r["seed"] == 0 and r["probe"] == "position"}
    # absolute schemes put position into the embeddings; none, RoPE and ALiBi do not
    for scheme in ("sinusoidal", "learned"):
        assert r2[(scheme, "trained", 0)] > 0.9, scheme
    for scheme in ("none", "rope", "alibi", "t5"):
        assert r2[(scheme, "trained", 0)] < 0.2, scheme


@pytest.mark.parametrize("framework", ["torch", "keras"])
def test_committed_probe_control_and_offset_probe(framework):
    # layer 0 of the schemes without an absolute table is one token embedding: the same R^2
    # for the four at initialisation (the control); ALiBi's scores carry the offset from the start
    got = _committed("probe", framework=framework, tag="seed0")
    rows = {(r["scheme"], r["stage"], r["probe"], r["layer"]): r["r2"] for r in got["rows"]}
    first = [rows[(s, "init", "position", 0)] for s in ("none", "rope", "alibi", "t5")]
    assert np.ptp(first) < 1e-6 and abs(first[0]) < 0.1
    depth = got["meta"]["settings"]["depth"]
    assert rows[("alibi", "init", "offset", depth)] > 0.3
    assert rows[("none", "init", "offset", depth)] < 0.05


def test_bfloat16_models_give_float32_states_and_finite_norms(mixed_bfloat16):
    torch.manual_seed(0)
    model = TorchStandIn().to(torch.bfloat16)
    tokens = torch.from_numpy(_lag_batches(1)[0])
    hidden = td.hidden_states(model, tokens)
    assert all(h.dtype == np.float32 for h in hidden)
    monitor = td.GradientMonitor(model)
    model(tokens).float().logsumexp(-1).mean().backward()
    monitor.remove()
    assert monitor.log.steps == 1 and np.isfinite(monitor.ratios).all()
    assert monitor.health() == "healthy"
    # Keras under the mixed_bfloat16 policy (the fixture): states come back as float32
    keras_model = _keras_model()
    states = kd.hidden_states(keras_model, tokens.numpy().astype("int32"))
    assert all(h.dtype == np.float32 for h in states)
    assert keras.backend.standardize_dtype(keras_model.embed.compute_dtype) == "bfloat16"
    k_monitor = kd.GradientMonitor(keras_model)
    k_monitor.gradients(lambda: ops.mean(ops.cast(keras_model(tokens.numpy().astype("int32")),
                                                  "float32") ** 2))
    assert np.isfinite(k_monitor.ratios).all() and k_monitor.health() == "healthy"


@pytest.mark.slow
@pytest.mark.keras
def test_probe_experiment_in_keras(tmp_path):
    from posenc.experiments.cli import main
    from posenc.experiments.records import read_results

    assert main(["probe", "--framework", "keras", "--schemes", "learned", "t5",
                 "--probe-windows", "8", "--sentence-len", "6", "--out", str(tmp_path),
                 *TINY_LAB]) == 0
    got = read_results(tmp_path / "probe" / "results-keras.json")
    assert [(r["stage"], r["probe"], r["layer"]) for r in got["rows"]
            if r["scheme"] == "learned"] == [
        ("init", "position", 0), ("init", "position", 1), ("init", "offset", 1),
        ("init", "permuted", 0), ("init", "permuted", 1),
        ("trained", "position", 0), ("trained", "position", 1), ("trained", "offset", 1),
        ("trained", "permuted", 0), ("trained", "permuted", 1)]
    assert np.asarray(got["meta"]["t5_first_layer_bias"]).shape == (2, 6, 6)
    assert np.asarray(got["meta"]["attention"]["learned"]).shape == (1, 2, 6, 6)
    assert got["meta"]["learned_table_similarity_by_offset"]["0"]["before"][0] == \
        pytest.approx(1.0)


# --------------------------------------------------------------------------- table analysis

def _toeplitz(first_row):
    n = len(first_row)
    return np.asarray(first_row)[np.abs(np.subtract.outer(np.arange(n), np.arange(n)))]


def test_table_similarity_is_one_vocabulary():
    # posenc.tasks no longer has a copy: the cosine and the profile by distance are here
    assert not any(hasattr(tasks, n) for n in ("cosine_similarity", "similarity_by_distance",
                                               "distance_share"))
    sim = dg.similarity([[1.0, 0.0], [0.0, 2.0], [-3.0, 0.0], [0.0, 0.0]])
    assert np.allclose(sim[:3, :3], [[1, 0, -1], [0, 1, 0], [-1, 0, 1]])
    assert np.all(sim[3] == 0)


def test_mean_by_offset_reads_the_diagonals_of_a_similarity():
    first = [1.0, 0.5, -0.25, 0.1, 0.0]
    offsets, means = dg.mean_by_offset(_toeplitz(first))
    assert np.allclose(means[offsets >= 0], first)


def test_distance_share_of_toeplitz_is_one():
    assert dg.distance_share(_toeplitz([1.0, 0.8, 0.3, -0.2, 0.1, 0.0])) == pytest.approx(1.0)
    # the sinusoid's similarity is a function of the distance
    table = pt.sinusoidal(24, 16).numpy()
    assert dg.distance_share(dg.similarity(table)) == pytest.approx(1.0, abs=1e-9)


def test_distance_share_of_structure_across_distances_is_low():
    # similarity set by a random sign of each row, not by the distance
    n = 32
    rng = np.random.default_rng(0)
    sign = rng.choice([-1.0, 1.0], size=n)
    table = np.stack([sign, rng.normal(size=n) * 0.1], axis=1)
    assert dg.distance_share(dg.similarity(table)) < 0.3
    # random rows: little of the variance is explained
    noise = dg.similarity(rng.normal(size=(40, 64)))
    assert dg.distance_share(noise) < 0.2


def test_analysis_rejects_non_square():
    with pytest.raises(ValueError, match=r"sim.shape=\(3, 4\)"):
        dg.distance_share(np.zeros((3, 4)))
    with pytest.raises(ValueError, match=r"distance_share: sim must be a square"):
        dg.distance_share(np.eye(2))


@pytest.mark.keras
def test_keras_monitor_keeps_the_loss_it_differentiated():
    # On JAX the loss function runs traced, so the lab's loop once read a tracer and failed.
    model = _keras_model()
    monitor = kd.GradientMonitor(model)
    tokens = np.random.default_rng(0).integers(0, 12, size=(2, 16))
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    monitor.gradients(lambda: loss_fn(tokens, model(tokens, training=True)))
    expected = float(keras.ops.convert_to_numpy(loss_fn(tokens, model(tokens, training=False))))
    assert isinstance(monitor.last_loss, float)
    assert monitor.last_loss == pytest.approx(expected, rel=1e-5)


def test_probe_control_task_tells_distinct_rows_from_order():
    # a random table per position is decoded as well under permuted labels (selectivity ~0);
    # a feature that grows with the position is not
    from posenc.diagnostics import fit_probe
    from posenc.experiments.probe import control_labels

    rng = np.random.default_rng(0)
    labels = control_labels(16)
    assert sorted(labels.tolist()) == list(range(16)) and (labels != np.arange(16)).any()
    table = rng.normal(size=(16, 32))
    distinct = table[None] + 0.1 * rng.normal(size=(24, 16, 32))
    true, permuted = fit_probe(distinct).r2, fit_probe(distinct, labels).r2
    assert true > 0.8 and abs(true - permuted) < 0.1
    ordered = np.arange(16)[None, :, None] * np.ones((24, 16, 4)) + rng.normal(size=(24, 16, 4))
    assert fit_probe(ordered).r2 > 0.8 > 0.2 > fit_probe(ordered, labels).r2
