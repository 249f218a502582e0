"""The incomplete gamma and beta kernels under one name: generated CPU kernel modules import
this module as ``vi`` and call ``vi.v<name>`` (``functrace.ops.special``'s templates).

Re-exports only: the kernels live in ``vecmath_incgamma`` (gammainc, gammaincc, d**n P/da**n)
and ``vecmath_incbeta`` (betainc, its partials in a and b), whose docstrings describe the
methods; docs/scipy.md gives their measured accuracy.
"""

from .vecmath_incbeta import vbetainc, vbetainc_dab
from .vecmath_incgamma import vgammainc, vgammainc_da, vgammaincc

__all__ = ["vgammainc", "vgammaincc", "vgammainc_da", "vbetainc", "vbetainc_dab"]
