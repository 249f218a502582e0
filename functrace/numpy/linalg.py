"""functrace.numpy.linalg: numpy.linalg, traceable and differentiable.

Every function has numpy's signature. Outside a transform it *is* numpy's (``np.linalg.f`` is
called and its result returned unchanged). Inside one it promotes like numpy.linalg (bool and
integers become float64, float16 and longdouble are rejected, mixed operands share one type),
broadcasts batch axes explicitly, and records the primitives of ``functrace.ops.linalg``
(cholesky, triangular_solve, solve, inv, det, slogdet, eigh, svd, qr), whose rules make every
function here differentiable to any order. Results that numpy returns as named tuples
(``SlogdetResult``, ``EighResult``, ``SVDResult``, ``QRResult``) are the same classes when
traced, holding tracers.

Choices worth knowing (docs/numerics.md):
* ``eigh``/``eigvalsh``/``cholesky`` read one triangle of the input, as numpy does (``UPLO``,
  ``upper``): the traced function builds the Hermitian matrix from that triangle, so values equal
  numpy's for any input. Their gradient is the symmetric one by default (JAX's; autograd's for
  cholesky), ``gradient="triangle"`` gives the exact gradient of numpy's function (zero on the
  triangle that is not read). ``eigh(..., symmetrize_input=True)`` decomposes ``(a + a^H)/2``
  instead (JAX's default), eagerly too.
* The 2-norm / Frobenius norm uses the ``l2norm`` op: its gradient at the zero vector is 0.
* Degenerate eigenvalues / singular values: a function of the values alone has a finite
  gradient (docs/numerics.md).
* Traced ``svd(full_matrices=True)`` works for square matrices only (where it equals the
  reduced SVD); traced ``qr`` supports modes 'reduced', 'r' and ('complete' when M <= N).

The functions live in ``_linalg_solvers`` (solvers and decompositions) and ``_linalg_norms``
(norms and the array-API products), with what they share in ``_linalg_common``; this module is
their public face and each says it belongs here (``__module__``), as numpy.linalg's do.
"""


from ._linalg_common import EighResult, EigResult, LinAlgError, QRResult, SlogdetResult, SVDResult
from ._linalg_norms import (
    cross,
    diagonal,
    matmul,
    matrix_norm,
    matrix_transpose,
    norm,
    outer,
    tensordot,
    trace,
    vecdot,
    vector_norm,
)
from ._linalg_solvers import (
    cholesky,
    cond,
    det,
    eig,
    eigh,
    eigvals,
    eigvalsh,
    inv,
    lstsq,
    matrix_power,
    matrix_rank,
    multi_dot,
    pinv,
    qr,
    slogdet,
    solve,
    svd,
    svdvals,
    tensorinv,
    tensorsolve,
)

__all__ = ["EigResult", "EighResult", "LinAlgError", "QRResult", "SVDResult", "SlogdetResult",
           "cholesky", "cond", "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh",
           "inv",
           "lstsq", "matmul", "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose",
           "multi_dot", "norm", "outer", "pinv", "qr", "slogdet", "solve", "svd", "svdvals",
           "tensordot", "tensorinv", "tensorsolve", "trace", "vecdot", "vector_norm"]

# error messages name fnp.linalg.<f> (functrace.numpy._device), and pickling by reference finds
# the functions here
for _name in __all__:
    _f = globals()[_name]
    if callable(_f) and getattr(_f, "__module__", "").startswith("functrace.numpy._linalg"):
        _f.__module__ = __name__
del _name, _f
