"""Every argument check of ``posenc``, so that both faces raise the same errors.

One convention for all of them: ``check_<rule>(value, ...)`` (or
``check_<rule>(name, value, ...)`` when the rule applies to arguments of
different names) returns the value in its canonical Python type, or raises a
``ValueError`` whose message starts with ``what`` (the function or class
being called), names the argument and the value it got, and says how to fix
it. ``what`` and ``fix`` are always keyword arguments. The checks take plain
Python values (shapes, dtype names, a minimum and a maximum read from a
tensor), never tensors, so that no framework is needed here and both faces
pass the same numbers to the same function.

Data-dependent checks (:func:`check_index_range`, ``posenc.trees.check_paths_values``)
are called by the faces only where the policy of :mod:`posenc` allows reading
values back (see the API reference, "Checks that read the data").
"""

from __future__ import annotations

import math
import numbers

LAYOUTS = ("interleaved", "concat")


def _error(what: str, message: str, fix: str = "") -> ValueError:
    """``"{what}: {message}; {fix}."``, without the parts that are empty."""
    text = (f"{what}: " if what else "") + message + (f"; {fix}" if fix else "")
    return ValueError(text if text.endswith(".") else text + ".")


# --------------------------------------------------------------------------- numbers


def check_int(name: str, value, *, minimum: int = 1, what: str = "", fix: str = "") -> int:
    """``value`` as an ``int`` of at least ``minimum`` (booleans and floats are refused)."""
    kind = {1: "a positive integer", 0: "a non-negative integer"}.get(
        minimum, f"an integer of at least {minimum}")
    if (isinstance(value, bool) or not isinstance(value, numbers.Integral)
            or value < minimum):
        raise _error(what, f"{name} must be {kind}, got {name}={value!r}", fix)
    return int(value)


def check_positive_int(name: str, value, *, what: str = "", fix: str = "") -> int:
    """``value`` as an ``int >= 1``."""
    return check_int(name, value, minimum=1, what=what, fix=fix)


def check_float(name: str, value, *, above: float | None = None, at_least: float | None = None,
                below: float | None = None, meaning: str = "", what: str = "",
                fix: str = "") -> float:
    """``value`` as a finite ``float`` in the given range.

    Strings, ``None`` and booleans are refused rather than converted, so
    ``base="10000"`` fails here, in both faces, with the same message.

    Args:
        name: the argument's name.
        value: what the caller passed.
        above: exclusive lower bound, or ``None``.
        at_least: inclusive lower bound, or ``None``.
        below: exclusive upper bound, or ``None``.
        meaning: a parenthesis saying what the number is, for the message.
        what: the function or class being called.
        fix: how to fix a wrong value.
    """
    if at_least is not None and below is not None:
        bounds = f" in [{at_least:g}, {below:g})"
    elif above is not None:
        bounds = f" greater than {above:g}"
    elif at_least is not None:
        bounds = f" >= {at_least:g}"
    else:
        bounds = ""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    number = float(value) if ok else math.nan
    ok = (math.isfinite(number)
          and (above is None or number > above)
          and (at_least is None or number >= at_least)
          and (below is None or number < below))
    if not ok:
        raise _error(what, f"{name} must be a finite number{bounds}"
                           f"{f' ({meaning})' if meaning else ''}, got {name}={value!r}", fix)
    return number


def check_choice(name: str, value, allowed, *, what: str = "", fix: str = ""):
    """``value`` if it is one of ``allowed`` (a tuple, or the keys of a registry)."""
    allowed = tuple(allowed)
    if not isinstance(value, str) or value not in allowed:
        raise _error(what, f"{name} must be one of {', '.join(repr(a) for a in allowed)}, "
                           f"got {name}={value!r}", fix)
    return value


def check_bool(name: str, value, *, what: str = "") -> bool:
    """``True`` or ``False`` (not ``0``/``1``, not a string)."""
    if not isinstance(value, bool):
        raise _error(what, f"{name} must be True or False, got {name}={value!r}")
    return value


