"""Write each notebooks/NN_name.ipynb from its MyST-markdown source, without outputs.

The .md is the source of truth. Cell ids of an existing .ipynb are kept, so a
change to one cell changes one cell of the .ipynb; outputs and execution counts
are dropped (Colab and nbval read the .ipynb; the book is built from the .md).

    python scripts/sync_notebooks.py            # every chapter
    python scripts/sync_notebooks.py notebooks/02_sinusoidal.md
"""

from __future__ import annotations

import sys
from pathlib import Path

import jupytext
import nbformat


def sync(md: Path) -> Path:
    ipynb = md.with_suffix(".ipynb")
    nb = jupytext.read(md)
    if ipynb.exists():
        old = nbformat.read(ipynb, as_version=4)
        # keep the ids of cells whose position and type are unchanged
        for new_cell, old_cell in zip(nb.cells, old.cells):
            if new_cell.cell_type == old_cell.cell_type and "id" in old_cell:
                new_cell["id"] = old_cell["id"]
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    jupytext.write(nb, ipynb, fmt="ipynb")
    return ipynb


def main(argv: list[str]) -> int:
    root = Path(__file__).resolve().parents[1]
    sources = [Path(a) for a in argv] or sorted((root / "notebooks").glob("*.md"))
    for md in sources:
        print(f"{md} -> {sync(md)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
