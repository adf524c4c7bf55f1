"""The lab's data, framework-free: synthetic sequence tasks and a character corpus, from seeds.

Everything here is NumPy, so the PyTorch and Keras runs, and every process of a distributed
run, build the same arrays from the same seed.

**Synthetic tasks** (after Kazemnejad et al. 2023, "The Impact of Positional Encoding on Length
Generalization in Transformers"). A decoder-only model reads ``input SEP output`` and is trained
to predict the output tokens only. The *length* of an example is the number of input symbols
(for ``addition``, the number of digits of each operand). :data:`TASKS` maps a task's name to
the function that turns one row of random symbols into its output:

* ``copy``: the input again;
* ``reverse``: the input backwards;
* ``sort``: the input in ascending order;
* ``addition``: two numbers of ``length`` digits, least significant digit first, and their sum
  (``length + 1`` digits, least significant first), as ``a PLUS b SEP sum``.

Token ids: ``PAD = 0``, ``SEP = 1``, ``PLUS = 2``, then the symbols (the digits 0-9 for
``addition``). With ``bos=True`` every example starts with a beginning-of-sequence token, the
id after the symbols (:func:`bos_id`), so that a model without positions can count from it
(Kazemnejad et al.'s construction). :func:`task_chance` is the chance level of a task.
:func:`task_batch` returns ``(inputs, targets, weights)`` already shifted for
next-token prediction, right-padded with ``PAD`` (harmless in a causal model: a position never
sees the padding after it) and with weight 1 exactly on the positions whose target is an output
token. With teacher forcing, "every weighted argmax equals its target" is the same event as
"greedy decoding writes the whole output correctly": both fail first at the first wrong token.

**Character corpus.** :func:`load_corpus` returns the text of the Python reference
(``pydoc_data.topics``, 465,048 characters). That module differs between Python versions
(in its size, its text and its vocabulary), so the package ships one frozen copy, that of
Python 3.11.7 (PSF licence, ``corpus/LICENSE-PSF.txt``), checked against its SHA-256
(:data:`PYDOC_SHA256`) whenever it is read: ``"pydoc"`` is the same text on every Python.
``"pydoc-installed"`` is the running Python's own copy (it differs between versions), and
``"wikitext-103"`` WikiText-103 through the ``datasets`` package when it is installed and the
network answers. :func:`data_sha256` is the hash the experiments record in their metadata
(``data_sha256``); :func:`split` refuses a corpus whose hash differs from an expected one.
:class:`Vocabulary` maps the text to ids, :func:`split` into train and validation,
:func:`lm_batch` draws random training windows, :func:`lm_windows` cuts non-overlapping
evaluation windows (the evaluation of Press et al. 2022) and :func:`lm_sliding_windows`
overlapping ones that score each character once, with at least ``length - stride`` characters
of context.
"""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

import numpy as np

from posenc._checks import _error, check_bool, check_choice, check_int, check_positive_int

__all__ = ["PAD", "SEP", "PLUS", "TASKS", "task_vocab_size", "task_example", "task_batch",
           "length_batches", "sequence_width", "bos_id", "task_chance", "CORPORA", "PYDOC_FILE",
           "PYDOC_SHA256", "load_corpus",
           "data_sha256", "Vocabulary", "split", "lm_batch", "lm_windows", "lm_sliding_windows"]

PAD, SEP, PLUS = 0, 1, 2
_FIRST_SYMBOL = 3
_DIGITS = 10


def _copy(x):
    return x.copy()


def _reverse(x):
    return x[::-1].copy()


def _sort(x):
    return np.sort(x)


#: Task name -> function from the input symbols (0-based) to the output symbols.
#: ``addition`` is handled by :func:`task_example` (its input is two numbers).
TASKS = {"copy": _copy, "reverse": _reverse, "sort": _sort, "addition": None}


def _check_task(task: str, what: str) -> str:
    return check_choice("task", task, tuple(TASKS), what=what)


def task_vocab_size(task: str, symbols: int = 16, *, bos: bool = False) -> int:
    """Number of token ids a task uses: ``PAD``, ``SEP``, ``PLUS``, its symbols and, with
    ``bos``, the beginning-of-sequence token.

    Example:
        >>> task_vocab_size("copy", 16), task_vocab_size("addition")
        (19, 13)
        >>> task_vocab_size("copy", 16, bos=True)
        20
    """
    _check_task(task, "task_vocab_size")
    return _FIRST_SYMBOL + (_DIGITS if task == "addition" else
                            check_positive_int("symbols", symbols, what="task_vocab_size")) \
        + int(check_bool("bos", bos, what="task_vocab_size"))


