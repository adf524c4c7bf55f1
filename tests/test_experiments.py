"""posenc.experiments: the command line, the data, the metadata, the results, distributed runs."""

from __future__ import annotations

import csv
import importlib.util
import math
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from posenc.experiments import EXPERIMENTS, experiment, load_results, results_path
from posenc.experiments import data
from posenc.experiments.cli import main, parse_args
from posenc.experiments.context import ExperimentContext
from posenc.experiments.analysis import over_seeds
from posenc.experiments.records import read_results, write_results

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--schemes", "alibi", "--tasks", "copy", "--train-len", "4", "--steps", "12",
        "--batch-size", "8", "--dim", "16", "--depth", "1", "--heads", "2",
        "--eval-examples", "6", "--no-progress"]


def _env():
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1",
               TF_CPP_MIN_LOG_LEVEL="2")
    return env


# --------------------------------------------------------------------------- the command line


def test_every_experiment_has_its_functions():
    for name in ("length-generalization", "lm-extrapolation", "ablation"):
        module = experiment(name)
        assert callable(module.add_arguments) and callable(module.run), name
    assert set(EXPERIMENTS) >= {"length-generalization", "lm-extrapolation", "ablation"}


def test_unknown_experiment_is_refused():
    with pytest.raises(ValueError, match="name must be one of"):
        experiment("lenght-generalization")
    with pytest.raises(SystemExit):
        parse_args(["lenght-generalization"])


def test_parse_common_and_own_options():
    args = parse_args(["length-generalization", "--quick", "--seeds", "3", "4", "--out", "x",
                       "--framework", "keras", "--tasks", "reverse", "--train-len", "5"])
    assert args.name == "length-generalization" and args.quick
    assert args.seeds == [3, 4] and args.seed == 3
    assert args.framework == "keras" and args.out == Path("x")
    assert args.tasks == ["reverse"] and args.train_len == 5
    assert parse_args(["ablation"]).seeds == [0]
    assert parse_args(["ablation", "--seed", "7"]).seeds == [7]


@pytest.mark.parametrize("argv", [
    ["ablation", "--seed", "1", "--seeds", "2"],       # one or the other
    ["ablation", "--framework", "jax"],
    ["lm-extrapolation", "--tasks", "copy"],           # not an option of this experiment
    ["ablation", "--seeds", "-1"],
])
def test_bad_command_lines_exit(argv):
    with pytest.raises(SystemExit):
        parse_args(argv)


def test_quick_and_default_sizes():
    lg = experiment("length-generalization")
    quick = lg.settings(parse_args(["length-generalization", "--quick"]))
    full = lg.settings(parse_args(["length-generalization"]))
    assert quick["test_len"] == 2 * quick["train_len"]
    assert full["train_len"] == 20 and full["test_len"] == 40     # as in Kazemnejad et al.
    assert quick["steps"] < full["steps"] and quick["dim"] < full["dim"]
    given = lg.settings(parse_args(["length-generalization", "--quick", "--steps", "3"]))
    assert given["steps"] == 3


# --------------------------------------------------------------------------- the data


def _outputs(inputs, targets, weights):
    """Per row: the input symbols (before SEP) and the weighted targets (the output)."""
    for x, y, w in zip(inputs, targets, weights):
        sep = int(np.argmax(x == data.SEP))
        yield x[:sep], y[w > 0]


@pytest.mark.parametrize("task, expect", [
    ("copy", lambda s: s),
    ("reverse", lambda s: s[::-1]),
    ("sort", np.sort),
])
def test_task_targets(task, expect):
    inputs, targets, weights = data.task_batch(task, [1, 3, 7, 12], seed=5)
    for row, (source, output) in enumerate(_outputs(inputs, targets, weights)):
        assert len(source) == [1, 3, 7, 12][row]
        np.testing.assert_array_equal(output, expect(source))
    assert (inputs[:, 1:][weights[:, 1:] > 0] == targets[:, :-1][weights[:, 1:] > 0]).all()


def test_reverse_is_not_copy():
    inputs, targets, weights = data.task_batch("reverse", [6], seed=0)
    source, output = next(_outputs(inputs, targets, weights))
    assert not np.array_equal(source, output)
    np.testing.assert_array_equal(output[::-1], source)


def test_addition_targets_are_sums():
    inputs, targets, weights = data.task_batch("addition", [1, 4, 9], seed=3)
    for x, y, w in zip(inputs, targets, weights):
        sep = int(np.argmax(x == data.SEP))
        plus = int(np.argmax(x == data.PLUS))
        a, b = x[:plus] - 3, x[plus + 1:sep] - 3
        digits = y[w > 0] - 3
        value = lambda ds: sum(int(d) * 10 ** i for i, d in enumerate(ds))  # noqa: E731
        assert len(a) == len(b) and len(digits) == len(a) + 1
        assert value(digits) == value(a) + value(b)


def test_padding_and_widths():
    inputs, targets, weights = data.task_batch("copy", [2, 5], seed=0, width=20)
    assert inputs.shape == (2, 20)
    assert (inputs[0, 4:] == data.PAD).all() and weights[0].sum() == 2
    assert data.sequence_width("copy", 5) == 10 and data.sequence_width("addition", 5) == 17
    with pytest.raises(ValueError, match="width"):
        data.task_batch("copy", [5], seed=0, width=3)


def test_task_data_come_from_the_seed():
    a = data.length_batches("sort", 6, 10, seed=2)
    b = data.length_batches("sort", 6, 10, seed=2)
    c = data.length_batches("sort", 6, 10, seed=3)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a[0], c[0])
    assert a[0].shape[1] == data.sequence_width("sort", 6)


def test_bos_starts_every_example_and_keeps_the_defaults():
    plain = data.task_batch("copy", [3, 5], seed=0)
    x, y, w = data.task_batch("copy", [3, 5], seed=0, bos=True)
    bos = data.bos_id("copy")
    assert bos == data.task_vocab_size("copy") == 19 and data.task_vocab_size(
        "copy", bos=True) == 20
    assert (x[:, 0] == bos).all() and not (plain[0] == bos).any()
    # the same examples one position later, the same output tokens scored
    np.testing.assert_array_equal(x[:, 1:], plain[0])
    np.testing.assert_array_equal(w[:, 1:], plain[2])
    assert data.sequence_width("copy", 5, bos=True) == data.sequence_width("copy", 5) + 1 == 11
    seq, sep = data.task_example("addition", 2, np.random.default_rng(0), bos=True)
    assert seq[0] == data.bos_id("addition") == 13 and seq[sep] == data.SEP and sep == 6
    assert data.task_chance("sort", 8) == 0.125 and data.task_chance("addition") == 0.1
    with pytest.raises(ValueError, match="bos must be True or False"):
        data.task_batch("copy", [3], seed=0, bos=1)


