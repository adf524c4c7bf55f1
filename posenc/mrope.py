"""Multimodal RoPE (NumPy): which axis each pair reads, and the positions of a mixed sequence.

A vision-language model such as Qwen2-VL (Wang et al., 2024) gives each token
three positions, temporal, height and width, ``(t, h, w)``, and splits RoPE's
frequency pairs between them: pair ``i`` turns by ``p[axis(i)] * inv_freq[i]``.
``sections = (s_t, s_h, s_w)`` says how many pairs each axis gets (they sum
to ``len(inv_freq)``), and the arrangement says which ones
(:func:`mrope_axes`):

* ``"chunked"`` (Qwen2-VL, Qwen2.5-VL): contiguous blocks, pairs
  ``[0, s_t)`` read ``t``, ``[s_t, s_t + s_h)`` read ``h``, the rest ``w``.
  The temporal axis then holds the fastest frequencies and the width the
  slowest.
* ``"interleaved"`` (Qwen3-VL): the pairs cycle ``t, h, w`` at stride 3,
  pair ``i`` reads ``h`` when ``i % 3 == 1`` and ``i < 3 s_h``, ``w`` when
  ``i % 3 == 2`` and ``i < 3 s_w``, and ``t`` otherwise, so that every axis
  sees fast and slow frequencies.

A text token has ``t = h = w``: every pair reads the same position and the
rotation is plain RoPE. :func:`mrope_positions` builds the ``(3, batch, seq)``
positions of a batch of text, images and videos (the Qwen2-VL paper's rule,
as in transformers 4.x's ``get_rope_index`` of Qwen2-VL and Qwen2.5-VL; the rule of
transformers from 5.3, at least through 5.23, with ``text_start="grid"``), with each
row's decoding offset ``rope_deltas``; :func:`mrope_decode_positions` gives the positions of
the tokens generated after the prompt. The rotation itself is in the faces
(``apply_mrope``), which reuse RoPE's own angles and rotation.
"""

from __future__ import annotations

import numbers

import numpy as np

from posenc._checks import _error, check_choice, check_float, check_positive_int

__all__ = [
    "MROPE_ARRANGEMENTS",
    "TOKEN_TYPES",
    "mrope_axes",
    "mrope_positions",
    "mrope_decode_positions",
]

#: The two ways to give RoPE's pairs to the three axes (see the module docstring).
MROPE_ARRANGEMENTS = ("chunked", "interleaved")

#: The values of ``token_types``, as Hugging Face's ``mm_token_type_ids``.
TOKEN_TYPES = {"text": 0, "image": 1, "video": 2}

#: Where the text after an image or a video starts (see :func:`mrope_positions`).
TEXT_STARTS = ("max", "grid")


# --------------------------------------------------------------------------- the rules

def _suggested_sections(num_freq: int) -> tuple[int, int, int]:
    """Qwen2-VL's proportions (16, 24, 24 of 64 pairs) for ``num_freq`` pairs."""
    spatial = 3 * num_freq // 8
    return num_freq - 2 * spatial, spatial, spatial


def check_mrope_sections(sections, num_freq: int, *, what: str = "") -> tuple[int, int, int]:
    """``sections``: three non-negative integers (pairs for t, h, w) summing to ``num_freq``."""
    example = _suggested_sections(num_freq)
    fix = (f"give each of the {num_freq} frequency pairs to one axis, e.g. "
           f"sections={example} (Qwen2-VL's proportions)")
    ok = (isinstance(sections, (tuple, list)) and len(sections) == 3
          and all(isinstance(s, numbers.Integral) and not isinstance(s, bool) and s >= 0
                  for s in sections))
    if not ok:
        raise _error(what, "sections must hold three non-negative integers, the frequency "
                           f"pairs of the temporal, height and width axes, got "
                           f"sections={sections!r}", fix)
    sections = tuple(int(s) for s in sections)
    if sum(sections) != num_freq:
        raise _error(what, f"sections must sum to len(inv_freq)={num_freq}, the number of "
                           f"frequency pairs, got sections={sections} (sum {sum(sections)})",
                     fix)
    return sections


