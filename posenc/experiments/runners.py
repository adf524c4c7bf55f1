"""How the lab builds, trains and reads its Transformer, one runner per framework.

:class:`TorchRunner` and :class:`KerasRunner` have the same methods; the command line picks
one (:data:`RUNNERS`) and hands it to the experiment as ``ctx.runner``, so an experiment is
written once for both frameworks:

* :meth:`~Runner.make_model`: the lab's causal Transformer for one positional scheme
  (:class:`posenc.torch.attention.Transformer` or its Keras twin), initialised from a seed;
* :meth:`~Runner.count_parameters`, :meth:`~Runner.position_weights`;
* :meth:`~Runner.fit` and :meth:`~Runner.fit_monitored` (with a gradient monitor),
  :meth:`~Runner.evaluate`;
* :meth:`~Runner.hidden_states`, :meth:`~Runner.attention_maps`, :meth:`~Runner.to_numpy`.

**One recipe.** Both runners train with AdamW (:data:`BETAS`, :data:`EPSILON`,
:data:`WEIGHT_DECAY`), clip the *global* gradient norm to :data:`CLIP_NORM`, follow the same
learning-rate schedule (:func:`learning_rate`: a linear warm-up over :func:`warmup_steps`, then
a cosine down to a tenth), minimise the same loss (the weighted mean cross-entropy: the sum over
positions of ``weight * loss`` divided by the sum of the weights) and record the loss of every
step before its update. PyTorch's runner also trains under ``torchrun``
(DistributedDataParallel; see :mod:`posenc.experiments.context`).
"""

from __future__ import annotations

import math
import os
import sys
import time

import numpy as np

from posenc._checks import _error

__all__ = ["BETAS", "EPSILON", "WEIGHT_DECAY", "CLIP_NORM", "learning_rate", "warmup_steps",
           "Runner", "TorchRunner", "KerasRunner", "RUNNERS", "SCHEME_VARIANTS",
           "variant_position", "adapt_variant", "make_model", "count_parameters",
           "split_rows"]

#: AdamW's ``(beta_1, beta_2)`` in both runners.
BETAS = (0.9, 0.98)
#: AdamW's epsilon in both runners (PyTorch's default; Keras' own default is ``1e-7``).
EPSILON = 1e-8
#: AdamW's decoupled weight decay in both runners.
WEIGHT_DECAY = 0.01
#: The global gradient norm is clipped to this (all weights together, not each one).
CLIP_NORM = 1.0


