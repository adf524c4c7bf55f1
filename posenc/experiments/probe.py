"""``probe``: how much position does each layer of a trained model still carry?

For every scheme and seed, the lab's causal Transformer learns to predict the next character of
the Python reference, as in :mod:`posenc.experiments.lm_extrapolation`. Before and after
training, a linear probe (:func:`posenc.diagnostics.fit_probe`: closed-form ridge regression,
scored on held-out windows) predicts each character's position in its window from the hidden
states of every layer (the embedding output, then each block's). Probing representations for
position follows Wang & Chen (2020) for encoders and Haviv et al. (2022) for language models
without any positional encoding.

A second probe reads where the relative schemes put position, the attention scores: from the
heads' logit differences of every (query, earlier key) pair of a block
(:func:`posenc.diagnostics.offset_features`), it predicts the offset ``i - j``
(:func:`posenc.diagnostics.probe_offsets`), before and after training like the first.

One row per (scheme, seed, stage, probe, layer), ``stage`` being ``"init"`` or ``"trained"``
and ``probe`` ``"position"`` (the hidden states of layer ``layer``: 0 the embedding output,
then each block's), ``"permuted"`` (the same hidden states, the positions replaced by the
control task's :func:`control_labels`) or ``"offset"`` (the attention scores of block
``layer``, from 1): the
probe's held-out R^2, the accuracy of its rounded prediction and its mean absolute error; the
trained rows also hold the final training loss; the position and offset rows also hold the
lowest and highest held-out R^2 over :data:`SPLITS` other random splits of the windows
(``r2_split_low``, ``r2_split_high``), the part of the probe's error that comes from which
windows it is scored on. The
metadata also hold, for the learned table, its mean cosine similarity by offset before and after
training, for one validation sentence every layer's and head's attention weights of each
trained model (seed of the first run), and the trained T5 model's first-layer bias per head,
for the pictures of the book.
"""

from __future__ import annotations

import numpy as np

from posenc.diagnostics import mean_by_offset, probe_layers, probe_offsets, similarity
from posenc.experiments import data
from posenc.experiments.cli import add_training_arguments, sizes

NAME = "probe"

#: The schemes the book compares (T5 for its learned bias per head).
PROBE_SCHEMES = ("none", "sinusoidal", "learned", "rope", "alibi", "t5")

QUICK = dict(train_len=32, steps=200, batch_size=16, dim=64, depth=2, heads=4, lr=3e-3,
             probe_windows=96, sentence_len=24)
DEFAULT = dict(train_len=128, steps=2000, batch_size=64, dim=256, depth=4, heads=8, lr=1e-3,
               probe_windows=512, sentence_len=48)

def control_labels(length: int) -> np.ndarray:
    """The control task's labels: the positions ``0 .. length-1`` under one fixed permutation.

    A probe that only tells the positions' vectors apart fits these as well as the true
    positions; one that reads an order does not (Hewitt & Liang's control tasks). The
    permutation is the same for every scheme, seed and layer.

    Example:
        >>> labels = control_labels(8)
        >>> sorted(labels.tolist()) == list(range(8)), bool((labels != np.arange(8)).any())
        (True, True)
    """
    return np.random.default_rng(0).permutation(length)


def add_arguments(parser) -> None:
    group = parser.add_argument_group(NAME)
    add_training_arguments(group, PROBE_SCHEMES)
    for option in ("probe-windows", "sentence-len"):
        group.add_argument(f"--{option}", type=int, default=None)
    group.add_argument("--ridge", type=float, default=1.0, help="the probe's ridge penalty")


def settings(args) -> dict:
    chosen = sizes(args, QUICK, DEFAULT, PROBE_SCHEMES)
    chosen["ridge"] = args.ridge
    return chosen


def sentence(valid_ids, vocab, length: int):
    """The validation sentence whose attention is drawn: ``(ids (1, length), text)``.

    The first place in the validation text where a sentence starts (a capital letter after
    ``". "``) and the next ``length`` characters are letters, spaces and commas only: prose,
    not code, so that the picture reads as a sentence.
    """
    import re

    text = vocab.decode(valid_ids)
    found = re.search(r"(?<=\. )[A-Z][A-Za-z ,]{%d}" % (length - 1), text)
    start = found.start() if found else 0
    ids = np.asarray(valid_ids[start:start + length])[None]
    return ids, vocab.decode(ids[0])


def _table(model, runner):
    """The learned table of a lab Transformer as a NumPy array."""
    return runner.to_numpy(runner.position_weights(model)[0])


