"""Structured positions (framework-free): times, trees, modalities.

Argument validation that both faces share (so PyTorch and Keras raise the same
messages) and the small NumPy formulas that do not depend on the data. The data
checks take plain Python numbers (a minimum, a maximum, a flag) that each face
computes from its own tensors, so no tensor ever has to leave its framework.
"""

from __future__ import annotations

from posenc._checks import check_number, check_positions_shape, check_positive_int
from posenc.learned import TABLE_INIT_STD  # noqa: F401  (the tables here start like a learned one)

#: The ways :class:`MultimodalEncoding` can share positions between modalities.
MULTIMODAL_MODES = ("shared", "per_modality", "shared_offset")


def check_time_scale(time_scale) -> float:
    """The unit of time, a finite number greater than 0."""
    value = check_number("time_scale", time_scale, what="ContinuousTimeEncoding")
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


def check_mode(mode) -> str:
    if mode not in MULTIMODAL_MODES:
        raise ValueError(
            "MultimodalEncoding: mode must be one of "
            f"{', '.join(repr(m) for m in MULTIMODAL_MODES)}, got mode={mode!r}."
        )
    return mode
