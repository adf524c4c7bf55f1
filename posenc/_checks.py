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

Data-dependent checks (:func:`check_index_range`, :func:`check_paths_values`)
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


def check_not_scalar(name: str, shape, *, what: str = "") -> None:
    """A tensor of one value per token: ``(..., seq)``, not a scalar."""
    if len(tuple(shape)) < 1:
        raise _error(what, f"{name} must be (..., seq), got a scalar",
                     f"pass one {name[:-1] if name.endswith('s') else name} per token")


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


# --------------------------------------------------------------------------- learned tables


def check_init_std(init_std, *, what: str = "") -> float:
    """The standard deviation of a fresh table, a finite number > 0."""
    return check_float("init_std", init_std, above=0.0, what=what,
                       fix="BERT and ViT use 0.02")


def check_scale(scale, *, what: str = "") -> float:
    """The initial scale of ``HybridEncoding``'s sinusoid, a finite number."""
    return check_float("scale", scale, what=what,
                       fix="the usual value is 1.0 (the sinusoid as it is)")


def check_extension(max_len: int, new_max_len, *, what: str = "") -> int:
    """``LearnedEncoding.extended`` keeps every trained row, so it only grows a table."""
    new_max_len = check_positive_int("new_max_len", new_max_len, what=what)
    if new_max_len < max_len:
        raise _error(what, f"new_max_len must be at least max_len={max_len} (every trained "
                           f"row is kept), got new_max_len={new_max_len}",
                     f"to shorten the table, resample it with enc.resized({new_max_len}) or "
                     f"keep its first rows with LearnedEncoding.from_table("
                     f"enc.table[:{new_max_len}])")
    return new_max_len


def check_low_rank(max_len, dim, rank, *, what: str = "") -> tuple[int, int, int]:
    """``1 <= rank <= min(max_len, dim)``."""
    max_len = check_positive_int("max_len", max_len, what=what)
    dim = check_positive_int("dim", dim, what=what)
    full = min(max_len, dim)
    if isinstance(rank, bool) or not isinstance(rank, numbers.Integral):
        raise _error(what, f"rank must be an integer, got rank={rank!r}")
    rank = int(rank)
    if rank < 1:
        raise _error(what, f"rank must be at least 1, got rank={rank}",
                     f"use a rank from 1 to min(max_len, dim)={full}")
    if rank > full:
        raise _error(what, f"rank={rank} exceeds min(max_len, dim)={full}; a rank of {full} "
                           "already represents every (max_len, dim) table, so more only adds "
                           "parameters", f"use rank <= {full}")
    return max_len, dim, rank


def check_grid_rows(rows: int, old_hw, prefix_tokens: int, *, what: str = "") -> None:
    """A ViT table has ``prefix_tokens + old_h * old_w`` rows."""
    old_h, old_w = old_hw
    expected = prefix_tokens + old_h * old_w
    if rows != expected:
        fits = []
        if rows >= old_h * old_w:
            fits.append(f"prefix_tokens={rows - old_h * old_w} would fit "
                        f"old_hw=({old_h}, {old_w})")
        side = math.isqrt(max(rows - prefix_tokens, 0))
        if side > 0 and side * side == rows - prefix_tokens:
            fits.append(f"old_hw=({side}, {side}) would fit prefix_tokens={prefix_tokens}")
        raise _error(what, f"the table has {rows} rows but prefix_tokens={prefix_tokens} plus "
                           f"old_hw=({old_h}, {old_w}) make {expected}",
                     "pass the grid the table was trained on, and as prefix_tokens the number "
                     "of leading rows that are not on it (1 for a CLS token)"
                     + (f": {'; '.join(fits)}" if fits else ""))


# --------------------------------------------------------------------------- regularisation


def check_rate(name: str, value, *, what: str = "") -> float:
    """A drop probability in ``[0, 1)``."""
    return check_float(name, value, at_least=0.0, below=1.0,
                       meaning="the probability of dropping an entry", what=what,
                       fix="use a small value such as 0.1, or 0 to switch it off")