def _first_layer_bias(model, length, runner):
    """The first block's position bias ``(heads, length, length)`` of a bias scheme (NumPy)."""
    return runner.to_numpy(model.blocks[0].attention.position_bias(length, length))[0]


#: How many other random splits of the probe windows each probe is refitted on, for the range
#: of its held-out R^2 over the split (the rows' ``r2_split_low`` and ``r2_split_high``).
SPLITS = 20


def _probe_rows(model, windows, s, ctx, scheme, seed, stage):
    hidden = ctx.runner.hidden_states(model, windows)
    maps = ctx.runner.attention_maps(model, windows)
    position = probe_layers(hidden, ridge=s["ridge"], seed=seed)
    offset = probe_offsets(maps, ridge=s["ridge"], seed=seed)
    split_r2 = {
        "position": np.array([[r.r2 for r in probe_layers(hidden, ridge=s["ridge"], seed=k)]
                              for k in range(1000, 1000 + SPLITS)]),
        "offset": np.array([[r.r2 for r in probe_offsets(maps, ridge=s["ridge"], seed=k)]
                            for k in range(1000, 1000 + SPLITS)])}
    permuted = probe_layers(hidden, control_labels(windows.shape[1]), ridge=s["ridge"],
                            seed=seed)
    rows = []
    for probe, results, first in (("position", position, 0), ("offset", offset, 1),
                                  ("permuted", permuted, 0)):
        for layer, result in enumerate(results, start=first):
            rows.append({"scheme": scheme, "seed": seed, "stage": stage, "probe": probe,
                         "layer": layer, "r2": round(result.r2, 6),
                         "accuracy": round(result.accuracy, 6),
                         "mean_abs_error": round(result.mean_abs_error, 6),
                         "train_r2": round(result.train_r2, 6)})
            if probe in split_r2:
                values = split_r2[probe][:, layer - first]
                rows[-1]["r2_split_low"] = round(float(values.min()), 6)
                rows[-1]["r2_split_high"] = round(float(values.max()), 6)
    return rows


def run(args, ctx) -> dict:
    s = settings(args)
    vocab, train_ids, valid_ids = data.split("pydoc")
    windows = data.lm_windows(valid_ids, s["train_len"], max_windows=s["probe_windows"])[0]
    sentence_ids, sentence_text = sentence(valid_ids, vocab, s["sentence_len"])
    rows, table_profile, attention, t5_bias = [], {}, {}, None
    for seed in ctx.seeds:
        for scheme in s["schemes"]:
            model = ctx.runner.make_model(scheme, len(vocab), dim=s["dim"], depth=s["depth"],
                                          heads=s["heads"], max_len=s["train_len"], seed=seed)
            rows += _probe_rows(model, windows, s, ctx, scheme, seed, "init")
            if scheme == "learned":
                before = mean_by_offset(similarity(_table(model, ctx.runner)))
            result = ctx.runner.fit(model, lambda step: data.lm_batch(
                train_ids, s["batch_size"], s["train_len"], seed=seed * 1_000_003 + step),
                steps=s["steps"], lr=s["lr"], desc=f"{scheme} seed {seed}")
            trained = _probe_rows(model, windows, s, ctx, scheme, seed, "trained")
            for row in trained:
                row["final_loss"] = round(result["losses"][-1], 6)
            rows += trained
            if scheme == "learned":
                offsets, after = mean_by_offset(similarity(_table(model, ctx.runner)))
                keep = offsets >= 0
                table_profile[str(seed)] = {"offsets": offsets[keep].tolist(),
                                            "before": np.round(before[1][keep], 6).tolist(),
                                            "after": np.round(after[keep], 6).tolist()}
            if seed == ctx.seeds[0] and scheme == "t5":
                bias = _first_layer_bias(model, s["sentence_len"], ctx.runner)
                t5_bias = np.round(bias, 4).tolist()
            if seed == ctx.seeds[0]:
                maps = ctx.runner.attention_maps(model, sentence_ids)
                attention[scheme] = np.round(np.stack([m[0] for m in maps]), 4).tolist()
            ctx.log(f"{scheme} seed {seed}: R^2 by layer, position "
                    + ", ".join(f"{row['r2']:.3f}" for row in trained
                                if row["probe"] == "position")
                    + "; offset " + ", ".join(f"{row['r2']:.3f}" for row in trained
                                              if row["probe"] == "offset"))
            ctx.write_results(rows, {"settings": s, "partial": True})
    extra = {"settings": s, "learned_table_similarity_by_offset": table_profile,
             "sentence": sentence_text, "attention": attention, "t5_first_layer_bias": t5_bias,
             "partial": False}
    path = ctx.write_results(rows, extra)
    return {"results": path, "rows": len(rows)}
