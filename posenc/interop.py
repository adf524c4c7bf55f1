"""Copy weights between the PyTorch and Keras faces.

Modules and layers of the same class name own weights of the same names and
layouts (the torch attribute name is the Keras weight name), so a PyTorch
module and its Keras twin given the same weights compute the same numbers.
A model of many layers (``Transformer``) is matched by attribute path:
``blocks.0.attention.query_kernel`` in PyTorch is ``blocks/0/attention/query_kernel``
in Keras.
"""

from __future__ import annotations

import sys

from posenc._checks import _error


def _is_torch_module(obj) -> bool:
    # On Keras' PyTorch backend every Keras layer is also a torch.nn.Module;
    # such a layer is handled as a Keras layer.
    torch = sys.modules.get("torch")
    return (torch is not None and isinstance(obj, torch.nn.Module)
            and not _is_keras_layer(obj))


def _is_keras_layer(obj) -> bool:
    keras = sys.modules.get("keras")
    return keras is not None and isinstance(obj, keras.layers.Layer)


def _torch_weights(module) -> dict:
    return {name: p for name, p in module.named_parameters()}


def _keras_weights(layer) -> dict:
    # The attribute path of each weight ("blocks/0/attention/query_kernel"), as PyTorch
    # names it ("blocks.0.attention.query_kernel"), when the attributes reach every weight;
    # otherwise weight.path ("layer_name/.../weight_name") without the outer layer's name.
    named = _keras_attribute_weights(layer)
    if {id(w) for w in named.values()} == {id(w) for w in layer.weights}:
        return named
    out = {}
    for w in layer.weights:
        parts = w.path.split("/")
        out["/".join(parts[1:]) or parts[0]] = w
    return out


def _keras_attribute_weights(layer, prefix: str = "") -> dict:
    keras = sys.modules["keras"]
    out = {}
    # (On Keras's PyTorch backend a sublayer assigned to an attribute is a torch submodule,
    # kept in _modules rather than in the instance's __dict__.)
    for name, value in {**vars(layer), **(getattr(layer, "_modules", None) or {})}.items():
        if name.startswith("_"):
            continue
        items = ([(f"{name}/{i}", v) for i, v in enumerate(value)]
                 if isinstance(value, (list, tuple)) else [(name, value)])
        for path, v in items:
            if isinstance(v, keras.Variable):
                out[prefix + path] = v
            elif isinstance(v, keras.layers.Layer):
                out.update(_keras_attribute_weights(v, f"{prefix}{path}/"))
    return out


def _match(src_names, dst_names, what: str) -> dict:
    """Map each source name to the destination name of the same path ("." and "/" alike),
    or, when the paths differ, to the one with the same last component."""
    def path(name: str) -> str:
        return name.replace(".", "/")

    if {path(n) for n in src_names} == {path(n) for n in dst_names}:
        dst_paths = {path(n): n for n in dst_names}
        return {n: dst_paths[path(n)] for n in src_names}

    def key(name: str) -> str:
        return name.replace(".", "/").split("/")[-1]

    src_keys = {key(n): n for n in src_names}
    dst_keys = {key(n): n for n in dst_names}
    check_weight_names(src_names, dst_names, src_keys, dst_keys, what=what)
    return {src_keys[k]: dst_keys[k] for k in src_keys}


def copy_weights(src, dst):
    """Copy every weight of ``src`` into ``dst``, across faces or within one.

    Args:
        src: a ``torch.nn.Module`` or a built ``keras.layers.Layer``.
        dst: a module or layer of the same posenc class (either face); a Keras
            layer must be built (call it once) before weights can be copied.

    Returns:
        ``dst``, with its weights replaced.

    Example:
        >>> import keras, numpy as np, torch
        >>> import posenc.keras as pk, posenc.torch as pt
        >>> torch_enc = pt.LearnedEncoding(16, 8)
        >>> keras_enc = pk.LearnedEncoding(16, 8)
        >>> x = np.zeros((2, 16, 8), dtype="float32")
        >>> _ = keras_enc(x)                      # build the layer: it owns its table now
        >>> copy_weights(torch_enc, keras_enc) is keras_enc
        True
        >>> same = torch_enc(torch.as_tensor(x)).detach().numpy()
        >>> bool(np.allclose(same, keras.ops.convert_to_numpy(keras_enc(x))))
        True
    """
    import numpy as np

    what = f"copy_weights: {type(src).__name__} -> {type(dst).__name__}"
    if _is_torch_module(src):
        src_w = {n: p.detach().float().cpu().numpy() for n, p in _torch_weights(src).items()}
    elif _is_keras_layer(src):
        src_w = {n: np.asarray(w.numpy(), dtype=np.float32) if hasattr(w, "numpy")
                 else np.asarray(w.value, dtype=np.float32) for n, w in _keras_weights(src).items()}
    else:
        raise TypeError(f"copy_weights: src must be a torch.nn.Module or a keras Layer, got {type(src).__name__}.")

    if _is_torch_module(dst):
        import torch

        dst_w = _torch_weights(dst)
        mapping = _match(list(src_w), list(dst_w), what)
        with torch.no_grad():
            for s, d in mapping.items():
                target = dst_w[d]
                check_weight_shape(d, target.shape, s, src_w[s].shape, what=what)
                target.copy_(torch.as_tensor(src_w[s], dtype=target.dtype))
    elif _is_keras_layer(dst):
        check_built(dst.built, what=what)
        dst_w = _keras_weights(dst)
        mapping = _match(list(src_w), list(dst_w), what)
        for s, d in mapping.items():
            target = dst_w[d]
            check_weight_shape(d, target.shape, s, src_w[s].shape, what=what)
            target.assign(src_w[s].astype(target.dtype))
    else:
        raise TypeError(f"copy_weights: dst must be a torch.nn.Module or a keras Layer, got {type(dst).__name__}.")
    return dst


# --------------------------------------------------------------------------- argument rules


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