def check_std(name: str, value, *, what: str = "") -> float:
    """A noise standard deviation, ``>= 0``."""
    return check_float(name, value, at_least=0.0, meaning="a standard deviation", what=what,
                       fix="use a small positive value such as 0.02, or 0 to switch the "
                           "noise off")


def check_regularized(dropout, channel_dropout, noise_std, seed, *,
                      what: str = "") -> tuple:
    """``RegularizedEncoding``'s two rates, its noise and its seed, in that order."""
    return (check_rate("dropout", dropout, what=what),
            check_rate("channel_dropout", channel_dropout, what=what),
            check_std("noise_std", noise_std, what=what),
            check_seed(seed, what=what))


def check_encoding(shape, dtype: str, *, got: str = "", what: str = "") -> None:
    """A regulariser's input: a floating-point tensor ``P`` of shape ``(..., seq, dim)``.

    ``shape`` is ``None`` when the input is not a tensor at all (``got`` names
    its type).
    """
    if shape is None:
        raise _error(what, f"the encoding must be a tensor P of shape (..., seq, dim), got {got}",
                     "pass the output of an encoding(...) method")
    if len(shape) < 2:
        raise _error(what, f"the encoding must be (..., seq, dim), got shape {tuple(shape)}",
                     "add a sequence axis first")
    check_float_dtype("the encoding", dtype, what=what,
                      fix="pass the encoding P itself (float32, bfloat16, ...), or cast it first")


def check_wrappable(ok: bool, got: str, *, kind: str, what: str = "") -> None:
    """``RegularizedEncoding`` wraps an absolute encoding: one with an ``encoding`` method."""
    if not ok:
        raise _error(what, f"encoding must be {kind} with an encoding(positions) method (e.g. "
                           f"SinusoidalEncoding), got {got}",
                     "relative schemes (RoPE, biases) have no P to add and cannot be wrapped")


# --------------------------------------------------------------------------- structured positions


def check_time_scale(time_scale, *, what: str = "") -> float:
    """The unit of time, a finite number greater than 0."""
    return check_float("time_scale", time_scale, above=0.0,
                       meaning="timestamps are divided by it", what=what,
                       fix="use the typical gap between events, or 1.0 to use the timestamps "
                           "as they are")


def _block_width(dim: int, blocks: int, name: str, unit: str, *, what: str) -> int:
    """Channels per block, ``dim // blocks``, when ``blocks`` sinusoids are concatenated:
    ``dim`` must be a multiple of ``2 * blocks``."""
    step = 2 * blocks
    if dim % step:
        lower, upper = dim - dim % step, dim - dim % step + step
        hint = f"dim={upper}" + (f" or dim={lower}" if lower else "")
        reason = (f"{dim} is not divisible by {name}={blocks}" if dim % blocks
                  else f"dim // {name} = {dim // blocks} is odd")
        raise _error(what, f"each of the {name}={blocks} {unit} gets dim // {name} "
                           f"channels of sine/cosine pairs, so dim must be a multiple of "
                           f"2 * {name} = {step}; got dim={dim} ({reason})", f"use {hint}")
    return dim // blocks


def check_level_width(dim, max_depth, *, what: str = "") -> int:
    """Channels per tree level, ``dim // max_depth``; it must be even."""
    dim = check_positive_int("dim", dim, what=what)
    max_depth = check_positive_int("max_depth", max_depth, what=what)
    return _block_width(dim, max_depth, "max_depth", "levels", what=what)


