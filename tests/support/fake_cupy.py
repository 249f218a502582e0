"""A stand-in for cupy on machines without a GPU: the two properties of cupy that host code
trips over, without the GPU.

* Its arrays refuse to become numpy arrays implicitly: ``np.asarray(x)`` raises ``TypeError``
  (as cupy's ``__array__`` does); ``x.get()`` copies to the host.
* Its functions lack some of numpy's keywords, as cupy's do (``_CUPY_LACKS``: ``where=`` on
  reductions, ``initial=`` on max/min, ``correction=`` on var/std).
* Its functions, ufuncs and operators refuse numpy arrays (any ndim, 0-d too) mixed with
  device arrays (cupy's kernels raise ``TypeError: Unsupported type <class 'numpy.ndarray'>``);
  Python and numpy scalars are accepted. ``asarray``/``array`` take numpy arrays (that is the
  host-to-device copy).

Everything else is numpy: values, dtypes, keywords. Install it with ``install(monkeypatch)``,
which puts it in ``sys.modules["cupy"]`` (functrace looks cupy up there, never importing it).
tests/backends/test_gpu.py runs the same paths against real cupy on a GPU.
"""

from __future__ import annotations

import sys
import types

import numpy as np

_HOST_OK = {"asarray", "array", "asanyarray", "ascontiguousarray", "asnumpy",
            "get_array_module", "result_type", "can_cast", "promote_types", "dtype", "finfo",
            "iinfo", "issubdtype", "ndim", "shape", "size", "isscalar"}


# keywords numpy takes and cupy's functions do not (seen on cupy 14.2; benchmarks/results/
# gpu_check_h200.log): the fake refuses them too, so tests notice code that relies on them
_CUPY_LACKS = {"sum": {"initial", "where"}, "prod": {"initial", "where"},
               "mean": {"where"}, "amax": {"initial", "where"}, "amin": {"initial", "where"},
               "max": {"initial", "where"}, "min": {"initial", "where"},
               "var": {"correction", "where"}, "std": {"correction", "where"},
               "all": {"where"}, "any": {"where"}, "count_nonzero": {"keepdims"}}


class _Device:
    id = 0


class ndarray:
    """A device array: a numpy array that does not let numpy see it."""

    __array_priority__ = 100
    __slots__ = ("_a",)

    def __init__(self, a):
        self._a = a

    # -- what cupy refuses --------------------------------------------------------------------
    def __array__(self, *args, **kwargs):
        raise TypeError("Implicit conversion to a NumPy array is not allowed. Please use "
                        "`.get()` to construct a NumPy array explicitly.")

    @property
    def __cuda_array_interface__(self):
        return {"shape": self._a.shape, "typestr": self._a.dtype.str,
                "data": (self._a.ctypes.data, False), "version": 3, "strides": None}

    def get(self, stream=None):
        return self._a.copy()

    @property
    def device(self):
        return _Device()

    # -- numpy's protocols, as cupy implements them ---------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        _refuse_host(inputs, kwargs, ufunc.__name__)
        res = getattr(ufunc, method)(*_unwrap(inputs), **_unwrap(kwargs))
        out = kwargs.get("out")
        if out is not None:                    # the out= array itself, as cupy returns it
            return out[0] if type(out) is tuple and len(out) == 1 else out
        return _wrap(res)

    def __array_function__(self, func, types_, args, kwargs):
        mod = getattr(func, "__module__", "numpy") or "numpy"
        target = _module
        for part in mod.split(".")[1:]:
            target = getattr(target, part)
        return getattr(target, func.__name__)(*args, **kwargs)

    # -- attributes and methods: numpy's, results on the device -------------------------------
    def __getattr__(self, name):
        if name.startswith("__"):     # numpy's __array_interface__ etc. would let numpy in
            raise AttributeError(name)
        attr = getattr(self._a, name)
        if callable(attr):
            def method(*args, **kwargs):
                _refuse_host(args, kwargs, name)
                return _wrap(attr(*_unwrap(args), **_unwrap(kwargs)))
            return method
        return _wrap(attr)

    def __getitem__(self, key):
        return _wrap(self._a[_unwrap(key)], scalars=True)

    def __setitem__(self, key, value):
        self._a[_unwrap(key)] = _unwrap(value)

    def __len__(self):
        return len(self._a)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __bool__(self):
        return bool(self._a)

    def __float__(self):
        return float(self._a)

    def __int__(self):
        return int(self._a)

    def __index__(self):
        return self._a.__index__()

    def __complex__(self):
        return complex(self._a)

    def __repr__(self):
        return "fake_cupy." + repr(self._a)

    def __copy__(self):
        return ndarray(self._a.copy())

    def __deepcopy__(self, memo):
        return ndarray(self._a.copy())


def _binary(uf, reflected=False):
    if reflected:
        return lambda self, other: uf(other, self)
    return lambda self, other: uf(self, other)