def test_clamping_t5_buckets_keeps_the_trained_distances():
    import torch

    from posenc.experiments.controls import clamp_t5_buckets, t5_bias_layers
    from posenc.experiments.runners import TorchRunner

    model = TorchRunner().make_model("t5", 19, dim=16, depth=2, heads=2, max_len=64, seed=0)
    tokens = torch.from_numpy(data.task_batch("copy", [4, 4], seed=0)[0])     # 8 positions
    with torch.no_grad():
        before = model(tokens)
        tables = [layer.relative_attention_bias.detach().clone()
                  for layer in t5_bias_layers(model)]
    assert clamp_t5_buckets(model, 7) == [7, 7]      # distances 0..7 have a bucket each
    for old, layer in zip(tables, t5_bias_layers(model)):
        new = layer.relative_attention_bias.detach()
        torch.testing.assert_close(new[:8], old[:8])
        torch.testing.assert_close(new[8:], old[7].expand(24, -1))
        assert not torch.equal(new, old)
    with torch.no_grad():                            # what the training length saw: unchanged
        torch.testing.assert_close(model(tokens), before)
    with pytest.raises(ValueError, match="clamp_t5_buckets: model has no T5 bias layer"):
        clamp_t5_buckets(TorchRunner().make_model("alibi", 19, dim=16, depth=1, heads=2), 7)


def test_hybrid_scale_reads_the_trained_weight_in_both_frameworks():
    import torch

    from posenc.experiments.controls import hybrid_scale
    from posenc.experiments.runners import KerasRunner, TorchRunner

    model = TorchRunner().make_model("hybrid", 19, dim=16, depth=1, heads=2, max_len=32, seed=0)
    assert hybrid_scale(model) == 1.0
    (encoding,) = [m for m in model.modules() if hasattr(m, "offset")]
    with torch.no_grad():
        encoding.scale.fill_(0.25)
    assert hybrid_scale(model) == 0.25
    assert hybrid_scale(TorchRunner().make_model("rope", 19, dim=16, depth=1, heads=2)) is None
    keras_model = KerasRunner().make_model("hybrid", 19, dim=16, depth=1, heads=2, max_len=32,
                                           seed=0)
    assert hybrid_scale(keras_model) == 1.0