def check_seed(seed, *, what: str = "") -> int | None:
    """``None`` or a non-negative integer."""
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)
                             or seed < 0):
        raise _error(what, f"seed must be None or a non-negative integer, got seed={seed!r}")
    return None if seed is None else int(seed)


def check_hw(name: str, hw, *, what: str = "") -> tuple[int, int]:
    """A ``(height, width)`` pair of positive integers."""
    ok = (isinstance(hw, (tuple, list)) and len(hw) == 2
          and all(isinstance(v, numbers.Integral) and not isinstance(v, bool) and v > 0
                  for v in hw))
    if not ok:
        raise _error(what, f"{name} must be a (height, width) pair of positive integers, "
                           f"got {name}={hw!r}")
    return int(hw[0]), int(hw[1])


# --------------------------------------------------------------------------- sinusoids


def check_even_dim(dim, *, multiple: int = 2, what: str = "sinusoidal") -> int:
    """A feature dimension that must be a positive multiple of ``multiple``."""
    dim = check_positive_int("dim", dim, what=what)
    if dim % multiple:
        lower = dim - dim % multiple
        upper = lower + multiple
        hint = f"use dim={upper}" + (f" or dim={lower}" if lower > 0 else "")
        reason = (
            "sines and cosines come in pairs"
            if multiple == 2
            else f"each axis gets dim/2 channels of sine/cosine pairs, so dim must be a "
                 f"multiple of {multiple}"
        )
        raise _error(what, f"dim must be a multiple of {multiple} ({reason}), got dim={dim}",
                     f"{hint}, or project the encoding to the model width with a linear layer")
    return dim


def check_base(base, *, what: str = "") -> float:
    """The wavelength base: a finite number greater than 1."""
    return check_float("base", base, above=1.0, what=what,
                       fix="the usual value is 10000.0 (Vaswani et al.)")


def check_layout(layout, *, what: str = "") -> str:
    """``"interleaved"`` or ``"concat"``."""
    return check_choice("layout", layout, LAYOUTS, what=what)


# --------------------------------------------------------------------------- shapes


def check_rank(name: str, shape, ranks, *, what: str = "", fix: str = "") -> None:
    """Raise if ``len(shape)`` is not in ``ranks``."""
    ranks = (ranks,) if isinstance(ranks, int) else tuple(ranks)
    if len(shape) not in ranks:
        want = " or ".join(str(r) for r in ranks)
        raise _error(what, f"{name} must have rank {want}, got shape {tuple(shape)} "
                           f"(rank {len(shape)})", fix)


def check_embeddings(shape, dim: int | None, *, what: str = "") -> None:
    """``x`` is ``(..., seq, dim)``; a ``None`` (symbolic) last axis or ``dim`` passes."""
    shape = tuple(shape)
    if len(shape) < 2:
        want = f"(..., seq, dim) with dim={dim}" if dim is not None else "(..., seq, dim)"
        raise _error(what, f"x must be {want}, got x.shape={shape} (rank {len(shape)})",
                     "add a sequence axis, e.g. x[None] for a single token")
    if dim is not None and shape[-1] is not None and shape[-1] != dim:
        raise _error(what, f"x must be (..., seq, dim) with dim={dim}, got x.shape={shape}",
                     f"build the encoding with dim={shape[-1]} or project x to the model "
                     "width first")


