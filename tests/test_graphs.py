"""Graph positions (Laplacian eigenvectors, LaplacianEncoding): the scheme's own properties.
Shapes, dtypes, parity on the same weights, saving and training of LaplacianEncoding are
the layer table's (tests/test_layers.py); bad input is the error table's
(tests/test_errors.py)."""

import keras
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc.graphs as sc
import posenc.keras as ks
import posenc.torch as ts
from faces import np32, numpy

FACES = {"torch": ts, "keras": ks}


# --------------------------------------------------------------------------- graphs

def cycle(n):
    a = np.roll(np.eye(n), 1, axis=1)
    return a + a.T


def path(n):
    return np.eye(n, k=1) + np.eye(n, k=-1)


def grid(rows, cols):
    return np.kron(path(rows), np.eye(cols)) + np.kron(np.eye(rows), path(cols))


def projection_residual(basis, vectors):
    """Largest distance of the columns of ``vectors`` from the span of ``basis``'s columns."""
    q, _ = np.linalg.qr(basis)
    return float(np.abs(vectors - q @ (q.T @ vectors)).max())


@pytest.mark.parametrize("n", [8, 12, 15])
@pytest.mark.parametrize("normalized", [True, False])
def test_cycle_eigenvectors_span_the_sinusoids(n, normalized):
    k = n - 1
    vectors, values = sc.laplacian_positions(cycle(n), k, normalized=normalized,
                                             return_eigenvalues=True)
    freq = np.array([m for m in range(1, n // 2 + 1) for _ in range(2 if 2 * m < n else 1)])
    expected = (1 - np.cos(2 * np.pi * freq / n)) * (1 if normalized else 2)
    np.testing.assert_allclose(values, expected, atol=1e-10)
    nodes = np.arange(n)
    for m in range(1, n // 2 + 1):
        cols = np.flatnonzero(np.isclose(values, expected[freq == m][0]))
        waves = [np.cos(2 * np.pi * m * nodes / n)]
        if 2 * m < n:
            waves.append(np.sin(2 * np.pi * m * nodes / n))
        waves = np.stack(waves, axis=1)
        assert len(cols) == waves.shape[1]
        assert projection_residual(vectors[:, cols], waves) < 1e-10
        assert projection_residual(waves, vectors[:, cols]) < 1e-10


@pytest.mark.parametrize("n", [2, 5, 9])
def test_path_graph_eigenvalues_and_vectors(n):
    k = n - 1
    _, values = sc.laplacian_positions(path(n), k, return_eigenvalues=True)
    np.testing.assert_allclose(values, 1 - np.cos(np.pi * np.arange(1, n) / (n - 1)), atol=1e-10)
    vectors, values = sc.laplacian_positions(path(n), k, normalized=False,
                                             return_eigenvalues=True)
    np.testing.assert_allclose(values, 2 - 2 * np.cos(np.pi * np.arange(1, n) / n), atol=1e-10)
    # D - A of a path: the DCT-II basis cos(pi m (i + 1/2) / n), up to sign and norm
    dct = np.cos(np.pi * np.arange(1, n)[None] * (np.arange(n)[:, None] + 0.5) / n)
    dct /= np.linalg.norm(dct, axis=0)
    np.testing.assert_allclose(np.abs(vectors), np.abs(dct), atol=1e-10)


def test_grid_eigenvalues_are_sums_of_path_eigenvalues():
    rows, cols = 3, 5
    n = rows * cols
    _, values = sc.laplacian_positions(grid(rows, cols), n - 1, normalized=False,
                                       return_eigenvalues=True)
    lam_r = 2 - 2 * np.cos(np.pi * np.arange(rows) / rows)
    lam_c = 2 - 2 * np.cos(np.pi * np.arange(cols) / cols)
    expected = np.sort(np.add.outer(lam_r, lam_c).ravel())[1:]
    np.testing.assert_allclose(values, expected, atol=1e-10)


@pytest.mark.parametrize("normalized", [True, False])
def test_eigen_equation_holds_with_any_signs(normalized):
    a = grid(3, 4)
    lap = sc.laplacian(a, normalized=normalized)
    vectors, values = sc.laplacian_positions(a, 5, normalized=normalized,
                                             return_eigenvalues=True)
    rng = np.random.default_rng(0)
    for _ in range(5):
        flipped = vectors * rng.choice([-1.0, 1.0], size=vectors.shape[1])
        np.testing.assert_allclose(lap @ flipped, flipped * values, atol=1e-12)
    np.testing.assert_allclose(vectors.T @ vectors, np.eye(5), atol=1e-12)


def test_sign_convention_first_significant_entry_positive_and_deterministic():
    rng = np.random.default_rng(1)
    w = rng.uniform(0.5, 2.0, size=(9, 9)) * (rng.uniform(size=(9, 9)) < 0.6)
    w = np.triu(w, 1)
    w = w + w.T + path(9)            # connected
    vectors = sc.laplacian_positions(w, 6)
    for column in vectors.T:
        first = np.flatnonzero(np.abs(column) > 1e-6 * np.abs(column).max())[0]
        assert column[first] > 0
    np.testing.assert_array_equal(vectors, sc.laplacian_positions(w.copy(), 6))


def test_trivial_eigenvectors_skipped_per_component():
    two = np.zeros((7, 7))
    two[:3, :3] = path(3)
    two[3:, 3:] = cycle(4)
    vectors, values = sc.laplacian_positions(two, 5, return_eigenvalues=True)
    assert values.min() > 1e-6                          # both zero eigenvalues skipped
    assert vectors.shape == (7, 5)


def test_laplacian_matches_its_definition():
    a = grid(2, 3) * 2.0
    d = a.sum(1)
    np.testing.assert_allclose(sc.laplacian(a, normalized=False), np.diag(d) - a)
    np.testing.assert_allclose(sc.laplacian(a), np.eye(6) - a / np.sqrt(np.outer(d, d)))
    isolated = np.zeros((3, 3))
    isolated[0, 1] = isolated[1, 0] = 1.0
    lap = sc.laplacian(isolated)
    assert lap[2, 2] == 0.0 and np.all(np.isfinite(lap))


@pytest.mark.keras
def test_faces_return_the_same_positions_and_laplacian():
    a = grid(3, 4)
    t_vec, t_val = ts.laplacian_positions(torch.as_tensor(a), 4, return_eigenvalues=True)
    k_vec, k_val = ks.laplacian_positions(keras.ops.convert_to_tensor(a), 4,
                                          return_eigenvalues=True)
    assert t_vec.dtype == torch.float32
    np.testing.assert_array_equal(np32(t_vec), np32(k_vec))
    np.testing.assert_array_equal(np32(t_val), np32(k_val))
    np.testing.assert_allclose(numpy(t_vec), sc.laplacian_positions(a, 4), atol=1e-7)
    np.testing.assert_array_equal(np32(ts.laplacian(a)), np32(ks.laplacian(a)))


# --------------------------------------------------------------------------- LaplacianEncoding

K, DIM, NODES, BATCH = 3, 8, 6, 4


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(BATCH, NODES, DIM)).astype(np.float32)
    u = sc.laplacian_positions(path(NODES), K).astype(np.float32)
    return x, u


def _flip_pattern(out, x, u, kernel, bias):
    """The signs s (batch, k) with out = x + (u * s) @ kernel + bias, solved by least squares."""
    p = out - x - bias                                          # (batch, nodes, dim)
    signs = []
    for b in range(p.shape[0]):
        coeffs = np.linalg.lstsq(kernel.T, p[b].T, rcond=None)[0].T   # (nodes, k) = u * s
        s = np.sign(np.sum(coeffs * u, axis=0))
        np.testing.assert_allclose(coeffs, u * s, atol=1e-4)
        signs.append(s)
    return np.array(signs)


@pytest.mark.parametrize("face", ["torch", "keras"])
def test_laplacian_encoding_flips_signs_only_in_training(face):
    x, u = _inputs()
    enc = FACES[face].LaplacianEncoding(K, DIM, seed=0)
    kernel, bias = np32(enc.kernel), np32(enc.bias)
    if face == "torch":
        enc.eval()
        out = np32(enc(torch.as_tensor(x), torch.as_tensor(u)))
    else:
        out = np32(enc(x, u))
    np.testing.assert_array_equal(_flip_pattern(out, x, u, kernel, bias), np.ones((BATCH, K)))
    patterns = []
    for _ in range(8):
        if face == "torch":
            enc.train()
            out = np32(enc(torch.as_tensor(x), torch.as_tensor(u)))
        else:
            out = np32(enc(x, u, training=True))
        patterns.append(_flip_pattern(out, x, u, kernel, bias))
    patterns = np.stack(patterns)                                  # (draws, batch, k)
    assert set(np.unique(patterns)) == {-1.0, 1.0}
    assert len({p.tobytes() for p in patterns.reshape(-1, K)}) > 2   # independent per graph


def test_laplacian_encoding_without_sign_flip_is_deterministic():
    x, u = _inputs()
    enc = ts.LaplacianEncoding(K, DIM, sign_flip=False).train()
    torch.testing.assert_close(enc(torch.as_tensor(x), torch.as_tensor(u)),
                               enc.eval()(torch.as_tensor(x), torch.as_tensor(u)))


# --------------------------------------------------------------------------- properties

@st.composite
def connected_graphs(draw):
    """A random weighted graph on n nodes with a path through all of them (so it is connected)."""
    n = draw(st.integers(3, 12))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    w = np.triu(rng.uniform(0.1, 3.0, size=(n, n)) * (rng.uniform(size=(n, n)) < 0.4), 1)
    return w + w.T + path(n)


@settings(max_examples=30, deadline=None)
@given(adjacency=connected_graphs(), normalized=st.booleans(), data=st.data())
def test_laplacian_positions_are_orthonormal_sorted_eigenvectors(adjacency, normalized, data):
    n = adjacency.shape[0]
    k = data.draw(st.integers(1, n - 1))
    vectors, values = sc.laplacian_positions(adjacency, k, normalized=normalized,
                                             return_eigenvalues=True)
    lap = sc.laplacian(adjacency, normalized=normalized)
    assert vectors.shape == (n, k) and values.shape == (k,)
    np.testing.assert_allclose(lap @ vectors, vectors * values, atol=1e-9)
    np.testing.assert_allclose(vectors.T @ vectors, np.eye(k), atol=1e-9)
    assert np.all(np.diff(values) >= -1e-12) and values[0] > 1e-9     # trivial one skipped
    if normalized:
        assert values[-1] <= 2 + 1e-9                                  # spectrum in [0, 2]
        degree_sqrt = np.sqrt(adjacency.sum(axis=1))
        np.testing.assert_allclose(vectors.T @ degree_sqrt, 0, atol=1e-9)   # orthogonal to u_0
