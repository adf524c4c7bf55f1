"""Shared test set-up.

A test is marked ``keras`` when it uses the Keras face; ``make test`` runs those tests again
under ``KERAS_BACKEND=jax`` and ``KERAS_BACKEND=torch``. The mark is explicit, never guessed:

- a ``keras`` mark written on the test, its class, its module (``pytestmark``) or one of its
  parameters (``pytest.param("keras", marks=pytest.mark.keras)``);
- a test parametrized over the faces: a parameter equal to ``"keras"`` or a module of the
  Keras face (``FACES = {"torch": pt, "keras": pk}``) marks that case, not its PyTorch twin;
- a test that requests a fixture of ``KERAS_FIXTURES`` (which set Keras's global state).

A test whose result cannot depend on the Keras backend (signatures, docstring examples)
carries ``backend_free`` as well: the backend passes (``-m "keras and not backend_free"``)
skip it, so it runs once. A Keras test that cannot run on JAX carries
``@pytest.mark.no_jax("reason")``: skipped there, with the reason in the report.
``tests/test_markers.py`` checks the rule.
"""

import os
import types
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402

# Fixtures that only a Keras test requests.
KERAS_FIXTURES = {"mixed_bfloat16"}


def pytest_configure(config):
    """On Keras's JAX backend, JAX's persistent compilation cache: eager Keras ops compile one
    small XLA program per operation and shape, and the pytest-xdist workers (and later runs)
    share what one of them compiled instead of compiling it again. ``POSENC_JAX_CACHE`` names
    the folder (default ``.pytest_cache/jax``); an empty value turns the cache off."""
    if os.environ.get("KERAS_BACKEND") != "jax":
        return
    folder = os.environ.get("POSENC_JAX_CACHE",
                            str(Path(config.rootpath) / ".pytest_cache" / "jax"))
    if not folder:
        return
    import jax

    jax.config.update("jax_compilation_cache_dir", folder)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def pytest_report_header(config):
    try:
        import keras

        return f"keras backend: {keras.backend.backend()}"
    except ImportError:  # pragma: no cover
        return "keras: not installed"


def names_keras(value) -> bool:
    """The Keras face named by a parameter: ``"keras"``, or a module of the face."""
    if isinstance(value, str):
        return value == "keras"
    return isinstance(value, types.ModuleType) and (
        value.__name__ == "keras" or value.__name__.startswith(("keras.", "posenc.keras")))


def uses_keras(item) -> bool:
    if item.get_closest_marker("keras") is not None:
        return True
    callspec = getattr(item, "callspec", None)
    if callspec is not None and any(names_keras(v) for v in callspec.params.values()):
        return True
    return bool(KERAS_FIXTURES & set(getattr(item, "fixturenames", ())))


def pytest_collection_modifyitems(config, items):
    backend = os.environ.get("KERAS_BACKEND", "tensorflow")
    for item in items:
        if uses_keras(item):
            item.add_marker(pytest.mark.keras)
            no_jax = item.get_closest_marker("no_jax")
            if no_jax is not None and backend == "jax":
                item.add_marker(pytest.mark.skip(reason=f"not on Keras's JAX backend: "
                                                        f"{no_jax.args[0]}"))


@pytest.fixture
def mixed_bfloat16():
    """Run a test under Keras's "mixed_bfloat16" policy, restoring "float32" after."""
    import keras

    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy("float32")