def check_mrope_arrangement(arrangement, *, what: str = "") -> str:
    """``"chunked"`` (Qwen2-VL) or ``"interleaved"`` (Qwen3-VL)."""
    return check_choice("arrangement", arrangement, MROPE_ARRANGEMENTS, what=what,
                        fix='"chunked" gives contiguous blocks of pairs to t, h, w (Qwen2-VL, '
                            'Qwen2.5-VL), "interleaved" cycles t, h, w at stride 3 (Qwen3-VL)')


def check_mrope_positions(shape, x_shape, *, what: str = "") -> None:
    """``positions`` is ``(3, batch, seq)`` for ``x`` ``(batch, ..., seq, head_dim)``
    (``batch`` may be 1); ``None`` sizes pass."""
    from posenc.rotary import check_rope_positions

    shape = tuple(shape)
    if len(shape) != 3 or shape[0] not in (3, None):
        raise _error(what, "positions must be (3, batch, seq): the temporal, height and width "
                           f"position of each token, got positions.shape={shape}",
                     "build them with posenc.mrope.mrope_positions; for text only, repeat the "
                     "(batch, seq) positions three times (t = h = w)")
    check_rope_positions(shape[1:], x_shape, name="x", what=what)


def mrope_axes(sections, arrangement: str = "chunked") -> np.ndarray:
    """The axis (0 temporal, 1 height, 2 width) whose position each frequency pair reads.

    Args:
        sections: ``(s_t, s_h, s_w)``, the number of pairs of each axis; their
            sum is the number of frequencies.
        arrangement: ``"chunked"`` (default; Qwen2-VL: ``s_t`` zeros, then
            ``s_h`` ones, then ``s_w`` twos) or ``"interleaved"`` (Qwen3-VL:
            ``0, 1, 2`` repeated while the height and width pairs last, then
            zeros).

    Returns:
        int64 array ``(sum(sections),)``.

    Example:
        >>> mrope_axes((2, 2, 2)).tolist()
        [0, 0, 1, 1, 2, 2]
        >>> mrope_axes((4, 3, 3), "interleaved").tolist()
        [0, 1, 2, 0, 1, 2, 0, 1, 2, 0]

    References:
        Wang et al., "Qwen2-VL: Enhancing Vision-Language Model's Perception of
        the World at Any Resolution", arXiv 2409.12191, 2024, section 2.1.
    """
    what = "mrope_axes"
    arrangement = check_mrope_arrangement(arrangement, what=what)
    ok = isinstance(sections, (tuple, list)) and all(
        isinstance(s, numbers.Integral) and not isinstance(s, bool) and s >= 0 for s in sections)
    return _axes(check_mrope_sections(sections, sum(sections) if ok else 0, what=what),
                 arrangement, what=what)


def _axes(sections: tuple[int, int, int], arrangement: str, *, what: str) -> np.ndarray:
    """:func:`mrope_axes` of checked arguments; an interleaving that cannot hold ``s_h``
    height and ``s_w`` width pairs at stride 3 is an error."""
    n = sum(sections)
    if arrangement == "chunked":
        return np.repeat(np.arange(3), sections)
    i = np.arange(n)
    axes = np.zeros(n, np.int64)
    axes[(i % 3 == 1) & (i < 3 * sections[1])] = 1
    axes[(i % 3 == 2) & (i < 3 * sections[2])] = 2
    counts = tuple(int(c) for c in np.bincount(axes, minlength=3))
    if counts != sections:
        raise _error(what, f"arrangement='interleaved' cycles t, h, w at stride 3, so "
                           f"{n} pairs hold at most {(n + 1) // 3} height and {n // 3} width "
                           f"pairs, got sections={sections}",
                     f"give the height and the width at most a third of the pairs each, e.g. "
                     f"sections={(n - 2 * (n // 3), n // 3, n // 3)}, or use "
                     "arrangement='chunked'")
    return axes