def check_paths_depth(shape, max_depth: int, *, what: str = "") -> None:
    """The last axis of ``paths`` holds one child index per level."""
    shape = tuple(shape)
    if len(shape) < 1 or (shape[-1] is not None and shape[-1] != max_depth):
        got = shape[-1] if shape else None
        if got is not None and got > max_depth:
            fix = f"build it with max_depth={got} for trees this deep"
        else:
            fix = f"pad every path with -1 up to max_depth={max_depth} levels"
        raise _error(what, f"paths must have shape (..., max_depth) with max_depth={max_depth}, "
                           f"got paths.shape={shape}", fix)


def check_paths_values(lowest: int, highest: int, gap: bool, *, max_children: int | None = None,
                       what: str = "") -> None:
    """Child indices are ``>= 0``; ``-1`` pads the levels below a node's depth."""
    if lowest < -1:
        raise _error(what, f"paths hold child indices >= 0, padded with -1 below the node's "
                           f"depth, got the value {lowest}",
                     "use -1 for every level deeper than the node")
    if gap:
        raise _error(what, "a path has a child index after a -1 (e.g. [2, -1, 0]); -1 marks "
                           "the levels below the node, so it may only follow the node's last "
                           "level, as in [2, 0, -1]")
    if max_children is not None and highest >= max_children:
        raise _error(what, f"child index {highest} is out of range for "
                           f"max_children={max_children} (indices 0 .. {max_children - 1})",
                     f"build it with max_children={highest + 1} or more")


def check_coordinates(shape, *, what: str = "") -> int:
    """``coords`` are ``(..., k)`` with ``k >= 1`` coordinates on the last axis; returns ``k``."""
    shape = tuple(shape)
    if len(shape) < 1:
        raise _error(what, "coords must be (..., k), got a scalar",
                     "use coords[..., None] for a single coordinate")
    if shape[-1] is None or shape[-1] < 1:
        raise _error(what, f"coords must be (..., k) with at least one coordinate on the last "
                           f"axis, got coords.shape={shape}",
                     "pass e.g. (y, x) pairs or (x, y, w, h) boxes")
    return int(shape[-1])


def check_coordinate_width(dim, num_coords: int, *, what: str = "") -> int:
    """Channels per coordinate, ``dim // k``; it must be even."""
    dim = check_positive_int("dim", dim, what=what)
    return _block_width(dim, num_coords, "k", "coordinates", what=what)


def check_coordinate_scale(scale, num_coords: int, *, what: str = "") -> tuple[float, ...]:
    """One finite factor ``> 0`` per coordinate (a single number is used for all)."""
    values = list(scale) if isinstance(scale, (list, tuple)) else [scale]
    if len(values) == 1:
        values = values * num_coords
    if len(values) != num_coords:
        raise _error(what, f"scale must be one number or one per coordinate, got "
                           f"{len(values)} values for k={num_coords} coordinates "
                           f"(scale={scale!r})",
                     f"pass a single number or a sequence of {num_coords}")
    return tuple(check_float("scale", v, above=0.0, meaning="coordinates are multiplied by it",
                             what=what,
                             fix="use 2 * pi for coordinates normalised to [0, 1] (DETR), or "
                                 "1 / unit for coordinates in a unit such as seconds or pixels")
                 for v in values)


