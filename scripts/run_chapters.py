"""Execute chapters without touching the book's execution cache.

Each chapter is read as MyST-NB reads it and run in its own kernel, from its own folder as
the working directory, with the timeout of ``_config.yml``, as ``scripts/execute_notebooks.py``
runs it, but nothing is stored in ``_build/.jupyter_cache``: the executed copies go to a
temporary folder (``--output-dir`` to keep them elsewhere). The chapters run one after the
other and the script stops at the first that fails, printing its traceback (exit status 1).
``make test-newest`` uses it to run the chapters that import transformers against the newest
release, in a second environment.

    python scripts/run_chapters.py notebooks/08_context_extension.md notebooks/18_batches_caches.md
    python scripts/run_chapters.py --importing transformers     # every chapter whose code imports it
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from execute_notebooks import ROOT, chapters, read_notebook, run_chapter


def importing(module: str) -> list[Path]:
    """The chapters of _toc.yml with a code cell that imports ``module`` (or a submodule)."""
    pattern = re.compile(rf"^\s*(import|from)\s+{re.escape(module)}(\s|\.|$)", re.MULTILINE)
    return [path for path in chapters()
            if any(cell.cell_type == "code" and pattern.search(cell.source)
                   for cell in read_notebook(path).cells)]


def run(path: Path, output_dir: Path) -> tuple[float, str | None]:
    """Execute one chapter; writes the executed copy to ``output_dir``; (seconds, traceback)."""
    notebook, result = run_chapter(path)
    nbformat.write(notebook, output_dir / f"{path.stem}.ipynb")
    return result.time, result.exc_string if result.err is not None else None


def version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="chapters to run")
    parser.add_argument("--importing", metavar="MODULE",
                        help="also run every chapter whose code imports MODULE")
    parser.add_argument("--output-dir", type=Path,
                        help="where the executed copies go (default: a new temporary folder)")
    args = parser.parse_args(argv)
    todo = [p.resolve() for p in args.notebooks]
    if args.importing:
        todo += [p for p in importing(args.importing) if p not in todo]
    if not todo and args.importing:
        parser.error(f"no chapter of _toc.yml imports {args.importing!r} in its code: "
                     "name the chapters to run instead")
    if not todo:
        parser.error("no chapters to run: name them, or give --importing MODULE "
                     "(e.g. --importing transformers)")
    missing = [str(p) for p in todo if not p.is_file()]
    if missing:
        parser.error(f"no such chapter: {', '.join(missing)}")
    output_dir = args.output_dir or Path(tempfile.mkdtemp(prefix="posenc-chapters-"))
    output_dir.mkdir(parents=True, exist_ok=True)
    print(f"transformers {version('transformers')}, keras-hub {version('keras-hub')}, "
          f"torch {version('torch')}; executed copies in {output_dir}", flush=True)
    start = time.perf_counter()
    for path in todo:
        name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        seconds, error = run(path, output_dir)
        print(f"{name}: {'FAILED' if error else 'executed'} in {seconds:.1f} s", flush=True)
        if error:
            print(f"\n=== {name} failed:\n{error}", file=sys.stderr)
            return 1
    print(f"{len(todo)} chapters in {time.perf_counter() - start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
