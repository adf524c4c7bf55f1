"""Graph positions (PyTorch face).

Dwivedi et al.'s Laplacian eigenvector positions: :func:`laplacian`,
:func:`laplacian_positions` (computed in float64 NumPy by ``posenc/graphs.py``)
and :class:`LaplacianEncoding` (a linear map of them, signs flipped in training).

The encodings are absolute: a module whose ``forward`` returns ``x + P``,
its ``encoding(...)`` ``P`` alone in float32. The Keras face
mirrors this module name for name.
"""

from __future__ import annotations

import torch
from torch import nn

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
from posenc.torch._util import AdditiveEncoding, SeededDraws, as_numpy, dtype_of

__all__ = [
    "laplacian",
    "laplacian_positions",
    "LaplacianEncoding",
]


def laplacian(adjacency, *, normalized: bool = True) -> torch.Tensor:
    """The graph Laplacian (float32), ``I - D^(-1/2) A D^(-1/2)`` or ``D - A``.

    Computed in float64 NumPy by :func:`posenc.graphs.laplacian` (the
    checks and the formula live there) and returned as a tensor.

    Args:
        adjacency: ``(nodes, nodes)`` symmetric, non-negative array or tensor.
        normalized: the normalised (default) or the combinatorial Laplacian.

    Returns:
        float32 tensor ``(nodes, nodes)``.

    Example:
        >>> laplacian(torch.tensor([[0, 1], [1, 0]]))
        tensor([[ 1., -1.],
                [-1.,  1.]])
    """
    lap = numpy_laplacian(as_numpy(adjacency), normalized=normalized)
    return torch.as_tensor(lap, dtype=torch.float32)


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
        >>> cycle = torch.roll(torch.eye(6), 1, 0) + torch.roll(torch.eye(6), -1, 0)
        >>> laplacian_positions(cycle, 2).shape
        torch.Size([6, 2])

    References:
        Dwivedi et al., "Benchmarking Graph Neural Networks", arXiv:2003.00982, 2020.
    """
    out = numpy_laplacian_positions(as_numpy(adjacency), k, normalized=normalized,
                                    return_eigenvalues=return_eigenvalues)
    if return_eigenvalues:
        return tuple(torch.as_tensor(o, dtype=torch.float32) for o in out)
    return torch.as_tensor(out, dtype=torch.float32)


class LaplacianEncoding(SeededDraws, AdditiveEncoding):
    """Graph node positions: a linear map of Laplacian eigenvectors, signs flipped in training.

    Dwivedi & Bresson (2021) give each node ``i`` of a graph the row ``u_i`` of
    its ``k`` Laplacian eigenvectors (:func:`laplacian_positions`) and add
    ``u_i C + c`` to the node's features, ``C`` a learned ``(k, dim)`` matrix.
    The sign of each eigenvector is arbitrary, so during training every
    eigenvector's sign is flipped at random (Dwivedi et al., 2020), here
    independently for each graph of the batch: the model learns not to rely
    on a sign that another graph, or another eigensolver, would choose
    differently. In
    evaluation mode the eigenvectors are used as given.

    Args:
        k: number of eigenvectors per node.
        dim: feature dimension; must equal ``x.shape[-1]``.
        sign_flip: flip signs at random in training. Default ``True``.
        seed: optional int for reproducible flips.

    Call arguments:
        x: ``(batch, nodes, dim)`` node features.
        eigenvectors: ``(nodes, k)`` or ``(batch, nodes, k)`` eigenvector entries.
            In training each graph (each leading index) draws its own signs; a
            ``(nodes, k)`` input draws one sign pattern for the whole batch.

    Returns:
        Tensor of the shape and dtype of ``x``.

    Weights:
        kernel: ``(k, dim)``, Glorot-uniform; bias: ``(dim,)``, zeros.

    Example:
        >>> path = torch.diag(torch.ones(4), 1) + torch.diag(torch.ones(4), -1)
        >>> enc = LaplacianEncoding(2, 8, seed=0)
        >>> enc(torch.zeros(1, 5, 8), laplacian_positions(path, 2)).shape
        torch.Size([1, 5, 8])

    References:
        Dwivedi & Bresson, "A Generalization of Transformer Networks to Graphs",
        AAAI Workshop on Deep Learning on Graphs, 2021.
        Dwivedi et al., "Benchmarking Graph Neural Networks", arXiv:2003.00982, 2020.
    """

    def __init__(self, k: int, dim: int, *, sign_flip: bool = True, seed: int | None = None):
        super().__init__()
        what = "LaplacianEncoding"
        self.k = check_positive_int("k", k, what=what)
        self.dim = check_positive_int("dim", dim, what=what)
        self.sign_flip = check_bool("sign_flip", sign_flip, what=what)
        self.seed = check_seed(seed, what=what)
        self._generators: dict[str, torch.Generator] = {}
        self.kernel = nn.Parameter(torch.empty(self.k, self.dim))
        self.bias = nn.Parameter(torch.empty(self.dim))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.xavier_uniform_(self.kernel)
        nn.init.zeros_(self.bias)

    def extra_repr(self) -> str:
        return f"k={self.k}, dim={self.dim}, sign_flip={self.sign_flip}, seed={self.seed}"

    def encoding(self, eigenvectors) -> torch.Tensor:
        """``P`` (float32) ``(..., nodes, dim)``; signs flipped at random in training mode."""
        u = self._eigenvectors(eigenvectors).to(self._anchor.device).float()
        if self.training and self.sign_flip:
            u = u * self._signs((*u.shape[:-2], 1, self.k))
        with torch.autocast(device_type=u.device.type, enabled=False):
            return u @ self.kernel.float() + self.bias.float()

    def forward(self, x: torch.Tensor, eigenvectors) -> torch.Tensor:
        check_embeddings(x.shape, self.dim, what=self._what())
        eigenvectors = self._eigenvectors(eigenvectors)
        self._per_token("eigenvectors", eigenvectors, x,
                        each="row of k eigenvector entries (one per node)", trailing="k")
        return self._add(x, self.encoding(eigenvectors))

    def _eigenvectors(self, eigenvectors) -> torch.Tensor:
        """``eigenvectors`` as a floating-point tensor ``(..., nodes, k)``."""
        u = eigenvectors if torch.is_tensor(eigenvectors) else torch.as_tensor(eigenvectors)
        check_float_dtype("eigenvectors", dtype_of(u), what=self._what(),
                          fix=f"pass laplacian_positions(adjacency, {self.k})")
        check_eigenvectors_shape(u.shape, self.k, what=self._what())
        return u

    def _signs(self, shape) -> torch.Tensor:
        """-1 or +1 with probability 1/2 each, of ``shape``, on the module's device."""
        return torch.where(self._uniform(shape, self._anchor.device) < 0.5, -1.0, 1.0)
