"""The imperative array and the recorder: ops that run at once and leave a graph behind.

Owns ``NDArray``, the ``_Recorder`` (an *eager* ``tracing.Trace``) that creates the history
nodes of ``_nodes.py``, and the ``record``/``pause`` scopes. It imports the layers below it
(core, tracing, ops, numpy) and knows nothing of how backward runs (``_backward.py``).

How it fits the one engine:
* ``NDArray`` is a ``Tracer`` whose trace is the single ``RECORDER``. It therefore *is* an
  array to every layer below: functrace.numpy promotes and broadcasts it, its operators and
  methods are functrace.numpy's (installed on Tracer), and every op reaches ``bind``, which
  hands it to the recorder. The recorder runs ``op.impl`` on the stored numpy (or cupy) arrays
  immediately, as MXNet does, and returns NDArrays. No op is implemented twice.
* While recording, and when an operand is in a graph (a marked variable or a recorded result),
  the recorder also keeps the equation (the same ``Eqn`` a trace would record) in a ``Node``
  that points to the nodes of its operands: the history is a DAG hanging off the arrays, freed
  by reference counting when they die (MXNet's AGInfo on nnvm nodes).
* A node keeps only the operand and result values its op's vjp rule reads (MXNet's
  GetBackwardDependency). We find them by tracing the rule once per op signature on abstract
  values and looking at what its graph reads; the others are left as placeholders (their
  Var carries shape and dtype).
* Inside ``with record():`` the recorder is also the *current* trace (when no transform is
  active), so any functrace.numpy function, ``ft.custom_vjp`` or ``ft.grad`` called there runs
  through it: an ``ft.grad`` evaluated inside ``record()`` is itself recorded.
* Outside ``record()`` an NDArray's methods make the recorder current for the call, and
  ``bind`` (a documented hook in tracing.py) sends ops on NDArrays to it; other transforms read
  NDArrays as constants (the other half of that hook).

Values are never written in place: an in-place update (``x[:] = v``, ``x += 1``) gives the
array a new buffer and a new Var, so the values a recorded graph keeps stay what they were.
"""

from __future__ import annotations

import contextlib
import functools
import operator
from collections.abc import Iterator

import numpy as np

from .. import numpy as fnp
from .. import ops
from ..autodiff import rule_dependency
from ..core import AVal, Eqn, Lit, Params, Var
from ..errors import (
    FunctraceError,
    FunctraceTypeError,
    FunctraceValueError,
    ShapeError,
    TracerLeakError,
)
from ..tracing import (
    CURRENT_TRACE,
    Trace,
    Tracer,
    current_trace,
    op_error,
    source_line,
    user_source,
)
from ._nodes import Node, Slot, check_req
from ._state import RECORDING, TRAINING

__all__ = ["RECORDER", "NDArray", "array", "pause", "predict_mode", "record", "train_mode"]

# --------------------------------------------------------------------------------------------
# Storage helpers (numpy, or any array with numpy's protocols, e.g. cupy)
# --------------------------------------------------------------------------------------------

def _is_device_array(x) -> bool:
    return hasattr(x, "__cuda_array_interface__") and not isinstance(x, np.ndarray)


def storage_of(x, dtype=None, copy: bool = False):
    """An array to store: numpy (copied if asked), or a device array kept as it is."""
    if isinstance(x, NDArray):
        a = x._data
        if dtype is not None and a.dtype != np.dtype(dtype):
            return a.astype(dtype)
        return a.copy() if copy else a
    if _is_device_array(x):
        a = x if dtype is None else x.astype(dtype)
        return a.copy() if copy else a
    a = np.array(x, dtype=dtype, copy=True) if copy else np.asarray(x, dtype=dtype)
    if a.dtype.kind not in "biufc":
        raise FunctraceTypeError(f"autograd arrays hold bool, integer, float or complex data; "
                                 f"got {type(x).__name__} of dtype {a.dtype}; at "
                                 f"{source_line(user_source())}")
    return a


def _host(a) -> np.ndarray:
    return a if isinstance(a, np.ndarray) else (a.get() if hasattr(a, "get") else np.asarray(a))


def _as_result(r, aval: AVal, op):
    if not isinstance(r, np.ndarray) and not _is_device_array(r):
        r = np.asarray(r)
    if r.dtype != aval.dtype:
        r = r.astype(aval.dtype)
    if r.shape != aval.shape:
        raise FunctraceError(f"internal: {op.name}'s numpy implementation returned shape "
                             f"{r.shape}, its shape rule says {aval.shape}")
    return r


