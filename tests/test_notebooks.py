"""The book's wiring: paired notebooks, the Colab cell, the table of contents, the config."""

from __future__ import annotations

import json
from pathlib import Path

import jupytext
import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "notebooks").glob("*.md"))
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
TOC = yaml.safe_load((ROOT / "_toc.yml").read_text())


def _toc_files(node) -> list[str]:
    files = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("file", "root"):
                files.append(value)
            else:
                files.extend(_toc_files(value))
    elif isinstance(node, list):
        for item in node:
            files.extend(_toc_files(item))
    return files


def _cells(nb):
    """Cell type, source and tags: what must agree between the .md and the .ipynb."""
    return [(c.cell_type, c.source.strip(), tuple(c.metadata.get("tags", [])),
             json.dumps(c.metadata.get("mystnb", {}), sort_keys=True)) for c in nb.cells]


def test_the_chapters_are_the_tocs_notebooks_in_order():
    # the tests below are parametrized by SOURCES: an empty or partial glob would skip them
    chapters = [f for f in _toc_files(TOC) if f.startswith("notebooks/")]
    assert [f"notebooks/{md.stem}" for md in SOURCES] == chapters


@pytest.mark.parametrize("md", SOURCES, ids=lambda p: p.name)
def test_pair_exists_and_is_in_sync(md):
    ipynb = md.with_suffix(".ipynb")
    assert ipynb.exists(), f"{md.name} has no paired {ipynb.name}: run `make ipynb`"
    from_md = jupytext.read(md)
    from_ipynb = nbformat.read(ipynb, as_version=4)
    assert _cells(from_md) == _cells(from_ipynb), (
        f"{ipynb.name} is out of sync with {md.name}: run `make ipynb`")


@pytest.mark.parametrize("md", [*SOURCES, *sorted((ROOT / "book").glob("*.md"))],
                         ids=lambda p: p.name)
def test_sources_hold_no_control_characters(md):
    """A tab or other control character in a page (``\\t`` typed as a tab inside
    ``\\text{...}``, say) renders as a broken formula or stray space."""
    for number, line in enumerate(md.read_text().splitlines(), 1):
        bad = [hex(ord(c)) for c in line if ord(c) < 32 or ord(c) == 127]
        assert not bad, f"{md.name}:{number} holds the control characters {bad}: {line.strip()[:60]}"


