"""Shared test set-up.

A test is marked ``keras`` when it uses the Keras face; ``make test`` runs those tests again
under ``KERAS_BACKEND=jax`` and ``KERAS_BACKEND=torch``. The rule (``uses_keras`` below):

- a ``keras`` mark written on the test, its class or its module (``pytestmark``) stands;
- a parametrized test whose parameters name a face decides by them: a parameter equal to
  ``"keras"`` (or a Keras module) marks it, a ``"torch"`` parameter without a Keras one
  leaves it unmarked;
- a parameter that is a function (a lambda of an error table) marks it when it refers to Keras;
- otherwise the test's code decides: it is marked when it, a fixture it requests, or a helper
  function of the tests it calls (followed transitively) refers to ``keras`` or to a module of
  the Keras face (``posenc.keras`` under any alias, or a dict or list holding one, like
  ``FACES``), or holds the string ``"keras"`` (``framework="keras"``).

So a PyTorch-only test of a module that imports Keras is not run again by the backend passes.
A Keras test that cannot run on JAX carries ``@pytest.mark.no_jax("reason")``: skipped there,
with the reason in the report.
"""

import inspect
import os
import types
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402

TESTS = Path(__file__).resolve().parent


def pytest_report_header(config):
    try:
        import keras

        return f"keras backend: {keras.backend.backend()}"
    except ImportError:  # pragma: no cover
        return "keras: not installed"


def _is_keras_module(value) -> bool:
    return isinstance(value, types.ModuleType) and (
        value.__name__ == "keras" or value.__name__.startswith(("keras.", "posenc.keras")))


def _names_keras(value) -> bool:
    """The face's name or a Keras module name ("keras", "posenc.keras.bias"), or the module."""
    if isinstance(value, str):
        return value == "keras" or value.startswith(("keras.", "posenc.keras"))
    return _is_keras_module(value)


def _holds_keras(value) -> bool:
    if _is_keras_module(value):
        return True
    if isinstance(value, dict):
        value = [*value.keys(), *value.values()]
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(_names_keras(v) for v in value)
    return False


def _codes(code):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _is_test_helper(value) -> bool:
    """A function or class defined in a file of tests/ (followed when a test calls it)."""
    value = inspect.unwrap(value) if callable(value) else value
    try:
        source = inspect.getsourcefile(value)
    except TypeError:
        return False
    return source is not None and Path(source).resolve().parent == TESTS


def _refers_to_keras(function, seen: set) -> bool:
    inner = getattr(getattr(function, "hypothesis", None), "inner_test", None)
    function = inspect.unwrap(inner if inner is not None else function)
    if isinstance(function, type):  # a helper class: its methods
        return any(_refers_to_keras(f, seen) for f in vars(function).values()
                   if inspect.isfunction(f))
    code = getattr(function, "__code__", None)
    if code is None or code in seen:
        return False
    seen.add(code)
    namespace = getattr(function, "__globals__", {})
    for c in _codes(code):
        if any(isinstance(const, str) and _names_keras(const) for const in c.co_consts):
            return True  # `framework="keras"`, `face == "keras"`, `import_module("posenc.keras")`
        for name in c.co_names:
            if name == "keras":  # `import keras`, `keras.ops`, `posenc.keras`, `pk.keras_...`
                return True
            value = namespace.get(name)
            if _holds_keras(value):
                return True
            if (inspect.isfunction(value) or isinstance(value, type)) and _is_test_helper(value):
                if _refers_to_keras(value, seen):
                    return True
    return False


def uses_keras(item) -> bool:
    if item.get_closest_marker("keras") is not None:
        return True
    callspec = getattr(item, "callspec", None)
    if callspec is not None:
        values = list(callspec.params.values())
        if any(_names_keras(v) for v in values):
            return True
        if any(callable(v) and not isinstance(v, type) and _refers_to_keras(v, set())
               for v in values):
            return True  # a parameter that is a function calling the Keras face
        if any(v == "torch" or (isinstance(v, types.ModuleType)
                                and v.__name__.startswith("posenc.torch")) for v in values):
            return False
    function = getattr(item, "function", None)
    if function is None:
        return False
    seen: set = set()
    if _refers_to_keras(function, seen):
        return True
    definitions = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    for name in item.fixturenames:
        for definition in definitions.get(name, ()):
            func = getattr(definition, "func", None)
            if func is not None and _is_test_helper(func) and _refers_to_keras(func, seen):
                return True
    return False


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
