"""Reading the lab's results: means and spreads over seeds, tables, rankings (framework-free).

The chapters plot and tabulate the rows that :func:`posenc.experiments.load_results` returns;
the few summaries they need live here, so that a number in a chapter is computed one way.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

__all__ = ["over_seeds", "markdown_table", "lm_ratio", "ranking", "meta_summary"]


def over_seeds(rows, keys, value) -> dict:
    """Mean, minimum and maximum of ``value`` over the seeds, per combination of ``keys``.

    Args:
        rows: the result rows (dicts).
        keys: tuple of column names to group by (e.g. ``("scheme", "eval_len")``).
        value: the column to summarise (e.g. ``"perplexity"``).

    Returns:
        ``{key tuple: {"mean": ..., "min": ..., "max": ..., "n": number of seeds}}`` (a
        one-column key is a plain value, not a tuple).

    Example:
        >>> rows = [{"s": "a", "v": 1.0}, {"s": "a", "v": 3.0}]
        >>> over_seeds(rows, ("s",), "v")["a"]["mean"]
        2.0
    """
    groups = defaultdict(list)
    for row in rows:
        key = tuple(row[k] for k in keys)
        groups[key[0] if len(keys) == 1 else key].append(float(row[value]))
    return {k: {"mean": float(np.mean(v)), "min": float(np.min(v)), "max": float(np.max(v)),
                "n": len(v)} for k, v in groups.items()}


def markdown_table(header, body, *, digits: int = 2) -> str:
    """A Markdown table: ``header`` (list of column titles) and ``body`` (list of rows);
    floats are written with ``digits`` decimals."""
    def cell(v):
        return f"{v:.{digits}f}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(map(str, header)) + " |",
             "|" + "|".join([":--"] + ["--:"] * (len(header) - 1)) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in body]
    return "\n".join(lines)


def lm_ratio(rows, scheme: str, long_len: int, short_len: int) -> float:
    """Mean perplexity at ``long_len`` over mean perplexity at ``short_len`` of one scheme
    (below 1: longer windows help; far above 1: the scheme fails to extrapolate)."""
    means = over_seeds([r for r in rows if r["scheme"] == scheme], ("eval_len",), "perplexity")
    return means[long_len]["mean"] / means[short_len]["mean"]


def ranking(rows, value: str = "token_accuracy", *, where=None) -> list:
    """Schemes ordered best first by the mean of ``value`` over the rows that ``where(row)``
    keeps (default: every row). Returns ``[(scheme, mean), ...]``."""
    kept = [r for r in rows if where is None or where(r)]
    means = over_seeds(kept, ("scheme",), value)
    return sorted(((s, m["mean"]) for s, m in means.items()), key=lambda p: -p[1])


def meta_summary(meta: dict) -> dict:
    """The few metadata fields a reader needs to judge and rerun a result."""
    hw = meta.get("hardware", {})
    machine = f"{hw.get('cpu', '?')}, {hw.get('cpu_cores', '?')} cores"
    if "gpu" in hw:
        machine += f", {hw['gpu']}"
    versions = meta.get("versions", {})
    return {"command": meta.get("command", ""), "commit": meta.get("commit", "")[:12],
            "machine": machine, "seeds": ", ".join(map(str, meta.get("seeds", []))),
            "minutes": round(meta.get("wall_seconds", 0) / 60, 1),
            "versions": ", ".join(f"{k} {v}" for k, v in versions.items()
                                  if k in ("python", "torch", "keras", "numpy"))}
