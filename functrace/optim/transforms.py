"""functrace.optim.transforms: gradient transformations, the pieces optimizers are built from.

Owns ``GradientTransformation`` (an ``(init, update)`` pair, as optax's), the state types,
the combinators (``chain``, ``masked``, ``apply_updates``) and the building blocks the
optimizers in ``optim.optimizers`` chain together: ``scale``, ``scale_by_learning_rate``,
``scale_by_schedule``, ``scale_by_adam``, ``scale_by_rms``, ``scale_by_stddev``,
``scale_by_rss``, ``trace``, ``add_decayed_weights``, ``clip``, ``clip_by_global_norm``.

Every function here is written with ``functrace.numpy`` over pytrees (``tree_util``), so it
runs eagerly on numpy arrays and records ops under a transform: an update step fuses into
one graph under ``ft.jit``. The formulas are optax's (google-deepmind/optax 0.2.8), in the
same order of floating-point operations, so results agree with optax to rounding
(tests/api/test_optim.py). States hold arrays only, and step counts are 0-d int32 arrays, as
in optax: a jitted step sees the same signature on every call and is traced once.

numpy's dtype rules apply (where JAX computes in float32 by default): ``b2 ** count`` in
a bias correction is float64 and is cast to the moment's dtype before dividing, which is
what optax computes with ``jax_enable_x64``.

Layer: optim (imports functrace.numpy, tree_util and errors; imported by nothing in
functrace).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from .. import numpy as fnp
from .. import tree_util
from ..errors import FunctraceTypeError, FunctraceValueError, where

__all__ = ["GradientTransformation", "EmptyState", "ScaleByAdamState", "ScaleByRmsState",
           "ScaleByRmsWithCountState", "ScaleByRStdDevState", "ScaleByRStdDevWithCountState",
           "ScaleByRssState", "ScaleByScheduleState", "TraceState", "WeightDecaySchedule",
           "MaskedState", "MaskedNode", "identity", "chain", "masked", "apply_updates",
           "global_norm", "safe_increment", "scale", "scale_by_schedule",
           "scale_by_learning_rate", "scale_by_adam", "scale_by_rms", "scale_by_stddev",
           "scale_by_rss", "trace", "add_decayed_weights", "clip", "clip_by_global_norm"]


class GradientTransformation(NamedTuple):
    """A pair of pure functions: ``init(params) -> state`` and
    ``update(updates, state, params=None) -> (updates, state)``.

    Both take and return pytrees of arrays; neither keeps anything between calls, so the
    state is whatever the caller carries from one step to the next (through ``ft.jit``
    included).

    Example:
        >>> import numpy as np
        >>> from functrace import optim, tree_util
        >>> double = optim.GradientTransformation(
        ...     lambda params: optim.EmptyState(),
        ...     lambda updates, state, params=None: (
        ...         tree_util.tree_map(lambda g: 2 * g, updates), state))
        >>> double.update(np.array([1.0, 2.0]), double.init(None))
        (array([2., 4.]), EmptyState())
    """

    init: Callable
    update: Callable


class EmptyState(NamedTuple):
    """The state of a stateless transformation: a pytree node without leaves.

    Example:
        >>> from functrace import optim, tree_util
        >>> tree_util.tree_leaves(optim.EmptyState())
        []
    """


class ScaleByAdamState(NamedTuple):
    """State of :func:`scale_by_adam`: the step ``count`` (0-d int32) and the first and second
    moment estimates ``mu`` and ``nu`` (pytrees shaped like the parameters).

    Example:
        >>> import numpy as np
        >>> from functrace import optim
        >>> optim.scale_by_adam().init(np.zeros(2))
        ScaleByAdamState(count=array(0, dtype=int32), mu=array([0., 0.]), nu=array([0., 0.]))
    """

    count: Any
    mu: Any
    nu: Any


class ScaleByRmsState(NamedTuple):
    """State of :func:`scale_by_rms` without bias correction: the moving average ``nu`` of
    squared updates.

    Example:
        >>> import numpy as np
        >>> from functrace import optim
        >>> optim.scale_by_rms().init(np.zeros(2))
        ScaleByRmsState(nu=array([0., 0.]))
    """

    nu: Any


class ScaleByRmsWithCountState(NamedTuple):
    """State of :func:`scale_by_rms` with ``bias_correction=True``: the step ``count`` and
    ``nu``.

    Example:
        >>> import numpy as np
        >>> from functrace import optim
        >>> optim.scale_by_rms(bias_correction=True).init(np.zeros(1))
        ScaleByRmsWithCountState(count=array(0, dtype=int32), nu=array([0.]))
    """

    count: Any
    nu: Any


class ScaleByRStdDevState(NamedTuple):
    """State of :func:`scale_by_stddev` without bias correction: moving averages of the
    updates (``mu``) and of their squares (``nu``).

    Example:
        >>> import numpy as np
        >>> from functrace import optim
        >>> optim.scale_by_stddev().init(np.zeros(1))
        ScaleByRStdDevState(mu=array([0.]), nu=array([0.]))
    """

    mu: Any
    nu: Any


class ScaleByRStdDevWithCountState(NamedTuple):
    """State of :func:`scale_by_stddev` with ``bias_correction=True``.

    Example:
        >>> import numpy as np
        >>> from functrace import optim
        >>> optim.scale_by_stddev(bias_correction=True).init(np.zeros(1)).count
        array(0, dtype=int32)
    """

    count: Any
    mu: Any
    nu: Any


class ScaleByRssState(NamedTuple):
    """State of :func:`scale_by_rss` (adagrad): the running sum of squared updates.

    Example:
        >>> import numpy as np
        >>> from functrace import optim
        >>> optim.scale_by_rss().init(np.zeros(2))
        ScaleByRssState(sum_of_squares=array([0.1, 0.1]))
    """

    sum_of_squares: Any


class ScaleByScheduleState(NamedTuple):
    """State of :func:`scale_by_schedule`: the step ``count`` the schedule is called with.

    Example:
        >>> from functrace import optim
        >>> optim.scale_by_schedule(lambda n: 0.1).init(None)
        ScaleByScheduleState(count=array(0, dtype=int32))
    """

    count: Any


class TraceState(NamedTuple):
    """State of :func:`trace` (momentum): the decaying sum of past updates.

    Example:
        >>> import numpy as np
        >>> from functrace import optim
        >>> optim.trace(0.9).init(np.ones(2))
        TraceState(trace=array([0., 0.]))
    """

    trace: Any


class WeightDecaySchedule(NamedTuple):
    """State of :func:`add_decayed_weights` when the weight decay is a schedule.

    Example:
        >>> from functrace import optim
        >>> optim.add_decayed_weights(lambda n: 1e-4).init(None)
        WeightDecaySchedule(count=array(0, dtype=int32))
    """

    count: Any


class MaskedState(NamedTuple):
    """State of :func:`masked`: the inner transformation's state.

    Example:
        >>> import numpy as np
        >>> from functrace import optim
        >>> optim.masked(optim.trace(0.9), {"a": True, "b": False}).init(
        ...     {"a": np.ones(1), "b": np.ones(1)})
        MaskedState(inner_state=TraceState(trace={'a': array([0.]), 'b': MaskedNode()}))
    """

    inner_state: Any


class MaskedNode(NamedTuple):
    """Stands where :func:`masked` hides a leaf: a node without children, so ``tree_map``
    passes over it.

    Example:
        >>> from functrace import optim, tree_util
        >>> tree_util.tree_leaves({"a": 1.0, "b": optim.MaskedNode()})
        [1.0]
    """


# -- helpers shared by the transformations ---------------------------------------------------

def _zero_count():
    """The initial step count: a 0-d int32 array, as optax's (an array, not a Python int, so
    that a jitted step is traced once, not once per step)."""
    return np.zeros((), np.int32)


def _dtype(x) -> np.dtype:
    """The dtype of an array, a tracer or a Python number (numpy's for the latter)."""
    dtype = getattr(x, "dtype", None)
    return np.dtype(dtype) if dtype is not None else np.asarray(x).dtype


def _is_complex(x) -> bool:
    return np.issubdtype(_dtype(x), np.complexfloating)


def _abs_sq(x):
    """|x|**2, real for complex x (``x * x`` for real x, the product JAX computes)."""
    if _is_complex(x):
        return fnp.real(fnp.conj(x) * x)
    return x * x


def _update_moment(updates, moments, decay, order):
    """The exponential moving average ``(1 - decay) * g**order + decay * m`` (order 1 uses
    ``g``, order 2 uses ``|g|**2``)."""
    if order == 1:
        return tree_util.tree_map(lambda g, t: (1 - decay) * g + decay * t, updates, moments)
    return tree_util.tree_map(lambda g, t: (1 - decay) * _abs_sq(g) + decay * t, updates,
                              moments)


def _bias_correction(moment, decay, count):
    """``moment / (1 - decay**count)``. The correction is computed in the precision numpy
    gives ``decay ** count`` (float64 for a Python float ``decay``), then cast to each
    moment's dtype before the division, as optax does, so float32 moments stay float32."""
    correction = 1 - decay ** count
    return tree_util.tree_map(lambda t: t / fnp.asarray(correction, dtype=t.dtype), moment)


def _cast(tree, dtype):
    if dtype is None:
        return tree
    return tree_util.tree_map(lambda t: fnp.asarray(t, dtype=dtype), tree)


def _cast_like(tree, other):
    return tree_util.tree_map(lambda t, o: fnp.asarray(t, dtype=_dtype(o)), tree,
                              other)


def _full_like(tree, value, dtype=None):
    return tree_util.tree_map(lambda x: fnp.full_like(x, value, dtype=dtype), tree)


def _zeros_like(tree, dtype=None):
    return tree_util.tree_map(lambda x: fnp.zeros_like(x, dtype=dtype), tree)


def _canonical_dtype(dtype):
    return None if dtype is None else np.dtype(dtype)


def _check_state(name, state, kind):
    if not isinstance(state, kind):
        raise FunctraceTypeError(
            f"optim.{name}: update got a state of type {type(state).__name__}, expected "
            f"{kind.__name__}. Fix: pass the state that this transformation's init returned "
            f"(and the one its previous update returned after that) ({where()})")


# -- combinators -----------------------------------------------------------------------------

def identity() -> GradientTransformation:
    """The transformation that returns the updates unchanged.

    Example:
        >>> import numpy as np
        >>> from functrace import optim
        >>> opt = optim.identity()
        >>> opt.update(np.array([1.0]), opt.init(None))
        (array([1.]), EmptyState())
    """
    def init(params):
        del params
        return EmptyState()

    def update(updates, state, params=None):
        del params
        return updates, state

    return GradientTransformation(init, update)


def chain(*transforms: GradientTransformation) -> GradientTransformation:
    """Applies ``transforms`` one after the other; the state is the tuple of their states.

    Args:
        *transforms: the ``GradientTransformation`` objects, applied first to last.

    Returns:
        A ``GradientTransformation`` whose ``update`` feeds each transformation's updates to
        the next (``optax.chain``).

    Example:
        >>> import numpy as np
        >>> from functrace import optim
        >>> opt = optim.chain(optim.clip(1.0), optim.scale(-0.1))
        >>> updates, state = opt.update(np.array([3.0, -0.5]), opt.init(np.zeros(2)))
        >>> updates, state
        (array([-0.1 ,  0.05]), (EmptyState(), EmptyState()))
    """
    for i, t in enumerate(transforms):
        if not (isinstance(t, tuple) and len(t) == 2 and all(map(callable, t))):
            raise FunctraceTypeError(
                f"optim.chain: argument {i} is {type(t).__name__}, not a "
                "GradientTransformation (an (init, update) pair, such as optim.adam(1e-3)) "
                f"({where()})")
    inits = tuple(t[0] for t in transforms)
    updates_fns = tuple(t[1] for t in transforms)

    def init(params):
        return tuple(fn(params) for fn in inits)

    def update(updates, state, params=None):
        if not isinstance(state, tuple) or len(state) != len(updates_fns):
            n = len(state) if isinstance(state, tuple) else type(state).__name__
            raise FunctraceValueError(
                f"optim.chain: the state has {n} part(s) but the chain has "
                f"{len(updates_fns)} transformation(s). Fix: pass the state returned by this "
                f"chain's init (or by its previous update) ({where()})")
        new_state = []
        for s, fn in zip(state, updates_fns):
            updates, s = fn(updates, s, params)
            new_state.append(s)
        return updates, tuple(new_state)

    return GradientTransformation(init, update)


def _mask_is_callable(mask) -> bool:
    leaves = tree_util.tree_leaves(tree_util.tree_map(callable, mask))
    return len(leaves) > 0 and all(leaves)


def masked(inner: GradientTransformation, mask) -> GradientTransformation:
    """Applies ``inner`` to the leaves where ``mask`` is True; the others pass through.

    Args:
        inner: the transformation to apply to the selected leaves.
        mask: a pytree of bools shaped like the parameters (or a prefix of them), or a
            function of the parameters (of the updates, in ``update``) returning one.

    Returns:
        A ``GradientTransformation`` with state ``MaskedState(inner_state)``. The hidden
        leaves are replaced by ``MaskedNode()`` (a node with no leaves) before ``inner``
        sees the tree, so ``inner`` keeps no state for them (``optax.masked``).

    Example:
        >>> import numpy as np
        >>> from functrace import optim
        >>> opt = optim.masked(optim.scale(10.0), {"w": True, "b": False})
        >>> g = {"w": np.array([1.0]), "b": np.array([1.0])}
        >>> opt.update(g, opt.init(g))[0]
        {'b': array([1.]), 'w': array([10.])}
    """
    def hide(tree, mask_tree):
        return tree_util.tree_map(lambda m, x: x if m else MaskedNode(), mask_tree, tree)

    def init(params):
        mask_tree = mask(params) if _mask_is_callable(mask) else mask
        return MaskedState(inner_state=inner.init(hide(params, mask_tree)))

    def update(updates, state, params=None):
        _check_state("masked", state, MaskedState)
        mask_tree = mask(updates) if _mask_is_callable(mask) else mask
        hidden_params = None if params is None else hide(params, mask_tree)
        new, inner_state = inner.update(hide(updates, mask_tree), state.inner_state,
                                        hidden_params)
        updates = tree_util.tree_map(lambda m, u_new, u_old: u_new if m else u_old,
                                     mask_tree, new, updates)
        return updates, MaskedState(inner_state=inner_state)

    return GradientTransformation(init, update)


def apply_updates(params, updates):
    """``params + updates`` leaf by leaf, each result cast back to its parameter's dtype.

    Args:
        params: a pytree of parameters.
        updates: a pytree of updates with the same structure (what an optimizer's ``update``
            returns: already scaled by the negative learning rate).

    Returns:
        The new parameters, with the structure and dtypes of ``params`` (optax's
        ``apply_updates``).

    Example:
        >>> import numpy as np
        >>> from functrace import optim
        >>> optim.apply_updates({"w": np.float32([1.0, 2.0])}, {"w": np.array([0.5, 0.5])})
        {'w': array([1.5, 2.5], dtype=float32)}
    """
    return tree_util.tree_map(
        lambda p, u: fnp.asarray(p + u, dtype=_dtype(p)), params, updates)


def global_norm(updates):
    """The l2 norm of all leaves of a pytree together: ``sqrt(sum of |x|**2)``.

    The sum is taken leaf by leaf, in flattening order, as optax's ``tree.norm``.

    Example:
        >>> import numpy as np
        >>> from functrace import optim
        >>> float(optim.global_norm({"a": np.array([3.0]), "b": (np.array([4.0]),)}))
        5.0
    """
    total = 0
    for leaf in tree_util.tree_leaves(updates):
        total = total + fnp.sum(_abs_sq(leaf))
    return fnp.sqrt(total)


def safe_increment(count):
    """``count + 1``, except at the largest value of its dtype, where it stays.

    Example:
        >>> import numpy as np
        >>> from functrace import optim
        >>> optim.safe_increment(np.array(1, np.int32))
        array(2, dtype=int32)
        >>> optim.safe_increment(np.array(2**31 - 1, np.int32))
        array(2147483647, dtype=int32)
    """
    dtype = _dtype(count)
    if np.issubdtype(dtype, np.integer):
        top = np.iinfo(dtype).max
    elif np.issubdtype(dtype, np.floating):
        top = np.finfo(dtype).max
    else:
        raise FunctraceTypeError(
            f"optim.safe_increment: a step count must be an integer or floating array, got "
            f"dtype {dtype} ({where()})")
    top = np.asarray(top, dtype)
    return fnp.where(count < top, count + np.asarray(1, dtype), top)


# -- scaling ---------------------------------------------------------------------------------

def scale(step_size) -> GradientTransformation:
    """Multiplies the updates by a fixed ``step_size``.

    Example:
        >>> import numpy as np
        >>> from functrace import optim
        >>> opt = optim.scale(-0.5)
        >>> opt.update({"w": np.array([2.0])}, opt.init(None))[0]
        {'w': array([-1.])}
    """
    def init(params):
        del params
        return EmptyState()

    def update(updates, state, params=None):
        del params
        return tree_util.tree_map(lambda g: step_size * g, updates), state

    return GradientTransformation(init, update)


def scale_by_schedule(step_size_fn: Callable) -> GradientTransformation:
    """Multiplies the updates by ``step_size_fn(count)``, the count of updates so far.

    The step size is cast to each update's dtype before the product, and the count is a 0-d
    int32 array in the state (a traced value under ``ft.jit``, so the schedule must be written
    with ``functrace.numpy``, as every schedule in ``optim`` is).

    Example:
        >>> import numpy as np
        >>> from functrace import optim
        >>> opt = optim.scale_by_schedule(lambda n: 0.5 ** n)
        >>> state = opt.init(None)
        >>> for _ in range(3):
        ...     u, state = opt.update(np.array([1.0]), state)
        >>> u, state.count
        (array([0.25]), array(3, dtype=int32))
    """
    def init(params):
        del params
        return ScaleByScheduleState(count=_zero_count())

    def update(updates, state, params=None):
        del params
        _check_state("scale_by_schedule", state, ScaleByScheduleState)
        step_size = step_size_fn(state.count)
        updates = tree_util.tree_map(
            lambda g: fnp.asarray(step_size, dtype=_dtype(g)) * g, updates)
        return updates, ScaleByScheduleState(count=safe_increment(state.count))

    return GradientTransformation(init, update)


def scale_by_learning_rate(learning_rate, *, flip_sign: bool = True) -> GradientTransformation:
    """Multiplies the updates by ``-learning_rate`` (by ``learning_rate`` if ``flip_sign`` is
    False): a number gives :func:`scale`, a schedule (a function of the step count)
    :func:`scale_by_schedule`, ``None`` :func:`identity`.

    Example:
        >>> import numpy as np
        >>> from functrace import optim
        >>> opt = optim.scale_by_learning_rate(0.1)
        >>> opt.update(np.array([2.0]), opt.init(None))[0]
        array([-0.2])
    """
    if learning_rate is None:
        return identity()
    sign = -1 if flip_sign else 1
    if callable(learning_rate):
        return scale_by_schedule(lambda count: sign * learning_rate(count))
    return scale(sign * learning_rate)


def scale_by_adam(b1=0.9, b2=0.999, eps=1e-8, eps_root=0.0, mu_dtype=None, *,
                  nesterov: bool = False) -> GradientTransformation:
    """Adam's rescaling (Kingma & Ba 2015): the bias-corrected first moment over the square
    root of the bias-corrected second moment.

    With ``m = b1 m + (1 - b1) g``, ``v = b2 v + (1 - b2) |g|**2`` and ``t`` the step number
    (from 1), the update is ``m_hat / (sqrt(v_hat + eps_root) + eps)`` with
    ``m_hat = m / (1 - b1**t)``, ``v_hat = v / (1 - b2**t)``. With ``nesterov=True``,
    ``m_hat`` is ``b1 m / (1 - b1**(t+1)) + (1 - b1) g / (1 - b1**t)`` (NAdam, Dozat 2016).

    Args:
        b1, b2: decay rates of the first and second moment averages.
        eps: added to the denominator, outside the square root.
        eps_root: added inside the square root (keeps its gradient finite when
            differentiating through the optimizer).
        mu_dtype: dtype of the first moment in the state (default: the parameters').
        nesterov: use Nesterov momentum (NAdam).

    Returns:
        A ``GradientTransformation`` with state ``ScaleByAdamState(count, mu, nu)``.

    Example:
        >>> import numpy as np
        >>> from functrace import optim
        >>> opt = optim.scale_by_adam()
        >>> u, state = opt.update(np.array([0.5, -2.0]), opt.init(np.zeros(2)))
        >>> np.round(u, 6), state.count
        (array([ 1., -1.]), array(1, dtype=int32))
    """
    mu_dtype = _canonical_dtype(mu_dtype)

    def init(params):
        return ScaleByAdamState(count=_zero_count(), mu=_zeros_like(params, mu_dtype),
                                nu=_zeros_like(params))

    def update(updates, state, params=None):
        del params
        _check_state("scale_by_adam", state, ScaleByAdamState)
        mu = _update_moment(updates, state.mu, b1, 1)
        nu = _update_moment(updates, state.nu, b2, 2)
        count = safe_increment(state.count)
        if nesterov:
            mu_hat = tree_util.tree_map(
                lambda m, g: b1 * m + (1 - b1) * g,
                _bias_correction(mu, b1, safe_increment(count)),
                _bias_correction(updates, b1, count))
        else:
            mu_hat = _bias_correction(mu, b1, count)
        nu_hat = _bias_correction(nu, b2, count)
        updates = tree_util.tree_map(lambda m, v: m / (fnp.sqrt(v + eps_root) + eps),
                                     mu_hat, nu_hat)
        return updates, ScaleByAdamState(count=count, mu=_cast(mu, mu_dtype),
                                         nu=_cast_like(nu, state.nu))

    return GradientTransformation(init, update)


def scale_by_rms(decay=0.9, eps=1e-8, initial_scale=0.0, eps_in_sqrt: bool = True,
                 bias_correction: bool = False) -> GradientTransformation:
    """RMSProp's rescaling: divide by the root of a moving average of squared updates.

    ``nu = decay nu + (1 - decay) |g|**2``; the update is ``g / sqrt(nu + eps)``, or
    ``g / (sqrt(nu) + eps)`` with ``eps_in_sqrt=False``; ``bias_correction=True`` divides
    ``nu`` by ``1 - decay**t`` first (and keeps a step count in the state).

    Args:
        decay: decay rate of the average of squares.
        eps: keeps the denominator away from zero.
        initial_scale: the initial value of ``nu``.
        eps_in_sqrt: add ``eps`` inside the square root (True) or after it.
        bias_correction: correct ``nu`` for its initialisation, as Adam does.

    Returns:
        A ``GradientTransformation`` with state ``ScaleByRmsState(nu)`` (or
        ``ScaleByRmsWithCountState(count, nu)`` with ``bias_correction``).

    Example:
        >>> import numpy as np
        >>> from functrace import optim
        >>> opt = optim.scale_by_rms(decay=0.75, eps=0.0)
        >>> opt.update(np.array([1.0, -4.0]), opt.init(np.zeros(2)))[0]
        array([ 2., -2.])
    """
    def init(params):
        nu = _full_like(params, initial_scale)
        if bias_correction:
            return ScaleByRmsWithCountState(count=_zero_count(), nu=nu)
        return ScaleByRmsState(nu=nu)

    def update(updates, state, params=None):
        del params
        _check_state("scale_by_rms", state,
                     ScaleByRmsWithCountState if bias_correction else ScaleByRmsState)
        nu = _update_moment(updates, state.nu, decay, 2)
        if bias_correction:
            count = safe_increment(state.count)
            nu_hat = _bias_correction(nu, decay, count)
        else:
            nu_hat = nu
        if eps_in_sqrt:
            scaling = tree_util.tree_map(lambda n: 1 / fnp.sqrt(n + eps), nu_hat)
        else:
            scaling = tree_util.tree_map(lambda n: 1 / (fnp.sqrt(n) + eps), nu_hat)
        updates = tree_util.tree_map(lambda s, g: s * g, scaling, updates)
        if bias_correction:
            return updates, ScaleByRmsWithCountState(count=count, nu=nu)
        return updates, ScaleByRmsState(nu=nu)

    return GradientTransformation(init, update)


def scale_by_stddev(decay=0.9, eps=1e-8, initial_scale=0.0, eps_in_sqrt: bool = True,
                    bias_correction: bool = False) -> GradientTransformation:
    """Centred RMSProp's rescaling: divide by the root of a moving estimate of the variance.

    Keeps ``mu`` (average of updates) and ``nu`` (average of their squares); the update is
    ``g / sqrt(nu - |mu|**2 + eps)`` (``g / (sqrt(nu - |mu|**2) + eps)`` with
    ``eps_in_sqrt=False``). Arguments as :func:`scale_by_rms`.

    Returns:
        A ``GradientTransformation`` with state ``ScaleByRStdDevState(mu, nu)`` (or
        ``ScaleByRStdDevWithCountState(count, mu, nu)`` with ``bias_correction``).

    Example:
        >>> import numpy as np
        >>> from functrace import optim
        >>> opt = optim.scale_by_stddev(decay=0.5, eps=0.0)
        >>> opt.update(np.array([2.0]), opt.init(np.zeros(1)))[0]
        array([2.])
    """
    def init(params):
        mu = _zeros_like(params)
        nu = _full_like(params, initial_scale)
        if bias_correction:
            return ScaleByRStdDevWithCountState(count=_zero_count(), mu=mu, nu=nu)
        return ScaleByRStdDevState(mu=mu, nu=nu)

    def update(updates, state, params=None):
        del params
        _check_state("scale_by_stddev", state,
                     ScaleByRStdDevWithCountState if bias_correction else ScaleByRStdDevState)
        mu = _update_moment(updates, state.mu, decay, 1)
        nu = _update_moment(updates, state.nu, decay, 2)
        if bias_correction:
            count = safe_increment(state.count)
            mu_hat = _bias_correction(mu, decay, count)
            nu_hat = _bias_correction(nu, decay, count)
        else:
            mu_hat, nu_hat = mu, nu
        if eps_in_sqrt:
            scaling = tree_util.tree_map(lambda m, n: 1 / fnp.sqrt(n - _abs_sq(m) + eps),
                                         mu_hat, nu_hat)
        else:
            scaling = tree_util.tree_map(lambda m, n: 1 / (fnp.sqrt(n - _abs_sq(m)) + eps),
                                         mu_hat, nu_hat)
        updates = tree_util.tree_map(lambda s, g: s * g, scaling, updates)
        if bias_correction:
            return updates, ScaleByRStdDevWithCountState(count=count, mu=mu, nu=nu)
        return updates, ScaleByRStdDevState(mu=mu, nu=nu)

    return GradientTransformation(init, update)


def scale_by_rss(initial_accumulator_value=0.1, eps=1e-7) -> GradientTransformation:
    """Adagrad's rescaling: divide by the root of the sum of all squared updates so far.

    ``s = s + |g|**2``; the update is ``g / sqrt(s + eps)`` where ``s > 0`` and 0 where
    ``s == 0``.

    Args:
        initial_accumulator_value: the initial value of the sum (>= 0).
        eps: keeps the denominator away from zero.

    Returns:
        A ``GradientTransformation`` with state ``ScaleByRssState(sum_of_squares)``.

    Example:
        >>> import numpy as np
        >>> from functrace import optim
        >>> opt = optim.scale_by_rss(initial_accumulator_value=0.0, eps=0.0)
        >>> opt.update(np.array([3.0, 0.0]), opt.init(np.zeros(2)))[0]
        array([1., 0.])
    """
    def init(params):
        return ScaleByRssState(sum_of_squares=_full_like(params, initial_accumulator_value))

    def update(updates, state, params=None):
        del params
        _check_state("scale_by_rss", state, ScaleByRssState)
        sums = tree_util.tree_map(lambda g, t: _abs_sq(g) + t, updates, state.sum_of_squares)
        # where(s > 0, ...) keeps a never-updated entry at 0 (optax); the denominator is made
        # safe too, so an eager call does not warn about the branch where() throws away
        inverse = tree_util.tree_map(
            lambda t: fnp.where(t > 0, 1 / fnp.sqrt(fnp.where(t > 0, t, 1) + eps),
                                fnp.zeros_like(t)), sums)
        updates = tree_util.tree_map(lambda s, g: s * g, inverse, updates)
        return updates, ScaleByRssState(sum_of_squares=sums)

    return GradientTransformation(init, update)


def trace(decay, nesterov: bool = False, accumulator_dtype=None) -> GradientTransformation:
    """Momentum: ``m = g + decay m``; the update is ``m`` (``g + decay m`` with
    ``nesterov=True``).

    Args:
        decay: the momentum coefficient.
        nesterov: use Nesterov's accelerated form.
        accumulator_dtype: dtype of ``m`` in the state (default: the parameters').

    Returns:
        A ``GradientTransformation`` with state ``TraceState(trace)``.

    Example:
        >>> import numpy as np
        >>> from functrace import optim
        >>> opt = optim.trace(0.5)
        >>> state = opt.init(np.zeros(1))
        >>> for _ in range(3):
        ...     u, state = opt.update(np.array([1.0]), state)
        >>> u
        array([1.75])
    """
    accumulator_dtype = _canonical_dtype(accumulator_dtype)

    def init(params):
        return TraceState(trace=_zeros_like(params, accumulator_dtype))

    def update(updates, state, params=None):
        del params
        _check_state("trace", state, TraceState)
        new_trace = tree_util.tree_map(lambda g, t: g + decay * t, updates, state.trace)
        if nesterov:
            updates = tree_util.tree_map(lambda g, t: g + decay * t, updates, new_trace)
        else:
            updates = new_trace
        return updates, TraceState(trace=_cast(new_trace, accumulator_dtype))

    return GradientTransformation(init, update)


def add_decayed_weights(weight_decay=0.0, mask=None) -> GradientTransformation:
    """Adds ``weight_decay * params`` to the updates (decoupled weight decay, as in AdamW).

    Args:
        weight_decay: a number, or a schedule (a function of the step count).
        mask: optional pytree of bools (or a function of the parameters returning one):
            decay only the leaves where it is True (see :func:`masked`).

    Returns:
        A ``GradientTransformation``; its ``update`` needs ``params``.

    Example:
        >>> import numpy as np
        >>> from functrace import optim
        >>> opt = optim.add_decayed_weights(0.1)
        >>> params = np.array([1.0, -2.0])
        >>> opt.update(np.zeros(2), opt.init(params), params)[0]
        array([ 0.1, -0.2])
    """
    def init(params):
        del params
        if callable(weight_decay):
            return WeightDecaySchedule(count=_zero_count())
        return EmptyState()

    def update(updates, state, params=None):
        if params is None:
            raise FunctraceValueError(
                "optim.add_decayed_weights: update needs the parameters (the weight decay is "
                "a multiple of them). Fix: call opt.update(grads, state, params) "
                f"({where()})")
        if callable(weight_decay):
            _check_state("add_decayed_weights", state, WeightDecaySchedule)
            decay = weight_decay(state.count)
            state = WeightDecaySchedule(count=safe_increment(state.count))
        elif isinstance(weight_decay, int | float) and weight_decay == 0.0:
            return updates, state
        else:
            decay = weight_decay
        return tree_util.tree_map(lambda g, p: g + decay * p, updates, params), state

    transform = GradientTransformation(init, update)
    return transform if mask is None else masked(transform, mask)


# -- clipping --------------------------------------------------------------------------------

def clip(max_delta) -> GradientTransformation:
    """Clips every update element to ``[-max_delta, max_delta]``.

    Example:
        >>> import numpy as np
        >>> from functrace import optim
        >>> opt = optim.clip(1.0)
        >>> opt.update(np.array([-3.0, 0.5, 2.0]), opt.init(None))[0]
        array([-1. ,  0.5,  1. ])
    """
    def init(params):
        del params
        return EmptyState()

    def update(updates, state, params=None):
        del params
        return tree_util.tree_map(lambda g: fnp.clip(g, -max_delta, max_delta), updates), state

    return GradientTransformation(init, update)


def clip_by_global_norm(max_norm) -> GradientTransformation:
    """Rescales the updates so that their :func:`global_norm` is at most ``max_norm``.

    When the norm ``n`` is below ``max_norm`` the updates pass unchanged; otherwise each
    becomes ``g / n * max_norm``. The choice is a ``where``, not a Python ``if``, so it
    compiles once under ``ft.jit``.

    Example:
        >>> import numpy as np
        >>> from functrace import optim
        >>> opt = optim.clip_by_global_norm(1.0)
        >>> opt.update({"a": np.array([3.0]), "b": np.array([4.0])}, opt.init(None))[0]
        {'a': array([0.6]), 'b': array([0.8])}
    """
    def init(params):
        del params
        return EmptyState()

    def update(updates, state, params=None):
        del params
        norm = global_norm(updates)
        keep = norm < max_norm
        # the divisor is 1 where the updates are kept, so a zero norm divides nothing by 0
        divisor = fnp.where(keep, fnp.ones_like(norm), norm)

        def clip_leaf(g):
            return fnp.where(keep, g, g / fnp.asarray(divisor, dtype=_dtype(g))
                             * max_norm)

        return tree_util.tree_map(clip_leaf, updates), state

    return GradientTransformation(init, update)
