"""Graph positions (Keras face).

Dwivedi et al.'s Laplacian eigenvector positions: :func:`laplacian`,
:func:`laplacian_positions` (computed in float64 NumPy by ``posenc/graphs.py``)
and :class:`LaplacianEncoding` (a linear map of them, signs flipped in training).

The encodings are absolute: a layer whose ``call`` returns ``x + P``,
its ``encoding(...)`` ``P`` alone in float32. The layers are built with
``autocast=False``: under a mixed policy, float inputs are not rounded to the
compute dtype and ``P`` is computed in float32, then cast to the compute dtype.
The PyTorch face mirrors this module name for name.
"""

from __future__ import annotations

import keras
from keras import ops

from posenc._checks import (
    check_bool,
    check_embeddings,
    check_float_dtype,
    check_positive_int,
    check_seed,
)
from posenc.graphs import laplacian as numpy_laplacian
from posenc.graphs import laplacian_positions as numpy_laplacian_positions
from posenc.graphs import check_eigenvectors_shape
from posenc.keras._util import AdditiveEncoding, as_numpy, dtype_of

__all__ = [
    "laplacian",
    "laplacian_positions",
    "LaplacianEncoding",
]


def laplacian(adjacency, *, normalized: bool = True):
    """The graph Laplacian (float32), ``I - D^(-1/2) A D^(-1/2)`` or ``D - A``.

    Computed in float64 NumPy by :func:`posenc.graphs.laplacian` (the
    checks and the formula live there) and returned as a tensor.

    Args:
        adjacency: ``(nodes, nodes)`` symmetric, non-negative array or tensor.
        normalized: the normalised (default) or the combinatorial Laplacian.

    Returns:
        float32 tensor ``(nodes, nodes)``.

    Example:
        >>> keras.ops.convert_to_numpy(laplacian([[0, 1], [1, 0]]))
        array([[ 1., -1.],
               [-1.,  1.]], dtype=float32)
    """
    lap = numpy_laplacian(as_numpy(adjacency), normalized=normalized)
    return ops.convert_to_tensor(lap.astype("float32"))


def laplacian_positions(adjacency, k: int, *, normalized: bool = True,
                        return_eigenvalues: bool = False):
    """Laplacian eigenvector positions (Dwivedi et al., 2020) as a float32 tensor.

    The ``k`` eigenvectors of the graph Laplacian with the smallest non-trivial
    eigenvalues, one row per node, with the deterministic sign convention of
    :func:`posenc.graphs.laplacian_positions` (which computes them in
    float64 NumPy: a preprocessing step, done once per graph).

    Args:
        adjacency: ``(nodes, nodes)`` symmetric, non-negative array or tensor.
        k: number of eigenvectors, ``1 <= k <= nodes - components``.
        normalized: normalised (default) or combinatorial Laplacian.
        return_eigenvalues: also return the ``k`` eigenvalues. Default ``False``.

    Returns:
        float32 tensor ``(nodes, k)`` (and the eigenvalues ``(k,)`` if asked).

    Example:
        >>> import numpy as np
        >>> cycle = np.roll(np.eye(6), 1, 0) + np.roll(np.eye(6), -1, 0)
        >>> tuple(laplacian_positions(cycle, 2).shape)
        (6, 2)

    References:
        Dwivedi et al., "Benchmarking Graph Neural Networks", arXiv:2003.00982, 2020.
    """
    out = numpy_laplacian_positions(as_numpy(adjacency), k, normalized=normalized,
                                    return_eigenvalues=return_eigenvalues)
    if return_eigenvalues:
        return tuple(ops.convert_to_tensor(o.astype("float32")) for o in out)
    return ops.convert_to_tensor(out.astype("float32"))