@pytest.mark.keras
def test_fire_l_starts_every_threshold_at_the_training_length_in_both_frameworks():
    import keras
    import torch

    from posenc.experiments.runners import KerasRunner, TorchRunner

    kw = dict(dim=16, depth=2, heads=2, max_len=64, seed=0)
    fire = TorchRunner().make_model("fire", 19, **kw)
    fire_l = TorchRunner().make_model("fire-L", 19, train_len=8, **kw)
    thresholds = [m.threshold for m in fire_l.modules() if type(m).__name__ == "FireBias"]
    assert thresholds == [8.0, 8.0]                              # every layer's, not the first
    assert [m.threshold for m in fire.modules() if type(m).__name__ == "FireBias"] == [512.0] * 2
    ids = torch.randint(0, 19, (2, 24), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():                     # the same weights, another threshold: other logits
        assert not torch.allclose(fire(ids), fire_l(ids))
    keras_model = KerasRunner(init_from_torch=True).make_model("fire-L", 19, train_len=8, **kw)
    layers = keras_model._flatten_layers(include_self=True, recursive=True)
    assert [m.threshold for m in layers if type(m).__name__ == "FireBias"] == [8.0, 8.0]
    with torch.no_grad():
        want = fire_l(ids).numpy()
    got = keras.ops.convert_to_numpy(keras_model(ids.numpy().astype("int32")))
    np.testing.assert_allclose(got, want, atol=1e-4)
    with pytest.raises(ValueError, match="train_len"):
        TorchRunner().make_model("fire-L", 19, **kw)


@pytest.mark.keras
def test_redrawn_position_table_is_the_same_in_both_frameworks():
    from posenc.experiments.controls import MATCHED_STD, redraw_position_table
    from posenc.experiments.runners import KerasRunner, TorchRunner

    model = TorchRunner().make_model("learned", 19, dim=16, depth=1, heads=2, max_len=64, seed=0)
    redraw_position_table(model, MATCHED_STD, seed=3)
    table = model.position_encoding.table.detach().numpy()
    assert table.std() == pytest.approx(MATCHED_STD, rel=0.05)
    keras_model = KerasRunner().make_model("learned", 19, dim=16, depth=1, heads=2, max_len=64,
                                           seed=0)
    redraw_position_table(keras_model, MATCHED_STD, seed=3)
    import keras

    np.testing.assert_allclose(keras.ops.convert_to_numpy(keras_model.position_encoding.table),
                               table, rtol=1e-6)
    with pytest.raises(ValueError, match="redraw_position_table: model has no learned"):
        redraw_position_table(TorchRunner().make_model("rope", 19, dim=16, depth=1, heads=2),
                              0.5, seed=0)
    with pytest.raises(ValueError, match="table_init_std redraws a learned table"):
        main(["lm-extrapolation", "--quick", "--table-init-std", "matched", "--no-progress",
              "--device", "cpu"])


@pytest.mark.keras
def test_clamping_t5_buckets_in_keras():
    import keras

    from posenc.experiments.controls import clamp_t5_buckets, t5_bias_layers, trained_t5_bucket
    from posenc.experiments.runners import KerasRunner

    model = KerasRunner().make_model("t5", 19, dim=16, depth=1, heads=2, max_len=64, seed=0)
    (layer,) = t5_bias_layers(model)
    old = np.array(keras.ops.convert_to_numpy(layer.relative_attention_bias))
    bucket = trained_t5_bucket(layer, 20)
    assert clamp_t5_buckets(model, 20) == [bucket] and 16 < bucket < 31
    new = np.array(keras.ops.convert_to_numpy(layer.relative_attention_bias))
    np.testing.assert_array_equal(new[: bucket + 1], old[: bucket + 1])
    assert (new[bucket + 1:] == old[bucket]).all()


def test_fit_stops_when_asked():
    from posenc.experiments.runners import TorchRunner

    runner = TorchRunner()
    model = runner.make_model("alibi", 19, dim=16, depth=1, heads=2, max_len=16, seed=0)
    seen = []

    def stop(step, losses):
        seen.append((step, len(losses)))
        return step == 2

    got = runner.fit(model, lambda step: data.task_batch("copy", [3, 4], seed=step),
                     steps=10, stop=stop)
    assert len(got["losses"]) == 3 and seen == [(0, 1), (1, 2), (2, 3)]


def test_length_generalization_with_bos_criterion_and_clamp(tmp_path):
    main(["length-generalization", "--schemes", "t5", "--tasks", "copy", "--train-len", "3",
          "--steps", "6", "--batch-size", "4", "--dim", "16", "--depth", "1", "--heads", "2",
          "--eval-examples", "4", "--bos", "--criterion", "1.0", "--check-every", "3",
          "--heldout-examples", "2", "--t5-clamp", "--loss-history", "--no-progress",
          "--device", "cpu",
          "--out", str(tmp_path)])
    results = load_results("length-generalization", folder=tmp_path)
    meta, rows = results["meta"], results["rows"]
    assert meta["settings"]["bos"] and meta["settings"]["criterion"] == 1.0
    (trained,) = meta["training"]
    assert trained["steps_run"] == 6 and trained["learned"] in (True, False)
    assert len(trained["losses"]) == 6 and trained["losses"][0] == pytest.approx(
        trained["first_loss"], abs=1e-5)
    assert 0.0 <= trained["heldout_exact"] <= 1.0
    assert [r["scheme"] for r in rows] == ["t5"] * 6 + ["t5-clamped"] * 6
    assert all(r["chance"] == 1 / 16 and r["chance_exact"] == (1 / 16) ** r["length"]
               for r in rows)
    assert len(meta["data_sha256"]) == 64
    # the clamp leaves the trained lengths alone: lengths 1..3 read distances 0..6 of 0..6
    inside = {(r["scheme"], r["length"]): r["token_accuracy"] for r in rows
              if r["in_distribution"]}
    assert all(inside["t5", n] == inside["t5-clamped", n] for n in (1, 2, 3))


def test_corpus_split_and_windows():
    vocab, train, valid = data.split("pydoc")
    assert len(train) > 400_000 and 40_000 < len(valid) < len(train) / 8
    assert vocab.decode(train[:50]) == data.load_corpus("pydoc")[0][:50]
    x, y, w = data.lm_batch(train, 4, 16, seed=0)
    np.testing.assert_array_equal(x[:, 1:], y[:, :-1])
    x, y, w = data.lm_windows(valid, 100)
    assert x.shape == (len(valid[:-1]) // 100, 100)
    np.testing.assert_array_equal(x.reshape(-1), valid[: x.size])     # non-overlapping, in order
    np.testing.assert_array_equal(y.reshape(-1), valid[1: x.size + 1])


def test_the_pydoc_corpus_is_the_shipped_copy_on_every_python():
    import hashlib

    train, valid = data.load_corpus("pydoc")
    assert len(train + valid) == 465_048           # Python 3.11.7's pydoc_data.topics
    assert hashlib.sha256((train + valid).encode()).hexdigest() == data.PYDOC_SHA256
    assert data.data_sha256(train, valid) == data.PYDOC_SHA256
    assert data.PYDOC_FILE.stat().st_size < 200_000
    assert (data.PYDOC_FILE.parent / "LICENSE-PSF.txt").exists()
    installed = data.load_corpus("pydoc-installed")
    assert (installed == (train, valid)) == (sys.version_info[:3] == (3, 11, 7))


def test_a_changed_corpus_is_refused(tmp_path, monkeypatch):
    import gzip

    bad = tmp_path / "topics.txt.gz"
    bad.write_bytes(gzip.compress(b"not the Python reference"))
    monkeypatch.setattr(data, "PYDOC_FILE", bad)
    with pytest.raises(ValueError, match="has SHA-256 .* reinstall posenc"):
        data.load_corpus("pydoc")


def test_split_refuses_an_unexpected_hash():
    *_, digest = data.split("pydoc", with_sha256=True)
    assert digest == data.PYDOC_SHA256
    assert len(data.split("pydoc", expect_sha256=digest)) == 3
    with pytest.raises(ValueError, match="split: the corpus 'pydoc' has data_sha256="):
        data.split("pydoc", expect_sha256="0" * 64)


def test_sliding_windows_score_each_character_once():
    ids = np.arange(1, 42)                 # 40 targets
    for length, stride in ((8, 4), (8, 1), (8, 8), (10, 3)):
        x, y, w = data.lm_sliding_windows(ids, length, stride)
        np.testing.assert_array_equal(x[:, 1:], y[:, :-1])
        scored = y[w > 0]
        # every target once, in order, from the first: length + stride * k of them
        np.testing.assert_array_equal(scored, ids[1: 1 + len(scored)])
        assert (len(scored) - length) % stride == 0 and len(ids) - 1 - len(scored) < stride
        # every scored character but the first window's has length - stride of context
        assert (w[1:, : length - stride] == 0).all()
    same = data.lm_sliding_windows(ids, 8, 8)
    for a, b in zip(same, data.lm_windows(ids, 8)):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="stride must be at most length=8"):
        data.lm_sliding_windows(ids, 8, 9)


def test_the_whole_validation_split_is_cut_to_the_longest_window():
    from posenc.experiments.lm_extrapolation import eval_ids

    valid = np.arange(1001)
    assert len(eval_ids(valid, {"eval_chars": 0}, 64)) == 960 + 1      # 15 windows of 64
    assert len(eval_ids(valid, {"eval_chars": 100}, 64)) == 101
    # every length scores the same characters
    for length in (16, 32, 64):
        x, y, w = data.lm_windows(eval_ids(valid, {"eval_chars": 0}, 64), length)
        assert y.size == 960


def test_position_loss_matches_the_mean_loss():
    from posenc.experiments.runners import TorchRunner

    runner = TorchRunner()
    model = runner.make_model("alibi", 19, dim=16, depth=1, heads=2, max_len=32, seed=0)
    batch = data.task_batch("copy", [5, 7, 3, 7], seed=0)
    mean = runner.evaluate(model, [batch])
    by_position = runner.position_loss(model, [batch])
    assert by_position["tokens"].sum() == mean["tokens"]
    weights = by_position["tokens"]
    kept = weights > 0
    assert np.isnan(by_position["loss"][~kept]).all()
    total = (by_position["loss"][kept] * weights[kept]).sum() / weights.sum()
    assert total == pytest.approx(mean["loss"], rel=1e-5)


@pytest.mark.keras
def test_position_loss_agrees_between_the_runners():
    from posenc.experiments.runners import KerasRunner, TorchRunner

    batch = data.task_batch("copy", [5, 7, 3, 7], seed=0)
    for runner in (TorchRunner(), KerasRunner()):
        model = runner.make_model("alibi", 19, dim=16, depth=1, heads=2, max_len=32, seed=0)
        got = runner.position_loss(model, [batch])
        mean = runner.evaluate(model, [batch])
        kept = got["tokens"] > 0
        assert (got["loss"][kept] * got["tokens"][kept]).sum() / got["tokens"].sum() \
            == pytest.approx(mean["loss"], rel=1e-5)


def test_lm_run_records_the_hash_the_positions_and_slides(tmp_path):
    main(["lm-extrapolation", "--schemes", "rope", "--train-len", "8", "--eval-lens", "8", "16",
          "--steps", "2", "--batch-size", "4", "--dim", "16", "--depth", "1", "--heads", "2",
          "--eval-chars", "0", "--eval-stride", "4", "--position-loss", "--loss-history",
          "--no-progress",
          "--device", "cpu", "--out", str(tmp_path)])
    results = load_results("lm-extrapolation", folder=tmp_path)
    meta, rows = results["meta"], results["rows"]
    assert meta["data_sha256"] == data.PYDOC_SHA256
    assert meta["settings"]["eval_stride"] == 4 and meta["settings"]["position_loss"]
    # the whole split, cut to a multiple of 16, every character scored once at both lengths
    assert rows[0]["tokens"] == rows[1]["tokens"] == (meta["valid_chars"] - 1) // 16 * 16
    # sliding windows 4 apart score the same characters, with more context than the offset
    assert rows[0]["sliding_tokens"] == rows[1]["sliding_tokens"] == rows[0]["tokens"]
    assert rows[1]["sliding_loss"] != rows[1]["loss"]
    assert rows[1]["sliding_bits_per_char"] == pytest.approx(rows[1]["sliding_loss"] / math.log(2),
                                                             abs=1e-5)
    assert [len(r["position_loss"]) for r in rows] == [8, 16]
    assert len(meta["training"][0]["losses"]) == 2
    with pytest.raises(ValueError, match="data_sha256"):
        main(["lm-extrapolation", "--schemes", "rope", "--steps", "1", "--quick",
              "--data-sha256", "0" * 64, "--no-progress", "--device", "cpu",
              "--out", str(tmp_path)])


@pytest.mark.skipif(importlib.util.find_spec("datasets") is not None,
                    reason="datasets is installed")
def test_wikitext_without_datasets_says_what_to_do():
    with pytest.raises(ValueError, match="pip install datasets"):
        data.load_corpus("wikitext-103")


# --------------------------------------------------------------------------- metadata, results


def test_metadata_fields():
    ctx = ExperimentContext(name="ablation", seeds=[1, 2], command="python -m x ablation")
    meta = ctx.metadata()
    for key in ("command", "commit", "hardware", "versions", "seeds", "wall_seconds",
                "started_utc", "world_size", "framework", "quick"):
        assert key in meta, key
    assert meta["seeds"] == [1, 2] and meta["command"] == "python -m x ablation"
    assert meta["hardware"]["cpu_cores"] == os.cpu_count()
    assert meta["versions"]["python"].startswith("3.") and "numpy" in meta["versions"]
    assert len(meta["commit"].split("+")[0]) == 40 or meta["commit"] == "unknown"


def test_results_round_trip(tmp_path):
    rows = [{"scheme": "alibi", "length": np.int64(4), "exact_match": np.float32(0.5)},
            {"scheme": "rope", "length": 8, "exact_match": 0.25}]
    path = write_results(tmp_path / "demo", "results", rows, {"seeds": [0]})
    back = read_results(path)
    assert back["meta"] == {"seeds": [0]}
    assert back["rows"] == [{"scheme": "alibi", "length": 4, "exact_match": 0.5},
                            {"scheme": "rope", "length": 8, "exact_match": 0.25}]
    with open(path.with_suffix(".csv")) as handle:
        table = list(csv.DictReader(handle))
    assert [r["scheme"] for r in table] == ["alibi", "rope"] and table[1]["length"] == "8"
    assert load_results("demo", folder=tmp_path) == back
    with pytest.raises(ValueError, match="no results"):
        load_results("demo", framework="keras", folder=tmp_path)
    assert results_path("demo", framework="keras", tag="s1", folder=tmp_path).name == (
        "results-keras-s1.json")


def test_rank_one_does_not_write(tmp_path):
    ctx = ExperimentContext(name="demo", rank=1, world_size=2, out=tmp_path)
    assert ctx.write_results([{"a": 1}]) is None
    assert not (tmp_path / "demo").exists()
    np.testing.assert_array_equal(ctx.shard(np.arange(6)), [1, 3, 5])


@pytest.mark.parametrize("name", ["length-generalization", "lm-extrapolation", "ablation"])
def test_committed_results_have_metadata(name):
    paths = sorted(results_path(name).parent.glob("results*.json"))
    assert len(paths) >= 5, paths                      # the study's five seeds at least
    for path in paths:
        results = json.loads(path.read_text())
        meta = results["meta"]
        assert meta["experiment"] == name and meta["command"].startswith(
            ("python -m posenc.experiments", "torchrun")), path.name
        assert meta["wall_seconds"] > 0 and meta["seeds"] and results["rows"], path.name
        assert not meta["partial"] and len(meta["data_sha256"]) == 64, path.name
        assert not str(meta["commit"]).endswith("+dirty"), path.name


# --------------------------------------------------------------------------- runs


@pytest.mark.slow
def test_tiny_run_writes_rows_and_metadata(tmp_path, capsys):
    main(["length-generalization", *TINY, "--device", "cpu", "--out", str(tmp_path)])
    results = load_results("length-generalization", folder=tmp_path)
    rows = results["rows"]
    assert [r["length"] for r in rows] == list(range(1, 9))     # test to twice L = 4
    assert all(0.0 <= r["exact_match"] <= r["token_accuracy"] <= 1.0 for r in rows)
    assert [r["in_distribution"] for r in rows] == [True] * 4 + [False] * 4
    meta = results["meta"]
    assert meta["settings"]["train_len"] == 4 and meta["training"][0]["scheme"] == "alibi"
    assert meta["command"].startswith("python -m posenc.experiments length-generalization")
    assert "--out" not in meta["command"] and str(tmp_path) not in json.dumps(results)


def _run(cmd, tmp):
    done = subprocess.run(cmd, cwd=tmp, env=_env(), capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.slow
def test_two_gloo_processes_match_one_process(tmp_path):
    """torchrun with 2 CPU processes (gloo) trains on the same global batches as one process:
    the same initial loss, the same training losses to float rounding, the same evaluation."""
    args = ["-m", "posenc.experiments", "length-generalization", *TINY, "--device", "cpu"]
    _run([sys.executable, *args, "--out", str(tmp_path / "one")], tmp_path)
    _run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
          "--standalone", *args, "--out", str(tmp_path / "two")], tmp_path)
    one = load_results("length-generalization", folder=tmp_path / "one")
    two = load_results("length-generalization", folder=tmp_path / "two")
    assert two["meta"]["world_size"] == 2 and one["meta"]["world_size"] == 1
    assert two["meta"]["command"].startswith("torchrun --nproc_per_node 2")
    t1, t2 = one["meta"]["training"][0], two["meta"]["training"][0]
    assert t2["first_loss"] == pytest.approx(t1["first_loss"], rel=1e-6)
    assert t2["final_loss"] == pytest.approx(t1["final_loss"], rel=1e-3)
    for r1, r2 in zip(one["rows"], two["rows"], strict=True):
        assert r1["length"] == r2["length"]
        assert r2["token_accuracy"] == pytest.approx(r1["token_accuracy"], abs=0.02)
    assert not list((tmp_path / "two").rglob("*keras*"))