def check_adjacency(adjacency, *, what: str = ""):
    """A graph's ``(nodes, nodes)`` adjacency (a NumPy array or nested lists): numbers, finite,
    non-negative, symmetric. Returns it as a float64 array, symmetrised exactly."""
    import numpy as np

    a = np.asarray(adjacency)
    if a.dtype == bool:
        a = a.astype(np.float64)
    if not (np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.floating)):
        raise _error(what, f"adjacency must hold numbers (0/1 or edge weights), got dtype "
                           f"{a.dtype}")
    a = a.astype(np.float64)
    if a.ndim != 2 or a.shape[0] != a.shape[1] or a.shape[0] == 0:
        raise _error(what, f"adjacency must be a square (nodes, nodes) matrix, got "
                           f"adjacency.shape={a.shape}",
                     "pass the n x n adjacency (or weight) matrix of the graph")
    if not np.all(np.isfinite(a)):
        raise _error(what, "adjacency must be finite, got a NaN or infinite weight")
    if np.any(a < 0):
        i, j = (int(v) for v in np.argwhere(a < 0)[0])
        raise _error(what, f"adjacency must hold non-negative edge weights, got "
                           f"adjacency[{i}, {j}]={float(a[i, j])!r}",
                     "use 0 for no edge and a positive weight for an edge")
    close = np.isclose(a, a.T, rtol=1e-6, atol=1e-9)
    if not np.all(close):
        i, j = (int(v) for v in np.argwhere(~close)[0])
        raise _error(what, f"adjacency must be symmetric (an undirected graph), got "
                           f"adjacency[{i}, {j}]={float(a[i, j])!r} but "
                           f"adjacency[{j}, {i}]={float(a[j, i])!r}",
                     "use np.maximum(A, A.T) or (A + A.T) / 2 for the undirected graph")
    return (a + a.T) / 2.0


def check_eigenvector_count(k: int, nodes: int, *, components: int | None = None,
                            what: str = "") -> None:
    """``k`` non-trivial eigenvectors exist: ``k <= nodes - components`` (one trivial
    eigenvector per connected component; ``None``: not known yet, at least one)."""
    if nodes < 2:
        raise _error(what, "adjacency has a single node, whose only eigenvector is the trivial "
                           "one", "Laplacian positions need a graph of at least 2 nodes")
    if k > nodes - 1:
        raise _error(what, f"k={k} is too large for a graph of {nodes} nodes: it has {nodes} "
                           "eigenvectors, one of them trivial", f"use k <= {nodes - 1}")
    if components is not None and k > nodes - components:
        raise _error(what, f"k={k} exceeds the {nodes - components} non-trivial eigenvectors "
                           f"of this graph ({nodes} nodes, {components} connected components, "
                           "each with a trivial eigenvector)",
                     f"use k <= {nodes - components}, or connect the graph")


def check_eigenvectors_shape(shape, k: int, *, what: str = "") -> None:
    """``eigenvectors`` are ``(..., nodes, k)``: one row of ``k`` entries per node."""
    shape = tuple(shape)
    if len(shape) < 2 or (shape[-1] is not None and shape[-1] != k):
        raise _error(what, f"eigenvectors must have shape (nodes, k) or (batch, nodes, k) with "
                           f"k={k}, got eigenvectors.shape={shape}",
                     f"pass laplacian_positions(adjacency, {k}) or build the encoding with "
                     "the k you computed")


# --------------------------------------------------------------------------- theory, plots, interop


def check_finite(name: str, values, *, what: str = "") -> None:
    """Every number of ``values`` (a float64 array) is finite."""
    import numpy as np

    if not np.all(np.isfinite(values)):
        raise _error(what, f"{name} must be finite, got {name}={values!r}")


def check_weight_names(src_names, dst_names, src_keys, dst_keys, *, what: str = "") -> None:
    """Two modules' weights pair up one to one by the last component of their names."""
    if len(src_keys) != len(src_names) or len(dst_keys) != len(dst_names):
        raise _error(what, f"weight names are not unique by their last component: "
                           f"{sorted(src_names)} / {sorted(dst_names)}")
    if set(src_keys) != set(dst_keys):
        raise _error(what, f"the weights do not match: source has {sorted(src_keys)}, "
                           f"destination has {sorted(dst_keys)}",
                     "build both with the same class and arguments")


def check_weight_shape(name: str, shape, source: str, source_shape, *, what: str = "") -> None:
    """A weight receives a value of its own shape."""
    if tuple(shape) != tuple(source_shape):
        raise _error(what, f"weight {name!r} has shape {tuple(shape)}, source {source!r} has "
                           f"{tuple(source_shape)}")


