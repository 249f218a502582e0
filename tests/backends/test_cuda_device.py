"""CPU tests of the pieces of the CUDA backend that a GPU run depends on but that need no GPU:
the direct-launch parameter buffer (laid out as numba-cuda passes kernel arguments), the
deterministic ``scatter`` for repeated indices, op impls on device arrays, and numpy keyword
forwarding for array libraries that dispatch through ``__array_function__``.

tests/backends/test_gpu.py checks the same paths on a real GPU (repeated calls through the driver,
strided views, repeated scatter indices); benchmarks/results/gpu_check_h200.log is a run.
"""

from __future__ import annotations

import ctypes
import struct
import sys
import types as types_module

import numpy as np
import pytest
from numba import types

import functrace.numpy as fnp
from functrace.backends.cuda import device as cuda_device
from functrace.backends.cuda.device import _Packed
from functrace.ops import as_array, namespace_of
from functrace.ops.indexing import _last_update_wins


class _Ptr:
    def __init__(self, ptr):
        self.ptr = ptr


class FakeDeviceArray:
    """What ``_Packed`` reads of a cupy array."""

    __cuda_array_interface__ = property(lambda self: {})

    def __init__(self, host: np.ndarray, ptr: int):
        self.host, self.data = host, _Ptr(ptr)
        self.size, self.dtype, self.shape, self.strides = (host.size, host.dtype, host.shape,
                                                           host.strides)
        self._c_contiguous = host.flags.c_contiguous
        self._f_contiguous = host.flags.f_contiguous


def _fields(p: _Packed) -> list[int]:
    return list(p.buf)


def test_parameter_buffer_follows_numbas_argument_layout():
    # numba passes an array as meminfo, parent, nitems, itemsize, data, shape..., strides...,
    # and scalars by value, each in its own kernel parameter
    a = FakeDeviceArray(np.zeros((3, 4), np.float32), ptr=0x1000)
    b = FakeDeviceArray(np.zeros(5), ptr=0x2000)
    sig = (types.int64, types.Array(types.float32, 2, "C"), types.Array(types.float64, 1, "C"),
           types.float64)
    p = _Packed(sig, (12, a, b, 0.5), func=0, launch=None)
    bits = struct.unpack("<q", struct.pack("<d", 0.5))[0]
    assert _fields(p) == [12, 0, 0, 12, 4, 0x1000, 3, 4, 16, 4, 0, 0, 5, 8, 0x2000, 5, 8, bits]
    base = ctypes.addressof(p.buf)
    assert [p.params[i] for i in range(len(p.buf))] == [base + 8 * i for i in range(18)]


def test_pack_writes_new_pointers_and_scalars_and_refuses_misfits():
    sig = (types.int64, types.Array(types.float64, 2, "C"), types.Array(types.float64, 2, "A"))
    h = np.zeros((4, 6))
    p = _Packed(sig, (7, FakeDeviceArray(h, 0x10), FakeDeviceArray(h, 0x20)), 0, None)
    strided = np.zeros((4, 12))[:, ::2]          # same shape, other strides
    assert p.pack((9, FakeDeviceArray(h, 0x30), FakeDeviceArray(strided, 0x40)))
    f = _fields(p)
    assert f[0] == 9 and f[5] == 0x30
    assert f[14] == 0x40 and f[15:17] == [4, 6] and f[17:19] == [96, 16]  # A: strides too
    # a transposed view cannot go to the C-layout specialisation: numba specialises anew
    assert not p.pack((9, FakeDeviceArray(np.zeros((6, 4)).T, 0x50), FakeDeviceArray(h, 0x60)))
    # a float argument is part of the specialisation's buffer: another value goes to numba
    q = _Packed((types.float32,), (1.5,), 0, None)
    assert q.pack((1.5,)) and not q.pack((2.5,))
    with pytest.raises(TypeError):
        _Packed((types.boolean,), (True,), 0, None)


@pytest.mark.parametrize("shape,key", [
    ((6,), lambda r: (r.integers(0, 6, 40),)),
    ((5, 4), lambda r: (r.integers(0, 5, 30), r.integers(0, 4, 30))),
    ((5, 4), lambda r: (slice(None), r.integers(0, 4, 9))),
])
def test_last_update_wins_gives_numpys_assignment_in_any_write_order(shape, key):
    rng = np.random.default_rng(0)
    k = key(rng)
    out = np.zeros(shape)
    idx_shape = out[k].shape
    v = rng.standard_normal(idx_shape)
    want = out.copy()
    want[k] = v                                 # numpy: the last update to a target stays
    w = _last_update_wins(np, shape, v, k)
    # equal values at equal targets: writing the updates in reverse gives the same result
    rev = out.copy()
    flat_targets = np.arange(out.size).reshape(shape)[k].reshape(-1)
    rev.reshape(-1)[flat_targets[::-1]] = w.reshape(-1)[::-1]
    np.testing.assert_array_equal(rev, want)
    got = out.copy()
    got[k] = w
    np.testing.assert_array_equal(got, want)