@pytest.mark.slow
@pytest.mark.keras
def test_keras_quick_smoke(tmp_path):
    main(["lm-extrapolation", "--quick", "--framework", "keras", "--schemes", "alibi",
          "--steps", "3", "--batch-size", "4", "--train-len", "16", "--eval-lens", "16", "32",
          "--dim", "16", "--depth", "1", "--heads", "2", "--eval-chars", "256",
          "--no-progress", "--out", str(tmp_path)])
    results = load_results("lm-extrapolation", framework="keras", folder=tmp_path)
    assert results["meta"]["framework"] == "keras" and "keras" in results["meta"]["versions"]
    assert [r["eval_len"] for r in results["rows"]] == [16, 32]
    assert all(np.isfinite(r["perplexity"]) for r in results["rows"])
    assert json.dumps(results)   # plain JSON


def test_importing_the_lab_imports_no_framework():
    code = ("import sys, posenc.experiments, posenc.experiments.cli, posenc.experiments.data, "
            "posenc.experiments.context, posenc.experiments.records, posenc.experiments.runners, "
            "posenc.experiments.analysis, posenc.experiments.stats, "
            "posenc.experiments.controls; print(sorted(m for m in ('torch', 'keras', "
            "'tensorflow') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=_env(), cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_analysis_summaries():
    from posenc.experiments.analysis import lm_ratio, markdown_table, ranking

    rows = [{"scheme": "a", "eval_len": n, "perplexity": p, "seed": s}
            for s, (p1, p2) in enumerate([(2.0, 4.0), (4.0, 4.0)]) for n, p in ((8, p1), (16, p2))]
    # per seed: ratios 2 and 1; their geometric mean (exp of the mean loss difference) is
    # sqrt(2), not the ratio of the mean perplexities, 4 / 3
    assert lm_ratio(rows, "a", 16, 8) == pytest.approx(2.0 ** 0.5)
    acc = [{"scheme": "x", "token_accuracy": 0.2}, {"scheme": "y", "token_accuracy": 0.9}]
    assert ranking(acc) == [("y", 0.9), ("x", 0.2)]
    assert markdown_table(["a", "b"], [["x", 1.234]]).splitlines()[2] == "| x | 1.23 |"



def _lm_rows():
    """Three seeds of two schemes at two lengths; b's loss is a's plus 0.1, plus 0.3 at 16."""
    rows = []
    for seed, base in enumerate([1.0, 1.2, 1.6]):
        for scheme in ("a", "b"):
            for n in (8, 16):
                loss = base + (0.1 if scheme == "b" else 0.0) + (0.3 if scheme == "b"
                                                                  and n == 16 else 0.0)
                rows.append({"scheme": scheme, "seed": seed, "eval_len": n, "loss": loss,
                             "perplexity": float(np.exp(loss))})
    return rows


def test_over_seeds_averages_losses_not_perplexities():
    rows = [{"s": "a", "perplexity": 2.0}, {"s": "a", "perplexity": 8.0}]
    got = over_seeds(rows, ("s",), "perplexity")["a"]
    assert got["mean"] == pytest.approx(4.0) and (got["min"], got["max"]) == (2.0, 8.0)
    assert over_seeds(rows, ("s",), "perplexity", geometric=False)["a"]["mean"] == 5.0


def test_intervals_and_paired_differences_over_seeds():
    from posenc.experiments.analysis import intervals, lm_bits, paired_differences

    rows = _lm_rows()
    loss = intervals(rows, ("scheme", "eval_len"), "loss")
    assert loss["a", 8].mean == pytest.approx(3.8 / 3) and loss["a", 8].n == 3
    bits = lm_bits(rows)
    assert bits["a", 8].mean == pytest.approx(3.8 / 3 / np.log(2))
    # the seeds' shared offsets cancel: b - a is exactly 0.1 at 8 and 0.4 at 16
    diff = paired_differences(rows, "loss", "a", keys=("eval_len",))
    assert set(diff) == {("b", 8), ("b", 16)}
    assert diff["b", 8].mean == pytest.approx(0.1) and diff["b", 8].half_width < 1e-9
    assert diff["b", 16].mean == pytest.approx(0.4)
    # unpaired, the same seeds give an interval that includes zero
    assert loss["b", 8].low < loss["a", 8].mean
    with pytest.raises(ValueError, match="reference='c' is not in the rows"):
        paired_differences(rows, "loss", "c", keys=("eval_len",))
    with pytest.raises(ValueError, match="seed 0 appears twice"):
        intervals(rows + rows[:1], ("scheme", "eval_len"), "loss")


def test_lm_log_ratio_is_per_seed_and_unit_free():
    from posenc.experiments.analysis import lm_log_ratio, lm_log_ratios
    from posenc.experiments.stats import verdict

    rows = _lm_rows()
    got = lm_log_ratio(rows, "b", 16, 8)
    expect = [(b + 0.4) / (b + 0.1) - 1 for b in (1.0, 1.2, 1.6)]
    assert got.mean == pytest.approx(np.mean(expect)) and got.n == 3
    # the same losses in bits give the same relative change
    in_bits = [dict(r, loss=r["loss"] / np.log(2)) for r in rows]
    assert lm_log_ratio(in_bits, "b", 16, 8).mean == pytest.approx(got.mean)
    assert lm_log_ratios(rows, 16, 8)["a"].mean == 0.0
    assert verdict(got, "positive").word == "agree"
    assert verdict(lm_log_ratios(rows, 16, 8)["a"], "positive").word == "inconclusive"


def test_ablation_rows_without_a_loss_use_the_log_of_the_perplexity():
    from posenc.experiments.analysis import paired_differences

    rows = [{"scheme": k, "seed": s, "perplexity": p, "long_perplexity": 2 * p}
            for s in range(3) for k, p in (("a", 4.0 + s), ("b", 8.0 + 2 * s))]
    diff = paired_differences(rows, "loss", "a")["b"]
    assert diff.mean == pytest.approx(np.log(2.0))
    assert paired_differences(rows, "long_loss", "a")["b"].mean == pytest.approx(np.log(2.0))


def _lg_rows():
    rows = []
    for seed in range(3):
        for scheme, inside, outside in (("good", 1.0, 0.5 + 0.1 * seed), ("bad", 0.5, 0.9)):
            for n in range(1, 5):
                rows.append({"task": "copy", "scheme": scheme, "seed": seed, "length": n,
                             "in_distribution": n <= 2, "chance": 1 / 16,
                             "exact_match": inside if n <= 2 else outside,
                             "token_accuracy": inside if n <= 2 else outside})
    return rows


def test_accuracy_beyond_training_only_where_the_task_was_learned():
    from posenc.experiments.analysis import beyond_training, learned_cells

    rows = _lg_rows()
    learned = learned_cells(rows)
    assert learned["copy", "good", 0] and not learned["copy", "bad", 2]
    got = beyond_training(rows)
    assert got["copy", "good"]["interval"].mean == pytest.approx(0.6)
    assert got["copy", "good"]["learned"] == [0, 1, 2]
    assert got["copy", "good"]["chance"] == pytest.approx(1 / 16)
    # the scheme that did not learn has no accuracy past L, however high its numbers
    assert got["copy", "bad"]["interval"] is None and got["copy", "bad"]["learned"] == []
    # a run's own held-out criterion wins over the rows
    training = [{"task": "copy", "scheme": s, "seed": k, "learned": s == "bad"}
                for s in ("good", "bad") for k in range(3)]
    assert beyond_training(rows, training=training)["copy", "good"]["interval"] is None


def _seed_run(seed, **meta):
    base = {"experiment": "lm-extrapolation", "framework": "torch", "commit": "abc",
            "seeds": [seed], "settings": {"steps": 3}, "data_sha256": "f00", "partial": False}
    return {"meta": {**base, **meta}, "rows": [{"scheme": "a", "seed": seed, "loss": 1.0}]}


def test_combine_runs_checks_that_the_runs_belong_together():
    from posenc.experiments.analysis import combine_runs

    got = combine_runs([_seed_run(0), _seed_run(1)])
    assert got["meta"]["seeds"] == [0, 1] and len(got["rows"]) == 2
    assert got["meta"]["data_sha256"] == "f00"
    for bad, match in ((_seed_run(0), "seed 0 is in runs 0 and 1"),
                       (_seed_run(1, settings={"steps": 4}), "other settings"),
                       (_seed_run(1, data_sha256="bad"), "data_sha256='bad'"),
                       (_seed_run(1, commit="abc+dirty"), "not a clean commit"),
                       (_seed_run(1, partial=True), "is partial")):
        with pytest.raises(ValueError, match=match):
            combine_runs([_seed_run(0), bad])
    assert combine_runs([_seed_run(0), _seed_run(1, commit="abc+dirty")], require_clean=False)
    # data drawn from the seed (the tasks' test examples): one hash per seed, each required
    per_seed = combine_runs([_seed_run(0), _seed_run(1, data_sha256="bad")], same_data=False)
    assert per_seed["meta"]["data_sha256"] == {0: "f00", 1: "bad"}
    with pytest.raises(ValueError, match="run 1 has no data_sha256"):
        combine_runs([_seed_run(0), _seed_run(1, data_sha256=None)], same_data=False)


def test_load_seed_runs_reads_one_file_per_seed(tmp_path):
    from posenc.experiments.analysis import load_seed_runs

    for seed in (0, 1, 10):
        write_results(tmp_path / "lm-extrapolation", f"results-seed{seed}",
                      _seed_run(seed)["rows"], _seed_run(seed)["meta"])
    got = load_seed_runs("lm-extrapolation", folder=tmp_path)
    assert got["meta"]["seeds"] == [0, 1, 10]
    assert load_seed_runs("lm-extrapolation", folder=tmp_path,
                          tags=["seed1"])["meta"]["seeds"] == [1]
    with pytest.raises(ValueError, match="load_seed_runs: no results"):
        load_seed_runs("ablation", folder=tmp_path)

# --------------------------------------------------------------------------- the two trainers


def _copy_batches(step):
    """Batches of the copy task: uneven lengths, so that the weights do not sum to the size."""
    width = data.sequence_width("copy", 6)
    lengths = np.random.default_rng(step).integers(1, 7, size=8)
    return data.task_batch("copy", lengths, seed=step + 100, width=width)


@pytest.mark.keras
def test_the_two_trainers_have_one_recipe(monkeypatch):
    """Keras' optimizer has PyTorch's settings: the global norm clipped (not each weight's),
    the same epsilon, betas and weight decay, and the learning rate of every step."""
    from posenc.experiments import runners
    from posenc.experiments.runners import KerasRunner, TorchRunner, learning_rate

    steps, lr = 25, 3e-3
    model = TorchRunner().make_model("alibi", 7, dim=8, depth=1, heads=2, max_len=16)
    torch_opt = TorchRunner().optimizer(model, steps, lr).defaults
    keras_opt = KerasRunner().optimizer(None, steps, lr)
    assert keras_opt.global_clipnorm == runners.CLIP_NORM and keras_opt.clipnorm is None
    assert keras_opt.epsilon == torch_opt["eps"] == runners.EPSILON
    assert (keras_opt.beta_1, keras_opt.beta_2) == torch_opt["betas"] == runners.BETAS
    assert keras_opt.weight_decay == torch_opt["weight_decay"] == runners.WEIGHT_DECAY
    want = [learning_rate(step, steps, lr) for step in range(steps)]
    schedule = KerasRunner().schedule(steps, lr)
    got = [float(schedule(step)) for step in range(steps)]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert want[0] == lr / runners.warmup_steps(steps) and want[-1] == pytest.approx(
        lr / 10, rel=0.05)

    seen = []                                    # the rates PyTorch's loop steps with
    optimizer = TorchRunner.optimizer

    def spy(self, model, steps, lr):
        opt = optimizer(self, model, steps, lr)
        opt.register_step_pre_hook(lambda o, *_: seen.append(o.param_groups[0]["lr"]))
        return opt

    monkeypatch.setattr(TorchRunner, "optimizer", spy)
    TorchRunner().fit(model, lambda step: (np.zeros((2, 4), np.int64),) * 2
                      + (np.ones((2, 4), np.float32),), steps=steps, lr=lr)
    assert seen == want


@pytest.mark.keras
def test_the_two_trainers_agree_from_the_same_weights():
    """From the same initial weights and batches, Keras' losses are PyTorch's.

    The first loss is computed before any update: the two forward passes agree to float32
    rounding (``1e-6`` relative). Each later loss follows updates of AdamW, which divides each
    weight's gradient by its own running size, so a rounding-level difference in a small
    gradient grows to a larger share of that weight's step; Keras also adds epsilon before the
    bias correction, PyTorch after. Measured over 8 steps of this model the gap stays below
    ``1e-5`` relative; the test allows ``1e-4``. A per-weight clip, Keras' ``1e-7`` epsilon,
    another schedule, Keras' mean over every position instead of over the weights, or the
    clipping of TensorFlow's sliced embedding gradient each move the losses by ``1e-3`` or more.
    """
    from posenc.experiments.runners import KerasRunner, TorchRunner
    from posenc.interop import copy_weights

    vocab, steps = data.task_vocab_size("copy"), 8
    torch_runner, keras_runner = TorchRunner(), KerasRunner()
    build = dict(dim=16, depth=1, heads=2, max_len=16)
    torch_model = torch_runner.make_model("t5", vocab, seed=0, **build)
    losses = {"torch": torch_runner.fit(torch_model, _copy_batches, steps=steps)["losses"]}
    for how in ("fit", "fit_monitored"):          # fit_monitored: the gradients experiment's
        keras_model = keras_runner.make_model("t5", vocab, seed=1, **build)
        copy_weights(torch_runner.make_model("t5", vocab, seed=0, **build), keras_model)
        result = getattr(keras_runner, how)(keras_model, _copy_batches, steps=steps)
        losses[how] = result["losses"] if how == "fit" else result[1]
    for how in ("fit", "fit_monitored"):
        assert losses[how][0] == pytest.approx(losses["torch"][0], rel=1e-6), how
        np.testing.assert_allclose(losses[how], losses["torch"], rtol=1e-4, err_msg=how)
    assert len(set(np.round(losses["torch"], 3))) == steps        # the losses do move


@pytest.mark.parametrize("scheme", ["learned", "t5", "rope"])
@pytest.mark.keras
def test_init_from_torch_starts_keras_at_the_torch_logits(scheme):
    """``--init-from-torch``: the Keras runner's model of a seed computes the PyTorch runner's
    logits of that seed at initialisation; without it the faces draw their own weights."""
    import keras
    import torch

    from posenc.experiments.runners import KerasRunner, TorchRunner

    build = dict(dim=16, depth=2, heads=2, max_len=16, seed=3)
    tokens = np.random.default_rng(0).integers(0, 19, size=(2, 12))
    with torch.no_grad():
        want = TorchRunner().make_model(scheme, 19, **build)(torch.as_tensor(tokens)).numpy()

    def keras_logits(runner):
        model = runner.make_model(scheme, 19, **build)
        return keras.ops.convert_to_numpy(model(runner.tokens(tokens)))

    np.testing.assert_allclose(keras_logits(KerasRunner(init_from_torch=True)), want,
                               atol=1e-5)
    assert np.abs(keras_logits(KerasRunner()) - want).max() > 1e-2


def test_init_from_torch_is_a_keras_option():
    args = parse_args(["probe", "--framework", "keras", "--init-from-torch"])
    assert args.init_from_torch and not parse_args(["probe", "--framework", "keras"]).init_from_torch
    with pytest.raises(SystemExit):
        parse_args(["probe", "--init-from-torch"])


def test_keras_refuses_the_torch_controls():
    gradients = experiment("gradients")
    args = parse_args(["gradients", "--framework", "keras", "--schemes", "t5", "learned-scaled"])
    with pytest.raises(ValueError, match=r"learned-scaled.*--framework torch"):
        gradients.settings(args)
    assert "learned-detached" not in gradients.settings(
        parse_args(["gradients", "--framework", "keras"]))["schemes"]


def test_benchmarks_record_with_the_lab_metadata(tmp_path, monkeypatch):
    import argparse

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import record

    monkeypatch.setattr(sys, "argv", ["benchmarks/bench_x.py", "--out", str(tmp_path), "--n", "3"])
    args = argparse.Namespace(no_save=False, device="cpu", out=str(tmp_path))
    path = record.save("bench-x", [{"n": 3, "ms": 1.5}], args, started=0.0, note="demo")
    meta = read_results(path)["meta"]
    assert meta["command"] == "python benchmarks/bench_x.py --n 3"
    assert meta["benchmark"] == "bench-x" and meta["device"] == "cpu" and meta["note"] == "demo"
    for key in ("commit", "hardware", "versions", "started_utc", "wall_seconds"):
        assert key in meta, key
    assert path.name == "results.json" and str(tmp_path) not in json.dumps(meta)


def test_token_embeddings_redrawn_alike_in_both_faces():
    from posenc.experiments.controls import MATCHED_STD, redraw_token_embedding
    from posenc.experiments.runners import TorchRunner

    model = TorchRunner().make_model("sinusoidal", 50, dim=64, depth=1, heads=2, seed=0)
    redraw_token_embedding(model, MATCHED_STD, 3)
    table = model.token_embedding.detach().numpy()
    assert abs(table.std() - 2 ** -0.5) < 0.02 and abs(MATCHED_STD - 2 ** -0.5) < 1e-12
    np.testing.assert_allclose(table, np.random.default_rng(3).normal(0, MATCHED_STD, (50, 64)),
                               rtol=1e-6)
    with pytest.raises(ValueError, match="redraw_token_embedding: std must be"):
        redraw_token_embedding(model, 0.0, 3)
    args = parse_args(["lm-extrapolation", "--quick", "--token-init-std", "matched"])
    assert experiment("lm-extrapolation").settings(args)["token_init_std"] == MATCHED_STD
    with pytest.raises(ValueError, match="token_init_std must be a number or 'matched'"):
        experiment("lm-extrapolation").settings(
            parse_args(["lm-extrapolation", "--token-init-std", "loud"]))


@pytest.mark.keras
def test_token_embeddings_redrawn_in_keras():
    import keras

    from posenc.experiments.controls import redraw_token_embedding
    from posenc.experiments.runners import KerasRunner

    model = KerasRunner().make_model("sinusoidal", 50, dim=64, depth=1, heads=2, seed=0)
    redraw_token_embedding(model, 0.5, 3)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(model.token_embedding),
                               np.random.default_rng(3).normal(0, 0.5, (50, 64)), rtol=1e-6)


