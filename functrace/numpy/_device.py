"""``functrace.numpy`` on GPU arrays outside transforms: numpy's semantics, computed with cupy.

On numpy inputs an ``fnp`` function outside a transform *is* numpy's function. On cupy inputs
numpy would hand the call to cupy (``__array_function__``), and cupy's functions are a subset
of numpy's: no ``where=`` on reductions, no ``initial=`` on ``max``, no ``correction=`` on
``var``, no numpy arrays mixed with device arrays. So instead the call is traced (the same
traced path a transform records) and the small graph is run by the reference interpreter with
cupy as its array module (``backends.reference``): every op impl is array-module generic and
the GPU test table checks it against numpy. Results are cupy arrays; numpy arguments and
literals are copied to the device.

The traced graph is cached per function and call signature (the shapes and dtypes of array
arguments, the values of the other arguments), so a repeated call costs a dictionary lookup
and the interpreter's loop over a few ops. A call that cannot be traced (an ``out=`` argument,
a function that returns Python values) goes to cupy through numpy's dispatch, as before.
"""

from __future__ import annotations

import functools
import sys

import numpy as np

from .. import tree_util
from ..backends import reference
from ..config import config
from ..core import on_device
from ..signature import SignatureCache, static_key
from ..tracing import USER_ERRORS, Tracer, current_trace, trace_to_graph, user_error

__all__ = ["device_dispatch"]

# (fnp function, structure, static values, array types) -> (graph, out_tree): graphs of
# functrace's own functions, so held strongly; bounded (functrace.caches)
_graphs = SignatureCache("numpy.device_graphs", scale=8)


class _NotArrays(Exception):
    """The function returned something other than arrays: not a graph."""


def _has_device(args, kwargs) -> bool:
    """Whether a device array is among the arguments (nested lists and tuples included:
    ``fnp.array([[x[0], x[1]]])``)."""
    for x in args:
        if on_device(x) or (type(x) in (list, tuple) and _has_device(x, {})):
            return True
    return any(on_device(v) or (type(v) in (list, tuple) and _has_device(v, {}))
               for v in kwargs.values())


def device_dispatch(fn, with_at):
    """Wrap the ``fnp`` function ``fn`` so that, outside transforms, device-array arguments
    run it through its traced path and the reference interpreter with cupy; and so that,
    while tracing, the numpy-style errors it raises for bad input become functrace's (naming
    ``fnp.<name>`` and the user's line: ``tracing.user_error``). On numpy arrays outside
    transforms numpy's own errors pass unchanged (a ``try`` costs nothing until it raises).
    With ``ft.config.eager_at`` on, numpy results (eager results, and constants computed
    while tracing: ``fnp.zeros(3)`` in a traced function) go through ``with_at``, which
    makes them ``fnp.AtArray``s (given by the package, which knows ``_indexing``)."""
    mod = fn.__module__
    sub = mod.rsplit(".", 1)[-1]
    name = (f"fnp.{sub}." if sub in ("linalg", "fft") else "fnp.") + fn.__name__

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if current_trace() is None and "cupy" in sys.modules and _has_device(args, kwargs):
            return call_on_device(fn, args, kwargs)
        try:
            out = fn(*args, **kwargs)
        except USER_ERRORS as e:
            err = user_error(e, name, args, kwargs)
            if err is e:
                raise
            raise err from None
        return with_at(out) if config.eager_at else out
    return wrapper


_CONTAINERS = (list, tuple, dict)


def _flatten(args, kwargs):
    """(leaves, structure key, rebuild): the common call (no containers among the arguments)
    without tree_util's walk."""
    if not any(type(a) in _CONTAINERS for a in args) and not any(
            type(v) in _CONTAINERS for v in kwargs.values()):
        names = tuple(kwargs)
        n = len(args)

        def rebuild(leaves):
            return leaves[:n], dict(zip(names, leaves[n:]))
        return list(args) + list(kwargs.values()), (n, names), rebuild
    leaves, in_tree = tree_util.tree_flatten((args, kwargs))
    return leaves, in_tree, lambda ls: tree_util.tree_unflatten(in_tree, ls)


def call_on_device(fn, args, kwargs):
    """``fn(*args, **kwargs)`` with numpy's semantics on device arrays (see the module
    docstring)."""
    leaves, in_tree, rebuild = _flatten(args, kwargs)
    idx = [i for i, x in enumerate(leaves) if on_device(x) or type(x) is np.ndarray]
    arrays = [leaves[i] for i in idx]
    pos = set(idx)
    try:
        key = (fn, in_tree, tuple(idx),    # where the arrays are: f(x, 0.0) is not f(0.0, x)
               tuple(static_key(x) for i, x in enumerate(leaves) if i not in pos),
               tuple((tuple(a.shape), np.dtype(a.dtype).str) for a in arrays))
        hash(key)
    except TypeError:     # an unhashable static argument: no caching
        key = None
    hit = _graphs.get(key) if key is not None else None
    if hit is None:
        box: list = []

        def flat(*tracers):
            ls = list(leaves)
            for i, t in zip(idx, tracers):
                ls[i] = t
            a, k = rebuild(ls)
            out_leaves, out_tree = tree_util.tree_flatten(fn(*a, **k))
            if not all(isinstance(o, Tracer | np.ndarray | np.generic) for o in out_leaves):
                raise _NotArrays       # Python values (fnp.shape, fnp.ndim): not a graph
            box.append(out_tree)
            return out_leaves

        try:
            tr = trace_to_graph(flat, arrays)
        except Exception as exc:       # not traceable: cupy's own function, through numpy
            try:
                return fn(*args, **kwargs)
            except Exception:
                if isinstance(exc, _NotArrays):
                    raise
                raise exc from None
        hit = (tr.graph, box[0])
        if key is not None and not tr.concretized:
            _graphs.put(key, hit, consts=tr.consts)
    graph, out_tree = hit
    outs = reference.run(graph, arrays)
    return tree_util.tree_unflatten(out_tree, outs)
