"""The op registry: every primitive, declared once, grouped by family.

Importing this package declares all ops (``functrace.core.registry`` maps names to ``Op``s)
and exposes the op-level functions that gradient rules are written with (``ops.mul``,
``ops.reduce_sum``, ...). Rules use these, never ``functrace.numpy``: they take operands of one
dtype and explicit shapes. Imports core/tracing only.

``_base`` is private to this package; the helpers the layers above need (``as_array``,
``namespace_of``: array-module generic impls; ``shape_of``, ``dtype_of``, ``lit``) are
re-exported here, so nothing outside ``ops/`` imports it.
"""

from ..core import registry
from . import (
    batch_rules,
    control,
    decomp,
    dot,
    elementwise,
    indexing,
    linalg,
    matfuncs,
    random,
    random_rejection,
    reduce,
    shape,
    special,
    xla_math,
)
from ._base import as_array, dtype_of, lit, namespace_of, shape_of
from .control import *  # noqa: F403
from .decomp import *  # noqa: F403
from .dot import *  # noqa: F403
from .elementwise import *  # noqa: F403
from .fft import *  # noqa: F403  (ops.fft is the op-level function, not the module)
from .indexing import *  # noqa: F403
from .linalg import *  # noqa: F403
from .matfuncs import *  # noqa: F403
from .random import *  # noqa: F403
from .random_rejection import *  # noqa: F403
from .reduce import *  # noqa: F403
from .shape import *  # noqa: F403
from .special import *  # noqa: F403
from .xla_math import *  # noqa: F403

__all__ = ["registry", "as_array", "dtype_of", "lit", "namespace_of", "shape_of", "batch_rules",
           "control", "decomp", "dot", "elementwise", "indexing", "linalg", "matfuncs", "random",
           "random_rejection", "reduce", "shape", "special", "xla_math"]