def check_built(built: bool, *, what: str = "") -> None:
    """A Keras layer has weights only once it is built."""
    if not built:
        raise _error(what, "the Keras layer is not built",
                     "call it once on an input (or call layer.build(shape)) before copying "
                     "weights")


# --------------------------------------------------------------------------- the lag task


def check_lag(lag, length, *, what: str = "") -> tuple[int, int]:
    """``lag`` and ``length`` together, ``1 <= lag < length``; returns both as ints."""
    length = check_positive_int("length", length, what=what,
                                fix="pass the number of tokens per sequence")
    lag = check_positive_int("lag", lag, what=what,
                             fix="the target at position p is tokens[p - lag]")
    if lag >= length:
        raise _error(what, f"lag must be smaller than length (positions p < lag have no target), "
                           f"got lag={lag} for length={length}",
                     f"use a lag of at most {length - 1} or longer sequences")
    return lag, length


def check_lag_model(vocab, dim, embed_std, dropout, *, what: str = "LagModel"
                    ) -> tuple[int, int, float, float]:
    """The arguments of ``LagModel``, checked the same way in both faces."""
    vocab = check_positive_int("vocab", vocab, what=what)
    dim = check_positive_int("dim", dim, what=what)
    embed_std = check_float("embed_std", embed_std, above=0.0, what=what,
                            meaning="the token table is drawn from N(0, embed_std^2)",
                            fix="zero token embeddings cannot tell the tokens apart; use 1.0")
    dropout = check_float("dropout", dropout, at_least=0.0, below=1.0, what=what,
                          meaning="the probability of zeroing an entry",
                          fix="use a small value such as 0.1, or 0 to switch it off")
    return vocab, dim, embed_std, dropout


def check_lr(lr, *, what: str = "") -> float:
    """A positive, finite learning rate."""
    return check_float("lr", lr, above=0.0, what=what,
                       fix="Adam's usual range is 1e-4 .. 1e-2")


# --------------------------------------------------------------------------- attention biases


def check_num_heads(num_heads, *, what: str = "") -> int:
    """The number of attention heads, a positive integer."""
    return check_positive_int("num_heads", num_heads, what=what,
                              fix="pass the attention layer's head count, e.g. num_heads=8")


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


def check_t5_buckets(bidirectional, num_buckets, max_distance, *,
                     what: str = "") -> tuple[bool, int, int]:
    """T5's bucketing: an even ``num_buckets`` when bidirectional (half for each direction),
    at least two buckets per direction, and a ``max_distance`` beyond the exact ones."""
    bidirectional = check_bool("bidirectional", bidirectional, what=what)
    num_buckets = check_positive_int("num_buckets", num_buckets, what=what,
                                     fix="T5 uses num_buckets=32")
    if bidirectional and num_buckets % 2:
        raise _error(what, f"num_buckets must be even when bidirectional=True (half of the "
                           f"buckets for each direction), got num_buckets={num_buckets}",
                     f"use num_buckets={num_buckets + 1} or {num_buckets - 1}, or "
                     "bidirectional=False for a decoder")
    per_direction = num_buckets // 2 if bidirectional else num_buckets
    if per_direction < 2:
        least = 4 if bidirectional else 2
        raise _error(what, f"num_buckets must be at least {least} (bidirectional="
                           f"{bidirectional}: an exact and a logarithmic bucket per direction), "
                           f"got num_buckets={num_buckets}", "T5 uses num_buckets=32")
    max_exact = per_direction // 2
    if (isinstance(max_distance, bool) or not isinstance(max_distance, numbers.Integral)
            or max_distance <= max_exact):
        raise _error(what, f"max_distance must be an integer greater than the {max_exact} "
                           f"exact distances (num_buckets={num_buckets}, bidirectional="
                           f"{bidirectional}), got max_distance={max_distance!r}",
                     f"T5 uses max_distance=128; any value above {max_exact} works")
    return bidirectional, num_buckets, int(max_distance)


