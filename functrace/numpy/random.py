"""functrace.numpy.random: numpy's own ``numpy.random``, as ``autograd.numpy.random`` is.

Ported autograd programs write ``import autograd.numpy.random as npr`` and ``np.random.seed``;
with ``functrace.numpy`` they keep those lines. What it draws are plain numpy arrays:
constants to every transform, drawn each time the Python code runs (un-jitted transforms
re-run it on every call, as autograd does; under ``ft.jit`` a draw happens once, when the
function is traced). For randomness that is an argument of a jitted or vmapped function,
use ``functrace.random`` (JAX-style keys; docs/random.md).

Example:
    >>> import functrace.numpy as fnp
    >>> fnp.random.RandomState(0).randn(2).shape
    (2,)
"""

from numpy.random import *  # noqa: F403
from numpy.random import __all__  # noqa: F401
