"""``lm-extrapolation``: a character language model trained short and tested long (Press et al.).

For every positional scheme and seed, a causal Transformer learns to predict the next character
of the Python reference (``pydoc_data.topics``, or WikiText-103 with ``--corpus wikitext-103``)
from random windows of ``train_len`` characters. It is then evaluated on the same validation
characters cut into non-overlapping windows of each length in ``eval_lens`` (shorter, equal and
longer than ``train_len``). A row per (scheme, seed, eval_len) holds the loss (nats per
character), the perplexity per character and bits per character.

Evaluation options: ``--eval-chars N`` scores the first ``N`` validation characters (the
committed runs: 16,384, 35 % of the split); ``--eval-chars 0`` the whole validation
split, cut to a multiple of the longest window so that every length scores the same
characters. ``--eval-stride S`` evaluates each length a second time with sliding windows
``S`` apart that score each character once with at least ``length - S`` characters of context
(``sliding_loss``, ``sliding_bits_per_char``, ``sliding_perplexity`` and ``sliding_tokens`` in
the row, beside the non-overlapping windows' figures, where a character's context is its offset
in its window; at a length of ``S`` or less the two coincide).
``--position-loss`` adds, to each row, the loss at each position of the window
(``position_loss``, nats), which separates the early tokens' lack of context from the use of
far positions (with non-overlapping windows, where every position is scored in every window;
with sliding ones only the first window scores the early positions). ``--t5-clamp``
evaluates each ``t5`` model a second time with the buckets
past the longest trained distance (``train_len - 1``) set to its bias
(:func:`posenc.experiments.controls.clamp_t5_buckets`; rows of scheme ``"t5-clamped"``), the
control of the untrained-buckets explanation. ``--token-init-std matched`` draws the token
embeddings as loud as the sinusoid (:func:`posenc.experiments.controls.redraw_token_embedding`),
the control of the amplitude confound between learned and sinusoidal encodings;
``--table-init-std matched`` (with ``--schemes learned``) draws the learned table as loud too
(:func:`posenc.experiments.controls.redraw_position_table`), so that both codes and the
characters start equally loud.
``--loss-history`` keeps every training step's loss (``meta["training"][i]["losses"]``).
``--data-sha256 HEX`` refuses a corpus of another hash; every run records its
own (``meta["data_sha256"]``, :func:`posenc.experiments.data.data_sha256`).

Stacks whose layers differ (``--stacks``): the schemes default to :data:`STACK_SCHEMES`,
``rope`` (every layer RoPE), ``none`` (every layer NoPE), ``irope`` (Llama 4's mix: every
fourth layer NoPE with the temperature of its queries, the others RoPE within chunks of
``train_len // 4``, the temperature's step ``floor_scale`` the same length, as Llama 4's
8192 and 8192) and ``local-global`` (Gemma 3's mix at this depth: three local layers, a
sliding window of ``train_len // 4`` keys with RoPE base 10,000, then one global layer with
base 1,000,000), all at equal parameters (no scheme here has weights), at depth
:data:`STACK_DEPTH` (4: one NoPE or global layer and three RoPE or local ones; the lab's
quick depth of 2 would leave one layer of each) unless ``--depth`` says otherwise. Their
layers are recorded in ``meta["settings"]["stacks"]``. ``--rope-bases B [B ...]`` adds one
RoPE scheme per base, named ``rope-base<B>`` (the base against the training length:
repeat the run with other ``--train-len``).
"""

from __future__ import annotations

import math
import re

from posenc.experiments import data
from posenc.experiments.cli import SCHEMES, add_training_arguments, sizes
from posenc.experiments.runners import split_rows

NAME = "lm-extrapolation"

QUICK = dict(train_len=64, eval_lens=[32, 64, 128, 256], steps=500, batch_size=32, dim=64,
             depth=2, heads=4, lr=3e-3, eval_chars=8192)
DEFAULT = dict(train_len=128, eval_lens=[64, 128, 256, 512, 1024], steps=5000, batch_size=64,
               dim=256, depth=4, heads=8, lr=1e-3, eval_chars=0)