def test_paired_verdicts_from_rows():
    from posenc.experiments.analysis import paired_verdict

    rows = _lm_rows()
    at_16 = paired_verdict(rows, "loss", "b", "a", "positive",
                           where=lambda r: r["eval_len"] == 16)
    assert at_16.word == "agree" and at_16.interval.mean == pytest.approx(0.4)
    assert paired_verdict(rows, "loss", "b", "a", "negative",
                          where=lambda r: r["eval_len"] == 8).word == "disagree"
    assert paired_verdict(rows, "loss", "b", "a", "positive", learned=False,
                          where=lambda r: r["eval_len"] == 8).label == \
        "inconclusive (not learned)"
    with pytest.raises(ValueError, match="seed 0 appears twice"):       # two lengths mixed
        paired_verdict(rows, "loss", "b", "a", "positive")


def test_beyond_verdict_needs_both_schemes_learned():
    from posenc.experiments.analysis import beyond_verdict

    rows = _lg_rows()
    # "bad" scores higher past L but never learned the task: not a test of the claim
    got = beyond_verdict(rows, "copy", "bad", "good", "positive")
    assert (got.word, got.reason) == ("inconclusive", "not learned")
    assert got.interval.mean > 0
    good_twice = rows + [dict(r, scheme="other", exact_match=r["exact_match"] - 0.1
                              if not r["in_distribution"] else 1.0)
                         for r in rows if r["scheme"] == "good"]
    assert beyond_verdict(good_twice, "copy", "good", "other", "positive").word == "agree"
    with pytest.raises(ValueError, match="beyond_verdict: task='sort' has no rows"):
        beyond_verdict(rows, "sort", "bad", "good", "positive")