def warmup_steps(steps: int) -> int:
    """The warm-up of a run of ``steps`` steps: a tenth of them, at least one."""
    return max(1, steps // 10)


def learning_rate(step: int, steps: int, lr: float, warmup: int | None = None) -> float:
    """The learning rate of step ``step`` (from 0) of ``steps``: a linear warm-up to ``lr`` over
    ``warmup`` steps (default :func:`warmup_steps`), then a cosine down to ``lr / 10``.

    Example:
        >>> [round(learning_rate(s, 10, 1.0), 3) for s in (0, 1, 5, 9)]
        [1.0, 1.0, 0.628, 0.127]
    """
    warmup = warmup_steps(steps) if warmup is None else warmup
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return lr * (0.1 + 0.45 * (1 + math.cos(math.pi * progress)))


def split_rows(arrays, rows: int):
    """Cut ``(inputs, targets, weights)`` into batches of at most ``rows`` rows."""
    total = len(arrays[0])
    return [tuple(a[i:i + rows] for a in arrays) for i in range(0, total, rows)]


def _scores(sums) -> dict:
    """The evaluation's dict from the sums (loss, weight, right tokens, right rows, rows)."""
    loss, weight, right, rows_right, rows = sums
    mean = loss / weight
    return {"loss": mean, "perplexity": math.exp(mean), "token_accuracy": right / weight,
            "exact_match": rows_right / rows, "rows": int(rows), "tokens": int(weight)}


def _old_position_weights(model) -> list:
    # until position_weights() lands: torch's position_parameters(), Keras' property
    if hasattr(model, "position_parameters"):
        return list(model.position_parameters())
    return list(model.position_weights)


#: Lab schemes that are a Transformer position with one setting changed once the model is
#: built, each to the position it changes: ``fire-L`` is FIRE with its threshold ``L``
#: started at the training length instead of ``FireBias``'s 512 (the value of the FIRE
#: paper's code). The lab trains on 8 to 64 positions and tests up to 512, so with 512 every
#: query has ``max(L, i) = L`` and the progressive interpolation never acts; from the
#: training length, it acts on every query past it.
SCHEME_VARIANTS = {"fire-L": "fire"}


def variant_position(scheme: str) -> str:
    """The Transformer position of lab scheme ``scheme`` (itself unless a variant)."""
    return SCHEME_VARIANTS.get(scheme, scheme)


def adapt_variant(layers, scheme: str, train_len: int | None) -> int:
    """Make the change of variant ``scheme`` to the ``layers`` of a model built with its
    position; returns the number of layers changed (0 for a scheme that is no variant)."""
    if scheme not in SCHEME_VARIANTS:
        return 0
    if train_len is None or int(train_len) < 1:
        raise _error("make_model", f"scheme={scheme!r} needs the training length, got "
                     f"train_len={train_len!r}", "pass train_len, the length trained on")
    changed = 0
    for layer in layers:
        if type(layer).__name__ == "FireBias":
            layer.threshold = float(train_len)
            changed += 1
    if not changed:
        raise _error("make_model", f"scheme={scheme!r} found no FireBias in the model",
                     f"build it with position={SCHEME_VARIANTS[scheme]!r}")
    return changed


class Runner:
    """What both runners share; a subclass supplies the framework's pieces.

    Args:
        ctx: the run's :class:`~posenc.experiments.context.ExperimentContext` (device, ranks,
            progress bars); default: one process on the CPU, no progress bars.
    """

    #: ``"torch"`` or ``"keras"``.
    framework = ""
    #: The dtype of token ids the models take.
    token_dtype = "int64"

    def __init__(self, ctx=None):
        if ctx is None:
            from posenc.experiments.context import ExperimentContext

            ctx = ExperimentContext(name="", framework=self.framework, progress_bars=False,
                                    commit="")
        self.ctx = ctx

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def position_weights(self, model) -> list:
        """The weights of ``model``'s positional scheme: ``model.position_weights()``."""
        found = getattr(model, "position_weights", None)
        if callable(found):
            return list(found())
        return _old_position_weights(model)

    def count_parameters(self, model) -> tuple[int, int]:
        """``(all parameters, those of the positional scheme)`` of a lab Transformer."""
        position = sum(int(np.prod(w.shape)) for w in self.position_weights(model))
        return int(sum(int(np.prod(w.shape)) for w in self.weights(model))), position

    def tokens(self, array: np.ndarray) -> np.ndarray:
        """Token ids as the models take them (:attr:`token_dtype`)."""
        return np.asarray(array, dtype=self.token_dtype)

    def fit(self, model, batch_fn, *, steps: int, lr: float = 3e-3,
            desc: str = "train", stop=None) -> dict:
        """Train ``model`` for ``steps`` steps on ``batch_fn(step) -> (inputs, targets,
        weights)`` (NumPy, the global batch), with the lab's recipe (see the module).

        ``stop(step, losses) -> bool``, when given, is called after every step (``step`` from
        0); ``True`` ends the training there (the schedule stays that of ``steps`` steps).

        Returns:
            A dict: ``"losses"`` (the global weighted mean loss of every step, before its
            update), ``"seconds"`` (the training time) and ``"tokens_per_second"`` (positions
            read per second, all processes together).
        """
        losses, tokens = [], 0
        step_fn = self._trainer(model, steps, lr)
        start = time.perf_counter()
        bar = self.ctx.progress(range(steps), desc=desc)
        for step in bar:
            inputs, targets, weights = batch_fn(step)
            tokens += inputs.size
            losses.append(step_fn(inputs, targets, weights))
            if step % 10 == 0 or step == steps - 1:
                bar.set_postfix(loss=f"{losses[-1]:.3f}")
            if stop is not None and stop(step, losses):
                break
        seconds = time.perf_counter() - start
        return {"losses": losses, "seconds": seconds, "tokens_per_second": tokens / seconds}

    def fit_monitored(self, model, batch_fn, *, steps: int, lr: float = 3e-3,
                      desc: str = "train"):
        """:meth:`fit` with the face's ``GradientMonitor`` recording every step's gradient
        norms; returns ``(monitor.log, losses)``."""
        raise NotImplementedError

    def evaluate(self, model, batches, *, desc: str = "eval") -> dict:
        """Loss and accuracy of ``model`` over ``batches`` (an iterable of global NumPy
        ``(inputs, targets, weights)`` batches).

        Returns:
            A dict, summed over every process: ``"loss"`` (mean weighted cross-entropy in
            nats), ``"perplexity"`` (its exponential), ``"token_accuracy"`` (share of weighted
            positions whose argmax is the target), ``"exact_match"`` (share of rows whose
            weighted positions are all right), ``"rows"`` and ``"tokens"`` (weighted
            positions).
        """
        sums = np.zeros(5)  # loss, weight, right tokens, right rows, rows
        for batch in self.ctx.progress(batches, desc=desc):
            sums += self._eval_sums(model, batch)
        return _scores(self.ctx.all_reduce(sums))

    def position_loss(self, model, batches, *, desc: str = "eval by position") -> dict:
        """The loss of ``model`` at each position of its windows, over ``batches`` (global
        NumPy ``(inputs, targets, weights)`` batches of one width).

        Returns:
            A dict, summed over every process: ``"loss"`` (float64 array, the weighted mean
            cross-entropy in nats at each position; ``nan`` where no weight falls) and
            ``"tokens"`` (the weight at each position).
        """
        sums = None
        for batch in self.ctx.progress(batches, desc=desc):
            got = self._position_sums(model, batch)
            sums = got if sums is None else sums + got
        sums = self.ctx.all_reduce(sums.reshape(-1)).reshape(2, -1)
        with np.errstate(invalid="ignore", divide="ignore"):
            loss = np.where(sums[1] > 0, sums[0] / sums[1], np.nan)
        return {"loss": loss, "tokens": sums[1]}

    def hidden_states(self, model, tokens) -> list[np.ndarray]:
        """Every layer's hidden states (the face's ``diagnostics.hidden_states``)."""
        return self._diagnostics().hidden_states(model, self.tokens(tokens))

    def attention_maps(self, model, tokens) -> list[np.ndarray]:
        """Every layer's attention weights (the face's ``diagnostics.attention_maps``)."""
        return self._diagnostics().attention_maps(model, self.tokens(tokens))


class TorchRunner(Runner):
    """The lab in PyTorch: :class:`posenc.torch.attention.Transformer`, a loop of AdamW steps
    that also runs under ``torchrun`` (DistributedDataParallel)."""

    framework = "torch"
    token_dtype = "int64"

    @staticmethod
    def setup(args, world_size: int):
        """The device and rank of this process (``args.device``, ``args.threads``); under
        ``torchrun`` (``world_size > 1``) the process group is started too (NCCL on CUDA,
        else gloo) and each process takes the device of its ``LOCAL_RANK``."""
        import torch

        from posenc.device import pick_device

        if world_size > 1:
            import torch.distributed as dist

            local_rank = int(os.environ.get("LOCAL_RANK", 0))
            use_cuda = torch.cuda.is_available() and args.device in ("auto", "cuda")
            if use_cuda:
                torch.cuda.set_device(local_rank)
                device = torch.device("cuda", local_rank)
            else:
                device = torch.device("cpu")
            dist.init_process_group("nccl" if use_cuda else "gloo")
            return device, dist.get_rank()
        threads = "auto" if args.threads is None else args.threads
        if args.device == "auto":
            return pick_device(verbose=False, cpu_threads=threads), 0
        if args.threads is not None:
            torch.set_num_threads(args.threads)
        return torch.device(args.device), 0

    @staticmethod
    def teardown(world_size: int) -> None:
        """End the process group that :meth:`setup` started."""
        if world_size > 1:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()

    def make_model(self, scheme: str, vocab_size: int, *, dim: int = 64, depth: int = 2,
                   heads: int = 4, max_len: int = 512, seed: int = 0,
                   train_len: int | None = None, **options):
        """The lab's causal Transformer with positional scheme ``scheme`` (a position of the
        Transformer or a variant of :data:`SCHEME_VARIANTS`, which needs ``train_len``),
        initialised from ``seed`` (:class:`posenc.torch.attention.Transformer`)."""
        import torch

        from posenc.torch.attention import Transformer

        torch.manual_seed(seed)
        model = Transformer(vocab_size, dim=dim, depth=depth, heads=heads, causal=True,
                            position=variant_position(scheme), max_len=max_len, **options)
        adapt_variant(model.modules(), scheme, train_len)
        return model

    def weights(self, model) -> list:
        """Every trainable weight of ``model``."""
        return list(model.parameters())

    def to_numpy(self, tensor) -> np.ndarray:
        """A float tensor as a float32 NumPy array."""
        return tensor.detach().float().cpu().numpy()

    def _device(self):
        import torch

        return self.ctx.device if self.ctx.device is not None else torch.device("cpu")

    def optimizer(self, model, steps: int, lr: float):
        """AdamW over ``model``'s weights with the lab's settings; :meth:`fit` sets each step's
        learning rate (:func:`learning_rate`)."""
        import torch

        return torch.optim.AdamW(model.parameters(), lr=learning_rate(0, steps, lr),
                                 betas=BETAS, eps=EPSILON, weight_decay=WEIGHT_DECAY)

    @staticmethod
    def _weighted_ce(logits, targets, weights):
        import torch.nn.functional as F

        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(),
                             targets.reshape(-1), reduction="none")
        return (ce * weights.reshape(-1)).sum()

    def _trainer(self, model, steps, lr):
        import torch

        ctx, device = self.ctx, self._device()
        model.to(device).train()
        net = model
        if ctx.distributed:
            from torch.nn.parallel import DistributedDataParallel

            net = DistributedDataParallel(model, device_ids=[device] if device.type == "cuda"
                                          else None)
        opt = self.optimizer(model, steps, lr)
        counter = iter(range(steps))

        def step_fn(inputs, targets, weights):
            step = next(counter)
            total_weight = float(weights.sum())
            x, y, w = (torch.from_numpy(ctx.shard(a)).to(device)
                       for a in (inputs, targets, weights))
            for group in opt.param_groups:
                group["lr"] = learning_rate(step, steps, lr)
            loss = self._weighted_ce(net(x), y, w) / total_weight
            opt.zero_grad(set_to_none=True)
            (loss * ctx.world_size).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP_NORM)
            opt.step()
            return float(ctx.all_reduce([loss.item()])[0])

        return step_fn

    def fit_monitored(self, model, batch_fn, *, steps: int, lr: float = 3e-3,
                      desc: str = "train"):
        from posenc.torch.diagnostics import GradientMonitor

        monitor = GradientMonitor(model)      # steps itself at every training forward pass
        try:
            result = self.fit(model, batch_fn, steps=steps, lr=lr, desc=desc)
        finally:
            monitor.remove()
        return monitor.log, result["losses"]

    def evaluate(self, model, batches, *, desc: str = "eval") -> dict:
        import torch

        model.to(self._device()).eval()
        with torch.no_grad():
            return super().evaluate(model, batches, desc=desc)

    def _eval_sums(self, model, batch):
        import torch

        x, y, w = (torch.from_numpy(self.ctx.shard(a)).to(self._device()) for a in batch)
        if x.shape[0] == 0:
            return np.zeros(5)
        logits = model(x)
        right = (logits.argmax(-1) == y).float() * w
        rows_right = (right.sum(-1) == w.sum(-1)).float()
        return np.array([float(self._weighted_ce(logits, y, w)), float(w.sum()),
                         float(right.sum()), float(rows_right.sum()), float(x.shape[0])])

    def _position_sums(self, model, batch):
        import torch
        import torch.nn.functional as F

        model.to(self._device()).eval()
        x, y, w = (torch.from_numpy(self.ctx.shard(a)).to(self._device()) for a in batch)
        if x.shape[0] == 0:
            return np.zeros((2, batch[0].shape[1]))
        with torch.no_grad():
            logits = model(x).float()
            ce = F.cross_entropy(logits.transpose(1, 2), y, reduction="none")
            return np.stack([(ce * w).sum(0).double().cpu().numpy(),
                             w.sum(0).double().cpu().numpy()])

    def _diagnostics(self):
        import posenc.torch.diagnostics as diagnostics

        return diagnostics


