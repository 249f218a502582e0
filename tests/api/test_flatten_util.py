"""ft.flatten_util.ravel_pytree (jax.flatten_util's) and the numpy utilities ported programs
reach through functrace.numpy (numpy.random, seterr/errstate), found porting autograd's and
JAX's examples (docs/porting.md)."""

import collections

import numpy as np
import pytest

import functrace as ft
import functrace.numpy as fnp
from functrace.flatten_util import ravel_pytree

Pair = collections.namedtuple("Pair", "w b")


def test_ravel_pytree_order_dtypes_and_round_trip():
    tree = {"z": [np.ones((2, 3)), Pair(np.arange(2.0), None)],
            "a": (np.float32(2.5), np.array([1, 2], dtype=np.int32))}
    flat, unravel = ravel_pytree(tree)
    # dict keys sorted, as tree_flatten; the leaves' promoted dtype (float64 here)
    np.testing.assert_array_equal(flat, [2.5, 1, 2, 1, 1, 1, 1, 1, 1, 0, 1])
    assert flat.dtype == np.float64
    back = unravel(flat)
    assert ft.tree_util.tree_structure(back) == ft.tree_util.tree_structure(tree)
    for a, b in zip(ft.tree_util.tree_leaves(back), ft.tree_util.tree_leaves(tree)):
        assert a.dtype == np.asarray(b).dtype and a.shape == np.shape(b)
        np.testing.assert_array_equal(a, b)


def test_ravel_pytree_empty_and_bad_vectors():
    flat, unravel = ravel_pytree({})
    assert flat.shape == (0,) and flat.dtype == np.float64 and unravel(flat) == {}
    _, unravel = ravel_pytree([np.zeros(3)])
    with pytest.raises(ValueError, match="length 3"):
        unravel(np.zeros(4))
    with pytest.raises(TypeError, match="float64"):
        unravel(np.zeros(3, np.float32))


def test_ravel_pytree_differentiates_both_ways_and_jits():
    params = [(np.arange(6.0).reshape(2, 3), np.ones(3)), (np.ones((3, 1)), np.zeros(1))]

    def l2(p):                                   # autograd's neural_net l2_norm
        flat, _ = ravel_pytree(p)
        return fnp.dot(flat, flat)

    g = ft.grad(l2)(params)
    for gi, pi in zip(ft.tree_util.tree_leaves(g), ft.tree_util.tree_leaves(params)):
        np.testing.assert_allclose(gi, 2 * pi)
    flat, unravel = ravel_pytree(params)
    gv = ft.grad(lambda v: fnp.sum(unravel(v)[0][0] ** 2))(flat)
    np.testing.assert_allclose(gv, np.concatenate([2 * np.arange(6.0), np.zeros(7)]))
    np.testing.assert_array_equal(ft.jit(lambda p: ravel_pytree(p)[0])(params), flat)
    ft.test_util.check_grads(lambda v: fnp.sum(fnp.tanh(unravel(v)[0][0])), (flat,), order=2)


def test_functrace_numpy_random_is_numpys():
    import functrace.numpy.random as npr
    assert fnp.random is npr
    assert npr.RandomState is np.random.RandomState and npr.seed is np.random.seed
    npr.seed(3)
    a = fnp.random.randn(3)
    np.random.seed(3)  # noqa: NPY002
    np.testing.assert_array_equal(a, np.random.randn(3))  # noqa: NPY002


def test_functrace_numpy_error_settings_are_numpys():
    assert fnp.seterr is np.seterr and fnp.geterr is np.geterr
    with fnp.errstate(divide="raise"), pytest.raises(FloatingPointError):
        fnp.log(np.zeros(1))


def test_doctests():
    import doctest

    from functrace import flatten_util
    res = doctest.testmod(flatten_util, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert res.attempted and not res.failed
