"""Execute the book's chapters into the build's execution cache, several at a time.

``jupyter-book build`` executes the chapters one after the other. This script runs them
first, ``--jobs`` at a time, each in its own kernel, exactly as MyST-NB would (the same
reader, the notebook's own folder as the working directory, the timeout of ``_config.yml``,
errors fatal), and stores each executed notebook in the cache that the build reads
(``execute.cache`` in ``_config.yml``). The build then finds every chapter there and
executes nothing again. A chapter this script could not run is left out of the cache (a
later build runs it again and reports it), and the script exits 1 once every chapter has
run, printing each failure's traceback, so ``make test`` stops before the build.

    python scripts/execute_notebooks.py --jobs 2          # every chapter of _toc.yml
    python scripts/execute_notebooks.py notebooks/07_rope.md

Chapters named with ``--alone`` (those that time things live) run after the others, one
at a time, so that nothing shares the machine with them. Each kernel sees
``POSENC_BUILD_JOBS``, so a chapter reports that its run time was measured beside another
chapter's.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def chapters() -> list[Path]:
    """The notebooks the table of contents names, in its order."""
    def files(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("root", "file"):
                    yield value
                else:
                    yield from files(value)
        elif isinstance(node, list):
            for item in node:
                yield from files(item)

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    return [ROOT / f"{name}.md" for name in files(toc)
            if name.startswith("notebooks/") and (ROOT / f"{name}.md").exists()]


def _config() -> dict:
    return yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))


def read_notebook(path: Path):
    """The notebook as MyST-NB's Sphinx parser reads it (so that the cache's hash matches)."""
    from myst_nb.core.read import read_myst_markdown_notebook
    from myst_parser.config.main import MdParserConfig

    extensions = _config().get("parse", {}).get("myst_enable_extensions", [])
    md_config = MdParserConfig(enable_extensions=set(extensions))
    return read_myst_markdown_notebook(path.read_text(encoding="utf-8"), config=md_config,
                                       add_source_map=True, path=str(path))


def cached(path: Path, cache_dir: Path | None = None) -> bool:
    """Whether the cache already holds this chapter's code, executed."""
    from jupyter_cache import get_cache

    cache = get_cache(str(cache_dir or ROOT / _config()["execute"]["cache"]))
    try:
        cache.match_cache_notebook(read_notebook(path))
    except KeyError:
        return False
    return True


def run_chapter(path: Path):
    """Execute one chapter as MyST-NB would (its reader, its folder as the working directory,
    ``_config.yml``'s timeout, errors fatal): ``(notebook, result)``, the executed notebook
    and jupyter-cache's execution result (``time``, ``err``, ``exc_string``)."""
    from jupyter_cache.executors.utils import single_nb_execution

    config = _config()["execute"]
    notebook = read_notebook(path)
    result = single_nb_execution(notebook, cwd=str(path.parent),
                                 allow_errors=config.get("allow_errors", False),
                                 timeout=config.get("timeout", 600), meta_override=True)
    return notebook, result


def execute(path: str, jobs: int, cache_dir: str | None = None) -> tuple[str, float, str | None]:
    """Run one chapter and cache it; returns (path, seconds, traceback or None)."""
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    os.environ["POSENC_BUILD_JOBS"] = str(jobs)
    config = _config()["execute"]
    nb_path = Path(path)
    cache = get_cache(str(cache_dir or ROOT / config["cache"]))
    notebook, result = run_chapter(nb_path)
    if result.err is not None:
        return path, result.time, result.exc_string
    cache.cache_notebook_bundle(CacheBundleIn(notebook, str(nb_path),
                                              data={"execution_seconds": result.time}),
                                check_validity=False, overwrite=True)
    return path, result.time, None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="chapters to run (default: every chapter of _toc.yml)")
    parser.add_argument("--jobs", type=int, default=2, help="chapters executed at a time")
    parser.add_argument("--alone", nargs="*", default=["notebooks/14_performance.md"],
                        help="chapters run afterwards, one at a time (they time things)")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    todo = [p.resolve() for p in args.notebooks] or chapters()
    todo = [p for p in todo if not cached(p)]     # `make book` re-runs only what changed
    alone = {(ROOT / a).resolve() for a in args.alone}
    shared = [p for p in todo if p not in alone]
    last = [p for p in todo if p in alone]
    start = time.perf_counter()
    failed = []

    def report(result):
        path, seconds, error = result
        name = Path(path).relative_to(ROOT)
        print(f"{name}: {'FAILED' if error else 'executed'} in {seconds:.1f} s", flush=True)
        if error:
            failed.append((name, error))

    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(execute, str(p), args.jobs) for p in shared]
        for future in as_completed(futures):
            report(future.result())
    for path in last:
        report(execute(str(path), 1))
    print(f"{len(todo)} chapters in {time.perf_counter() - start:.0f} s, {args.jobs} at a time "
          f"({len(last)} alone)", flush=True)
    for name, error in failed:
        print(f"\n=== {name} failed:\n{error}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