def check_window(window_size, *, name: str = "window_size", what: str = "") -> tuple[int, int]:
    """A window: a positive int ``n`` (an ``n x n`` window) or a ``(height, width)`` pair."""
    pair = window_size
    if isinstance(window_size, numbers.Integral) and not isinstance(window_size, bool):
        pair = (window_size, window_size)
    ok = (isinstance(pair, (tuple, list)) and len(pair) == 2
          and all(isinstance(v, numbers.Integral) and not isinstance(v, bool) and v > 0
                  for v in pair))
    if not ok:
        raise _error(what, f"{name} must be a positive integer or a (height, width) pair of "
                           f"positive integers, got {name}={window_size!r}",
                     "a window holds at least one patch; Swin uses 7")
    return int(pair[0]), int(pair[1])


def check_window_lengths(q_len, k_len, window_hw, *, what: str = "") -> None:
    """A window's bias is ``(H*W, H*W)``: ``q_len`` and ``k_len`` must both be ``H*W``."""
    size = window_hw[0] * window_hw[1]
    if q_len != size or k_len != size:
        raise _error(what, f"q_len and k_len must both be window_h * window_w = {size} (window "
                           f"{window_hw[0]}x{window_hw[1]}), got q_len={q_len!r}, "
                           f"k_len={k_len!r}",
                     f"pass q_len={size}, or build the layer for your window (resize a trained "
                     "table with .resized(new_window))")


def check_swin_table(shape, window_hw, *, what: str = "") -> None:
    """A Swin bias table is ``((2H-1) * (2W-1), num_heads)`` for an ``H x W`` window."""
    rows = (2 * window_hw[0] - 1) * (2 * window_hw[1] - 1)
    if len(shape) != 2 or shape[0] != rows:
        raise _error(what, f"table must be ((2*{window_hw[0]}-1) * (2*{window_hw[1]}-1), "
                           f"num_heads) = ({rows}, num_heads) for the window "
                           f"{window_hw[0]}x{window_hw[1]}, got table.shape={tuple(shape)}",
                     "pass the window the table was trained for as old_window")


# --------------------------------------------------------------------------- diagnostics


def check_diagnostic_array(name: str, values, rank: int, *, what: str = "", shape_text: str = "",
                           finite: bool = True):
    """``values`` as a float64 NumPy array of rank ``rank`` (finite unless ``finite=False``)."""
    import numpy as np

    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise _error(what, f"{name} must be a numeric array {shape_text}, got "
                           f"{type(values).__name__}",
                     "pass a NumPy array (convert a tensor with .numpy() or "
                     "keras.ops.convert_to_numpy)") from None
    check_rank(name, array.shape, rank, what=what, fix=f"pass {name} as {shape_text}")
    if 0 in array.shape:
        raise _error(what, f"{name} must not be empty, got shape {array.shape}")
    if finite and not np.all(np.isfinite(array)):
        raise _error(what, f"{name} must be finite, got {int((~np.isfinite(array)).sum())} "
                           "non-finite values", "check the model for NaN or overflow")
    return array


def check_probe_split(batch: int, test_fraction: float, *, what: str = "") -> int:
    """The number of held-out sequences: at least one, and at least one left to fit."""
    if batch < 2:
        raise _error(what, f"hidden must hold at least 2 sequences (one to fit, one to score), "
                           f"got batch={batch}", "pass more sequences")
    return min(batch - 1, max(1, int(round(batch * test_fraction))))


def check_gradient_counts(position_count, rest_count, old_position=None, old_rest=None, *,
                          what: str = "") -> tuple[int, int]:
    """Weight counts of a gradient record: integers >= 0 (the rest > 0), unchanged across steps."""
    position_count = check_int("position_count", position_count, minimum=0, what=what)
    rest_count = check_int("rest_count", rest_count, minimum=1, what=what,
                           fix="the model must have trainable weights besides the positional ones")
    for name, new, old in (("position_count", position_count, old_position),
                           ("rest_count", rest_count, old_rest)):
        if old is not None and new != old:
            raise _error(what, f"{name} changed between steps, got {name}={new} after {old}",
                         "use one log per model (a model's weights must not change mid-run)")
    return position_count, rest_count