def check_per_token(name: str, shape, x_shape, *, what: str = "", each: str = "position",
                    trailing: str = "") -> None:
    """``name`` gives one ``each`` per token of ``x`` ``(..., seq, dim)``.

    Its shape (without its last axis when ``trailing`` names one, as for the
    levels of ``paths``) is ``(seq,)`` or ``(batch, seq)``: any shape that
    broadcasts to ``x.shape[:-1]`` without changing it. Unknown (``None``)
    sizes pass.
    """
    shape = tuple(shape)
    lead, tokens = (shape[:-1] if trailing else shape), tuple(x_shape)[:-1]
    ok = 1 <= len(lead) <= len(tokens) and all(
        p is None or q is None or p == q or (p == 1 and i > 0)
        for i, (p, q) in enumerate(zip(reversed(lead), reversed(tokens)))
    )
    if not ok:
        one, batched = ((f"(seq, {trailing})", f"(batch, seq, {trailing})") if trailing
                        else ("(seq,)", "(batch, seq)"))
        raise _error(what, f"{name} must have shape {one} or {batched} matching x's "
                           f"(..., seq, dim), got {name}.shape={shape} for "
                           f"x.shape={tuple(x_shape)}", f"pass one {each} per token")


# --------------------------------------------------------------------------- dtypes


def check_numeric_dtype(name: str, dtype: str, *, what: str = "") -> None:
    """Positions and times are numbers: a boolean tensor is a mask passed by mistake."""
    if dtype == "bool" or "complex" in dtype:
        raise _error(what, f"{name} must be integers or floats, got dtype {dtype}",
                     f"a boolean tensor is a mask, not {name}: pass the {name} themselves "
                     "(e.g. an arange)")


def check_integer_dtype(name: str, dtype: str, *, what: str = "") -> None:
    """Indices into a table must be integers (not floats, not booleans)."""
    if "int" not in dtype:
        raise _error(what, f"{name} index a table, so they must be integers, got dtype {dtype}",
                     "round them to integers, or use a sinusoidal encoding for fractional "
                     "positions")


def check_float_dtype(name: str, dtype: str, *, what: str = "", fix: str = "") -> None:
    """Tensors that are interpolated or scaled must be floating-point."""
    if "float" not in dtype:
        raise _error(what, f"{name} must be a floating-point tensor, got dtype {dtype}", fix)


# --------------------------------------------------------------------------- data (policy-bound)


def check_length(length: int, max_len: int, *, what: str = "",
                 fix: str = "build it with a larger max_len") -> None:
    """A sequence of ``length`` positions fits a table of ``max_len`` rows.

    ``fix`` may name the rows needed as ``{need}``.
    """
    if length > max_len:
        raise _error(what, f"sequence length {length} exceeds the table's max_len={max_len}",
                     fix.format(need=length))


def check_index_range(name: str, lowest: int, highest: int, limit: int, *,
                      limit_name: str = "max_len", what: str = "", fix: str = "") -> None:
    """Integer indices ``lowest .. highest`` into a table of ``limit`` rows.

    ``fix`` may name the rows needed as ``{need}``.
    """
    if lowest < 0 or highest >= limit:
        bad = lowest if lowest < 0 else highest
        raise _error(what, f"{name} must lie in 0 .. {limit - 1}, got {bad} "
                           f"({limit_name}={limit})", fix.format(need=max(highest + 1, limit)))


# --------------------------------------------------------------------------- probabilities


def check_rate(name: str, value, *, what: str = "") -> float:
    """A drop probability in ``[0, 1)`` (attention dropout and the regularisers)."""
    return check_float(name, value, at_least=0.0, below=1.0,
                       meaning="the probability of dropping an entry", what=what,
                       fix="use a small value such as 0.1, or 0 to switch it off")


# --------------------------------------------------------------------------- relative attention


def check_lengths(q_len, k_len, *, what: str = "") -> tuple[int, int]:
    """``0 <= q_len <= k_len``: the queries are the last ``q_len`` of the ``k_len`` positions."""
    q_len = check_int("q_len", q_len, minimum=0, what=what,
                      fix="pass the number of query positions")
    k_len = check_int("k_len", k_len, minimum=0, what=what,
                      fix="pass the number of key positions (the cached keys plus the new ones)")
    if q_len > k_len:
        raise _error(what, f"q_len must be at most k_len (the queries are the last q_len of the "
                           f"k_len key positions), got q_len={q_len}, k_len={k_len}",
                     f"pass k_len >= {q_len}: the cached keys plus the new ones")
    return q_len, k_len