#: The schemes of ``--stacks``: every layer RoPE, every layer NoPE, Llama 4's mix, Gemma 3's.
STACK_SCHEMES = ("rope", "none", "irope", "local-global")
#: The single-change arms of the stacks (``--schemes`` with ``--stacks``): ``irope-notemp``
#: (irope without the temperature), ``rnope-swa`` (Yang et al.'s hybrid: three RoPE layers
#: with a sliding window of ``train_len // 4``, then one NoPE layer over every key, no
#: temperature; windows where irope has chunks) and ``local-global-1e4`` (local-global with
#: the global layer at base 10,000: the windows alone).
STACK_ABLATIONS = ("irope-notemp", "rnope-swa", "local-global-1e4")
#: The depth of ``--stacks`` (one NoPE or global layer beside three RoPE or local ones).
STACK_DEPTH = 4
#: ``--stacks --quick``: the quick setting at :data:`STACK_DEPTH`, with fewer steps.
QUICK_STACKS = dict(QUICK, depth=STACK_DEPTH, steps=250)

_ROPE_BASE = re.compile(r"^rope-base([0-9.eE+]+)$")


def stack_of(scheme: str, depth: int, train_len: int) -> list[dict] | None:
    """The layers of a stack scheme (``irope``, ``local-global``) for ``depth`` blocks trained
    on ``train_len`` characters, or ``None`` for a scheme whose layers are all alike."""
    from posenc.stacks import gemma3_stack, llama4_stack

    local = max(1, train_len // 4)
    if scheme == "irope":
        return llama4_stack(depth, nope_every=4, base=10_000.0, rope_layout="half",
                            chunk=local, qk_norm=False, floor_scale=float(local),
                            attn_scale=0.1)
    if scheme == "local-global":
        return gemma3_stack(depth, window=local, local_base=10_000.0, global_base=1_000_000.0,
                            global_factor=1.0, pattern=4)
    # The single-change arms (:data:`STACK_ABLATIONS`): each differs from a mix above, or from
    # the other, in one thing.
    if scheme == "irope-notemp":      # irope without the temperature of its NoPE layer
        return [{k: v for k, v in e.items()
                 if k not in ("attn_temperature_tuning", "floor_scale", "attn_scale")}
                for e in stack_of("irope", depth, train_len)]
    if scheme == "rnope-swa":         # Yang et al.'s hybrid: windowed RoPE layers, full NoPE
        return [({"position": "none"} if (i + 1) % 4 == 0 else
                 {"position": "rope", "base": 10_000.0, "window": local})
                for i in range(depth)]
    if scheme == "local-global-1e4":  # local-global with the global layer's base at 10,000
        return gemma3_stack(depth, window=local, local_base=10_000.0, global_base=10_000.0,
                            global_factor=1.0, pattern=4)
    return None


def model_options(scheme: str, s: dict) -> tuple[str, dict]:
    """``(position, Transformer options)`` of a lab scheme: a name of ``POSITIONS``, a stack
    (:func:`stack_of`) or ``rope-base<B>`` (RoPE of base ``B``)."""
    stack = stack_of(scheme, s["depth"], s["train_len"])
    if stack is not None:
        return "rope", {"stack": stack}
    match = _ROPE_BASE.match(scheme)
    if match:
        return "rope", {"base": float(match.group(1))}
    return scheme, {}


def add_lm_arguments(group) -> None:
    """The options every character-LM experiment shares."""
    group.add_argument("--corpus", choices=list(data.CORPORA), default="pydoc")
    add_training_arguments(group, SCHEMES)
    group.add_argument("--eval-chars", type=int, default=None,
                       help="validation characters to evaluate on (0: the whole split, cut to "
                            "a multiple of the longest window)")
    group.add_argument("--eval-stride", type=int, default=None,
                       help="also evaluate on sliding windows this many characters apart, each "
                            "character scored once (the rows' sliding_* columns)")
    group.add_argument("--position-loss", action="store_true",
                       help="record the loss at each position of the evaluation windows")
    group.add_argument("--t5-clamp", action="store_true",
                       help="also evaluate each t5 model with the buckets past the trained "
                            "distances clamped to the last trained one (scheme t5-clamped)")
    group.add_argument("--token-init-std", default=None,
                       help="redraw the token embeddings with this standard deviation "
                            "('matched': 1/sqrt(2), as loud as the sinusoid; the lab's own is "
                            "0.02)")
    group.add_argument("--table-init-std", default=None,
                       help="redraw a learned position table with this standard deviation "
                            "('matched': 1/sqrt(2), as loud as the sinusoid)")
    group.add_argument("--loss-history", action="store_true",
                       help="record every training step's loss in meta['training']")
    group.add_argument("--data-sha256", default=None,
                       help="refuse a corpus whose SHA-256 is not this (meta['data_sha256'] "
                            "of the run being repeated)")
    group.add_argument("--stacks", action="store_true",
                       help="stacks whose layers differ: schemes rope, none, irope, "
                            "local-global at depth 4 (unless --schemes, --depth)")
    group.add_argument("--rope-bases", type=float, nargs="+", default=None,
                       help="add one RoPE scheme per base (rope-base<B>)")


def add_arguments(parser) -> None:
    group = parser.add_argument_group(NAME)
    add_lm_arguments(group)
    group.add_argument("--eval-lens", type=int, nargs="+", default=None,
                       help="evaluation window lengths")


def settings(args, quick=QUICK, default=DEFAULT, schemes=SCHEMES) -> dict:
    stacks = getattr(args, "stacks", False)
    if stacks:
        quick, default = QUICK_STACKS, dict(default, depth=STACK_DEPTH)
        schemes = STACK_SCHEMES
    chosen = sizes(args, quick, default, schemes)
    chosen["corpus"] = args.corpus
    for base in getattr(args, "rope_bases", None) or ():
        if not base > 1.0:
            raise ValueError(f"{NAME}: rope_bases must be numbers above 1, got {base}; pass "
                             "e.g. --rope-bases 100 1000 10000.")
        name = f"rope-base{base:g}"
        if name not in chosen["schemes"]:
            chosen["schemes"].append(name)
    if stacks or getattr(args, "rope_bases", None):
        chosen["stacks"] = {scheme: model_options(scheme, chosen)[1]
                            for scheme in chosen["schemes"] if model_options(scheme, chosen)[1]}
    stride = getattr(args, "eval_stride", None)
    if stride is not None:
        if stride < 1:
            raise ValueError(f"{NAME}: eval_stride must be a positive integer, got "
                             f"eval_stride={stride}; pass a stride of at least 1, or leave it "
                             "out for non-overlapping windows.")
        chosen["eval_stride"] = stride
    if getattr(args, "position_loss", False):
        chosen["position_loss"] = True
    if getattr(args, "t5_clamp", False):
        chosen["t5_clamp"] = True
    if getattr(args, "loss_history", False):
        chosen["loss_history"] = True
    for option in ("token_init_std", "table_init_std"):
        std = getattr(args, option, None)
        if std is None:
            continue
        from posenc.experiments.controls import MATCHED_STD

        try:
            chosen[option] = MATCHED_STD if std == "matched" else float(std)
        except ValueError:
            raise ValueError(f"{NAME}: {option} must be a number or 'matched', got "
                             f"{option}={std!r}; pass e.g. 0.7 or matched.") from None
    if chosen.get("table_init_std") and set(chosen["schemes"]) != {"learned"}:
        raise ValueError(f"{NAME}: table_init_std redraws a learned table, got schemes="
                         f"{chosen['schemes']}; pass --schemes learned with it.")
    return chosen


def history(result, s) -> dict:
    """``{"losses": [every step's loss]}`` when ``s["loss_history"]``, else ``{}``."""
    if not s.get("loss_history"):
        return {}
    return {"losses": [round(float(v), 5) for v in result["losses"]]}


def load_data(s, args):
    """``(vocabulary, train_ids, valid_ids, data_sha256)`` of the corpus in ``s``, refused
    when ``--data-sha256`` names another hash."""
    return data.split(s["corpus"], expect_sha256=getattr(args, "data_sha256", None),
                      with_sha256=True)


def eval_ids(valid_ids, s, longest: int):
    """The validation ids scored: the first ``eval_chars`` characters (and the one after),
    or with ``eval_chars`` 0 the whole split cut to a multiple of ``longest``."""
    if s["eval_chars"]:
        return valid_ids[: s["eval_chars"] + 1]
    count = (len(valid_ids) - 1) // longest * longest
    if count < 1:
        raise ValueError(f"{NAME}: the longest window ({longest}) is longer than the "
                         f"validation text ({len(valid_ids)} characters); use shorter "
                         "evaluation lengths.")
    return valid_ids[: count + 1]


def train_lm(scheme, seed, s, ctx, train_ids, vocab_size, max_len):
    """Train one character LM; returns ``(model, fit result)``."""
    position, options = model_options(scheme, s)
    model = ctx.runner.make_model(position, vocab_size, dim=s["dim"], depth=s["depth"],
                                  heads=s["heads"], max_len=max_len, seed=seed,
                                  train_len=s["train_len"], **options)
    if s.get("token_init_std"):
        from posenc.experiments.controls import redraw_token_embedding

        redraw_token_embedding(model, s["token_init_std"], seed)
    if s.get("table_init_std"):
        from posenc.experiments.controls import redraw_position_table

        redraw_position_table(model, s["table_init_std"], seed)

    def batch_fn(step):
        return data.lm_batch(train_ids, s["batch_size"], s["train_len"],
                             seed=seed * 1_000_003 + step)

    return model, ctx.runner.fit(model, batch_fn, steps=s["steps"], lr=s["lr"],
                                 desc=f"{scheme} seed {seed}")


def eval_lm(model, valid_ids, length, s, ctx, desc="", longest=None):
    """Loss, perplexity and bits per character on non-overlapping windows of ``length``, and
    with ``s["eval_stride"]`` the same on windows sliding that far apart (``sliding_*``); with ``s["position_loss"]`` also the loss at each
    position of the window. ``longest``: the longest window of the run (default ``length``),
    whose multiple of the split is scored when ``s["eval_chars"]`` is 0."""
    ids = eval_ids(valid_ids, s, longest or length)
    windows = data.lm_windows(ids, length)
    rows_per_batch = max(1, 16_384 // length)
    got = ctx.runner.evaluate(model, split_rows(windows, rows_per_batch), desc=desc)
    found = {"loss": round(got["loss"], 6), "perplexity": round(got["perplexity"], 6),
             "bits_per_char": round(got["loss"] / math.log(2), 6),
             "accuracy": round(got["token_accuracy"], 6), "tokens": got["tokens"]}
    stride = s.get("eval_stride")
    if stride:
        if stride < length:
            slid = ctx.runner.evaluate(
                model, split_rows(data.lm_sliding_windows(ids, length, stride), rows_per_batch),
                desc=f"{desc} sliding")
        else:                       # windows ``stride`` apart do not overlap: the same scores
            slid = got
        found.update(sliding_loss=round(slid["loss"], 6),
                     sliding_perplexity=round(slid["perplexity"], 6),
                     sliding_bits_per_char=round(slid["loss"] / math.log(2), 6),
                     sliding_tokens=slid["tokens"])
    if s.get("position_loss"):
        by_position = ctx.runner.position_loss(model, split_rows(windows, rows_per_batch),
                                               desc=f"{desc} by position")
        found["position_loss"] = [round(float(v), 6) for v in by_position["loss"]]
    return found


def run(args, ctx) -> dict:
    s = settings(args)
    vocab, train_ids, valid_ids, digest = load_data(s, args)
    rows, training = [], []
    for seed in ctx.seeds:
        for scheme in s["schemes"]:
            model, result = train_lm(scheme, seed, s, ctx, train_ids, len(vocab),
                                     max(s["eval_lens"]))
            total, position = ctx.runner.count_parameters(model)
            training.append({"scheme": scheme, "seed": seed, "first_loss": result["losses"][0],
                             "final_loss": result["losses"][-1],
                             "seconds": round(result["seconds"], 2),
                             "tokens_per_second": round(result["tokens_per_second"], 1),
                             "parameters": total, "position_parameters": position,
                             **history(result, s)})
            for length in s["eval_lens"]:
                got = eval_lm(model, valid_ids, length, s, ctx, desc=f"{scheme} len {length}",
                              longest=max(s["eval_lens"]))
                rows.append({"scheme": scheme, "seed": seed, "eval_len": length,
                             "train_len": s["train_len"], **got})
                ctx.log(f"{scheme} seed {seed}: perplexity {got['perplexity']:.3f} at "
                        f"{length} characters")
            if s.get("t5_clamp") and scheme == "t5":
                from posenc.experiments.controls import clamp_t5_buckets

                clamp_t5_buckets(model, s["train_len"] - 1)
                for length in s["eval_lens"]:
                    got = eval_lm(model, valid_ids, length, s, ctx, longest=max(s["eval_lens"]),
                                  desc=f"{scheme} clamped len {length}")
                    rows.append({"scheme": "t5-clamped", "seed": seed, "eval_len": length,
                                 "train_len": s["train_len"], **got})
            ctx.write_results(rows, {"settings": s, "training": training, "partial": True,
                                     "data_sha256": digest})
    path = ctx.write_results(rows, {"settings": s, "training": training, "partial": False,
                                    "data_sha256": digest,
                                    "vocab_size": len(vocab),
                                    "train_chars": len(train_ids),
                                    "valid_chars": len(valid_ids)})
    return {"results": path, "rows": len(rows)}