def test_op_impl_helpers_keep_device_arrays_where_they_are(monkeypatch):
    class Dev:
        __cuda_array_interface__ = property(lambda self: {})
        dtype = np.dtype(np.float32)

        def astype(self, dt):
            return ("cast", np.dtype(dt))

    d = Dev()
    assert as_array(d) is d and as_array(d, np.float32) is d
    assert as_array(d, np.float64) == ("cast", np.dtype(np.float64))
    assert namespace_of(np.ones(2), d) is np          # no cupy imported: numpy
    fake_cupy = types_module.SimpleNamespace(ndarray=Dev)
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    assert namespace_of(np.ones(2), d) is fake_cupy
    assert namespace_of(np.ones(2), 3.0) is np
    from functrace.device import array_module
    assert array_module(d) is fake_cupy and array_module(np.ones(2)) is np
    assert type(as_array([1, 2])) is np.ndarray


def test_reductions_forward_only_the_keywords_a_caller_gave():
    """cupy's ``sum`` has no ``initial`` (nor ``where``): an eager ``fnp.sum`` on an array
    that dispatches through ``__array_function__`` must not pass numpy's defaults on."""
    seen = []

    class Rec:
        def __array_function__(self, func, types, args, kwargs):
            seen.append((func.__name__, sorted(kwargs)))
            return 0.0

    fnp.sum(Rec())
    fnp.prod(Rec(), axis=0)
    fnp.sum(Rec(), initial=1.0)
    assert seen == [("sum", ["axis", "dtype", "keepdims", "out"]),
                    ("prod", ["axis", "dtype", "keepdims", "out"]),
                    ("sum", ["axis", "dtype", "initial", "keepdims", "out"])]
    assert float(fnp.sum(np.array([1.0, 2.0]), initial=0.5)) == 3.5


def test_numpy_compat_leaves_numpy_as_it_found_it(monkeypatch):
    """numba-cuda <= 0.30.4 registers an overload for np.row_stack, which numpy 2.5 removed;
    the stand-in lives only while numba-cuda's registry module imports."""
    monkeypatch.delattr(np, "row_stack", raising=False)
    monkeypatch.setattr(cuda_device, "simulator_enabled", lambda: False)
    seen = []

    def load():                      # what numba-cuda's registry module does at import
        seen.append(np.row_stack([np.ones(2), np.zeros(2)]))  # noqa: NPY201

    cuda_device._numpy_compat(load)
    np.testing.assert_array_equal(seen[0], [[1.0, 1.0], [0.0, 0.0]])
    assert not hasattr(np, "row_stack")
    cuda_device._numpy_compat()      # the real module, or ImportError without numba-cuda
    assert not hasattr(np, "row_stack")


class _FakeCupy:
    class ndarray(FakeDeviceArray):
        pass


def test_launch_goes_through_numba_once_then_the_driver(monkeypatch):
    """cuda_device._Launch: the first call (and any call whose arrays do not fit the
    specialisation) goes through numba's launch; the others fill the buffer and call the
    driver's launch with it; a kernel without a direct path stays on numba's."""
    numba_calls, driver_calls = [], []
    sig = (types.int64, types.Array(types.float64, 1, "C"))

    class Kernel:
        def __getitem__(self, config):
            return lambda *a: numba_calls.append(a)

    class Cuda:
        @staticmethod
        def as_cuda_array(a, sync=True):
            assert sync is False          # numba must not synchronise the host per argument
            return ("numba view", a)

    class Adapter:
        cp, cuda = _FakeCupy, Cuda

    def launch(func, gx, gy, gz, bx, by, bz, shmem, stream, params, extra):
        ptr = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))
        data = ctypes.cast(ptr[5], ctypes.POINTER(ctypes.c_int64))[0]   # the array's pointer
        driver_calls.append((func, (gx, gy, gz), (bx, by, bz), stream, data))

    monkeypatch.setattr(_Packed, "from_numba", classmethod(
        lambda cls, kernel, nargs, args: cls(sig, args, 77, launch)))
    la = cuda_device._Launch(Adapter(), Kernel(), 4, 256, ("stream", "numba stream", 0xABC))
    h = np.zeros(8)
    la(8, _FakeCupy.ndarray(h, 0x100))
    assert len(numba_calls) == 1 and numba_calls[0][1] == ("numba view", numba_calls[0][1][1])
    la(8, _FakeCupy.ndarray(h, 0x200))
    la(8, _FakeCupy.ndarray(h, 0x300))
    assert len(numba_calls) == 1
    assert driver_calls == [(77, (4, 1, 1), (256, 1, 1), 0xABC, 0x200),
                            (77, (4, 1, 1), (256, 1, 1), 0xABC, 0x300)]
    la(8, _FakeCupy.ndarray(np.zeros(16)[::2], 0x400))   # strided: numba specialises anew
    assert len(numba_calls) == 2 and len(driver_calls) == 2

    def broken(cls, kernel, nargs, args):
        raise LookupError("another numba-cuda")
    monkeypatch.setattr(_Packed, "from_numba", classmethod(broken))
    lb = cuda_device._Launch(Adapter(), Kernel(), 1, 32, ("s", "ns", 1))
    lb(8, _FakeCupy.ndarray(h, 0x100))
    lb(8, _FakeCupy.ndarray(h, 0x100))
    assert lb.fast is False and len(numba_calls) == 4
