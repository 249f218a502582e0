"""Called (not inlined) versions of the vecmath functions, for the bodies of compiled loops
(``cpu_loop``): ``vecmath_calls.vtanh`` is ``vecmath.vtanh`` compiled as a numba function of
its own, kept in numba's disk cache next to ``vecmath.py`` (like ``vecmath_special``'s large
functions), that a loop calls.

Why: a ``vecmath`` function is ``inline="always"``, inlined at numba-IR level into every
caller, and numba copies and re-types its whole IR at each call site (tanh: ~0.3 s of a loop
module's compile, measured on the scan RNN benchmark). Called instead, its machine code
comes from numba's cache and only LLVM sees it again: numba links the callee into the
loop's module before optimising it, so LLVM still inlines it into the trip and vectorises
the kernel's element loop (the benchmark's warm time is unchanged;
``test_compiled_loop_calls_vecmath_and_views_buffers_bit_for_bit`` in
tests/transforms/test_control_flow.py checks the bits). Flags: numba's
``error_model="numpy"`` and no fast-math flag, the kernels' own (``vecmath.JIT_OPTIONS``):
results are bit for bit those of the inlined function.

Any public name of ``vecmath`` resolves here (module ``__getattr__``, which numba's typing
uses too), made on first use. numba's cache checks only ``vecmath.py``'s time stamp, not the
files it imports; kernel and loop module keys include ``target.vecmath_hash()``, and a
change to ``vecmath_f32.py`` or ``vecmath_llvm.py`` must touch ``vecmath.py`` too (as for
``vecmath_special``). Imports numba and ``vecmath`` only.
"""

import threading

import numba

from . import vecmath as _vm

_made: dict = {}
_lock = threading.Lock()


def __getattr__(name: str):
    fn = _made.get(name)
    if fn is not None:
        return fn
    if name.startswith("_") or name not in _vm.__all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    inlined = getattr(_vm, name)
    if not isinstance(inlined, numba.core.registry.CPUDispatcher):
        raise AttributeError(f"vecmath.{name} is not a numba function")
    with _lock:
        fn = _made.get(name)
        if fn is None:
            fn = _made[name] = numba.njit(cache=True, **_vm.JIT_OPTIONS)(inlined.py_func)
    return fn