def check_monitored_weights(found, name: str, *, what: str = "") -> None:
    """Every weight a monitor is told to watch is a trainable weight of the model."""
    missing = [i for i, ok in enumerate(found) if not ok]
    if missing:
        raise _error(what, f"{name} must be trainable weights of the model, got "
                           f"{len(missing)} that are not (entries {missing})",
                     f"pass weights of the model being trained, or leave {name} out to "
                     "use the model's own list")


# --------------------------------------------------------------------------- rotary

ROPE_LAYOUTS = ("half", "interleaved")


def check_head_dim(head_dim, *, name: str = "head_dim", multiple: int = 2,
                   what: str = "") -> int:
    """The number of rotated features: a positive integer, even (they rotate in pairs), or
    a multiple of 4 for axial 2D RoPE (``multiple=4``: pairs for the rows and the columns)."""
    head_dim = check_positive_int(name, head_dim, what=what)
    if head_dim % multiple:
        lower = head_dim - head_dim % multiple
        reason = ("must be even (RoPE rotates the features in pairs)" if multiple == 2 else
                  f"must be a multiple of {multiple} (pairs of features for the rows and "
                  "as many for the columns)")
        raise _error(what, f"{name} {reason}, got {name}={head_dim}",
                     f"use {name}={lower + multiple}" + (f" or {name}={lower}" if lower else ""))
    return head_dim


def check_rope_layout(layout, *, what: str = "") -> str:
    """``"half"`` (GPT-NeoX, Hugging Face) or ``"interleaved"`` (GPT-J, Meta)."""
    return check_choice("layout", layout, ROPE_LAYOUTS, what=what,
                        fix='"half" pairs feature i with i + r/2 (GPT-NeoX, Hugging Face), '
                            '"interleaved" pairs 2i with 2i+1 (GPT-J, Meta); convert a '
                            "checkpoint with convert_rope_layout")


def check_rope_scaling(scaling, types, head_dim: int, seq_len, *, what: str = "") -> dict:
    """A ``rope_scaling`` dict in Hugging Face's vocabulary, checked for its ``rope_type``.

    ``types`` are the registry's names. Returns a plain dict with ``rope_type``
    (``"default"`` for ``None``), and ``seq_len`` for ``dynamic``.
    """
    if scaling is None:
        return {"rope_type": "default"}
    if not isinstance(scaling, dict):
        raise _error(what, f"scaling must be None or a dict such as {{'rope_type': 'linear', "
                           f"'factor': 4.0}}, got scaling={scaling!r}")
    params = dict(scaling)
    rope_type = params.pop("rope_type", params.pop("type", None))
    rope_type = check_choice("scaling['rope_type']", rope_type, types, what=what,
                             fix="Hugging Face's rope_scaling vocabulary; 'ntk' is the static "
                                 "NTK-aware rule, 'dynamic' the dynamic one")
    params["rope_type"] = rope_type
    if rope_type == "default":
        return params
    params["factor"] = check_float(
        "scaling['factor']", params.get("factor"), at_least=1.0, what=what,
        meaning="how many times longer the context becomes",
        fix="a factor below 1 would shrink the context; use e.g. 4.0 for 4x the trained length")
    if rope_type in ("ntk", "dynamic") and head_dim < 4:
        raise _error(what, f"head_dim must be at least 4 for rope_type={rope_type!r} (the "
                           f"new base is base * factor^(d/(d-2))), got head_dim={head_dim}",
                     "use a wider head, or rope_type='linear'")
    if rope_type in ("dynamic", "yarn", "llama3"):
        params["original_max_position_embeddings"] = check_positive_int(
            "scaling['original_max_position_embeddings']",
            params.get("original_max_position_embeddings"), what=what,
            fix="pass the context length the model was trained on, e.g. 4096")
    if rope_type == "dynamic":
        if seq_len is None:
            raise _error(what, "rope_type='dynamic' needs seq_len (its base grows with the "
                               "sequence), got seq_len=None",
                         "pass seq_len=, the number of positions of the current sequence")
        params["seq_len"] = check_positive_int("seq_len", seq_len, what=what)
    if rope_type == "llama3":
        low = check_float("scaling['low_freq_factor']", params.get("low_freq_factor"),
                          above=0.0, what=what, fix="Llama 3 uses low_freq_factor=1.0")
        high = check_float("scaling['high_freq_factor']", params.get("high_freq_factor"),
                           above=low, what=what,
                           fix="Llama 3 uses high_freq_factor=4.0 (above low_freq_factor)")
        params["low_freq_factor"], params["high_freq_factor"] = low, high
    return params