@pytest.mark.parametrize("md", SOURCES, ids=lambda p: p.name)
def test_ipynb_has_no_outputs(md):
    nb = nbformat.read(md.with_suffix(".ipynb"), as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.outputs, f"{md.stem}.ipynb carries outputs: run `make ipynb`"
            assert cell.execution_count is None


@pytest.mark.parametrize("md", SOURCES, ids=lambda p: p.name)
def test_glue_sits_in_hidden_cells(md):
    """A reader sees the lesson's code; the lines that hand numbers to the prose are hidden."""
    hidden = {"remove-input", "remove-cell"}
    for cell in jupytext.read(md).cells:
        if cell.cell_type != "code" or hidden & set(cell.metadata.get("tags", [])):
            continue
        calls = [line for line in cell.source.splitlines() if "glue(" in line]
        assert not calls, (f"{md.name}: a visible cell calls {calls[0].strip()!r}: move it into "
                           "a cell tagged remove-input after the values it glues exist")


def _defined(path: Path, name: str) -> bool:
    """Whether ``name`` (``func`` or ``Class.method``) is defined at the top of ``path``."""
    import ast

    body = ast.parse(path.read_text()).body
    for part in name.split("."):
        found = [n for n in body if isinstance(n, (ast.FunctionDef, ast.ClassDef))
                 and n.name == part]
        if not found:
            return False
        body = found[0].body
    return True


@pytest.mark.parametrize("md", SOURCES, ids=lambda p: p.name)
def test_listings_name_code_that_exists(md):
    """Each ``literalinclude`` with a ``:pyobject:`` shows a function the package still has."""
    lines = md.read_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("```{literalinclude}"):
            path = (md.parent / line.split("}", 1)[1].strip()).resolve()
            assert path.exists(), f"{md.name}:{i + 1}: {path.name} does not exist"
            options = [o for o in lines[i + 1:i + 6] if o.startswith(":pyobject:")]
            for option in options:
                name = option.split(":", 2)[2].strip()
                assert _defined(path, name), (
                    f"{md.name}:{i + 1}: {name} is not defined in {path.name}: update the "
                    "listing's :pyobject: to the name the code has now")


@pytest.mark.parametrize("md", SOURCES, ids=lambda p: p.name)
def test_first_cell_installs_posenc_only_on_colab(md):
    nb = jupytext.read(md)
    first = next(c for c in nb.cells if c.cell_type == "code")
    repo = CONFIG["repository"]["url"]
    assert 'if "google.colab" in sys.modules:' in first.source
    assert f"git+{repo}@{CONFIG['repository']['branch']}" in first.source
    # elsewhere the cell must do nothing: executing it outside Colab installs nothing
    namespace: dict = {}
    exec(compile(first.source, md.name, "exec"), namespace)
    assert "subprocess" not in namespace


# What a chapter's Colab cell installs: posenc[all] and, beyond it, the distributions of every
# third-party package the chapter imports, spelled as in pyproject.toml's `book` extra; nothing
# more. IPython comes with the kernel.
PYPROJECT = __import__("tomllib").loads((ROOT / "pyproject.toml").read_text())["project"]
KERNEL_MODULES = {"IPython"}


def _posenc_distributions(extras) -> set[str]:
    """The distributions `pip install "posenc[extras]"` asks for (extras expanded)."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    found = {canonicalize_name(Requirement(r).name) for r in PYPROJECT["dependencies"]}
    for extra in extras:
        for spec in PYPROJECT["optional-dependencies"][extra]:
            req = Requirement(spec)
            found |= (_posenc_distributions(req.extras) if req.name == "posenc"
                      else {canonicalize_name(req.name)})
    return found


def _installed_by(cell_source: str) -> tuple[set[str], list[str]]:
    """The distributions a Colab cell installs, and its requirements other than posenc."""
    import ast

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    strings = [n.value for n in ast.walk(ast.parse(cell_source))
               if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    assert "install" in strings, "the Colab cell runs no `pip install`"
    specs = [s for s in strings[strings.index("install") + 1:] if not s.startswith("-")]
    found, others = set(), []
    for spec in specs:
        req = Requirement(spec)
        if req.name == "posenc":
            found |= _posenc_distributions(req.extras)
        else:
            found.add(canonicalize_name(req.name))
            others.append(spec)
    return found, others


def _imported_distributions(nb) -> dict[str, set[str]]:
    """Each third-party top-level module a chapter's code imports -> its distributions."""
    import ast
    import importlib.metadata
    import sys

    from packaging.utils import canonicalize_name

    owners = importlib.metadata.packages_distributions()
    modules = set()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        code = "\n".join(line for line in cell.source.splitlines()
                         if not line.lstrip().startswith(("%", "!")))
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.Import):
                modules |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                modules.add(node.module.split(".")[0])
    modules -= set(sys.stdlib_module_names) | KERNEL_MODULES | {"posenc"}
    unknown = sorted(m for m in modules if m not in owners)
    assert not unknown, f"no installed distribution provides {unknown}"
    return {m: {canonicalize_name(d) for d in owners[m]} for m in modules}


@pytest.mark.parametrize("md", SOURCES, ids=lambda p: p.name)
def test_first_cell_installs_what_the_chapter_imports(md):
    nb = jupytext.read(md)
    first = next(c for c in nb.cells if c.cell_type == "code")
    installed, others = _installed_by(first.source)
    imported = _imported_distributions(nb)
    missing = {m: sorted(d) for m, d in imported.items() if not d & installed}
    assert not missing, f"{md.name} imports {missing}, which its Colab cell does not install"
    beyond_all = installed - _posenc_distributions(["all"])
    unused = beyond_all - set().union(*imported.values())
    assert not unused, f"{md.name}'s Colab cell installs {sorted(unused)}, which it never imports"
    book = PYPROJECT["optional-dependencies"]["book"]
    assert set(others) <= set(book), (
        f"{md.name}'s Colab cell names {others}: write each as in pyproject.toml's book "
        f"extra {book}")


