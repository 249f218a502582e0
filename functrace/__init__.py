"""functrace: JAX-style function transforms for numpy code, in pure Python.

Trace a numpy-style function into an immutable graph, transform it (gradients of any order,
forward mode, batching), and run it on a numpy reference interpreter or numba-compiled kernels.

Example:
    >>> import numpy as np, functrace as ft, functrace.numpy as fnp
    >>> sym = ft.trace(lambda x: fnp.sum(fnp.sin(x)))(np.zeros(3))
    >>> float(sym(np.zeros(3)))
    0.0

Importing functrace is cheap: numba, cupy and scipy are imported only by the backends that
need them.
"""

from . import ops as _ops  # noqa: F401  (declares every primitive)
from . import numpy as _fnp  # noqa: F401  (installs the array protocol on tracers)
from . import (debug, device, extend, flatten_util, nn, random,  # noqa: F401
               test_util, tree_util)
from .api import (checkpoint, clear_caches, custom_jvp, custom_vjp, eval_shape, grad, remat,
                  safe_where, stop_gradient, trace, value_and_grad, vjp)
from .control import cond, fori_loop, map, scan, switch, while_loop
from .config import config, disable_jit
from .core import AVal, Graph, verify
from .custom_rules import register_custom_rule
from .device import block_until_ready, device_get, device_put
from .errors import (AxisError, BackendError, ConcretizationError, FunctraceError,
                     FunctraceTypeError, FunctraceValueError, FunctraceWarning,
                     GraphFormatError, GuardError, MissingRuleError, NaNError, ShapeError,
                     TracerConversionError, TracerLeakError)
from .forward import hessian, jacfwd, jacobian, jacrev, jvp, linearize, vmap
from .jit import jit
from .symbol import Symbol
from .tracing import ShapeDtype
from . import autograd  # the MXNet-style imperative API: the top layer, imported last

__version__ = "0.1.0"

__all__ = ["trace", "grad", "value_and_grad", "vjp", "jvp", "linearize", "vmap", "jacfwd",
           "jacrev", "jacobian", "hessian", "jit", "cond", "switch", "while_loop", "fori_loop",
           "scan", "map", "stop_gradient", "clear_caches",
           "custom_vjp", "custom_jvp", "register_custom_rule", "checkpoint", "remat",
           "safe_where", "Symbol",
           "ShapeDtype", "config", "disable_jit", "eval_shape", "block_until_ready",
           "AVal", "Graph", "verify", "device_put", "device_get", "device", "debug",
           "tree_util", "flatten_util", "nn", "random", "test_util", "autograd", "FunctraceError",
           "FunctraceWarning", "FunctraceTypeError", "FunctraceValueError", "ShapeError",
           "AxisError",
           "ConcretizationError", "MissingRuleError", "BackendError", "TracerLeakError",
           "TracerConversionError", "GuardError", "GraphFormatError", "NaNError"]
