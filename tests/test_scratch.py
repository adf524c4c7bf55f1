"""The teaching versions in posenc.torch.scratch and posenc.keras.scratch equal the package."""

from __future__ import annotations


# Chapter 3

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import posenc.keras as pk  # noqa: E402
import posenc.torch as pt  # noqa: E402
from posenc.keras import scratch as sk  # noqa: E402
from posenc.torch import scratch as st  # noqa: E402


def test_learned_scratch_equals_package():
    torch.manual_seed(0)
    enc = pt.LearnedEncoding(12, 8)
    x = torch.randn(3, 7, 8)
    table = enc.table.detach()
    assert torch.equal(st.learned(x, table), enc(x).detach())
    enc_k = pk.LearnedEncoding(12, 8)
    enc_k.table.assign(table.numpy())
    out_k = keras.ops.convert_to_numpy(sk.learned(x.numpy(), enc_k.table))
    np.testing.assert_allclose(out_k, keras.ops.convert_to_numpy(enc_k(x.numpy())), atol=1e-7)
    np.testing.assert_allclose(out_k, st.learned(x, table).numpy(), atol=1e-7)


@pytest.mark.parametrize("old,new", [(8, 16), (8, 13), (16, 5), (7, 7), (1, 4), (5, 1)])
def test_resize_linear_scratch_equals_package(old, new):
    table = np.random.default_rng(old * 100 + new).normal(size=(old, 6)).astype("float32")
    want = pt.resize_table(torch.from_numpy(table), new).numpy()
    np.testing.assert_allclose(st.resize_linear(torch.from_numpy(table), new).numpy(), want,
                               atol=1e-5)
    got_k = keras.ops.convert_to_numpy(sk.resize_linear(keras.ops.convert_to_tensor(table), new))
    np.testing.assert_allclose(got_k, want, atol=1e-5)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(pk.resize_table(keras.ops.convert_to_tensor(table), new)),
        want, atol=1e-6)