@pytest.mark.parametrize("md", SOURCES, ids=lambda p: p.name)
def test_chapter_is_in_the_toc(md):
    assert f"notebooks/{md.stem}" in _toc_files(TOC), f"add notebooks/{md.stem} to _toc.yml"


def test_every_toc_entry_exists():
    for entry in _toc_files(TOC):
        matches = [p for p in (ROOT / f"{entry}.md", ROOT / f"{entry}.ipynb") if p.exists()]
        assert matches, f"_toc.yml lists {entry}, which does not exist"


def test_config_builds_from_md_and_links_colab_to_ipynb():
    assert "**.ipynb" in CONFIG["exclude_patterns"]
    assert CONFIG["launch_buttons"]["colab_url"] == "https://colab.research.google.com"
    assert CONFIG["repository"]["url"].startswith("https://github.com/")
    # executed once, then cached in the (ignored) build folder; CI builds from a clean _build
    assert CONFIG["execute"]["execute_notebooks"] == "cache"
    assert CONFIG["execute"]["cache"].startswith("_build/")


def _make_recipe(target: str) -> list[str]:
    lines = (ROOT / "Makefile").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{target}:"))
    recipe = []
    for line in lines[start + 1:]:
        if not line.startswith("\t"):
            break
        recipe.append(line.strip())
    return recipe


def test_make_test_executes_every_notebook_once_from_scratch_with_errors_fatal():
    # `make test` (the README's command, which CI runs) builds the book from a clean _build,
    # so no cached output stands in for an execution, and a cell that raises fails it: the
    # execution is not allowed to err, and -W turns the failed execution's warning into a failure
    assert CONFIG["execute"]["allow_errors"] is False
    assert CONFIG["execute"]["show_tb"] is True     # the failing cell's traceback in the log
    assert _make_recipe("test") == [] and "test-notebooks" in (
        (ROOT / "Makefile").read_text().split("\ntest:", 1)[1].splitlines()[0])
    recipe = _make_recipe("test-notebooks")
    assert recipe[0] == "rm -rf _build"
    # the chapters run ahead, two at a time, into the clean cache; then the build reads them
    assert "scripts/execute_notebooks.py" in recipe[1] and "jupyter-book build . -W" in recipe[2]
    # CI runs `make test` and checks the site it built, without a second execution
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test\n" in ci and "make test-site" in ci
    assert "make book" not in ci and "nbval" not in ci


