"""functrace.scipy: scipy's API, traceable and differentiable (``special`` and ``stats``).

Outside a transform each function is scipy's own (when SciPy is installed: the ``scipy`` extra);
inside one it binds functrace ops: the special-function primitives of ``functrace.ops.special``
(our own CPU kernels) or compositions of other ops. See docs/scipy.md. Imports the layers below
(ops, tracing, functrace.numpy); nothing below imports it.
"""

from . import special, stats

__all__ = ["special", "stats"]
