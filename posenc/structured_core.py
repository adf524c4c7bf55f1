"""Framework-free parts of the regularised and structured encodings.

Argument validation that both faces share (so PyTorch and Keras raise the same
messages) and the small NumPy formulas that do not depend on the data. The data
checks take plain Python numbers (a minimum, a maximum, a flag) that each face
computes from its own tensors, so no tensor ever has to leave its framework.
"""

from __future__ import annotations

import math
import numbers

from posenc._checks import check_positions_shape, check_positive_int

#: The ways :class:`MultimodalEncoding` can share positions between modalities.
MULTIMODAL_MODES = ("shared", "per_modality", "shared_offset")

#: Standard deviation of a freshly initialised learned table (BERT, GPT-2).
TABLE_INIT_STD = 0.02


def _plain_number(name: str, value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{what}: {name} must be a number, got {name}={value!r}.")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{what}: {name} must be finite, got {name}={value!r}.")
    return value


def check_rate(name: str, value, *, what: str) -> float:
    """A drop probability in ``[0, 1)``."""
    rate = _plain_number(name, value, what)
    if not 0.0 <= rate < 1.0:
        raise ValueError(
            f"{what}: {name} must be in [0, 1) (the probability of dropping an entry), "
            f"got {name}={value!r}; use a small value such as 0.1, or 0 to switch it off."
        )
    return rate


def check_std(name: str, value, *, what: str) -> float:
    """A noise standard deviation, ``>= 0``."""
    std = _plain_number(name, value, what)
    if std < 0.0:
        raise ValueError(
            f"{what}: {name} must be >= 0 (a standard deviation), got {name}={value!r}; "
            "use a small positive value such as 0.02, or 0 to switch the noise off."
        )
    return std


def check_seed(seed, *, what: str):
    """``None`` or a non-negative integer."""
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(
            f"{what}: seed must be None or a non-negative integer, got seed={seed!r}."
        )
    return int(seed)


def check_time_scale(time_scale) -> float:
    """The unit of time, a finite number greater than 0."""
    value = _plain_number("time_scale", time_scale, "ContinuousTimeEncoding")
    if value <= 0.0:
        raise ValueError(
            f"ContinuousTimeEncoding: time_scale must be greater than 0 (timestamps are divided "
            f"by it), got time_scale={time_scale!r}; use the typical gap between events, "
            "or 1.0 to use the timestamps as they are."
        )
    return value


def hierarchical_level_width(dim, max_depth, *, what: str = "hierarchical") -> int:
    """Channels per tree level, ``dim // max_depth``; it must be even."""
    dim = check_positive_int("dim", dim)
    max_depth = check_positive_int("max_depth", max_depth)
    step = 2 * max_depth
    if dim % step:
        lower, upper = dim - dim % step, dim - dim % step + step
        hint = f"dim={upper}" + (f" or dim={lower}" if lower else "")
        reason = (f"{dim} is not divisible by max_depth={max_depth}" if dim % max_depth
                  else f"dim // max_depth = {dim // max_depth} is odd")
        raise ValueError(
            f"{what}: each of the max_depth={max_depth} levels gets dim // max_depth channels "
            f"of sine/cosine pairs, so dim must be a multiple of 2 * max_depth = {step}; "
            f"got dim={dim} ({reason}). Use {hint}."
        )
    return dim // max_depth


def check_paths_depth(shape, max_depth: int, *, what: str) -> None:
    """The last axis of ``paths`` holds one child index per level."""
    shape = tuple(shape)
    if len(shape) < 1 or (shape[-1] is not None and shape[-1] != max_depth):
        got = shape[-1] if shape else None
        if got is not None and got > max_depth:
            fix = f"build it with max_depth={got} for trees this deep"
        else:
            fix = f"pad every path with -1 up to max_depth={max_depth} levels"
        raise ValueError(
            f"{what}: paths must have shape (..., max_depth) with max_depth={max_depth}, "
            f"got paths.shape={shape}; {fix}."
        )


def check_paths_values(lowest: int, highest: int, gap: bool, *, what: str,
                       max_children: int | None = None) -> None:
    """Child indices are ``>= 0``, ``-1`` pads the levels below a node's depth."""
    if lowest < -1:
        raise ValueError(
            f"{what}: paths hold child indices >= 0, padded with -1 below the node's depth, "
            f"got the value {lowest}; use -1 for every level deeper than the node."
        )
    if gap:
        raise ValueError(
            f"{what}: a path has a child index after a -1 (e.g. [2, -1, 0]); -1 marks the "
            "levels below the node, so it may only follow the node's last level, as in "
            "[2, 0, -1]."
        )
    if max_children is not None and highest >= max_children:
        raise ValueError(
            f"{what}: child index {highest} is out of range for max_children={max_children} "
            f"(indices 0 .. {max_children - 1}); build it with max_children={highest + 1} "
            "or more."
        )