def test_requirements_are_pinned():
    lines = [line.split("#")[0].strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    reqs = [line for line in lines if line]
    assert reqs and all("==" in r for r in reqs), [r for r in reqs if "==" not in r]
    names = {r.split("==")[0].lower() for r in reqs}
    assert {"jupyter-book", "jupytext", "nbval", "torch", "tensorflow", "keras", "matplotlib",
            "pytest", "hypothesis"} <= names
    assert any(r.startswith("jupyter-book==1.") for r in reqs)


def _bib_keys() -> set[str]:
    import re

    text = (ROOT / "book" / "references.bib").read_text()
    return set(re.findall(r"^@\w+\{([^,\s]+),", text, flags=re.M))


def test_the_bibliography_parses():
    # the book build reads it with pybtex (sphinxcontrib-bibtex): an entry without its closing
    # brace swallows the next one and stops the build
    bibtex = pytest.importorskip("pybtex.database")
    data = bibtex.parse_file(str(ROOT / "book" / "references.bib"), bib_format="bibtex")
    assert set(data.entries) == _bib_keys()


def test_every_bibliography_entry_formats():
    # sphinxcontrib-bibtex formats each cited entry with pybtex's style (alpha by default); an
    # entry missing a field the style requires (an article without its year) stops the build
    # only when a page cites it, so every entry is formatted here
    pytest.importorskip("pybtex.database")
    from pybtex.database import parse_file
    from pybtex.plugin import find_plugin

    data = parse_file(str(ROOT / "book" / "references.bib"), bib_format="bibtex")
    failed = {}
    for name in ("alpha", "plain"):
        style = find_plugin("pybtex.style.formatting", name)()
        for key, entry in data.entries.items():
            try:
                list(style.format_entries([entry]))
            except Exception as error:  # noqa: BLE001 - the message names the missing field
                failed[key] = repr(error)
    assert not failed, failed
    missing_year = [k for k, e in data.entries.items() if "year" not in e.fields]
    assert not missing_year, missing_year


def _cited_keys() -> set[str]:
    import re

    keys: set[str] = set()
    for path in [*SOURCES, *sorted((ROOT / "book").glob("*.md"))]:
        for group in re.findall(r"\{(?:foot)?cite(?::\w+)?\}`([^`]+)`", path.read_text()):
            keys.update(k.strip() for k in group.split(","))
    return keys


def test_the_bibliography_lists_only_cited_works():
    # book/references.md lists every entry of the .bib file (":all:") and says they are the
    # works the chapters and the preface cite: that is true only while each one is cited.
    uncited = _bib_keys() - _cited_keys()
    assert not uncited, f"cite these works somewhere or remove them from references.bib: {uncited}"
    missing = _cited_keys() - _bib_keys()
    assert not missing, f"cited but not in references.bib: {missing}"


def test_chapters_executed_ahead_are_found_by_the_build(tmp_path):
    # scripts/execute_notebooks.py runs the chapters two at a time before `jupyter-book build`;
    # the build uses a stored run only when the notebook MyST-NB reads hashes to the same key,
    # so the script must read a chapter exactly as MyST-NB's Sphinx parser does
    pytest.importorskip("myst_nb")
    import sys

    from jupyter_cache import get_cache
    from myst_nb.core.config import NbParserConfig
    from myst_nb.core.read import create_nb_reader
    from myst_parser.config.main import MdParserConfig

    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import execute_notebooks
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    assert execute_notebooks.chapters() == [ROOT / f"{name}.md" for name in _toc_files(TOC)
                                            if name.startswith("notebooks/")]
    source = SOURCES[0].read_text(encoding="utf-8")
    header = source.split("\n---\n", 1)[0] + "\n---\n"
    md = tmp_path / "chapter.md"
    md.write_text(header + "\n# A chapter\n\n$x$ and a fence:\n\n```{code-cell} ipython3\n"
                  ":tags: [remove-input]\n\nimport os\nprint(os.environ['POSENC_BUILD_JOBS'])\n```\n"
                  "\n:::{note}\nA colon fence.\n:::\n", encoding="utf-8")
    cache_dir = tmp_path / "cache"
    assert not execute_notebooks.cached(md, cache_dir)
    path, seconds, error = execute_notebooks.execute(str(md), 2, str(cache_dir))
    assert error is None and seconds > 0
    assert execute_notebooks.cached(md, cache_dir)
    # what the build's parser reads (the book's MyST extensions) matches the stored run
    md_config = MdParserConfig(enable_extensions=set(CONFIG["parse"]["myst_enable_extensions"]))
    text = md.read_text(encoding="utf-8")
    notebook = create_nb_reader(str(md), md_config, NbParserConfig(), text).read(text)
    cache = get_cache(str(cache_dir))
    _, merged = cache.merge_match_into_notebook(notebook)
    outputs = [o for c in merged.cells if c.cell_type == "code" for o in c.outputs]
    assert outputs[0]["text"].strip() == "2"
    # a cell that raises is reported and not stored, so that the build runs it and fails
    md.write_text(text.replace("print(", "raise RuntimeError("), encoding="utf-8")
    assert execute_notebooks.execute(str(md), 1, str(cache_dir))[2] is not None
    assert not execute_notebooks.cached(md, cache_dir)
