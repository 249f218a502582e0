"""The op registry: every primitive, declared once, grouped by family.

Importing this package declares all ops (``functrace.core.registry`` maps names to ``Op``s)
and exposes the op-level functions that gradient rules are written with (``ops.mul``,
``ops.reduce_sum``, ...). Rules use these, never ``functrace.numpy``: they take operands of one
dtype and explicit shapes. Imports core/tracing only.
"""

from ..core import registry
from . import control, dot, elementwise, indexing, reduce, shape
from .control import *  # noqa: F403
from .dot import *  # noqa: F403
from .elementwise import *  # noqa: F403
from .indexing import *  # noqa: F403
from .linalg import *  # noqa: F403
from .reduce import *  # noqa: F403
from .shape import *  # noqa: F403

__all__ = ["registry", "control", "dot", "elementwise", "indexing", "reduce", "shape"]
