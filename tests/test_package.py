"""Package-level behaviour: import isolation, the device helper, argument checks."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest

import posenc
from posenc import _checks


@pytest.fixture(autouse=True)
def _keep_torch_threads(monkeypatch):
    """pick_device may set PyTorch's thread count: never for the rest of the test session."""
    import torch

    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)


def test_import_posenc_imports_no_framework():
    code = ("import sys, posenc, posenc.sinusoidal, posenc.learned, posenc.regularization, posenc.time, posenc.trees, posenc.modalities, posenc.graphs, posenc.positions, posenc.bias, posenc.shaw, posenc.interop, posenc.notebook, posenc.plotting, posenc.diagnostics; "
            "print(sorted(m for m in ('torch', 'keras', 'tensorflow', 'jax') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_pick_device_chooses_cuda_then_mps_then_cpu(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert posenc.pick_device(verbose=False).type == "mps"
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert posenc.pick_device(verbose=False).type == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert posenc.pick_device(verbose=False).type == "cuda"


def test_pick_device_turns_on_tensorflow_memory_growth(monkeypatch, capsys):
    calls = []
    gpus = [types.SimpleNamespace(name="/physical_device:GPU:0"),
            types.SimpleNamespace(name="/physical_device:GPU:1")]
    experimental = types.SimpleNamespace(set_memory_growth=lambda gpu, on: calls.append((gpu.name, on)))
    config = types.SimpleNamespace(list_physical_devices=lambda kind: gpus if kind == "GPU" else [],
                                   experimental=experimental)
    monkeypatch.setitem(sys.modules, "tensorflow", types.SimpleNamespace(config=config))
    monkeypatch.setenv("KERAS_BACKEND", "tensorflow")
    monkeypatch.delitem(sys.modules, "keras", raising=False)
    device, report = posenc.pick_device(report=True)
    assert calls == [(g.name, True) for g in gpus]
    assert report.tensorflow_gpus == [g.name for g in gpus]
    assert "2 GPU(s), memory growth on" in capsys.readouterr().out


def test_pick_device_tolerates_an_initialised_gpu(monkeypatch):
    def refuse(gpu, on):
        raise RuntimeError("Physical devices cannot be modified after being initialized")

    gpu = types.SimpleNamespace(name="/physical_device:GPU:0")
    config = types.SimpleNamespace(list_physical_devices=lambda kind: [gpu],
                                   experimental=types.SimpleNamespace(set_memory_growth=refuse))
    monkeypatch.setitem(sys.modules, "tensorflow", types.SimpleNamespace(config=config))
    _, report = posenc.pick_device(verbose=False, report=True)
    assert report.tensorflow_gpus == [gpu.name]


@pytest.mark.parametrize("dim, message", [
    (7, "dim must be a multiple of 2 .*got dim=7; use dim=8 or dim=6"),
    (0, "dim must be a positive integer, got dim=0"),
    (-4, "dim must be a positive integer, got dim=-4"),
    (8.0, "dim must be a positive integer, got dim=8.0"),
    (True, "dim must be a positive integer, got dim=True"),
])
def test_check_even_dim_names_argument_value_and_fix(dim, message):
    with pytest.raises(ValueError, match=message):
        _checks.check_even_dim(dim)


def test_check_even_dim_multiple_of_four():
    assert _checks.check_even_dim(12, multiple=4) == 12
    with pytest.raises(ValueError, match=r"multiple of 4 .*got dim=10; use dim=12 or dim=8"):
        _checks.check_even_dim(10, multiple=4, what="sinusoidal_2d")


@pytest.mark.parametrize("base", [1.0, 0.5, -3, float("inf"), float("nan"), "ten"])
def test_check_base_rejects(base):
    with pytest.raises(ValueError, match="base must be"):
        _checks.check_base(base)


def test_check_layout_and_rank():
    assert _checks.check_layout("concat") == "concat"
    with pytest.raises(ValueError, match="layout must be one of 'interleaved', 'concat', got layout='half'"):
        _checks.check_layout("half")
    _checks.check_rank("x", (2, 3, 4), (3, 4))
    with pytest.raises(ValueError, match=r"x must have rank 3 or 4, got shape \(2, 3\) \(rank 2\)"):
        _checks.check_rank("x", (2, 3), (3, 4))


def test_core_frequencies_and_wavelengths():
    import numpy as np

    inv_freq = posenc.sinusoidal_inv_freq(8, base=10000.0)
    assert np.allclose(inv_freq, [1.0, 0.1, 0.01, 0.001])
    lam = posenc.wavelengths(512)
    assert np.isclose(lam[0], 2 * np.pi)
    assert np.isclose(lam[-1], 2 * np.pi * 10000.0 ** (510 / 512))   # just below base * 2 pi
    assert np.all(np.diff(lam) > 0)


def test_glue_falls_back_to_print_without_myst_nb(monkeypatch, capsys):
    from posenc import notebook

    monkeypatch.setitem(sys.modules, "myst_nb", None)   # makes `from myst_nb import glue` fail
    assert notebook.glue("answer", 42) is None
    assert "answer = 42" in capsys.readouterr().out


def test_pick_device_uses_one_torch_thread_next_to_tensorflow_on_the_cpu(monkeypatch):
    import torch

    calls = []
    monkeypatch.setattr(torch, "set_num_threads", calls.append)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    config = types.SimpleNamespace(list_physical_devices=lambda kind: [],
                                   experimental=types.SimpleNamespace())
    monkeypatch.setitem(sys.modules, "tensorflow", types.SimpleNamespace(config=config))
    _, report = posenc.pick_device(verbose=False, report=True)
    assert calls == [1] and report.torch_threads == 1
    assert "PyTorch on cpu (1 thread)" in str(report)
    posenc.pick_device(verbose=False, cpu_threads=3)
    posenc.pick_device(verbose=False, cpu_threads=None)
    assert calls == [1, 3]
    with pytest.raises(ValueError, match="pick_device: cpu_threads must be a positive integer"):
        posenc.pick_device(verbose=False, cpu_threads=0)
    # without TensorFlow in the process, "auto" leaves PyTorch alone
    monkeypatch.delitem(sys.modules, "tensorflow")
    monkeypatch.setenv("KERAS_BACKEND", "torch")
    monkeypatch.setattr("posenc.device._installed", lambda name: name == "torch")
    assert posenc.pick_device(verbose=False, report=True)[1].torch_threads is None
    assert calls == [1, 3]


def test_pick_device_leaves_threads_alone_on_a_gpu(monkeypatch):
    import torch

    calls = []
    monkeypatch.setattr(torch, "set_num_threads", calls.append)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert posenc.pick_device(verbose=False).type == "cuda"
    assert calls == []


def test_glue_run_time_glues_seconds_and_machine(monkeypatch):
    import os
    import time

    import posenc.notebook as notebook

    glued = {}
    monkeypatch.setattr(notebook, "glue", lambda name, value, display=False: glued.update({name: value}))
    monkeypatch.delenv("POSENC_BUILD_JOBS", raising=False)
    notebook.glue_run_time(time.perf_counter() - 2.0)
    assert set(glued) == {"chapter_seconds", "machine"}
    assert 2.0 <= glued["chapter_seconds"] < 60.0
    assert glued["machine"] == f"{os.cpu_count()} CPU cores, no GPU used"
    # executed beside other chapters (scripts/execute_notebooks.py --jobs 2), it says so
    monkeypatch.setenv("POSENC_BUILD_JOBS", "2")
    notebook.glue_run_time(time.perf_counter())
    assert glued["machine"] == (f"{os.cpu_count()} CPU cores, no GPU used, shared with 1 other "
                                "chapter running alongside")


def test_package_docstring_names_every_module_and_only_real_ones():
    """The package docstring's map of the package: every module with a face (a family, or a
    tool laid out like one) and the framework-free tools are named, and every name imports."""
    import importlib
    import pathlib
    import re

    named = set(re.findall(r":mod:`posenc\.(\w+)`", posenc.__doc__))
    root = pathlib.Path(posenc.__file__).parent
    torch_side, keras_side = ({p.stem for p in root.joinpath(face).glob("*.py")
                               if not p.stem.startswith("_") and p.stem != "scratch"}
                              for face in ("torch", "keras"))
    faces = torch_side & keras_side
    assert faces | {"theory", "interop", "plotting", "experiments"} <= named
    # a module of one face only (FlexAttention's route is PyTorch's) is named with its face
    one_face = {f"torch.{s}" for s in torch_side - keras_side} | {
        f"keras.{s}" for s in keras_side - torch_side}
    assert one_face == {"torch.flex"}
    assert one_face <= set(re.findall(r":mod:`posenc\.((?:torch|keras)\.\w+)`", posenc.__doc__))
    for name in one_face:
        importlib.import_module(f"posenc.{name}")
    for name in named:
        importlib.import_module(f"posenc.{name}")


def test_every_public_keras_layer_is_registered_under_its_own_name():
    """A model that holds any layer of the Keras face must load again: each public Layer (and
    Model) class is registered as ``posenc>Name``. A decorator that slips onto a helper above
    the class would leave the class unregistered (loading then fails with "Could not locate")."""
    keras = pytest.importorskip("keras")
    import posenc.keras as face

    classes = [getattr(face, name) for name in face.__all__
               if isinstance(getattr(face, name), type)
               and issubclass(getattr(face, name), keras.layers.Layer)]
    assert len(classes) > 20
    unregistered = [cls.__name__ for cls in classes
                    if keras.saving.get_registered_name(cls) != f"posenc>{cls.__name__}"
                    or keras.saving.get_registered_object(f"posenc>{cls.__name__}") is not cls]
    assert not unregistered, f"not registered under posenc>Name: {unregistered}"


# The README against the repository: what it lists is read from the package, and each face's
# snippet runs with that face's extra alone.

ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _readme_section(start: str, end: str) -> str:
    assert start in README and end in README, f"README.md has lost {start!r} or {end!r}"
    return README.split(start, 1)[1].split(end, 1)[0]


def _readme_python(marker: str) -> str:
    """The README's ```python block that contains ``marker``."""
    import re

    blocks = [b for b in re.findall(r"```python\n(.*?)```", README, re.S) if marker in b]
    assert len(blocks) == 1, f"README.md has {len(blocks)} python blocks with {marker!r}"
    return blocks[0]


def test_readme_lists_the_position_schemes_of_the_registry():
    import re

    from posenc.attention import POSITIONS

    listed = _readme_section("`python -c \"import posenc.attention as a; print(*a.POSITIONS)\"` "
                             "prints:", ".\n")
    assert re.findall(r"`(\w+)`", listed) == list(POSITIONS), (
        "README.md's list of position schemes differs from posenc.attention.POSITIONS: "
        "list every name of the registry, in its order")


def test_readme_names_every_module_of_the_package():
    import re

    section = _readme_section("### What is in the package", "### The lab")
    named = set(re.findall(r"`(\w+)`", section))
    package = ROOT / "posenc"
    modules = {p.stem for p in package.glob("*.py")} | {
        p.stem for face in ("torch", "keras") for p in (package / face).glob("*.py")} | {
        p.name for p in package.iterdir() if (p / "__init__.py").exists()} - {"torch", "keras"}
    missing = sorted(m for m in modules if not m.startswith("_") and m not in named)
    assert not missing, f"README.md's 'What is in the package' does not name {missing}"


def test_readme_lists_every_extra():
    import re
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    rows = re.findall(r"^\| `([\w-]+)` \|", _readme_section("| extra |", "**PyTorch.**"), re.M)
    assert sorted(rows) == sorted(extras), (
        "README.md's table of extras differs from pyproject.toml's")


def test_readme_lists_every_chapter_in_order():
    import re

    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    # the chapters, not the pages listed as their sections
    chapters = [entry["file"] for part in toc["parts"] for entry in part["chapters"]
                if entry["file"].startswith("notebooks/")]
    table = re.findall(r"^\| \d+ \| \[[^]]+\]\((notebooks/\w+)\.md\)", README, re.M)
    assert table == chapters, "README.md's chapter table differs from _toc.yml's chapters"


# Each face with the other framework (and the optional packages) made unimportable: an entry
# of None in sys.modules makes `import name` raise ImportError.
_OPTIONAL = ("matplotlib", "tqdm", "IPython", "myst_nb", "transformers", "keras_hub")


def _run_blocked(code: str, blocked: tuple, backend: str | None = None) -> str:
    import os

    prelude = ("import sys\n"
               f"for name in {blocked!r}:\n"
               "    sys.modules[name] = None\n")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    if backend is not None:
        env["KERAS_BACKEND"] = backend
    out = subprocess.run([sys.executable, "-c", prelude + code], capture_output=True, text=True,
                         env=env, cwd=ROOT)
    assert out.returncode == 0, f"failed with {blocked} unimportable:\n{out.stderr[-3000:]}"
    return out.stdout


_EVERY_MODULE = """
import importlib, pkgutil
import posenc, posenc.{face}
for module in pkgutil.walk_packages(posenc.__path__, "posenc."):
    if not module.name.startswith("posenc.{other}"):
        importlib.import_module(module.name)
"""


def test_the_pytorch_face_and_its_readme_snippet_need_no_keras():
    """`pip install "posenc[torch]"` is enough for the PyTorch face (and posenc's framework-free
    modules) and for the README's PyTorch snippet."""
    code = (_EVERY_MODULE.format(face="torch", other="keras")
            + _readme_python("import posenc.torch")
            + "\nprint(tuple(pe.shape), tuple(logits.shape))")
    out = _run_blocked(code, ("keras", "tensorflow", "jax") + _OPTIONAL)
    assert out.split("\n")[-2] == "(2048, 512) (2, 16, 100)"


@pytest.mark.parametrize("backend, other", [("tensorflow", "jax"), ("jax", "tensorflow")])
def test_the_keras_face_and_its_readme_snippet_need_no_torch(backend, other):
    """`pip install "posenc[tensorflow]"` (or `[jax]`) is enough for the Keras face and for the
    README's Keras snippet, on that backend."""
    import importlib.util

    if importlib.util.find_spec(backend) is None:
        pytest.skip(f"{backend} is not installed")
    snippet = _readme_python("import posenc.keras")
    assert 'os.environ["KERAS_BACKEND"] = "tensorflow"' in snippet
    snippet = snippet.replace('= "tensorflow"', f'= "{backend}"')
    code = (snippet + _EVERY_MODULE.format(face="keras", other="torch")
            + "\nprint(keras.backend.backend(), tuple(pe.shape), tuple(logits.shape))")
    out = _run_blocked(code, ("torch", other) + _OPTIONAL, backend=backend)
    assert out.split("\n")[-2] == f"{backend} (2048, 512) (2, 16, 100)"
