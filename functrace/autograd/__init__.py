"""functrace.autograd: MXNet's imperative autograd API, as a thin layer over functrace.

Arrays are ``autograd.NDArray``s (numpy or cupy storage, numpy's operators and methods,
``.grad``, ``.backward()``). Operations run at once; inside ``with autograd.record():`` the
ones that involve a marked variable are also recorded, as the same equations ``ft.trace``
records, and ``autograd.backward`` differentiates them with the same ``vjp_graph`` that
``ft.grad`` uses. There is one engine: this package only keeps the history and turns it into a
graph (see ``_ndarray.py`` and ``_backward.py`` for how).

Example:
    >>> import numpy as np
    >>> import functrace.numpy as fnp
    >>> from functrace import autograd
    >>> x = autograd.attach_grad(fnp.array([1.0, 2.0]), grad_req="write")
    >>> with autograd.record(train_mode=True):
    ...     y = (x * x).sum()
    >>> autograd.backward(y)            # or y.backward()
    >>> x.grad
    NDArray([2., 4.])

Layering: the top layer; it may import anything below (api, numpy, symbol, autodiff,
tracing, backends) and nothing imports it except the package root.
"""

from ._backward import backward, get_symbol, grad
from ._marking import attach_grad, drop_grads, grad_of, mark_variables
from ._ndarray import NDArray, array, pause, predict_mode, record, train_mode
from ._state import is_recording, is_training, set_recording, set_training

__all__ = ["NDArray", "array", "attach_grad", "backward", "drop_grads", "get_symbol", "grad",
           "grad_of", "is_recording", "is_training", "mark_variables", "pause", "predict_mode",
           "record", "set_recording", "set_training", "train_mode"]