def wrap(data, var: Var | None = None, node: Node | None = None, index: int = 0,
          slot: Slot | None = None) -> NDArray:
    obj = NDArray.__new__(NDArray)
    obj._trace = RECORDER
    obj._var = var if var is not None else Var(AVal(data.shape, data.dtype))
    obj._data = data
    obj._node = node
    obj._index = index
    obj._slot = slot
    return obj


# --------------------------------------------------------------------------------------------
# The recorder
# --------------------------------------------------------------------------------------------

class _Recorder(Trace):
    """The eager trace of autograd arrays: computes each op now, records it when asked."""

    eager = True

    def __init__(self):
        super().__init__(None)

    def __repr__(self):
        return "<autograd recorder>"

    def record(self, op, args, params):
        recording = RECORDING.get()
        n = len(args)
        datas: list = [None] * n
        avals: list = [None] * n
        atoms: list = [None] * n
        parents: list = [None] * n
        attached = False
        for i, a in enumerate(args):
            if isinstance(a, NDArray):
                datas[i] = a._data
                avals[i] = a._var.aval
                if recording:
                    p = a._ref()
                    parents[i] = p
                    attached = attached or p is not None
                    atoms[i] = a._var
            elif isinstance(a, Tracer):
                raise TracerLeakError(
                    f"{op.name} got a traced value of {a._trace} while running autograd arrays "
                    f"eagerly, at {source_line(user_source())}: a traced value escaped its "
                    "transform (stored in a global or closure?); return it from the "
                    "transformed function instead")
            elif isinstance(a, Lit):
                datas[i] = a.val
                avals[i] = a.aval
                atoms[i] = a
            else:
                d = storage_of(a)
                datas[i] = d
                avals[i] = av = AVal(d.shape, d.dtype)
                if recording:
                    atoms[i] = Lit(d) if d.ndim == 0 else Var(av)
        try:
            out = op.abstract_eval(*avals, **params)
        except (TypeError, ValueError) as e:
            raise op_error(op, e, avals, user_source()) from None
        out_avals = tuple(out) if op.multiple_results else (out,)
        token = CURRENT_TRACE.set(None)   # impls that evaluate sub-graphs run plain numpy
        try:
            res = op.impl(*datas, **params)
        finally:
            CURRENT_TRACE.reset(token)
        res = res if op.multiple_results else (res,)
        outs = [wrap(_as_result(r, av, op), Var(av))
                for r, av in zip(res, out_avals, strict=True)]
        if attached:
            self._remember(op, params, atoms, datas, parents, avals, out_avals, outs)
        return tuple(outs) if op.multiple_results else outs[0]

    @staticmethod
    def _remember(op, params, atoms, datas, parents, avals, out_avals, outs):
        """Keep the equation in a node (MXNet's RecordOp), with only the values its
        gradient rule reads."""
        eqn = Eqn(op, atoms, Params(params), [o._var for o in outs], user_source())
        in_key = tuple(a if isinstance(a, Lit) else av for a, av in zip(atoms, avals, strict=True))
        active = tuple(p is not None and av.dtype.kind in "fc"
                       for p, av in zip(parents, avals, strict=True))
        save_in, save_out = rule_dependency(op, eqn.params, in_key, out_avals, active)
        saved = {}
        for a, d, s in zip(atoms, datas, save_in, strict=True):
            if s and isinstance(a, Var):
                saved[a] = d
        for o, s in zip(outs, save_out, strict=True):
            if s:
                saved[o._var] = o._data
        node = Node(eqn, tuple(parents), saved or None)
        for i, o in enumerate(outs):
            o._node, o._index = node, i


RECORDER = _Recorder()