def bos_id(task: str, symbols: int = 16) -> int:
    """The id of the beginning-of-sequence token of a task: the one after its symbols.

    Example:
        >>> bos_id("copy", 16)
        19
    """
    return task_vocab_size(task, symbols)


def task_chance(task: str, symbols: int = 16) -> float:
    """The token accuracy of guessing each output symbol uniformly: ``1 / symbols`` (``1/10``
    for ``addition``'s digits). The exact match of a guess of ``n`` output tokens is this to
    the power ``n``.

    Example:
        >>> task_chance("copy", 16), task_chance("addition")
        (0.0625, 0.1)
    """
    _check_task(task, "task_chance")
    return 1.0 / (_DIGITS if task == "addition" else
                  check_positive_int("symbols", symbols, what="task_chance"))


def task_example(task: str, length: int, rng, symbols: int = 16, *,
                 bos: bool = False) -> tuple[np.ndarray, int]:
    """One example as a token sequence ``[BOS] input SEP output`` and the index of ``SEP``.

    Args:
        task: a name in :data:`TASKS`.
        length: input symbols (``addition``: digits per operand), a positive int.
        rng: a ``numpy.random.Generator``.
        symbols: alphabet size of ``copy``/``reverse``/``sort``. Default ``16``.
        bos: start with the beginning-of-sequence token (:func:`bos_id`). Default ``False``.

    Returns:
        ``(sequence, sep)``: int64 array and the position of ``SEP`` in it.

    Example:
        >>> seq, sep = task_example("reverse", 4, np.random.default_rng(0))
        >>> bool((seq[sep + 1:] == seq[:sep][::-1]).all())
        True
    """
    task = _check_task(task, "task_example")
    length = check_positive_int("length", length, what="task_example")
    if task == "addition":
        a, b = rng.integers(0, _DIGITS, size=(2, length))       # least significant first
        value = sum(int(d) * 10 ** i for i, d in enumerate(a)) + sum(
            int(d) * 10 ** i for i, d in enumerate(b))
        out = np.array([(value // 10 ** i) % 10 for i in range(length + 1)])
        source = np.concatenate([a + _FIRST_SYMBOL, [PLUS], b + _FIRST_SYMBOL])
    else:
        x = rng.integers(0, symbols, size=length)
        out = TASKS[task](x)
        source = x + _FIRST_SYMBOL
    if check_bool("bos", bos, what="task_example"):
        source = np.concatenate([[bos_id(task, symbols)], source])
    seq = np.concatenate([source, [SEP], out + _FIRST_SYMBOL]).astype(np.int64)
    return seq, len(source)


def task_batch(task: str, lengths, *, seed: int, symbols: int = 16, width: int | None = None,
               bos: bool = False):
    """A batch of examples, one per entry of ``lengths``, shifted for next-token prediction.

    Args:
        task: a name in :data:`TASKS`.
        lengths: sequence of positive ints, the length of each example.
        seed: non-negative int for ``numpy.random.default_rng``.
        symbols: alphabet size. Default ``16``.
        width: pad every row to this many positions (default: the longest row).
        bos: start every example with the beginning-of-sequence token. Default ``False``.

    Returns:
        ``(inputs, targets, weights)``: int64, int64, float32 arrays ``(batch, width)``;
        ``targets[:, t]`` is the token after ``inputs[:, t]``, and ``weights`` is 1 where that
        target is an output token, else 0.

    Example:
        >>> x, y, w = task_batch("copy", [3], seed=0)
        >>> x.shape, int(w.sum())
        ((1, 6), 3)
    """
    rng = np.random.default_rng(check_int("seed", seed, minimum=0, what="task_batch"))
    examples = [task_example(task, n, rng, symbols, bos=bos) for n in lengths]
    longest = max(len(s) - 1 for s, _ in examples)
    width = longest if width is None else check_int("width", width, minimum=longest,
                                                     what="task_batch")
    inputs = np.full((len(examples), width), PAD, dtype=np.int64)
    targets = np.full((len(examples), width), PAD, dtype=np.int64)
    weights = np.zeros((len(examples), width), dtype=np.float32)
    for row, (seq, sep) in enumerate(examples):
        n = len(seq) - 1
        inputs[row, :n] = seq[:-1]
        targets[row, :n] = seq[1:]
        weights[row, sep:n] = 1.0          # targets seq[sep + 1:], the output tokens
    return inputs, targets, weights


def length_batches(task: str, max_length: int, num_examples: int, *, seed: int,
                   min_length: int = 1, symbols: int = 16):
    """Training examples with lengths uniform in ``min_length .. max_length``, one padded array.

    Returns ``task_batch(task, lengths, seed=seed, width=...)`` with every row padded to the
    longest possible example, so that a run of ``steps`` batches is ``steps`` slices of it.
    """
    rng = np.random.default_rng(check_int("seed", seed, minimum=0, what="length_batches"))
    lengths = rng.integers(min_length, max_length + 1, size=num_examples)
    width = sequence_width(task, max_length)
    return task_batch(task, lengths, seed=seed + 1, symbols=symbols, width=width)


def sequence_width(task: str, length: int, *, bos: bool = False) -> int:
    """Positions the model reads for an example of ``length``:
    ``len([BOS] input SEP output) - 1``."""
    return (3 * length + 2 if task == "addition" else 2 * length) + int(bos)


# --------------------------------------------------------------------------- text

#: Corpus names :func:`load_corpus` knows.
CORPORA = ("pydoc", "pydoc-installed", "wikitext-103")

#: The frozen copy of ``pydoc_data.topics`` (Python 3.11.7) that ``"pydoc"`` reads.
PYDOC_FILE = Path(__file__).resolve().parent / "corpus" / "pydoc-topics-3.11.7.txt.gz"
#: SHA-256 of that text (UTF-8), the ``data_sha256`` of every run on ``"pydoc"``.
PYDOC_SHA256 = "2a95af4ac93f5b719944030ce3769070ddf827d847cba42192afa8da989e5dc4"


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def data_sha256(train: str, valid: str) -> str:
    """SHA-256 (hex) of a corpus: of ``train + valid`` in UTF-8, so that a ``"pydoc"`` run's
    is :data:`PYDOC_SHA256`.

    Example:
        >>> data_sha256(*load_corpus("pydoc")) == PYDOC_SHA256
        True
    """
    return _sha256(train + valid)


def _pydoc_text(installed: bool) -> str:
    if installed:
        from pydoc_data.topics import topics

        return "\n".join(topics[key] for key in sorted(topics))
    text = gzip.decompress(PYDOC_FILE.read_bytes()).decode("utf-8")
    if _sha256(text) != PYDOC_SHA256:
        raise ValueError(f"load_corpus: the shipped corpus {PYDOC_FILE.name} has SHA-256 "
                         f"{_sha256(text)}, not {PYDOC_SHA256}; reinstall posenc (the file "
                         "was changed or truncated).")
    return text


def load_corpus(name: str = "pydoc") -> tuple[str, str]:
    """The training and validation text of a corpus.

    ``"pydoc"``: the topics of the Python reference in ``pydoc_data.topics`` of Python
    3.11.7, joined in sorted order (the copy shipped with the package, the same on every
    Python, its hash checked); the last tenth is the validation text. ``"pydoc-installed"``:
    the same from the running Python's ``pydoc_data`` (its size and text depend on the
    version).
    ``"wikitext-103"``: the raw WikiText-103 train and validation splits through
    ``datasets.load_dataset``; needs the ``datasets`` package and a network.

    Returns:
        ``(train_text, valid_text)``.

    Example:
        >>> train, valid = load_corpus("pydoc")
        >>> len(train) > 8 * len(valid) > 0
        True
    """
    name = check_choice("corpus", name, CORPORA, what="load_corpus")
    if name in ("pydoc", "pydoc-installed"):
        text = _pydoc_text(name == "pydoc-installed")
        cut = int(len(text) * 0.9)
        return text[:cut], text[cut:]
    import importlib.util

    if importlib.util.find_spec("datasets") is None:
        raise ValueError(
            "load_corpus: corpus='wikitext-103' needs the `datasets` package, which is not "
            "installed; pip install datasets (and have a network), or use corpus='pydoc'.")
    try:
        from datasets import load_dataset

        data = load_dataset("wikitext", "wikitext-103-raw-v1")
    except Exception as error:  # no network, no cache
        raise ValueError(
            f"load_corpus: corpus='wikitext-103' could not be downloaded ({error}); connect "
            "to a network, or use corpus='pydoc'.") from error
    return "".join(data["train"]["text"]), "".join(data["validation"]["text"])


class Vocabulary:
    """Characters to ids and back; id 0 is kept for characters the vocabulary has not seen.

    Example:
        >>> vocab = Vocabulary("abca")
        >>> vocab.encode("cab?").tolist(), len(vocab)
        ([3, 1, 2, 0], 4)
    """

    def __init__(self, text: str):
        self.chars = sorted(set(text))
        self.index = {c: i + 1 for i, c in enumerate(self.chars)}

    def __len__(self) -> int:
        return len(self.chars) + 1

    def encode(self, text: str) -> np.ndarray:
        return np.array([self.index.get(c, 0) for c in text], dtype=np.int64)

    def decode(self, ids) -> str:
        return "".join(self.chars[i - 1] if i > 0 else "?" for i in np.asarray(ids).tolist())


def split(name: str = "pydoc", *, expect_sha256: str | None = None, with_sha256: bool = False):
    """``(vocabulary, train_ids, valid_ids)`` of a corpus (the vocabulary from the train text).

    Args:
        name: a name in :data:`CORPORA`.
        expect_sha256: refuse the corpus unless its :func:`data_sha256` is this (the
            ``data_sha256`` of the run being repeated or extended).
        with_sha256: also return the hash, as a fourth element.
    """
    train, valid = load_corpus(name)
    digest = data_sha256(train, valid) if (expect_sha256 or with_sha256) else None
    if expect_sha256 is not None and digest != expect_sha256:
        raise _error("split", f"the corpus {name!r} has data_sha256={digest!r}, not the "
                     f"expected {expect_sha256!r}",
                     "use the corpus the run was made on (corpus='pydoc' is the same on "
                     "every Python), or drop the expected hash")
    vocab = Vocabulary(train)
    found = (vocab, vocab.encode(train), vocab.encode(valid))
    return found + (digest,) if with_sha256 else found


def lm_batch(ids, batch_size: int, length: int, *, seed: int):
    """Random training windows: ``(inputs, targets, weights)``, each ``(batch_size, length)``.

    ``targets`` is ``inputs`` shifted by one character; every weight is 1.

    Example:
        >>> x, y, w = lm_batch(np.arange(100), 2, 5, seed=0)
        >>> bool((y[:, :-1] == x[:, 1:]).all()), w.shape
        (True, (2, 5))
    """
    ids = np.asarray(ids)
    length = check_positive_int("length", length, what="lm_batch")
    if len(ids) <= length:
        raise ValueError(f"lm_batch: length={length} needs more than {length} ids, got "
                         f"{len(ids)}; use a shorter length.")
    rng = np.random.default_rng(check_int("seed", seed, minimum=0, what="lm_batch"))
    starts = rng.integers(0, len(ids) - length, size=batch_size)
    rows = starts[:, None] + np.arange(length + 1)
    windows = ids[rows]
    return windows[:, :-1], windows[:, 1:], np.ones((batch_size, length), dtype=np.float32)


def lm_windows(ids, length: int, *, max_windows: int | None = None):
    """Non-overlapping evaluation windows of ``length`` characters (the tail that does not fill
    a window is dropped): ``(inputs, targets, weights)``, each ``(windows, length)``.

    Every character of a window is predicted from the window alone, as in the non-overlapping
    evaluation of Press et al. 2022, so longer windows give each prediction more context on
    average.
    """
    ids = np.asarray(ids)
    length = check_positive_int("length", length, what="lm_windows")
    count = (len(ids) - 1) // length
    if max_windows is not None:
        count = min(count, max_windows)
    if count < 1:
        raise ValueError(f"lm_windows: length={length} is longer than the text "
                         f"({len(ids)} ids); use a shorter length.")
    rows = np.arange(count)[:, None] * length + np.arange(length + 1)
    windows = ids[rows]
    return windows[:, :-1], windows[:, 1:], np.ones((count, length), dtype=np.float32)


def lm_sliding_windows(ids, length: int, stride: int):
    """Overlapping evaluation windows of ``length`` characters, ``stride`` apart, that score
    each character once: ``(inputs, targets, weights)``, each ``(windows, length)``.

    The first window scores all its ``length`` targets; each later one only its last
    ``stride``, so every scored character is predicted from at least ``length - stride``
    characters before it (all of them for the first window's). The targets scored are the
    first ``length + stride * k`` of the text, ``k`` the most windows that fit.
    ``stride == length`` is :func:`lm_windows`.

    Example:
        >>> x, y, w = lm_sliding_windows(np.arange(11), 4, 2)
        >>> x[:, 0].tolist(), w.sum(-1).tolist()   # windows start 2 apart; 4, then 2 scored
        ([0, 2, 4, 6], [4.0, 2.0, 2.0, 2.0])
    """
    ids = np.asarray(ids)
    length = check_positive_int("length", length, what="lm_sliding_windows")
    stride = check_positive_int("stride", stride, what="lm_sliding_windows")
    if stride > length:
        raise _error("lm_sliding_windows", f"stride must be at most length={length}, got "
                     f"stride={stride}", "pass a stride no longer than the window")
    if len(ids) - 1 < length:
        raise _error("lm_sliding_windows", f"length={length} is longer than the text "
                     f"({len(ids)} ids)", "use a shorter length")
    count = 1 + (len(ids) - 1 - length) // stride
    rows = np.arange(count)[:, None] * stride + np.arange(length + 1)
    windows = ids[rows]
    weights = np.zeros((count, length), dtype=np.float32)
    weights[0] = 1.0
    weights[1:, length - stride:] = 1.0
    return windows[:, :-1], windows[:, 1:], weights