class KerasRunner(Runner):
    """The lab in Keras: :class:`posenc.keras.attention.Transformer`, one process, one
    ``train_on_batch`` per step (so that every step's own loss is recorded)."""

    framework = "keras"
    token_dtype = "int32"

    def __init__(self, ctx=None, *, init_from_torch: bool = False):
        super().__init__(ctx)
        #: Whether :meth:`make_model` starts from the PyTorch runner's weights of the same
        #: scheme, sizes and seed (``--init-from-torch``), so that both faces start alike.
        self.init_from_torch = bool(init_from_torch)

    def __repr__(self) -> str:
        return f"KerasRunner(init_from_torch={self.init_from_torch})"

    @staticmethod
    def setup(args, world_size: int):
        """One process, no device to pick (``--device`` and ``--threads`` are PyTorch's)."""
        if world_size > 1:
            raise SystemExit("--framework keras runs in one process; start it without "
                             "torchrun.")
        return None, 0

    @staticmethod
    def teardown(world_size: int) -> None:
        """Nothing to end."""

    def make_model(self, scheme: str, vocab_size: int, *, dim: int = 64, depth: int = 2,
                   heads: int = 4, max_len: int = 512, seed: int = 0,
                   train_len: int | None = None, **options):
        """The lab's causal Transformer with positional scheme ``scheme`` (a position or a
        variant of :data:`SCHEME_VARIANTS`, which needs ``train_len``), initialised from
        ``seed`` (:class:`posenc.keras.attention.Transformer`, built on a dummy batch so that
        it has weights).

        With :attr:`init_from_torch`, its weights are then replaced by those of
        :meth:`TorchRunner.make_model` for the same arguments
        (:func:`posenc.interop.copy_weights`): the Keras model computes the PyTorch one's
        logits at the start.
        """
        import keras

        from posenc.keras.attention import Transformer

        keras.utils.set_random_seed(seed)
        model = Transformer(vocab_size, dim=dim, depth=depth, heads=heads, causal=True,
                            position=variant_position(scheme), max_len=max_len, **options)
        model(np.zeros((1, 8), dtype="int32"))
        if self.init_from_torch:
            from posenc.interop import copy_weights

            twin = TorchRunner().make_model(scheme, vocab_size, dim=dim, depth=depth,
                                            heads=heads, max_len=max_len, seed=seed,
                                            train_len=train_len, **options)
            copy_weights(twin, model)
        adapt_variant(model._flatten_layers(include_self=True, recursive=True), scheme,
                      train_len)
        return model

    def weights(self, model) -> list:
        """Every weight of ``model``."""
        return list(model.weights)

    def to_numpy(self, tensor) -> np.ndarray:
        """A float tensor as a float32 NumPy array."""
        import keras

        return np.asarray(keras.ops.convert_to_numpy(tensor), dtype=np.float32)

    def schedule(self, steps: int, lr: float):
        """:func:`learning_rate` as a Keras ``LearningRateSchedule`` (evaluated at the
        optimizer's step count, which starts at 0 as PyTorch's loop does)."""
        return _keras_classes()["WarmupCosine"](steps, lr)

    def optimizer(self, model, steps: int, lr: float):
        """AdamW with the lab's settings, the global norm clipped (``global_clipnorm``), and
        :meth:`schedule`.

        The gradients are made dense before they are clipped: under TensorFlow the embedding's
        gradient is a set of slices, one per token read, and Keras' global norm of it sums the
        squares of the slices, not of their sums, so a token read twice counted twice and the
        norm was not PyTorch's.
        """
        return _keras_classes()["AdamW"](self.schedule(steps, lr), beta_1=BETAS[0],
                                         beta_2=BETAS[1], epsilon=EPSILON,
                                         weight_decay=WEIGHT_DECAY, global_clipnorm=CLIP_NORM)

    @staticmethod
    def _rescaled(weights):
        """Keras divides a batch's weighted loss by its number of positions, PyTorch's loop by
        the sum of the weights: scaling the weights by their ratio makes the two equal."""
        weights = np.asarray(weights, dtype=np.float32)
        return weights * np.float32(weights.size / weights.sum())

    def _loss(self):
        import keras

        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def _trainer(self, model, steps, lr):
        model.compile(optimizer=self.optimizer(model, steps, lr), loss=self._loss())

        def step_fn(inputs, targets, weights):
            model.reset_metrics()          # so that the logged loss is this step's alone
            logs = model.train_on_batch(self.tokens(inputs), self.tokens(targets),
                                        sample_weight=self._rescaled(weights),
                                        return_dict=True)
            return float(logs["loss"])

        return step_fn

    def fit_monitored(self, model, batch_fn, *, steps: int, lr: float = 3e-3,
                      desc: str = "train"):
        import keras

        from posenc.keras.diagnostics import GradientMonitor

        monitor = GradientMonitor(model)
        optimizer = self.optimizer(model, steps, lr)
        loss_fn = self._loss()
        losses = []
        for step in self.ctx.progress(range(steps), desc=desc):
            inputs, targets, weights = batch_fn(step)
            inputs, targets = self.tokens(inputs), self.tokens(targets)
            weights = self._rescaled(weights)

            def loss():
                return loss_fn(targets, model(inputs, training=True), sample_weight=weights)

            optimizer.apply(monitor.gradients(loss), model.trainable_variables)
            losses.append(monitor.last_loss)
        return monitor.log, losses

    def _eval_sums(self, model, batch):
        inputs, targets, weights = batch
        logits = self.to_numpy(model(self.tokens(inputs))).astype(np.float64)
        logits -= logits.max(-1, keepdims=True)
        logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        ce = -np.take_along_axis(logp, targets[..., None], -1)[..., 0]
        right = (logits.argmax(-1) == targets) * weights
        rows_right = right.sum(-1) == weights.sum(-1)
        return np.array([(ce * weights).sum(), weights.sum(), right.sum(), rows_right.sum(),
                         len(inputs)])

    def _position_sums(self, model, batch):
        inputs, targets, weights = batch
        logits = self.to_numpy(model(self.tokens(inputs))).astype(np.float64)
        logits -= logits.max(-1, keepdims=True)
        logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        ce = -np.take_along_axis(logp, targets[..., None], -1)[..., 0]
        return np.stack([(ce * weights).sum(0), weights.sum(0).astype(np.float64)])

    def _diagnostics(self):
        import posenc.keras.diagnostics as diagnostics

        return diagnostics