def run_recorded(fn):
    """Run ``fn`` with the recorder as the current trace, unless a transform is active (then
    NDArrays are that transform's constants and ``fn`` runs as it is)."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        if current_trace() is not None:
            return fn(*args, **kwargs)
        token = CURRENT_TRACE.set(RECORDER)
        try:
            return fn(*args, **kwargs)
        finally:
            CURRENT_TRACE.reset(token)
    return run


def _attached(x) -> bool:
    return isinstance(x, NDArray) and x._ref() is not None


def _raw(x, readonly: bool = False):
    """NDArrays inside (nested) argument lists replaced by their stored arrays (read-only
    views for numpy functions we do not know: they must not write into stored values)."""
    if isinstance(x, NDArray):
        d = x._data
        if readonly and isinstance(d, np.ndarray):
            d = d.view()
            d.flags.writeable = False
        return d
    if isinstance(x, list | tuple):
        return type(x)(_raw(e, readonly) for e in x)
    return x


def _any_attached(x) -> bool:
    if isinstance(x, NDArray):
        return x._ref() is not None
    if isinstance(x, list | tuple):
        return any(_any_attached(e) for e in x)
    if isinstance(x, dict):
        return any(_any_attached(e) for e in x.values())
    return False


def _fnp_counterpart(func, module: str):
    ns = fnp
    if module.startswith("numpy."):
        for part in module.split(".")[1:]:
            if part.startswith("_"):   # numpy._core.* are numpy's own top-level functions
                break
            ns = getattr(ns, part, None)
            if ns is None:
                return None
    fn = getattr(ns, getattr(func, "__name__", ""), None)
    return None if fn is None or fn is func or not callable(fn) else fn


def _untraceable(what: str):
    return FunctraceTypeError(
        f"{what} was called on an autograd array that is part of a recorded graph, at "
        f"{source_line(user_source())}, and it has no functrace.numpy counterpart, so it "
        "cannot be recorded or differentiated. Write it with functrace.numpy, or take the "
        "values with x.asnumpy() (no gradient flows through them).")


_INPLACE_MSG = (
    "in-place operation ({what}) on an array that is part of a recorded graph, while autograd "
    "is recording: the recorded history would no longer describe the array, so its gradients "
    "would be wrong. Write it functionally (y = x + 1, y = x.at[idx].set(v)), or make the "
    "update outside autograd.record() or inside autograd.pause().")


# --------------------------------------------------------------------------------------------
# NDArray
# --------------------------------------------------------------------------------------------

class NDArray(Tracer):
    """An imperative array: numpy (or cupy) storage, numpy's operators, and autograd.

    Operations run at once and return new NDArrays. Inside ``with autograd.record():`` they
    are also recorded when an operand is a marked variable or a recorded result, so that
    ``autograd.backward`` can differentiate them. Mark variables with
    ``autograd.attach_grad(x)`` (or ``x.attach_grad()``); read gradients from ``x.grad``.

    Example:
        >>> import numpy as np
        >>> from functrace import autograd
        >>> x = autograd.attach_grad(np.array([1.0, 2.0]))
        >>> with autograd.record():
        ...     y = (x * x).sum()
        >>> y.backward()
        >>> x.grad
        NDArray([2., 4.])
    """

    __slots__ = ("_data", "_index", "_node", "_slot")

    def __init__(self, data, dtype=None):
        arr = storage_of(data, dtype, copy=True)
        self._trace = RECORDER
        self._var = Var(AVal(arr.shape, arr.dtype))
        self._data = arr
        self._node = None
        self._index = 0
        self._slot = None

    # -- the graph ---------------------------------------------------------------------------
    def _ref(self):
        """This array's place in a graph: its producing node, its slot if it is a marked
        leaf, or None if it is a constant (never recorded, or its history was freed)."""
        node = self._node
        if node is not None:
            return None if node.freed else node
        return self._slot

    # -- values ------------------------------------------------------------------------------
    @property
    def value(self):
        return self._data

    def _concrete(self, why: str = "", truth: bool = False, convert: bool = True):
        return self._data

    def _differentiated(self) -> bool:
        return False   # read by transforms as a constant

    def __array__(self, dtype=None, copy=None):
        a = _host(self._data)
        if dtype is not None and a.dtype != np.dtype(dtype):
            return a.astype(dtype)
        if copy:
            return a.copy()
        if a is self._data:   # a read-only view: stored values are never written in place
            a = a.view()
            a.flags.writeable = False
        return a

    def asnumpy(self) -> np.ndarray:
        """A numpy copy of the values (no gradient flows through it)."""
        return np.array(_host(self._data), copy=True)

    def wait_to_read(self) -> None:
        """MXNet compatibility: values are computed eagerly, so there is nothing to wait for."""

    def __repr__(self):
        r = repr(_host(self._data))
        return ("NDArray" + r[5:]) if r.startswith("array") else f"NDArray({r})"

    def __str__(self):
        return str(_host(self._data))

    def __format__(self, spec):
        if self.ndim == 0:
            return format(self._data.item(), spec)
        return format(str(self), spec)

    __hash__ = object.__hash__   # identity, as MXNet's NDArray (== is elementwise)

    def __reduce__(self):
        return (NDArray, (self.asnumpy(),))

    def __copy__(self):
        return wrap(self._data)

    def __deepcopy__(self, memo):
        return wrap(self._data.copy())

    # -- autograd ----------------------------------------------------------------------------
    @property
    def grad(self) -> NDArray | None:
        """The gradient buffer of a marked array (None if the array is not marked)."""
        return self._slot.grad if self._slot is not None else None

    @property
    def grad_req(self) -> str:
        """"write", "add" or "null" ("null" also for arrays that are not marked)."""
        return self._slot.req if self._slot is not None else "null"

    @grad_req.setter
    def grad_req(self, req: str) -> None:
        check_req(req)
        if self._slot is None:
            if req != "null":
                self.attach_grad(req)
            return
        self._slot.req = req

    # attach_grad(grad_req="write") and backward(out_grad=None, ...) are methods too: the
    # modules that own them (_marking, _backward) sit above this one and install them

    def detach(self) -> NDArray:
        """The same values, outside any graph (no gradient flows through it)."""
        return wrap(self._data)

    def copy(self) -> NDArray:
        """A copy; recorded (gradients flow through it) when recording an array in a graph."""
        if RECORDING.get() and self._ref() is not None:
            return ops.convert_element_type(self, self.dtype)   # an identity op, recorded
        return wrap(self._data.copy())

    # -- in-place updates --------------------------------------------------------------------
    def _check_inplace(self, what: str) -> None:
        if RECORDING.get() and self._ref() is not None:
            raise FunctraceValueError(_INPLACE_MSG.format(what=what) + f" At "
                                      f"{source_line(user_source())}.")

    def _take(self, new, keep_graph: bool) -> None:
        """Make ``new``'s value this array's (in place, from the user's point of view)."""
        data = new._data if isinstance(new, NDArray) else storage_of(new)
        if data.shape != self.shape:
            raise ShapeError(f"cannot write a value of shape {data.shape} into an array of "
                             f"shape {self.shape} in place; at {source_line(user_source())}")
        if data.dtype != self.dtype:
            if not np.can_cast(data.dtype, self.dtype, "same_kind"):
                raise FunctraceTypeError(
                    f"cannot write {data.dtype} values into a {self.dtype} array in place "
                    f"(numpy's same_kind rule); at {source_line(user_source())}")
            if keep_graph and _attached(new):
                new = ops.convert_element_type(new, self.dtype)
                data = new._data
            else:
                data = data.astype(self.dtype)
        if self._node is not None and self._node.marks:
            self._node.marks.pop(self._index, None)   # a marked result becomes a leaf
        self._data = data
        if keep_graph and _attached(new):
            self._var, self._node, self._index = new._var, new._node, new._index
        else:
            self._var = Var(self._var.aval)   # a new value: graphs recorded so far keep theirs
            self._node = None

    def __setitem__(self, idx, value):
        self._check_inplace("x[idx] = value")
        if RECORDING.get() and _any_attached(value):
            new = run_recorded(lambda: fnp.at(self)[idx].set(value))()
            self._take(new, keep_graph=True)
            return
        data = self._data.copy()
        data[_raw(idx)] = _raw(value)
        self._take(data, keep_graph=False)

    # -- numpy protocols ---------------------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        out = kwargs.pop("out", None)
        if method == "at" and isinstance(inputs[0], NDArray):   # np.add.at(x, idx, v)
            target = inputs[0]
            what = f"numpy.{ufunc.__name__}.at"
            target._check_inplace(what)
            if RECORDING.get() and _any_attached(inputs[1:]):
                raise _untraceable(what)
            data = target._data.copy()   # numpy's ufunc.at ignores read-only flags
            ufunc.at(data, *_raw(inputs[1:], True), **kwargs)
            target._take(data, keep_graph=False)
            return None
        fn = _fnp_counterpart(ufunc, "numpy") if method == "__call__" else None
        if fn is not None:
            res = run_recorded(fn)(*inputs, **kwargs)
        else:
            what = f"numpy.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
            if RECORDING.get() and _any_attached(inputs):
                raise _untraceable(what)
            res = getattr(ufunc, method)(*_raw(inputs, True), **kwargs)
        if out is None:
            return res
        target = out[0] if isinstance(out, tuple) else out
        if isinstance(target, NDArray):
            target._check_inplace(f"out= of numpy.{ufunc.__name__}")
            target._take(res, keep_graph=RECORDING.get())
        else:
            target[...] = np.asarray(res)
        return target

    def __array_function__(self, func, types, args, kwargs):
        module = getattr(func, "__module__", None) or "numpy"
        fn = _fnp_counterpart(func, module)
        if fn is not None:
            return run_recorded(fn)(*args, **kwargs)
        if RECORDING.get() and (_any_attached(args) or _any_attached(kwargs)):
            raise _untraceable(f"{module}.{func.__name__}")
        return func(*_raw(args, True), **{k: _raw(v, True) for k, v in kwargs.items()})

    def __iter__(self) -> Iterator[NDArray]:
        if not self.shape:
            raise FunctraceTypeError(f"iteration over a 0-d array, at "
                                     f"{source_line(user_source())}")
        return (self[i] for i in range(self.shape[0]))


def _inplace(name: str, symbol: str):
    binary = getattr(operator, name)

    def method(self, other):
        self._check_inplace(f"x {symbol}= ...")
        new = run_recorded(binary)(self, other)
        self._take(new, keep_graph=RECORDING.get())
        return self
    method.__name__ = f"__i{name.strip('_')}__"
    return method


for _name, _sym in [("add", "+"), ("sub", "-"), ("mul", "*"), ("truediv", "/"),
                    ("floordiv", "//"), ("mod", "%"), ("pow", "**"), ("matmul", "@")]:
    setattr(NDArray, f"__i{_name}__", _inplace(_name, _sym))


def _install_eager_methods() -> None:
    """Give NDArray every array method functrace.numpy installed on Tracer, run through the
    recorder (so ``x + 1`` outside ``record()`` is an NDArray op too, not a leaked tracer)."""
    own = set(vars(NDArray))
    for name, attr in list(vars(Tracer).items()):
        if name in own:
            continue
        fn = attr.fget if isinstance(attr, property) else attr
        if not callable(fn) or not getattr(fn, "__module__", "").startswith("functrace.numpy"):
            continue
        setattr(NDArray, name, property(run_recorded(fn)) if isinstance(attr, property)
                else run_recorded(fn))


_install_eager_methods()


def array(data, dtype=None) -> NDArray:
    """An autograd array holding a copy of ``data`` (not marked: see ``attach_grad``).

    Example:
        >>> from functrace import autograd
        >>> autograd.array([1, 2]) * 2
        NDArray([2, 4])
    """
    return NDArray(data, dtype)


# --------------------------------------------------------------------------------------------
# Scopes
# --------------------------------------------------------------------------------------------

@contextlib.contextmanager
def _scope(recording: bool | None, training: bool | None):
    t_rec = RECORDING.set(recording) if recording is not None else None
    t_train = TRAINING.set(bool(training)) if training is not None else None
    cur = current_trace()
    t_cur = None
    if recording is True and cur is None:
        t_cur = CURRENT_TRACE.set(RECORDER)    # functrace.numpy calls in the scope run through it
    elif recording is False and cur is RECORDER:
        t_cur = CURRENT_TRACE.set(None)
    try:
        yield
    finally:
        if t_cur is not None:
            CURRENT_TRACE.reset(t_cur)
        if t_train is not None:
            TRAINING.reset(t_train)
        if t_rec is not None:
            RECORDING.reset(t_rec)


def record(train_mode: bool = True):
    """``with autograd.record():`` records operations on arrays in a graph for ``backward``.

    Only operations with an operand in a graph (a marked variable or a recorded result) are
    recorded. Inside the scope functrace.numpy functions, ``ft.custom_vjp`` and ``ft.grad``
    run through the recorder too. The state is per thread (and per asyncio task).

    Example:
        >>> import numpy as np
        >>> from functrace import autograd
        >>> x = autograd.attach_grad(np.array(3.0))
        >>> with autograd.record():
        ...     y = x * x
        >>> autograd.grad(y, [x])[0]
        NDArray(6.)
    """
    return _scope(True, train_mode)


def pause(train_mode: bool = False):
    """``with autograd.pause():`` stops recording inside a ``record()`` scope."""
    return _scope(False, train_mode)


def train_mode():
    """``with autograd.train_mode():`` sets training mode without changing recording."""
    return _scope(None, True)


def predict_mode():
    """``with autograd.predict_mode():`` sets prediction mode without changing recording."""
    return _scope(None, False)
