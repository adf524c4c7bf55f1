"""``ablation``: what each positional scheme costs and buys, on the character LM.

Per scheme (every causal scheme of the lab's Transformer: none, sinusoidal, learned, hybrid,
shaw, t5, alibi, rope) and seed: the parameters (all, and those of the scheme), the training
throughput (characters per second), the validation perplexity at the training length
(in distribution) and at ``long_factor`` times it (long sequences), with their losses (nats
per character, ``loss`` and ``long_loss``: average these over seeds, not the perplexities),
and for the hybrid its trained ``hybrid_scale`` (the sinusoid's weight, 1 at the start). The
throughput is the training's own clock: compare it only between runs on an otherwise idle
machine.
The training, the evaluation options, the controls (``--t5-clamp``: a row of scheme
``"t5-clamped"`` after each ``t5`` row, the same model with its buckets clamped;
``--token-init-std``) and the corpus hash are those of
:mod:`posenc.experiments.lm_extrapolation`.
"""

from __future__ import annotations

from posenc.experiments.lm_extrapolation import (add_lm_arguments, eval_lm, history, load_data,
                                                 settings, train_lm)

NAME = "ablation"

#: Every causal scheme of the Transformer (Swin's bias needs a 2D grid of patches).
ABLATION_SCHEMES = ("none", "sinusoidal", "learned", "hybrid", "shaw", "t5", "alibi", "rope")

QUICK = dict(train_len=64, long_factor=4, steps=300, batch_size=32, dim=64, depth=2, heads=4,
             lr=3e-3, eval_chars=8192)
DEFAULT = dict(train_len=128, long_factor=4, steps=3000, batch_size=64, dim=256, depth=4,
               heads=8, lr=1e-3, eval_chars=0)


def add_arguments(parser) -> None:
    group = parser.add_argument_group(NAME)
    add_lm_arguments(group)
    group.add_argument("--long-factor", type=int, default=None,
                       help="long sequences are this many times the training length")


def run(args, ctx) -> dict:
    s = settings(args, QUICK, DEFAULT, ABLATION_SCHEMES)
    long_len = s["long_factor"] * s["train_len"]
    vocab, train_ids, valid_ids, digest = load_data(s, args)
    rows, training = [], []
    for seed in ctx.seeds:
        for scheme in s["schemes"]:
            model, result = train_lm(scheme, seed, s, ctx, train_ids, len(vocab), long_len)
            total, position = ctx.runner.count_parameters(model)
            short = eval_lm(model, valid_ids, s["train_len"], s, ctx, desc=f"{scheme} short",
                            longest=long_len)
            long = eval_lm(model, valid_ids, long_len, s, ctx, desc=f"{scheme} long",
                           longest=long_len)
            from posenc.experiments.controls import hybrid_scale

            scale = hybrid_scale(model) if scheme == "hybrid" else None
            rows.append({"scheme": scheme, "seed": seed, "parameters": total,
                         "position_parameters": position,
                         "tokens_per_second": round(result["tokens_per_second"], 1),
                         "train_seconds": round(result["seconds"], 2),
                         "final_loss": round(result["losses"][-1], 6),
                         "train_len": s["train_len"], "long_len": long_len,
                         "perplexity": short["perplexity"],
                         "long_perplexity": long["perplexity"],
                         "loss": short["loss"], "long_loss": long["loss"],
                         **({"hybrid_scale": round(scale, 6)} if scale is not None else {}),
                         **({"position_loss": short["position_loss"],
                             "long_position_loss": long["position_loss"]}
                            if s.get("position_loss") else {})})
            ctx.log(f"{scheme} seed {seed}: {total} parameters ({position} positional), "
                    f"{result['tokens_per_second']:.0f} characters/s, perplexity "
                    f"{short['perplexity']:.3f} at {s['train_len']}, "
                    f"{long['perplexity']:.3f} at {long_len}")
            if s.get("t5_clamp") and scheme == "t5":
                from posenc.experiments.controls import clamp_t5_buckets

                clamp_t5_buckets(model, s["train_len"] - 1)
                clamped = {k: eval_lm(model, valid_ids, n, s, ctx, desc=f"t5 clamped {k}",
                                      longest=long_len)
                           for k, n in (("short", s["train_len"]), ("long", long_len))}
                rows.append({**rows[-1], "scheme": "t5-clamped",
                             "perplexity": clamped["short"]["perplexity"],
                             "long_perplexity": clamped["long"]["perplexity"],
                             "loss": clamped["short"]["loss"],
                             "long_loss": clamped["long"]["loss"],
                             **({"position_loss": clamped["short"]["position_loss"],
                                 "long_position_loss": clamped["long"]["position_loss"]}
                                if s.get("position_loss") else {})})
            if s.get("loss_history"):
                training.append({"scheme": scheme, "seed": seed, **history(result, s)})
            ctx.write_results(rows, {"settings": s, "partial": True, "data_sha256": digest,
                                     **({"training": training} if training else {})})
    path = ctx.write_results(rows, {"settings": s, "vocab_size": len(vocab), "partial": False,
                                    "data_sha256": digest,
                                    **({"training": training} if training else {})})
    return {"results": path, "rows": len(rows)}