def check_rope_features(num_freq, head_dim, *, name: str = "x", what: str = "") -> None:
    """``inv_freq`` of ``n`` frequencies rotates ``2n`` features: at most ``head_dim``."""
    if head_dim is not None and 2 * num_freq > head_dim:
        raise _error(what, f"inv_freq has {num_freq} frequencies, which rotate {2 * num_freq} "
                           f"features, but {name} has only head_dim={head_dim}",
                     f"pass at most {head_dim // 2} frequencies "
                     f"(rope_frequencies({head_dim - head_dim % 2}))")


def check_rope_width(name: str, shape, head_dim: int, *, what: str = "") -> None:
    """A layer's ``q`` or ``k`` is ``(..., seq, head_dim)`` with the layer's ``head_dim``."""
    shape = tuple(shape)
    if len(shape) >= 2 and shape[-1] is not None and shape[-1] != head_dim:
        raise _error(what, f"{name} must be (..., seq, head_dim) with head_dim={head_dim}, got "
                           f"{name}.shape={shape}",
                     f"build the layer with head_dim={shape[-1]}, or split the heads first "
                     "(batch, heads, seq, head_dim)")


def check_rope_positions(shape, x_shape, *, name: str = "x", what: str = "") -> None:
    """Positions ``(seq,)`` or ``(batch, seq)`` for ``x`` ``(batch, ..., seq, head_dim)``:
    ``batch`` is ``x``'s first axis (or 1); ``None`` sizes pass."""
    shape, x_shape = tuple(shape), tuple(x_shape)
    seq = x_shape[-2] if len(x_shape) >= 2 else None

    def same(a, b):
        return a is None or b is None or a == b

    ok = len(x_shape) >= 2 and (
        (len(shape) == 1 and same(shape[0], seq))
        or (len(shape) == 2 and len(x_shape) >= 3 and same(shape[1], seq)
            and (shape[0] == 1 or same(shape[0], x_shape[0]))))
    if not ok:
        raise _error(what, f"positions must have shape (seq,) or (batch, seq) matching "
                           f"{name}'s (batch, ..., seq, head_dim), got positions.shape={shape} "
                           f"for {name}.shape={x_shape}", "pass one position per token")


def check_rope_weight(shape, num_heads: int, *, what: str = "") -> int:
    """A q or k projection weight ``(num_heads * head_dim, in_features)``, ``head_dim``
    even; returns ``head_dim``."""
    shape = tuple(shape)
    if len(shape) != 2 or shape[0] % num_heads:
        raise _error(what, f"weight must be (num_heads * head_dim, in_features) with "
                           f"num_heads={num_heads}, got weight.shape={shape}",
                     "pass a q or k projection weight as stored (out_features first), e.g. "
                     "nn.Linear.weight, or the transpose of a Keras Dense kernel")
    return check_head_dim(shape[0] // num_heads, what=what)