def check_per_token_shape(name: str, shape, x_shape, *, what: str, each: str,
                          trailing: str = "") -> None:
    """``name`` gives one ``each`` per token of ``x`` ``(..., seq, dim)``.

    Its shape (without its last axis when ``trailing`` names one, as for the
    levels of ``paths``) must be ``(seq,)`` or ``(batch, seq)``, or anything
    else :func:`posenc._checks.check_positions_shape` accepts.
    """
    shape = tuple(shape)
    lead = shape[:-1] if trailing else shape
    try:
        check_positions_shape(what, lead, x_shape)
    except ValueError:
        one, batched = ((f"(seq, {trailing})", f"(batch, seq, {trailing})") if trailing
                        else ("(seq,)", "(batch, seq)"))
        raise ValueError(
            f"{what}: {name} must have shape {one} or {batched} matching x's (..., seq, dim), "
            f"got {name}.shape={shape} for x.shape={tuple(x_shape)}; pass one {each} per token."
        ) from None


def check_numeric_timestamps(dtype: str, *, what: str) -> None:
    """Timestamps are numbers (int or float); a boolean tensor is a mask."""
    if dtype == "bool" or "complex" in dtype:
        raise ValueError(
            f"{what}: timestamps must be integers or floats, got dtype {dtype}; a boolean "
            "tensor is a mask, not times: pass the time of each token."
        )


def check_float_encoding(what: str, dtype: str) -> None:
    """A regulariser scales and perturbs ``P``: an integer ``P`` would be truncated."""
    if "float" not in dtype:
        raise ValueError(
            f"{what}: the encoding must be a floating-point tensor, got dtype {dtype}; "
            "pass the encoding P itself (float32, bfloat16, ...), or cast it first."
        )


def check_index_values(name: str, lowest: int, highest: int, limit: int, *, what: str,
                       fix: str) -> None:
    """Integer indices into a table of ``limit`` rows."""
    if lowest < 0 or highest >= limit:
        bad = lowest if lowest < 0 else highest
        raise ValueError(
            f"{what}: {name} must lie in 0 .. {limit - 1}, got {bad}; {fix}."
        )


def check_length(length: int, max_len: int, *, what: str) -> None:
    """A sequence fits a table of ``max_len`` rows."""
    if length > max_len:
        raise ValueError(
            f"{what}: sequence length {length} exceeds the table's max_len={max_len}; "
            "build it with a larger max_len."
        )


def integer_positions_error(name: str, dtype: str, *, what: str) -> ValueError:
    return ValueError(
        f"{what}: {name} index a table, so they must be integers, got dtype {dtype}; "
        "round them to integers, or use a sinusoidal encoding for fractional positions."
    )


def check_mode(mode) -> str:
    if mode not in MULTIMODAL_MODES:
        raise ValueError(
            "MultimodalEncoding: mode must be one of "
            f"{', '.join(repr(m) for m in MULTIMODAL_MODES)}, got mode={mode!r}."
        )
    return mode


def check_low_rank(max_len, dim, rank) -> tuple[int, int, int]:
    """``1 <= rank <= min(max_len, dim)``."""
    max_len = check_positive_int("max_len", max_len)
    dim = check_positive_int("dim", dim)
    full = min(max_len, dim)
    if isinstance(rank, bool) or not isinstance(rank, numbers.Integral):
        raise ValueError(f"LowRankEncoding: rank must be an integer, got rank={rank!r}.")
    rank = int(rank)
    if rank < 1:
        raise ValueError(
            f"LowRankEncoding: rank must be at least 1, got rank={rank}; "
            f"use a rank from 1 to min(max_len, dim)={full}."
        )
    if rank > full:
        raise ValueError(
            f"LowRankEncoding: rank={rank} exceeds min(max_len, dim)={full}; a rank of {full} "
            "already represents every (max_len, dim) table, so more only adds parameters. "
            f"Use rank <= {full}."
        )
    return max_len, dim, rank


def low_rank_init_std(rank: int, target: float = TABLE_INIT_STD) -> float:
    """Standard deviation of each factor so that ``left @ right`` has std ``target``.

    With independent ``N(0, s^2)`` entries, each entry of the product is a sum
    of ``rank`` terms of variance ``s^4``, so ``s = sqrt(target / sqrt(rank))``.
    """
    return math.sqrt(target / math.sqrt(rank))