def test_ablation_records_losses_and_the_t5_control(tmp_path):
    main(["ablation", "--schemes", "t5", "--train-len", "8", "--long-factor", "2", "--steps",
          "2", "--batch-size", "4", "--dim", "16", "--depth", "1", "--heads", "2",
          "--eval-chars", "512", "--t5-clamp", "--no-progress", "--device", "cpu",
          "--out", str(tmp_path)])
    results = load_results("ablation", folder=tmp_path)
    rows = results["rows"]
    assert [r["scheme"] for r in rows] == ["t5", "t5-clamped"]
    assert results["meta"]["data_sha256"] == data.PYDOC_SHA256
    for row in rows:
        assert row["loss"] == pytest.approx(np.log(row["perplexity"]), abs=1e-5)
        assert row["long_loss"] == pytest.approx(np.log(row["long_perplexity"]), abs=1e-5)
    # at the training length the clamp changes nothing
    assert rows[0]["loss"] == pytest.approx(rows[1]["loss"], abs=1e-6)


def test_load_seed_runs_reads_the_untagged_run_beside_the_tagged_ones(tmp_path):
    # A folder with seed 0 untagged (results.json) and seed 1 tagged: the default once read
    # seed 1 alone, silently.
    from posenc.experiments.analysis import load_seed_runs

    for seed, tag in ((0, None), (1, "seed1")):
        ctx = ExperimentContext(name="ablation", seeds=[seed], out=tmp_path, tag=tag)
        ctx.write_results([{"scheme": "none", "seed": seed, "loss": 1.0 + seed}],
                          {"settings": {"steps": 3}, "partial": False})
    got = load_seed_runs("ablation", folder=tmp_path, require_clean=False)
    assert got["meta"]["seeds"] == [0, 1] and len(got["rows"]) == 2
    assert load_seed_runs("ablation", folder=tmp_path, tags=["seed1"],
                          require_clean=False)["meta"]["seeds"] == [1]


def test_meta_summary_keeps_the_dirty_mark_of_a_long_commit():
    # It once cut the commit to 12 characters, hiding "+dirty".
    from posenc.experiments.analysis import meta_summary

    commit = "0123456789abcdef0123456789abcdef01234567"
    assert meta_summary({"commit": commit + "+dirty"})["commit"] == commit[:12] + "+dirty"
    assert meta_summary({"commit": commit})["commit"] == commit[:12]
