"""functrace.scipy: scipy's API, traceable and differentiable (as ``functrace.numpy`` is numpy's).

Outside a transform each function *is* scipy's (scipy must be installed: ``functrace[scipy]``);
inside one it records functrace ops. See docs/scipy.md.
"""

from . import linalg

__all__ = ["linalg"]
