"""Diagnostics (NumPy): what a model knows about position, and how its positional weights learn.

Three questions a reader can ask any trained Transformer, answered with NumPy on arrays the
faces hand over (``posenc.torch.diagnostics`` and ``posenc.keras.diagnostics`` collect them):

* **What does a table look like?** :func:`similarity` gives the matrix of a table's row
  similarities (``PE PE^T`` for an absolute table), :func:`mean_by_offset` its average along
  each diagonal, and :func:`rope_scores` the analogous position-pair score of rotary attention.
* **How much position does each layer carry?** :func:`fit_probe` fits a linear probe that
  predicts a token's position from its hidden state (closed-form ridge regression, scored on
  held-out sequences); :func:`probe_layers` runs it on every layer.
* **Where do relative schemes keep position?** Not in the hidden states but in the attention
  scores: :func:`offset_features` turns a layer's causal attention weights into one feature
  per head for every pair of a query and an earlier key, and :func:`probe_offsets` fits the
  same probe to predict the offset ``i - j`` from them.
* **Does the positional table get a fair share of the gradient?** :class:`GradientLog` keeps
  the gradient norms a monitor records, and :func:`gradient_health` says whether the ratio of
  the positional weights' gradient to the rest of the model's lies in
  :data:`GRADIENT_RATIO_RANGE`, the healthy range measured on the lab's models.

``import posenc.diagnostics`` imports no framework. The argument checks live in
:mod:`posenc._checks`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from posenc._checks import (
    _error,
    check_choice,
    check_float,
    check_int,
    check_positive_int,
    check_rank,
    check_seed,
)
from posenc.positions import relative_positions
from posenc.sinusoidal import sinusoidal_inv_freq

__all__ = [
    "SIMILARITY_KINDS",
    "similarity",
    "mean_by_offset",
    "distance_share",
    "rope_scores",
    "ProbeResult",
    "ridge_regression",
    "fit_probe",
    "probe_layers",
    "offset_features",
    "probe_offsets",
    "GRADIENT_RATIO_RANGE",
    "GradientLog",
    "gradient_health",
]

#: kind -> what :func:`similarity` compares.
SIMILARITY_KINDS = {
    "cosine": "cosine of the angle between two rows (1 on the diagonal)",
    "dot": "plain dot product of two rows (PE PE^T)",
}


def similarity(table, *, kind: str = "cosine") -> np.ndarray:
    """Similarity of every pair of rows of a ``(positions, dim)`` table: ``(positions, positions)``.

    ``kind="dot"`` is ``PE PE^T``; ``kind="cosine"`` (default) divides by the rows' norms, so a
    learned table and a sinusoidal one, whose rows have different lengths, share one scale.
    A zero row has cosine 0 with everything.

    Args:
        table: array-like ``(positions, dim)``.
        kind: ``"cosine"`` (default) or ``"dot"`` (:data:`SIMILARITY_KINDS`).

    Returns:
        float64 array ``(positions, positions)``, symmetric.

    Example:
        >>> similarity([[1.0, 0.0], [1.0, 1.0], [0.0, 2.0]]).round(3)
        array([[1.   , 0.707, 0.   ],
               [0.707, 1.   , 0.707],
               [0.   , 0.707, 1.   ]])
    """
    what = "similarity"
    kind = check_choice("kind", kind, SIMILARITY_KINDS, what=what)
    table = check_diagnostic_array("table", table, 2, what=what, shape_text="(positions, dim)")
    if kind == "cosine":
        norms = np.linalg.norm(table, axis=1, keepdims=True)
        table = np.divide(table, norms, out=np.zeros_like(table), where=norms > 0)
    return table @ table.T


def mean_by_offset(matrix) -> tuple[np.ndarray, np.ndarray]:
    """Average a ``(q_len, k_len)`` position-pair matrix along each diagonal ``j - i = k``.

    The queries are the last ``q_len`` of the ``k_len`` positions, as in
    :func:`posenc.bias.relative_positions`. Entries that are not finite (the ``-inf`` of a
    causal bias) are left out; an offset with none left gets ``nan``. A matrix that depends
    only on ``j - i`` (a relative scheme) is constant along each diagonal, so its profile
    loses nothing; for a learned table it is the structure that training put there.

    Args:
        matrix: array-like ``(q_len, k_len)``.

    Returns:
        ``(offsets, means)``: int64 ``-(k_len-1) .. k_len-1`` and float64 of the same length.

    Example:
        >>> offsets, means = mean_by_offset([[1.0, 0.5], [0.25, 1.0]])
        >>> offsets, means
        (array([-1,  0,  1]), array([0.25, 1.  , 0.5 ]))
    """
    matrix = check_diagnostic_array("matrix", matrix, 2, what="mean_by_offset",
                                    shape_text="(q_len, k_len)", finite=False)
    q_len, k_len = matrix.shape
    rel = relative_positions(q_len, k_len)
    offsets = np.arange(-(k_len - 1), k_len)
    finite = np.isfinite(matrix)
    sums = np.bincount((rel + k_len - 1)[finite], weights=matrix[finite],
                       minlength=len(offsets))
    counts = np.bincount((rel + k_len - 1)[finite], minlength=len(offsets))
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    return offsets, means


def distance_share(sim) -> float:
    """Share of the off-diagonal variance of ``sim`` that the offset ``j - i`` explains.

    Each entry is predicted by the mean of its diagonal (:func:`mean_by_offset`); the share is
    one minus the residual sum of squares over the total sum of squares, both over the pairs
    ``i != j``. It is 1 for a Toeplitz matrix (a function of ``j - i`` alone, as the
    sinusoid's similarities are) and near 0 when the similarity does not depend on the
    distance. A matrix whose off-diagonal entries are all equal has no variance to explain:
    its share is 1.

    Args:
        sim: square ``(length, length)`` matrix, ``length >= 3``, e.g. :func:`similarity`
            of a table.

    Returns:
        A float at most 1.

    Example:
        >>> first_row = np.array([1.0, 0.6, 0.2, -0.1])
        >>> toeplitz = first_row[np.abs(np.subtract.outer(np.arange(4), np.arange(4)))]
        >>> round(distance_share(toeplitz), 6)
        1.0
    """
    what = "distance_share"
    sim = check_diagnostic_array("sim", sim, 2, what=what, shape_text="(length, length)")
    n = sim.shape[0]
    if sim.shape[1] != n or n < 3:
        raise _error(what, f"sim must be a square (length, length) matrix with length >= 3 "
                           f"(two distances), got sim.shape={sim.shape}",
                     "compute it with similarity(table)")
    offsets, means = mean_by_offset(sim)
    gap = relative_positions(n, n)
    off = gap != 0
    residual = sim - means[gap + n - 1]
    total = ((sim[off] - sim[off].mean()) ** 2).sum()
    if total == 0:
        return 1.0
    return float(1.0 - (residual[off] ** 2).sum() / total)


def rope_scores(seq_len: int, head_dim: int, *, base: float = 10000.0) -> np.ndarray:
    """RoPE's position-pair score for a query and a key that are both all ones: ``(seq, seq)``.

    RoPE rotates the feature pair ``i`` of a query at position ``m`` by ``m theta_i`` and that of
    a key at ``n`` by ``n theta_i``, so the score of two equal, unit-per-pair vectors is
    ``sum_i 2 cos((m - n) theta_i)``, divided here by ``head_dim`` to lie in ``[-1, 1]``. It is
    the ``PE PE^T`` of a sinusoidal table with the same frequencies (``theta_i`` =
    ``base^(-2i/head_dim)``, :func:`posenc.sinusoidal_inv_freq`), but it enters attention as a
    function of ``m - n`` only.

    Example:
        >>> rope_scores(3, 2, base=10000.0).round(3)
        array([[ 1.   ,  0.54 , -0.416],
               [ 0.54 ,  1.   ,  0.54 ],
               [-0.416,  0.54 ,  1.   ]])
    """
    inv_freq = sinusoidal_inv_freq(head_dim, base)
    positions = np.arange(check_positive_int("seq_len", seq_len, what="rope_scores"),
                          dtype=np.float64)
    offsets = positions[:, None] - positions[None, :]
    return np.cos(offsets[..., None] * inv_freq).mean(-1)


# --------------------------------------------------------------------------- the probe


@dataclass
class ProbeResult:
    """What :func:`fit_probe` measured on the held-out sequences.

    Attributes:
        r2: coefficient of determination of the predicted positions (1 is perfect, 0 is no
            better than predicting the mean position).
        accuracy: fraction of held-out tokens whose rounded prediction is their position.
        mean_abs_error: mean absolute error, in positions.
        train_r2: the same R^2 on the sequences the probe was fitted on.
        weights: ``(dim,)`` probe weights on the standardised features.
        intercept: the probe's intercept.
    """

    r2: float
    accuracy: float
    mean_abs_error: float
    train_r2: float
    weights: np.ndarray = field(repr=False)
    intercept: float = 0.0


def _r2(y, pred):
    total = float(((y - y.mean()) ** 2).sum())
    return 1.0 - float(((y - pred) ** 2).sum()) / total if total > 0 else float("nan")


def ridge_regression(x, y, ridge: float = 1.0) -> tuple[np.ndarray, float]:
    """Closed-form ridge regression with an unpenalised intercept: ``(weights, intercept)``.

    With ``xc = x - mean(x)`` and ``yc = y - mean(y)``, the weights minimise
    ``|xc w - yc|^2 + ridge |w|^2``, so ``w = (xc^T xc + ridge I)^{-1} xc^T yc``, and the
    intercept is ``mean(y) - mean(x) . w``. Solved with a least-squares solver, so ``ridge=0``
    on collinear features still returns the minimum-norm solution.

    Args:
        x: ``(n, dim)`` features.
        y: ``(n,)`` targets.
        ridge: the penalty, >= 0. Default 1.0.

    Example:
        >>> w, b = ridge_regression([[0.0], [1.0], [2.0]], [1.0, 3.0, 5.0], ridge=0.0)
        >>> w.round(6), round(b, 6)
        (array([2.]), 1.0)
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    x_mean, y_mean = x.mean(0), y.mean()
    xc = x - x_mean
    gram = xc.T @ xc + ridge * np.eye(x.shape[1])
    weights = np.linalg.lstsq(gram, xc.T @ (y - y_mean), rcond=None)[0]
    return weights, float(y_mean - x_mean @ weights)


def fit_probe(hidden, positions=None, *, ridge: float = 1.0, test_fraction: float = 0.25,
              seed: int | None = 0) -> ProbeResult:
    """Fit a linear probe that predicts each token's position from its hidden state.

    The probe is :func:`ridge_regression` (closed form, ``w = (X^T X + ridge I)^{-1} X^T y``)
    on features standardised with the training split's mean and standard deviation. Whole sequences are held out, not single tokens:
    ``test_fraction`` of the batch (at least one sequence) is scored, the rest fitted, so the
    probe cannot memorise a sentence's tokens. The idea of probing representations for position
    follows Wang & Chen (2020) and Haviv et al. (2022).

    Args:
        hidden: array-like ``(batch, seq, dim)``, a layer's hidden states; ``batch >= 2``.
        positions: optional ``(seq,)`` or ``(batch, seq)`` ints; default ``0 .. seq-1``.
        ridge: the penalty, a finite number >= 0. Default 1.0.
        test_fraction: fraction of the sequences held out, in ``(0, 1)``. Default 0.25.
        seed: seed of the split (``None``: fresh randomness). Default 0.

    Returns:
        :class:`ProbeResult`.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> pos = np.arange(16)
        >>> hidden = rng.normal(size=(8, 16, 4)) * 0.01 + pos[None, :, None] * [1, 0, 0, 0]
        >>> result = fit_probe(hidden, ridge=0.0)
        >>> round(result.r2, 3), result.accuracy
        (1.0, 1.0)
    """
    what = "fit_probe"
    hidden = check_diagnostic_array("hidden", hidden, 3, what=what,
                                    shape_text="(batch, seq, dim)")
    batch, seq, dim = hidden.shape
    ridge = check_float("ridge", ridge, at_least=0.0, meaning="the ridge penalty", what=what)
    test_fraction = check_float("test_fraction", test_fraction, above=0.0, below=1.0,
                                meaning="the fraction of sequences held out", what=what)
    seed = check_seed(seed, what=what)
    if positions is None:
        positions = np.arange(seq)
    positions = np.broadcast_to(np.asarray(positions, dtype=np.float64), (batch, seq))
    n_test = check_probe_split(batch, test_fraction, what=what)
    order = np.random.default_rng(seed).permutation(batch)
    test, train = order[:n_test], order[n_test:]
    x_train, y_train = hidden[train].reshape(-1, dim), positions[train].reshape(-1)
    x_test, y_test = hidden[test].reshape(-1, dim), positions[test].reshape(-1)
    mean, std = x_train.mean(0), x_train.std(0)
    std = np.where(std > 0, std, 1.0)
    x_train, x_test = (x_train - mean) / std, (x_test - mean) / std
    weights, intercept = ridge_regression(x_train, y_train, ridge)
    pred_train, pred_test = x_train @ weights + intercept, x_test @ weights + intercept
    return ProbeResult(
        r2=_r2(y_test, pred_test),
        accuracy=float(np.mean(np.rint(pred_test) == y_test)),
        mean_abs_error=float(np.abs(pred_test - y_test).mean()),
        train_r2=_r2(y_train, pred_train),
        weights=weights,
        intercept=intercept,
    )


def probe_layers(hidden_states, positions=None, **probe_options) -> list[ProbeResult]:
    """:func:`fit_probe` on each layer of ``hidden_states`` (a list of ``(batch, seq, dim)``).

    The lab's models return ``depth + 1`` of them: the embedding output, then each block's.
    Every layer is split the same way (same ``seed``), so the layers are scored on the same
    held-out sequences.
    """
    return [fit_probe(h, positions, **probe_options) for h in hidden_states]


def offset_features(attention, *, floor: float = 1e-30) -> tuple[np.ndarray, np.ndarray]:
    """Per-head features of every (query, earlier key) pair, from causal attention weights.

    A softmax ignores a constant added to a query's logits, so what attention can act on is the
    difference of two logits of the same query. This returns, for each pair of a query ``i``
    and a key ``j < i``, each head's ``log a[i, j] - log a[i, i]``: the logit of the key minus
    that of the query's own position (the pair at offset 0), which equals the difference of the
    logits before the softmax. ALiBi's bias, for one, enters it as ``-slope * (i - j)``.

    Args:
        attention: array-like ``(batch, heads, seq, seq)``, a layer's causal attention
            weights (each row sums to 1; ``seq >= 2``).
        floor: weights below it are raised to it before the logarithm (a softmax in float32
            can underflow to 0). Default ``1e-30``.

    Returns:
        ``(features, offsets)``: ``(batch, pairs, heads)`` float64 features and the
        ``(pairs,)`` offsets ``i - j`` (from 1 to ``seq - 1``), ``pairs = seq (seq - 1) / 2``,
        ready for :func:`fit_probe` as its ``hidden`` and ``positions``.

    Example:
        >>> logits = -0.5 * np.subtract.outer(np.arange(4), np.arange(4)).astype(float)
        >>> logits[np.triu_indices(4, 1)] = -np.inf
        >>> weights = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
        >>> features, offsets = offset_features(weights[None, None])
        >>> features.shape, offsets.tolist()
        ((1, 6, 1), [1, 2, 1, 3, 2, 1])
        >>> np.allclose(features[0, :, 0], -0.5 * offsets)
        True
    """
    what = "offset_features"
    attention = check_diagnostic_array("attention", attention, 4, what=what,
                                       shape_text="(batch, heads, seq, seq)")
    seq = attention.shape[-1]
    if attention.shape[-2] != seq or seq < 2:
        raise _error(what, f"attention must be square in its last two axes with seq >= 2, got "
                           f"shape {attention.shape}",
                     "pass self-attention weights (batch, heads, seq, seq) of a causal layer")
    floor = check_float("floor", floor, above=0.0, meaning="the smallest weight", what=what)
    i, j = np.tril_indices(seq, -1)
    log = np.log(np.maximum(attention, floor))
    features = log[..., i, j] - log[..., i, i]               # (batch, heads, pairs)
    return features.transpose(0, 2, 1), i - j


def probe_offsets(attention_maps, **probe_options) -> list[ProbeResult]:
    """:func:`fit_probe` of the offset ``i - j`` on :func:`offset_features` of each layer.

    ``attention_maps`` is a list of ``(batch, heads, seq, seq)`` causal weights, one per layer
    (the faces' ``attention_maps``). The probe is linear in the heads' logit differences, so it
    reads a bias that grows with the offset (ALiBi, a T5 bias that learned to) at once; a
    rotation's score mixes the offset with the content, and the probe says how much of it a
    linear read-out recovers. Held-out whole sequences, as in :func:`fit_probe`.
    """
    results = []
    for maps in attention_maps:
        features, offsets = offset_features(maps)
        results.append(fit_probe(features, offsets, **probe_options))
    return results


# --------------------------------------------------------------------------- gradients

#: The healthy range of :attr:`GradientLog.ratios`, the per-weight RMS gradient of the
#: positional weights over that of the rest of the model. Derived from measurements:
#: ``python -m posenc.experiments gradients --quick --seed N --tag seedN`` for seeds 0, 1 and
#: 2 trains the lab's Transformer with each scheme that has positional weights (learned,
#: hybrid, T5, Shaw) on the character corpus and records the ratio at every step; the healthy
#: range is the 1st to 99th percentile of those ratios, widened ten times on each side and
#: rounded out to powers of ten (:func:`posenc.experiments.gradients.healthy_range`). Seeds 3
#: to 5 and the controls were held out: :func:`posenc.experiments.gradients.validate` scores
#: them. It is one range for every scheme; :func:`posenc.experiments.gradients.validate`
#: compares it with each scheme's own band (the same rule on its runs alone). Only the learned
#: table's band is narrower, from 0.1; the hybrid's, T5's and Shaw's start at 1e-3 like this
#: range. Below it, the positional weights get next to no gradient (detached, scaled down,
#: outside the graph): a detector of a cut-off gradient, not of one a few times too small, nor
#: of a table the optimiser does not update (its gradient is intact). Above it, their
#: gradient is out of scale with the rest of the model; under Adam,
#: which divides each weight's step by its own gradient's size, that alone does not make
#: their updates larger.
GRADIENT_RATIO_RANGE = (1e-3, 1e2)


@dataclass
class GradientLog:
    """Gradient norms per training step: positional weights against the rest of the model.

    The faces' monitors fill it, one :meth:`add` per optimiser step. The ratio compares
    root-mean-square gradients per weight, ``(|g_pos| / sqrt(n_pos)) / (|g_rest| /
    sqrt(n_rest))``, so that a table's size does not decide the answer.

    Attributes:
        position_norms: L2 norm of the positional weights' gradient at each step.
        rest_norms: L2 norm of every other trainable weight's gradient at each step.
        position_count: number of positional weights.
        rest_count: number of other weights.
    """

    position_norms: list = field(default_factory=list)
    rest_norms: list = field(default_factory=list)
    position_count: int = 0
    rest_count: int = 0

    def add(self, position_norm: float, rest_norm: float, position_count: int,
            rest_count: int) -> None:
        """Append one step's norms (and the weight counts, which must not change)."""
        position_count, rest_count = check_gradient_counts(
            position_count, rest_count, self.position_count if self.position_norms else None,
            self.rest_count if self.rest_norms else None, what="GradientLog.add")
        self.position_norms.append(float(position_norm))
        self.rest_norms.append(float(rest_norm))
        self.position_count, self.rest_count = position_count, rest_count

    @property
    def steps(self) -> int:
        """Number of steps recorded."""
        return len(self.position_norms)

    @property
    def ratios(self) -> np.ndarray:
        """Per-weight RMS gradient ratio at each step (``nan`` where the rest has no gradient)."""
        pos = np.asarray(self.position_norms, dtype=np.float64)
        rest = np.asarray(self.rest_norms, dtype=np.float64)
        if self.position_count == 0:
            return np.full(pos.shape, np.nan)
        scale = math.sqrt(self.rest_count / self.position_count)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(rest > 0, pos / np.where(rest > 0, rest, 1.0) * scale, np.nan)

    def health(self, healthy=GRADIENT_RATIO_RANGE) -> str:
        """:func:`gradient_health` of the median ratio over the recorded steps."""
        ratios = self.ratios[np.isfinite(self.ratios)]
        return gradient_health(float(np.median(ratios)) if ratios.size else float("nan"), healthy)


def gradient_health(ratio: float, healthy=GRADIENT_RATIO_RANGE) -> str:
    """Name the regime of a positional / rest gradient ratio (see :class:`GradientLog`).

    Returns ``"starved"`` below ``healthy[0]`` (also for 0, a table that gets no gradient),
    ``"dominant"`` above ``healthy[1]``, ``"healthy"`` in between, and ``"none"`` for ``nan``
    (a model without positional weights).

    Example:
        >>> gradient_health(1.3), gradient_health(1e-5), gradient_health(0.0)
        ('healthy', 'starved', 'starved')
    """
    low, high = healthy
    if ratio != ratio:
        return "none"
    if ratio < low:
        return "starved"
    return "dominant" if ratio > high else "healthy"


# --------------------------------------------------------------------------- argument rules


def check_diagnostic_array(name: str, values, rank: int, *, what: str = "", shape_text: str = "",
                           finite: bool = True):
    """``values`` as a float64 NumPy array of rank ``rank`` (finite unless ``finite=False``)."""
    import numpy as np

    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise _error(what, f"{name} must be a numeric array {shape_text}, got "
                           f"{type(values).__name__}",
                     "pass a NumPy array (convert a tensor with .numpy() or "
                     "keras.ops.convert_to_numpy)") from None
    check_rank(name, array.shape, rank, what=what, fix=f"pass {name} as {shape_text}")
    if 0 in array.shape:
        raise _error(what, f"{name} must not be empty, got shape {array.shape}")
    if finite and not np.all(np.isfinite(array)):
        raise _error(what, f"{name} must be finite, got {int((~np.isfinite(array)).sum())} "
                           "non-finite values", "check the model for NaN or overflow")
    return array


def check_probe_split(batch: int, test_fraction: float, *, what: str = "") -> int:
    """The number of held-out sequences: at least one, and at least one left to fit."""
    if batch < 2:
        raise _error(what, f"hidden must hold at least 2 sequences (one to fit, one to score), "
                           f"got batch={batch}", "pass more sequences")
    return min(batch - 1, max(1, int(round(batch * test_fraction))))


def check_gradient_counts(position_count, rest_count, old_position=None, old_rest=None, *,
                          what: str = "") -> tuple[int, int]:
    """Weight counts of a gradient record: integers >= 0 (the rest > 0), unchanged across steps."""
    position_count = check_int("position_count", position_count, minimum=0, what=what)
    rest_count = check_int("rest_count", rest_count, minimum=1, what=what,
                           fix="the model must have trainable weights besides the positional ones")
    for name, new, old in (("position_count", position_count, old_position),
                           ("rest_count", rest_count, old_rest)):
        if old is not None and new != old:
            raise _error(what, f"{name} changed between steps, got {name}={new} after {old}",
                         "use one log per model (a model's weights must not change mid-run)")
    return position_count, rest_count


def check_monitored_weights(found, name: str, *, what: str = "") -> None:
    """Every weight a monitor is told to watch is a trainable weight of the model."""
    missing = [i for i, ok in enumerate(found) if not ok]
    if missing:
        raise _error(what, f"{name} must be trainable weights of the model, got "
                           f"{len(missing)} that are not (entries {missing})",
                     f"pass weights of the model being trained, or leave {name} out to "
                     "use the model's own list")