for _name, _uf in {"add": np.add, "sub": np.subtract, "mul": np.multiply,
                   "truediv": np.true_divide, "floordiv": np.floor_divide, "mod": np.remainder,
                   "pow": np.power, "matmul": np.matmul, "and": np.bitwise_and,
                   "or": np.bitwise_or, "xor": np.bitwise_xor, "lshift": np.left_shift,
                   "rshift": np.right_shift}.items():
    setattr(ndarray, f"__{_name}__", _binary(_uf))
    setattr(ndarray, f"__r{_name}__", _binary(_uf, reflected=True))
for _name, _uf in {"lt": np.less, "le": np.less_equal, "gt": np.greater,
                   "ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal}.items():
    setattr(ndarray, f"__{_name}__", _binary(_uf))
ndarray.__neg__ = lambda self: np.negative(self)
ndarray.__pos__ = lambda self: np.positive(self)
ndarray.__abs__ = lambda self: np.absolute(self)
ndarray.__invert__ = lambda self: np.invert(self)
ndarray.__hash__ = None


def _walk(x):
    if isinstance(x, list | tuple):
        for e in x:
            yield from _walk(e)
    elif isinstance(x, dict):
        for e in x.values():
            yield from _walk(e)
    else:
        yield x


def _refuse_host(args, kwargs, what):
    for x in _walk((args, kwargs)):
        if type(x) is np.ndarray:
            raise TypeError(f"Unsupported type {type(x)} (fake cupy: {what} was given a "
                            "numpy array)")


def _unwrap(x):
    if isinstance(x, ndarray):
        return x._a
    if type(x) is list:
        return [_unwrap(e) for e in x]
    if type(x) is tuple:
        return tuple(_unwrap(e) for e in x)
    if type(x) is dict:
        return {k: _unwrap(v) for k, v in x.items()}
    return x


def _wrap(x, scalars=True):
    if isinstance(x, np.ndarray):
        return ndarray(x)
    if scalars and isinstance(x, np.generic):   # cupy returns 0-d arrays, not scalars
        return ndarray(np.asarray(x))
    if type(x) is tuple:
        return tuple(_wrap(e) for e in x)
    if type(x) is list:
        return [_wrap(e) for e in x]
    return x


class _Ufunc:
    """numpy's ufunc on device arrays; ``at`` only where cupy has it (no ``multiply.at``)."""

    _WITH_AT = frozenset({"add", "subtract", "maximum", "minimum"})

    def __init__(self, uf, call):
        self._uf, self._call = uf, call
        self.__name__ = uf.__name__

    def __call__(self, *args, **kwargs):
        return self._call(*args, **kwargs)

    def at(self, a, indices, b=None):
        if self.__name__ not in self._WITH_AT:
            raise AttributeError(f"'ufunc' object has no attribute 'at' ({self.__name__})")
        _refuse_host((a, indices, b), {}, self.__name__ + ".at")
        self._uf.at(_unwrap(a), _unwrap(indices), _unwrap(b))

    def reduce(self, a, *args, **kwargs):
        _refuse_host((a, args), kwargs, self.__name__ + ".reduce")
        return _wrap(self._uf.reduce(_unwrap(a), *_unwrap(args), **_unwrap(kwargs)))


class _Namespace(types.ModuleType):
    """numpy's functions (or a numpy submodule's), taking and returning device arrays."""

    def __init__(self, name, np_module):
        super().__init__(name)
        self._np = np_module

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        attr = getattr(self._np, name)
        if isinstance(attr, types.ModuleType):
            sub = _Namespace(f"{self.__name__}.{name}", attr)
            setattr(self, name, sub)
            return sub
        if isinstance(attr, type) or not callable(attr):
            return attr
        host_ok = name in _HOST_OK

        lacks = _CUPY_LACKS.get(name, ())

        def fn(*args, **kwargs):
            for k in lacks:
                if k in kwargs:
                    raise TypeError(f"{name}() got an unexpected keyword argument '{k}'")
            if not host_ok:
                _refuse_host(args, kwargs, name)
            return _wrap(attr(*_unwrap(args), **_unwrap(kwargs)))
        fn.__name__ = name
        if isinstance(attr, np.ufunc):
            fn = _Ufunc(attr, fn)
        setattr(self, name, fn)
        return fn


_module = _Namespace("cupy", np)
_module.ndarray = ndarray
_module.asarray = lambda x, dtype=None: x if isinstance(x, ndarray) and (
    dtype is None or x.dtype == np.dtype(dtype)) else ndarray(np.array(_unwrap(x), dtype=dtype))
_module.array = lambda x, dtype=None, copy=True: ndarray(np.array(_unwrap(x), dtype=dtype))
_module.asnumpy = lambda x: x.get() if isinstance(x, ndarray) else np.asarray(x)
_module.get_array_module = lambda *xs: (_module if any(isinstance(x, ndarray) for x in xs)
                                        else np)
_module.is_available = lambda: False
_module.__version__ = "fake"


def install(monkeypatch):
    """Put the fake in ``sys.modules["cupy"]`` for one test; returns the module."""
    monkeypatch.setitem(sys.modules, "cupy", _module)
    return _module