def mrope_setup(sections, num_freq: int, arrangement: str, *, what: str) -> np.ndarray:
    """The checks of ``apply_mrope``'s ``sections`` and ``arrangement``, shared by both faces;
    returns :func:`mrope_axes`."""
    arrangement = check_mrope_arrangement(arrangement, what=what)
    return _axes(check_mrope_sections(sections, num_freq, what=what), arrangement, what=what)


# --------------------------------------------------------------------------- the positions

def _array(name: str, value, *, what: str, ndim=None, integer=True, fix: str = "") -> np.ndarray:
    """A tensor of any face, or a list, as a NumPy array of the given rank."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    try:
        array = np.asarray(value)
    except (TypeError, ValueError):
        array = np.asarray(object())
    if ndim is not None and array.ndim not in ((ndim,) if isinstance(ndim, int) else ndim):
        raise _error(what, f"{name} must have rank {ndim}, got shape {array.shape}", fix)
    if integer and array.size and not np.issubdtype(array.dtype, np.integer):
        raise _error(what, f"{name} must hold integers, got dtype {array.dtype}", fix)
    if not integer and array.size and not np.issubdtype(array.dtype, np.number):
        raise _error(what, f"{name} must hold numbers, got dtype {array.dtype}", fix)
    return array


def _grids(name: str, value, merge: int, *, what: str) -> list[tuple[int, int, int]]:
    if value is None:
        return []
    grids = _array(name, value, what=what, ndim=2,
                   fix="pass one (t, h, w) row per image or video, as the processor's "
                       f"{name}")
    if grids.size and grids.shape[1] != 3:
        raise _error(what, f"{name} must be (count, 3), one (t, h, w) per grid, got shape "
                           f"{grids.shape}", "pass the processor's grid_thw")
    out = []
    for t, h, w in grids.tolist():
        if t < 1 or h < 1 or w < 1 or h % merge or w % merge:
            raise _error(what, f"each grid of {name} must be positive, with h and w multiples "
                               f"of spatial_merge_size={merge}, got (t, h, w)={(t, h, w)}",
                         "pass the grid of patches before the merge, as the processor gives it")
        out.append((t, h // merge, w // merge))
    return out


def _vision_block(start: int, grid, interval) -> np.ndarray:
    """``(3, t * h * w)`` positions of one merged grid, row-major in ``(t, h, w)``; the
    times are truncated in the dtype of ``interval`` (float32 for absolute time)."""
    t, h, w = grid
    times = np.trunc(np.arange(t).astype(np.asarray(interval).dtype) * interval).astype(np.int64)
    tt, hh, ww = np.meshgrid(times, np.arange(h), np.arange(w), indexing="ij")
    return np.stack([tt, hh, ww]).reshape(3, -1) + start


def mrope_positions(token_types, *, image_grid_thw=None, video_grid_thw=None,
                    spatial_merge_size: int = 1, tokens_per_second=None,
                    second_per_grid_t=None, attention_mask=None, text_start: str = "max"):
    """The ``(3, batch, seq)`` M-RoPE positions of a batch of text, image and video tokens,
    and each row's decoding offset.

    Text tokens get ``t = h = w``, one more per token. An image or a video is a
    grid of ``t x h x w`` tokens after the spatial merge (``h`` and ``w`` of
    ``grid_thw`` divided by ``spatial_merge_size``), laid out row-major; its
    token ``(i, j, k)`` gets ``(s + time(i), s + j, s + k)``, where ``s`` is the
    block's start and ``time(i) = i`` (Qwen2-VL), or, with
    ``tokens_per_second``, the absolute time of the grid's frames
    ``trunc(i * second_per_grid_t * tokens_per_second)`` (Qwen2.5-VL: one
    temporal position per ``1 / tokens_per_second`` seconds, whatever the
    frame rate). Each block (text or vision) starts one past the largest
    position before it (``text_start="max"``, the paper's rule), so a grid
    advances the positions by ``max(h, w)`` (or more, when its times run
    past that) instead of by its ``t * h * w`` tokens.

    ``rope_deltas[b] = max(positions of row b) + 1 - (real tokens of row b)``,
    usually negative (an image advances the positions by at most its tokens;
    a video under absolute time can advance them by more): the generated tokens, which are text, take
    ``c + rope_deltas`` (:func:`mrope_decode_positions`), where ``c`` counts
    the row's real tokens before them (transformers 5:
    ``attention_mask.cumsum(-1) - 1``). Using ``c`` alone continues from the
    wrong place (the "stale offset" bug). transformers 4.x measured the delta
    against the padded length instead and added it to ``cache_position``,
    which counts the padding: do not mix the two conventions.

    With ``text_start="max"`` this is the paper's rule and that of the Qwen
    team's ``get_rope_index`` in transformers 4.x (``st_idx =
    llm_pos_ids_list[-1].max() + 1``; the tests compare it with a frozen copy)
    and up to 5.2. ``text_start="grid"`` gives the rule of transformers from
    the 5.3 rewrite of ``get_rope_index`` (at least through 5.23), with no
    stated reason, under which the block after a grid starts at
    ``s + max(h, w)`` even when the grid's temporal positions run past it (a
    video of more than ``max(h, w)`` grid steps, or Qwen2.5-VL's absolute
    times), so that the text that follows overlaps the video's times; the two
    agree for images and for videos whose temporal positions stay below
    ``max(h, w)``. One more difference: consecutive grids with no text between
    them are read one after the other (Hugging Face's groups merge them; real
    prompts put a text token between).

    Absolute times are computed as transformers 5.23 computes them from the
    processor's float32 ``second_per_grid_ts``: ``interval = tokens_per_second
    * second_per_grid_t`` rounded to float32, then ``trunc(i * interval)`` in
    float32 (float64 would truncate some products differently, e.g. at
    ``tokens_per_second=25``).

    Args:
        token_types: ints ``(batch, seq)``: 0 text, 1 image, 2 video (Hugging
            Face's ``mm_token_type_ids``); each run of image or video tokens
            holds the tokens of one or more grids, in order.
        image_grid_thw: ``(num_images, 3)`` ints ``(t, h, w)``, the images of
            every row in order (the patch grid before the merge, as the
            processor gives it); ``None`` if there are none.
        video_grid_thw: ``(num_videos, 3)``, the same for the videos.
        spatial_merge_size: patches merged along each spatial axis into one
            token (2 in Qwen2-VL); default 1.
        tokens_per_second: ``None`` (default; Qwen2-VL: one temporal position
            per grid step) or the temporal positions per second of video
            (Qwen2.5-VL's ``vision_config.tokens_per_second``).
        second_per_grid_t: ``(num_videos,)`` seconds between the grid steps of
            each video (Qwen2.5-VL's ``second_per_grid_ts``,
            ``temporal_patch_size / fps``); default 1.0 each. Needs
            ``tokens_per_second``.
        attention_mask: optional ``(batch, seq)``, 1 for real tokens and 0 for
            padding (left or right): positions count the real tokens only, and
            padding gets position 0 (as transformers 5; 4.x gave it 1; either
            is masked).
        text_start: ``"max"`` (default; the paper, transformers 4.x to 5.2) or
            ``"grid"`` (transformers from 5.3, at least through 5.23; see above).

    Returns:
        ``(positions, rope_deltas)``: int64 arrays ``(3, batch, seq)`` and
        ``(batch,)`` (Hugging Face returns the deltas as ``(batch, 1)``).

    Example:
        >>> types = [[0, 0, 1, 1, 1, 1, 1, 1, 0]]            # text, a 2 x 3 image, text
        >>> positions, deltas = mrope_positions(types, image_grid_thw=[[1, 4, 6]],
        ...                                     spatial_merge_size=2)
        >>> positions[:, 0].tolist()
        [[0, 1, 2, 2, 2, 2, 2, 2, 5], [0, 1, 2, 2, 2, 3, 3, 3, 5], [0, 1, 2, 3, 4, 2, 3, 4, 5]]
        >>> deltas.tolist()
        [-3]

    References:
        Wang et al., "Qwen2-VL: Enhancing Vision-Language Model's Perception of
        the World at Any Resolution", arXiv 2409.12191, 2024, section 2.1;
        Bai et al., "Qwen2.5-VL Technical Report", arXiv 2502.13923, 2025,
        section 2.1.3.
    """
    what = "mrope_positions"
    types = _array("token_types", token_types, what=what, ndim=2,
                   fix="pass (batch, seq) ints, 0 text, 1 image, 2 video; a single sequence "
                       "as [token_types]")
    bad = sorted(set(np.unique(types).tolist()) - set(TOKEN_TYPES.values()))
    if bad:
        raise _error(what, f"token_types must be 0 (text), 1 (image) or 2 (video), got "
                           f"{bad[0]!r}", "mark every token with its modality")
    merge = check_positive_int("spatial_merge_size", spatial_merge_size, what=what,
                               fix="pass the vision encoder's spatial_merge_size (2 in Qwen2-VL)")
    text_start = check_choice("text_start", text_start, TEXT_STARTS, what=what,
                              fix='"max" starts each block one past the largest position '
                                  'before it (the paper), "grid" at the last grid\'s start + '
                                  "max(h, w) (transformers >= 5.3)")
    grids = {1: _grids("image_grid_thw", image_grid_thw, merge, what=what),
             2: _grids("video_grid_thw", video_grid_thw, merge, what=what)}
    videos = len(grids[2])
    if tokens_per_second is not None:
        tokens_per_second = check_float("tokens_per_second", tokens_per_second, above=0.0,
                                        what=what, fix="pass vision_config.tokens_per_second")
    if second_per_grid_t is None:
        seconds = np.ones(videos)
    else:
        if tokens_per_second is None:
            raise _error(what, "second_per_grid_t needs tokens_per_second (absolute time, "
                               "Qwen2.5-VL), got tokens_per_second=None",
                         "pass tokens_per_second=, or leave second_per_grid_t=None for "
                         "Qwen2-VL's frame steps")
        seconds = _array("second_per_grid_t", second_per_grid_t, what=what, ndim=1,
                         integer=False, fix="pass one number per video").astype(np.float64)
        if len(seconds) != videos or not np.all(np.isfinite(seconds) & (seconds > 0)):
            raise _error(what, f"second_per_grid_t must hold one positive number per video "
                               f"({videos}), got second_per_grid_t={seconds.tolist()}",
                         "pass temporal_patch_size / fps for each video")
    if attention_mask is None:
        mask = np.ones(types.shape, bool)
    else:
        mask = _array("attention_mask", attention_mask, what=what, ndim=2,
                      integer=False, fix="pass (batch, seq), 1 for real tokens")
        if mask.shape != types.shape:
            raise _error(what, f"attention_mask must have the shape of token_types "
                               f"{types.shape}, got attention_mask.shape={mask.shape}",
                         "pass one 1 (real token) or 0 (padding) per token")
        mask = mask.astype(bool)

    positions = np.zeros((3,) + types.shape, np.int64)
    deltas = np.zeros(types.shape[0], np.int64)
    used = {1: 0, 2: 0}
    names = {1: "image", 2: "video"}
    for b in range(types.shape[0]):
        row = types[b][mask[b]]
        blocks, start, i = [], 0, 0
        while i < len(row):
            kind = int(row[i])
            end = i
            while end < len(row) and row[end] == kind:
                end += 1
            if kind == 0:
                block = np.broadcast_to(np.arange(end - i) + start, (3, end - i))
                blocks.append(block)
                start = int(block[0, -1]) + 1
            else:
                covered = 0
                while covered < end - i:
                    if used[kind] >= len(grids[kind]):
                        raise _error(what, f"token_types hold more {names[kind]} tokens than "
                                           f"{names[kind]}_grid_thw's {len(grids[kind])} "
                                           f"grids give (row {b})",
                                     f"pass the grid of every {names[kind]} of the batch, "
                                     "in order")
                    grid = grids[kind][used[kind]]
                    interval = 1.0
                    if kind == 2 and tokens_per_second is not None:
                        interval = np.float32(tokens_per_second) * np.float32(seconds[used[kind]])
                    block = _vision_block(start, grid, interval)
                    blocks.append(block)
                    covered += block.shape[1]
                    start = (int(block.max()) + 1 if text_start == "max"
                             else start + max(grid[1], grid[2]))
                    used[kind] += 1
                if covered != end - i:
                    raise _error(what, f"a run of {end - i} {names[kind]} tokens (row {b}) does "
                                       f"not match its grids, which hold {covered} tokens",
                                 "each grid (t, h, w) takes t * h * w / spatial_merge_size^2 "
                                 "tokens; check spatial_merge_size and the grids' order")
            i = end
        if blocks:
            row_positions = np.concatenate(blocks, axis=1)
            positions[:, b, mask[b]] = row_positions
            deltas[b] = int(row_positions.max()) + 1 - len(row)
    for kind in (1, 2):
        if used[kind] != len(grids[kind]):
            raise _error(what, f"{names[kind]}_grid_thw has {len(grids[kind])} grids but "
                               f"token_types hold the tokens of {used[kind]}",
                         f"pass only the grids of the {names[kind]}s in this batch")
    return positions, deltas


def mrope_decode_positions(rope_deltas, cache_position) -> np.ndarray:
    """The ``(3, batch, seq)`` positions of tokens generated after an M-RoPE prompt.

    A generated token is text, so its three positions are equal:
    ``cache_position + rope_deltas``, where ``cache_position`` is the token's
    index among its row's real tokens (the prompt's real tokens and the
    tokens generated so far; padding not counted, as transformers 5's
    ``attention_mask.cumsum(-1) - 1``, unlike transformers' own
    ``cache_position``, which counts padded slots) and ``rope_deltas`` the
    row's offset from :func:`mrope_positions`. The offset belongs to one prompt: a new prompt
    (a new image) needs its own.

    Args:
        rope_deltas: ints ``(batch,)`` or ``(batch, 1)``.
        cache_position: an int (one new token at that index in every row), or
            ints ``(seq,)`` (the same indices in every row) or ``(batch, seq)``
            (per row; with left padding, count each row's real tokens, e.g.
            ``attention_mask.sum(-1, keepdims=True)`` for the next token).

    Returns:
        int64 array ``(3, batch, seq)``.

    Example:
        >>> mrope_decode_positions([-3], 9)[:, 0].tolist()     # after the prompt above
        [[6], [6], [6]]
    """
    what = "mrope_decode_positions"
    deltas = _array("rope_deltas", rope_deltas, what=what, ndim=(1, 2),
                    fix="pass the rope_deltas of mrope_positions, (batch,)").astype(np.int64)
    if deltas.ndim == 2 and deltas.shape[1] != 1:
        raise _error(what, f"rope_deltas must be (batch,) or (batch, 1), got shape "
                           f"{deltas.shape}", "pass the rope_deltas of mrope_positions")
    deltas = deltas.reshape(-1, 1)
    if isinstance(cache_position, numbers.Integral) and not isinstance(cache_position, bool):
        cache = np.full((1, 1), int(cache_position), np.int64)
    else:
        cache = _array("cache_position", cache_position, what=what, ndim=(1, 2),
                       fix="pass an int, (seq,) or (batch, seq) indices").astype(np.int64)
        cache = cache.reshape(1, -1) if cache.ndim == 1 else cache
        if cache.shape[0] not in (1, deltas.shape[0]):
            raise _error(what, f"cache_position (batch, seq) must have the batch of rope_deltas "
                               f"({deltas.shape[0]}), got cache_position.shape={cache.shape}",
                         "pass one row of indices per row of the batch, or one for all")
    out = cache + deltas
    return np.broadcast_to(out[None], (3,) + out.shape).copy()
