"""The lag task's data, model, training and analysis helpers, in NumPy and both faces."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import torch

import posenc.keras as pk
import posenc.torch as pt
from posenc import tasks

from faces import same_error
from posenc.keras import tasks as kt
from posenc.torch import tasks as tt

SEQ, VOCAB, DIM, LAG = 12, 8, 16, 2


# ---- data -----------------------------------------------------------------------------------

def test_lag_tokens_are_deterministic_per_seed():
    a = tasks.lag_tokens(5, SEQ, vocab=VOCAB, seed=3)
    assert a.shape == (5, SEQ) and a.dtype == np.int64
    assert np.array_equal(a, tasks.lag_tokens(5, SEQ, vocab=VOCAB, seed=3))
    assert not np.array_equal(a, tasks.lag_tokens(5, SEQ, vocab=VOCAB, seed=4))
    assert a.min() >= 0 and a.max() < VOCAB
    # a longer run starts with the same rows: the first batches do not depend on `steps`
    assert np.array_equal(tasks.lag_tokens(9, SEQ, vocab=VOCAB, seed=3)[:5], a)


def test_lag_targets_shift_and_mask():
    tokens = tasks.lag_tokens(4, SEQ, vocab=VOCAB, seed=0)
    targets, weights = tasks.lag_targets(tokens, LAG)
    assert np.array_equal(targets[:, LAG:], tokens[:, :-LAG])
    assert np.all(weights[:, :LAG] == 0) and np.all(weights[:, LAG:] == 1)


@pytest.mark.parametrize("call, words", [
    (lambda: tasks.lag_tokens(0, SEQ, vocab=VOCAB), "num_sequences=0"),
    (lambda: tasks.lag_tokens(2, SEQ, vocab=VOCAB, seed=-1), "seed=-1"),
    (lambda: tasks.lag_tokens(2, SEQ, vocab=2.5), "vocab=2.5"),
    (lambda: tasks.check_lag(5, 5), "lag=5 for length=5"),
    (lambda: tasks.check_lag(0, 5), "lag=0"),
    (lambda: tasks.lag_targets(np.zeros(4, dtype=int), 1), "tokens.shape=(4,)"),
    (lambda: tasks.check_lag_model(8, 16, 1.0, 1.0), "dropout=1.0"),
    (lambda: tasks.check_lag_model(8, 16, 0.0, 0.1), "embed_std=0.0"),
    (lambda: tasks.check_lr(0.0), "lr=0.0"),
])
def test_bad_arguments_name_the_value(call, words):
    with pytest.raises(ValueError, match=None) as info:
        call()
    assert words in str(info.value)


def _lag_model(face):
    lib, tk = (pt, tt) if face == "torch" else (pk, kt)
    return tk, tk.LagModel(lib.LearnedEncoding(SEQ, DIM), vocab=VOCAB, dim=DIM)


@pytest.mark.parametrize("call, words", [
    (lambda face: _lag_model(face)[0].LagModel(None, vocab=VOCAB, dim=DIM, dropout=-0.1),
     "LagModel: dropout must be a finite number in [0, 1)"),
    (lambda face: _lag_model(face)[0].train_lag(_lag_model(face)[1], lag=SEQ, length=SEQ, steps=1),
     f"lag={SEQ} for length={SEQ}"),
    (lambda face: _lag_model(face)[0].train_lag(_lag_model(face)[1], lag=LAG, length=SEQ,
                                                steps=0), "steps=0"),
])
@pytest.mark.keras
def test_faces_check_arguments_alike(call, words):
    assert words in same_error(["torch", "keras"], call)


# ---- analysis helpers -----------------------------------------------------------------------

# ---- models in both faces -------------------------------------------------------------------

def _pair(torch_pos, keras_pos, **kwargs):
    torch.manual_seed(0)
    model_t = tt.LagModel(torch_pos, vocab=VOCAB, dim=DIM, **kwargs)
    model_k = kt.LagModel(keras_pos, vocab=VOCAB, dim=DIM, **kwargs)
    kt.load_lag_weights(model_k, tt.lag_weights(model_t))
    return model_t, model_k


@pytest.mark.parametrize("kind", ["learned", "hybrid", "sinusoidal", "none"])
@pytest.mark.parametrize("embed_scale", [False, True])
@pytest.mark.keras
def test_same_weights_same_logits(kind, embed_scale):
    encodings = {
        "learned": (lambda: pt.LearnedEncoding(SEQ, DIM), lambda: pk.LearnedEncoding(SEQ, DIM)),
        "hybrid": (lambda: pt.HybridEncoding(SEQ, DIM), lambda: pk.HybridEncoding(SEQ, DIM)),
        "sinusoidal": (lambda: pt.SinusoidalEncoding(DIM), lambda: pk.SinusoidalEncoding(DIM)),
        "none": (lambda: None, lambda: None),
    }
    make_t, make_k = encodings[kind]
    model_t, model_k = _pair(make_t(), make_k(), embed_scale=embed_scale, dropout=0.3)
    tokens = tasks.lag_tokens(4, SEQ, vocab=VOCAB, seed=1)
    model_t.eval()
    logits_t = model_t(torch.from_numpy(tokens)).detach().numpy()
    logits_k = keras.ops.convert_to_numpy(model_k(tokens.astype("int32"), training=False))
    np.testing.assert_allclose(logits_k, logits_t, atol=2e-5)
    np.testing.assert_allclose(float(kt.lag_loss(model_k, tokens, lag=LAG)),
                               float(tt.lag_loss(model_t, tokens, lag=LAG).detach()), rtol=1e-5)
    # and back again
    back = tt.LagModel(make_t(), vocab=VOCAB, dim=DIM, embed_scale=embed_scale)
    tt.load_lag_weights(back, kt.lag_weights(model_k))
    assert torch.equal(back.eval()(torch.from_numpy(tokens)), torch.from_numpy(logits_t))


@pytest.mark.keras
def test_causal_mask_in_both_faces():
    # a change at the last position changes no earlier logit
    model_t, model_k = _pair(pt.LearnedEncoding(SEQ, DIM), pk.LearnedEncoding(SEQ, DIM))
    tokens = tasks.lag_tokens(2, SEQ, vocab=VOCAB, seed=2)
    changed = tokens.copy()
    changed[:, -1] = (changed[:, -1] + 1) % VOCAB
    for run in (lambda t: model_t.eval()(torch.from_numpy(t)).detach().numpy(),
                lambda t: keras.ops.convert_to_numpy(model_k(t.astype("int32")))):
        a, b = run(tokens), run(changed)
        assert np.allclose(a[:, :-1], b[:, :-1], atol=1e-6)
        assert not np.allclose(a[:, -1], b[:, -1])


def test_embed_options_set_the_start():
    model = tt.LagModel(None, vocab=50, dim=64, embed_std=0.25)
    assert abs(float(model.embed.weight.detach().std()) - 0.25) < 0.02
    scaled = tt.LagModel(None, vocab=VOCAB, dim=DIM, embed_scale=True)
    plain = tt.LagModel(None, vocab=VOCAB, dim=DIM)
    plain.load_state_dict(scaled.state_dict())
    tokens = torch.from_numpy(tasks.lag_tokens(2, SEQ, vocab=VOCAB, seed=0))
    # with no encoding and no dropout, scaling the embedding by sqrt(dim) scales q, k and v
    assert not torch.allclose(scaled(tokens), plain(tokens))


@pytest.mark.keras
def test_load_lag_weights_refuses_other_models():
    model_t = tt.LagModel(pt.LearnedEncoding(SEQ, DIM), vocab=VOCAB, dim=DIM)
    with pytest.raises(ValueError, match="do not match"):
        kt.load_lag_weights(kt.LagModel(None, vocab=VOCAB, dim=DIM), tt.lag_weights(model_t))
    with pytest.raises(ValueError, match="do not match"):
        tt.load_lag_weights(tt.LagModel(pt.HybridEncoding(SEQ, DIM), vocab=VOCAB, dim=DIM),
                            tt.lag_weights(model_t))
    with pytest.raises(ValueError, match="'embed' has shape"):
        tt.load_lag_weights(tt.LagModel(pt.LearnedEncoding(SEQ, DIM), vocab=VOCAB + 1, dim=DIM),
                            tt.lag_weights(model_t))


# ---- training -------------------------------------------------------------------------------

STEPS = 120


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tiny models train fastest on one thread (more fight TensorFlow's thread pool)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("face", ["torch", "keras"])
def test_loss_falls_and_accuracy_beats_chance(face):
    torch.manual_seed(0)
    keras.utils.set_random_seed(0)
    lib, tk = (pt, tt) if face == "torch" else (pk, kt)
    model = tk.LagModel(lib.SinusoidalEncoding(DIM), vocab=VOCAB, dim=DIM)
    losses = tk.train_lag(model, lag=LAG, length=SEQ, steps=STEPS, batch_size=32, lr=1e-2)
    assert losses.shape == (STEPS,)
    assert losses[-10:].mean() < 0.5 * losses[:10].mean()
    acc = tk.accuracy_by_position(model, lag=LAG, length=SEQ, num_sequences=256)
    assert acc.shape == (SEQ - LAG,)
    assert acc.mean() > 3 / VOCAB


@pytest.mark.keras
def test_faces_train_alike_from_the_same_start():
    model_t, model_k = _pair(pt.LearnedEncoding(SEQ, DIM), pk.LearnedEncoding(SEQ, DIM))
    lt = tt.train_lag(model_t, lag=LAG, length=SEQ, steps=20, batch_size=16)
    lk = kt.train_lag(model_k, lag=LAG, length=SEQ, steps=20, batch_size=16)
    # the first loss is computed before any update: the same weights and the same batch
    assert lk[0] == pytest.approx(lt[0], rel=1e-5)
    # the same Adam on dense gradients: the losses follow each other to float32 rounding
    # (Keras' own Adam on TensorFlow's sparse embedding gradient drifts by tens of percent)
    np.testing.assert_allclose(lk, lt, rtol=1e-4)


@pytest.mark.keras
def test_keras_step_losses_are_each_batchs_loss():
    keras.utils.set_random_seed(0)
    model = kt.LagModel(pk.LearnedEncoding(SEQ, DIM), vocab=VOCAB, dim=DIM)
    kt.load_lag_weights(model, kt.lag_weights(kt._built(model, SEQ)))
    start = kt.lag_weights(model)
    losses = kt.train_lag(model, lag=LAG, length=SEQ, steps=1, batch_size=16)
    fresh = kt.load_lag_weights(kt.LagModel(pk.LearnedEncoding(SEQ, DIM), vocab=VOCAB, dim=DIM),
                                start)
    batch = tasks.lag_tokens(16, SEQ, vocab=VOCAB, seed=0)
    assert losses[0] == pytest.approx(float(kt.lag_loss(fresh, batch, lag=LAG)), rel=1e-5)


# ---- a rotary LagModel ----------------------------------------------------------------------

@pytest.mark.parametrize("scaling", [None, {"rope_type": "linear", "factor": 4.0}])
@pytest.mark.keras
def test_rope_lag_model_same_logits_in_both_faces(scaling):
    torch.manual_seed(0)
    model_t = tt.LagModel(None, vocab=VOCAB, dim=DIM, rope=pt.RotaryEmbedding(DIM, scaling=scaling))
    model_k = kt.LagModel(None, vocab=VOCAB, dim=DIM, rope=pk.RotaryEmbedding(DIM, scaling=scaling))
    kt.load_lag_weights(model_k, tt.lag_weights(model_t))
    assert set(tt.lag_weights(model_t)) == set(tt.lag_weights(tt.LagModel(None, vocab=VOCAB,
                                                                            dim=DIM)))
    tokens = tasks.lag_tokens(3, SEQ, vocab=VOCAB, seed=5)
    logits_t = model_t.eval()(torch.from_numpy(tokens)).detach().numpy()
    logits_k = keras.ops.convert_to_numpy(model_k(tokens.astype("int32"), training=False))
    np.testing.assert_allclose(logits_k, logits_t, atol=2e-5)
    # the rotation acts: the same weights without it give other logits
    plain = tt.load_lag_weights(tt.LagModel(None, vocab=VOCAB, dim=DIM), tt.lag_weights(model_t))
    assert np.abs(plain.eval()(torch.from_numpy(tokens)).detach().numpy() - logits_t).max() > 1e-3


# ---- a LagModel with its own attention ------------------------------------------------------

def _shaw_pair(max_distance=2):
    torch.manual_seed(0)
    model_t = tt.LagModel(None, vocab=VOCAB, dim=DIM,
                          attention=pt.ShawRelativeAttention(DIM, 1, max_distance, causal=True))
    model_k = kt.LagModel(None, vocab=VOCAB, dim=DIM,
                          attention=pk.ShawRelativeAttention(DIM, 1, max_distance, causal=True))
    kt.load_lag_weights(model_k, tt.lag_weights(model_t))
    return model_t, model_k


@pytest.mark.keras
def test_attention_slot_replaces_the_built_in_attention():
    model_t, model_k = _shaw_pair()
    names = set(tt.lag_weights(model_t))
    assert {"query", "key", "value"}.isdisjoint(names)
    assert {"attention/key_table", "attention/query_kernel", "readout"} <= names
    assert names == set(kt.lag_weights(model_k))
    assert not any(hasattr(m, "query") for m in (model_t, model_k))
    tokens = tasks.lag_tokens(3, SEQ, vocab=VOCAB, seed=5)
    logits_t = model_t.eval()(torch.from_numpy(tokens)).detach().numpy()
    logits_k = keras.ops.convert_to_numpy(model_k(tokens.astype("int32"), training=False))
    np.testing.assert_allclose(logits_k, logits_t, atol=2e-5)
    # the layer is the model's attention: its relative table changes the logits
    with torch.no_grad():
        model_t.attention.key_table.add_(torch.randn_like(model_t.attention.key_table))
    assert np.abs(model_t(torch.from_numpy(tokens)).detach().numpy() - logits_t).max() > 1e-3


@pytest.mark.keras
def test_attention_slot_trains_alike_in_both_faces():
    model_t, model_k = _shaw_pair()
    lt = tt.train_lag(model_t, lag=1, length=SEQ, steps=20, batch_size=16)
    lk = kt.train_lag(model_k, lag=1, length=SEQ, steps=20, batch_size=16)
    assert lk[0] == pytest.approx(lt[0], rel=1e-5)
    np.testing.assert_allclose(lk, lt, rtol=0.05)
    acc_t = tt.accuracy_by_position(model_t, lag=1, length=2 * SEQ, num_sequences=64)
    acc_k = kt.accuracy_by_position(model_k, lag=1, length=2 * SEQ, num_sequences=64)
    assert acc_t.shape == acc_k.shape == (2 * SEQ - 1,)


@pytest.mark.keras
def test_attention_and_rope_are_refused_alike():
    def call(face):
        lib, tk = (pt, tt) if face == "torch" else (pk, kt)
        return tk.LagModel(None, vocab=VOCAB, dim=DIM, rope=lib.RotaryEmbedding(DIM),
                           attention=lib.ShawRelativeAttention(DIM, 1, 2, causal=True))
    message = same_error(["torch", "keras"], call)
    assert "LagModel: attention and rope cannot be combined" in message
    assert "leave attention=None" in message


# ---- any token task: fit_tokens and token_accuracy ------------------------------------------

@pytest.mark.parametrize("face", ["torch", "keras"])
def test_accuracy_by_position_is_token_accuracy_of_the_lag_targets(face):
    torch.manual_seed(0)
    keras.utils.set_random_seed(0)
    lib, tk = (pt, tt) if face == "torch" else (pk, kt)
    model = tk.LagModel(lib.SinusoidalEncoding(DIM), vocab=VOCAB, dim=DIM)
    tokens = tasks.lag_tokens(32, SEQ, vocab=VOCAB, seed=123)
    targets, _ = tasks.lag_targets(tokens, LAG)
    by_token = tk.token_accuracy(model, tokens, targets)
    assert by_token.shape == (SEQ,) and by_token.dtype == np.float64
    np.testing.assert_array_equal(
        tk.accuracy_by_position(model, lag=LAG, length=SEQ, num_sequences=32), by_token[LAG:])


@pytest.mark.parametrize("face", ["torch", "keras"])
def test_fit_tokens_learns_a_task_that_is_not_the_lag_task(face):
    # copy the first token of the sequence at every position: attention to key 0
    torch.manual_seed(0)
    keras.utils.set_random_seed(0)
    lib, tk = (pt, tt) if face == "torch" else (pk, kt)
    model = tk.LagModel(lib.SinusoidalEncoding(DIM), vocab=VOCAB, dim=DIM)
    tokens = tasks.lag_tokens(64 * 60, SEQ, vocab=VOCAB, seed=0)
    targets = np.repeat(tokens[:, :1], SEQ, axis=1)
    losses = tk.fit_tokens(model, tokens, targets, batch_size=64, lr=1e-2)
    assert losses.shape == (60,)
    assert losses[-10:].mean() < 0.8 * losses[:10].mean()
    test = tasks.lag_tokens(128, SEQ, vocab=VOCAB, seed=9)
    assert tk.token_accuracy(model, test, np.repeat(test[:, :1], SEQ, axis=1)).mean() > 2 / VOCAB


@pytest.mark.keras
def test_keras_step_losses_with_a_short_last_batch():
    # a learning rate too small to move the weights: each step's loss is the start's loss on
    # that batch, also for the last, shorter batch (fit logs a mean over samples)
    keras.utils.set_random_seed(0)
    model = kt.LagModel(pk.LearnedEncoding(SEQ, DIM), vocab=VOCAB, dim=DIM)
    start = kt.lag_weights(kt._built(model, SEQ))
    tokens = tasks.lag_tokens(40, SEQ, vocab=VOCAB, seed=0)
    targets, weights = tasks.lag_targets(tokens, LAG)
    losses = kt.fit_tokens(model, tokens, targets, weights=weights, batch_size=16, lr=1e-12)
    fresh = kt.load_lag_weights(kt.LagModel(pk.LearnedEncoding(SEQ, DIM), vocab=VOCAB, dim=DIM),
                                start)
    want = [float(kt.lag_loss(fresh, tokens[i:i + 16], lag=LAG)) for i in (0, 16, 32)]
    np.testing.assert_allclose(losses, want, rtol=1e-4)


@pytest.mark.keras
def test_token_targets_must_match():
    model = tt.LagModel(None, vocab=VOCAB, dim=DIM)
    message = same_error(["torch", "keras"], lambda face: (tt if face == "torch" else kt)
                         .token_accuracy(model if face == "torch" else
                                         kt.LagModel(None, vocab=VOCAB, dim=DIM),
                                         np.zeros((2, 5), dtype=int), np.zeros((2, 4), dtype=int)))
    assert "tokens.shape=(2, 5) and targets.shape=(2, 4)" in message


def test_lag_weights_refuse_a_stack_whose_weights_share_names():
    # Two Shaw layers in one attention slot once collided silently under "attention/NAME".
    import posenc.torch as pt_
    import posenc.torch.tasks as tt_

    stack = torch.nn.Sequential(pt_.ShawRelativeAttention(8, 1, 2, causal=True),
                                pt_.ShawRelativeAttention(8, 1, 2, causal=True))
    model = tt_.LagModel(None, vocab=6, dim=8, attention=stack)
    with pytest.raises(ValueError, match="lag_weights: two weights of the model are both named "
                                         "'attention/query_kernel'"):
        tt_.lag_weights(model)
    single = tt_.LagModel(None, vocab=6, dim=8,
                          attention=pt_.ShawRelativeAttention(8, 1, 2, causal=True))
    assert "attention/query_kernel" in tt_.lag_weights(single)


@pytest.mark.keras
def test_keras_adam_updates_a_repeated_embedding_row_as_pytorch():
    """A token repeated in the batch: Keras' Adam on TensorFlow's sparse gradient moves its
    row twice as far as PyTorch's Adam (checked below); the lag task's optimiser must not."""
    vocab, dim, lr = 6, 3, 0.01
    start = np.random.default_rng(0).normal(size=(vocab, dim)).astype("float32")
    tokens = np.array([[1, 1, 1, 1, 2]], dtype="int32")
    weight = np.arange(dim, dtype="float32")

    table = torch.nn.Embedding(vocab, dim)
    table.weight.data = torch.tensor(start)
    opt = torch.optim.Adam(table.parameters(), lr=lr, eps=1e-8)
    (table(torch.tensor(tokens, dtype=torch.long)) * torch.tensor(weight)).sum().backward()
    opt.step()
    expected = table.weight.detach().numpy()

    def keras_step(optimizer):
        layer = keras.layers.Embedding(vocab, dim)
        layer.build((None,))
        layer.embeddings.assign(start)
        if keras.backend.backend() == "tensorflow":
            import tensorflow as tf

            with tf.GradientTape() as tape:
                loss = keras.ops.sum(layer(tokens) * weight)
            grads = tape.gradient(loss, layer.trainable_variables)
            optimizer.apply_gradients(zip(grads, layer.trainable_variables))
        else:
            optimizer.build(layer.trainable_variables)
            optimizer.apply([keras.ops.convert_to_tensor(np.broadcast_to(
                np.bincount(tokens.ravel(), minlength=vocab)[:, None] * weight,
                (vocab, dim)).astype("float32"))], layer.trainable_variables)
        return keras.ops.convert_to_numpy(layer.embeddings)

    dense = keras_step(kt._DenseAdam(learning_rate=lr, epsilon=1e-8))
    np.testing.assert_allclose(dense, expected, atol=1e-6)
    if keras.backend.backend() == "tensorflow":      # the sparse path the fix avoids
        plain = keras_step(keras.optimizers.Adam(learning_rate=lr, epsilon=1e-8))
        assert np.abs(plain - start)[1].max() == pytest.approx(2 * lr, rel=1e-3)