_KERAS_CLASSES = {}


def _keras_classes() -> dict:
    """The Keras classes of the recipe: ``WarmupCosine`` (:func:`learning_rate` as a
    ``LearningRateSchedule``) and ``AdamW`` (clipping dense gradients). Defined on first use,
    so that importing this module imports no framework."""
    if _KERAS_CLASSES:
        return _KERAS_CLASSES
    import keras
    from keras import ops

    class WarmupCosine(keras.optimizers.schedules.LearningRateSchedule):
        """:func:`posenc.experiments.runners.learning_rate` at the optimizer's step."""

        def __init__(self, steps, lr, warmup=None):
            self.steps, self.lr = int(steps), float(lr)
            self.warmup = warmup_steps(steps) if warmup is None else int(warmup)

        def __call__(self, step):
            step = ops.cast(step, "float32")
            warm = self.lr * (step + 1.0) / self.warmup
            progress = (step - self.warmup) / max(1, self.steps - self.warmup)
            cosine = self.lr * (0.1 + 0.45 * (1.0 + ops.cos(math.pi * progress)))
            return ops.where(step < self.warmup, warm, cosine)

        def get_config(self):
            return {"steps": self.steps, "lr": self.lr, "warmup": self.warmup}

    class AdamW(keras.optimizers.AdamW):
        """Keras' AdamW on dense gradients (clipped and applied as PyTorch's AdamW)."""

        def _clip_gradients(self, grads):
            from posenc.keras.diagnostics import _dense_gradients

            return super()._clip_gradients(_dense_gradients(grads))

    _KERAS_CLASSES.update(WarmupCosine=WarmupCosine, AdamW=AdamW)
    return _KERAS_CLASSES


#: Framework name -> runner class; the command line picks one per run.
RUNNERS = {"torch": TorchRunner, "keras": KerasRunner}


def make_model(scheme: str, vocab_size: int, *, framework: str = "torch", **options):
    """``RUNNERS[framework]().make_model(scheme, vocab_size, **options)``: the lab's
    Transformer in one framework, outside an experiment."""
    return RUNNERS[framework]().make_model(scheme, vocab_size, **options)


def count_parameters(model) -> tuple[int, int]:
    """``(all parameters, those of the positional scheme)`` of a lab Transformer of either
    framework (:meth:`Runner.count_parameters` of the runner of its framework)."""
    keras = sys.modules.get("keras")
    is_keras = keras is not None and isinstance(model, keras.layers.Layer)
    return RUNNERS["keras" if is_keras else "torch"]().count_parameters(model)
