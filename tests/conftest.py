"""Shared test set-up.

Tests of the Keras face are marked ``keras`` automatically (any test module that
imports ``keras``); ``make test`` runs them again under ``KERAS_BACKEND=torch``.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402


def pytest_report_header(config):
    try:
        import keras

        return f"keras backend: {keras.backend.backend()}"
    except ImportError:  # pragma: no cover
        return "keras: not installed"


def pytest_collection_modifyitems(config, items):
    for item in items:
        module = getattr(item, "module", None)
        if module is not None and "keras" in vars(module):
            item.add_marker(pytest.mark.keras)


@pytest.fixture
def mixed_bfloat16():
    """Run a test under Keras's "mixed_bfloat16" policy, restoring "float32" after."""
    import keras

    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy("float32")