@keras.saving.register_keras_serializable(package="posenc")
class LaplacianEncoding(AdditiveEncoding):
    """Graph node positions: a linear map of Laplacian eigenvectors, signs flipped in training.

    Dwivedi & Bresson (2021) give each node ``i`` of a graph the row ``u_i`` of
    its ``k`` Laplacian eigenvectors (:func:`laplacian_positions`) and add
    ``u_i C + c`` to the node's features, ``C`` a learned ``(k, dim)`` matrix.
    The sign of each eigenvector is arbitrary, so during training every
    eigenvector's sign is flipped at random (Dwivedi et al., 2020), here
    independently for each graph of the batch: the model learns not to rely
    on a sign that another graph, or another eigensolver, would choose
    differently.
    Without ``training=True`` the eigenvectors are used as given.

    Args:
        k: number of eigenvectors per node.
        dim: feature dimension; must equal ``x.shape[-1]``.
        sign_flip: flip signs at random in training. Default ``True``.
        seed: optional int for a reproducible ``keras.random.SeedGenerator``.

    Call arguments:
        x: ``(batch, nodes, dim)`` node features.
        eigenvectors: ``(nodes, k)`` or ``(batch, nodes, k)`` eigenvector entries.
            In training each graph (each leading index) draws its own signs; a
            ``(nodes, k)`` input draws one sign pattern for the whole batch.
        training: bool; only ``True`` flips signs. Keras sets it inside ``fit``.

    Returns:
        Tensor of the shape of ``x`` in the layer's compute dtype.

    Weights:
        kernel: ``(k, dim)``, Glorot-uniform; bias: ``(dim,)``, zeros.

    Example:
        >>> import numpy as np
        >>> path = np.eye(5, k=1) + np.eye(5, k=-1)
        >>> enc = LaplacianEncoding(2, 8, seed=0)
        >>> tuple(enc(keras.ops.zeros((1, 5, 8)), laplacian_positions(path, 2)).shape)
        (1, 5, 8)

    References:
        Dwivedi & Bresson, "A Generalization of Transformer Networks to Graphs",
        AAAI Workshop on Deep Learning on Graphs, 2021.
        Dwivedi et al., "Benchmarking Graph Neural Networks", arXiv:2003.00982, 2020.
    """

    def __init__(self, k: int, dim: int, *, sign_flip: bool = True, seed: int | None = None,
                 **kwargs):
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        what = "LaplacianEncoding"
        self.k = check_positive_int("k", k, what=what)
        self.dim = check_positive_int("dim", dim, what=what)
        self.sign_flip = check_bool("sign_flip", sign_flip, what=what)
        self.seed = check_seed(seed, what=what)
        self.seed_generator = keras.random.SeedGenerator(self.seed)
        self.kernel = self.add_weight(name="kernel", shape=(self.k, self.dim),
                                      initializer="glorot_uniform")
        self.bias = self.add_weight(name="bias", shape=(self.dim,), initializer="zeros")
        self.built = True

    def encoding(self, eigenvectors, training=None):
        """``P`` (float32) ``(..., nodes, dim)``; signs flipped at random when training."""
        u = ops.cast(self._eigenvectors(eigenvectors), "float32")
        if training and self.sign_flip:
            u = u * self._signs((*ops.shape(u)[:-2], 1, self.k))
        return ops.matmul(u, ops.cast(self.kernel, "float32")) + ops.cast(self.bias, "float32")

    def call(self, x, eigenvectors, training=None):
        check_embeddings(x.shape, self.dim, what=self._what())
        eigenvectors = self._eigenvectors(eigenvectors)
        self._per_token("eigenvectors", eigenvectors, x,
                        each="row of k eigenvector entries (one per node)", trailing="k")
        return self._add(x, self.encoding(eigenvectors, training=training))

    def _eigenvectors(self, eigenvectors):
        """``eigenvectors`` as a floating-point tensor ``(..., nodes, k)``."""
        u = ops.convert_to_tensor(eigenvectors)
        check_float_dtype("eigenvectors", dtype_of(u), what=self._what(),
                          fix=f"pass laplacian_positions(adjacency, {self.k})")
        check_eigenvectors_shape(u.shape, self.k, what=self._what())
        return u

    def _signs(self, shape):
        """-1 or +1 with probability 1/2 each, of ``shape``, from the layer's seed generator."""
        return ops.where(keras.random.uniform(shape, seed=self.seed_generator) < 0.5, -1.0, 1.0)

    def get_config(self):
        config = super().get_config()
        config.update({"k": self.k, "dim": self.dim, "sign_flip": self.sign_flip,
                       "seed": self.seed})
        return config
