"""The op registry: every primitive, declared once, grouped by family.

Importing this package declares all ops (``functrace.core.registry`` maps names to ``Op``s)
and exposes the op-level functions that gradient rules are written with (``ops.mul``,
``ops.reduce_sum``, ...). Rules use these, never ``functrace.numpy``: they take operands of one
dtype and explicit shapes. Imports core/tracing only.
"""

from ..core import registry
from . import batch_rules, control, decomp, dot, elementwise, indexing, linalg, reduce, shape
from .control import *  # noqa: F403
from .decomp import *  # noqa: F403
from .dot import *  # noqa: F403
from .elementwise import *  # noqa: F403
from .indexing import *  # noqa: F403
from .linalg import *  # noqa: F403
from .reduce import *  # noqa: F403
from .shape import *  # noqa: F403

# every declared op gets its family's batch rule now, once (an op with a rule of its own
# keeps it; ops declared later, by functrace.extend, get theirs at declaration)
for _op in list(registry.values()):
    batch_rules.attach(_op)
del _op

__all__ = ["registry", "batch_rules", "control", "decomp", "dot", "elementwise", "indexing",
           "linalg", "reduce", "shape"]
