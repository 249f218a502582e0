"""functrace.optim against optax, and a training step under ft.jit.

optax is never needed: its numbers are stored in ``support/optax_reference.json``
(optax 0.2.8 on jax 0.10.2 with ``jax_enable_x64``, written by ``tools/optax_reference.py``
from the cases of ``support/optim_cases.py``: 25 optimizers and chains, 6 steps each on a
pytree of a dict and a tuple, float64 and float32). Where optax is importable the same
comparisons also run live (``test_live_against_optax``).

What is compared, and how closely:

- the optimizers' arithmetic, with optax's own schedule values played back
  (``optim_cases.Replay``): parameters after every step and the final state (values and
  dtypes, the int32 step count exactly) within 2 ulps of each vector's largest entry, in
  float64 and float32. The parameters of 20 of the 25 cases agree bit for bit in each
  dtype; the others (mostly rmsprop and adagrad, where optax calls ``lax.rsqrt`` and we
  divide 1 by ``sqrt``) differ in the last bit or two;
- the same end to end with our schedules: optax computes ``count / steps`` in float32 (an
  int32 array over a Python int is float32 in JAX), we in float64, so the cases with a
  schedule agree to float32 rounding of the learning rate (rtol 1e-5), the others as above;
- each schedule at counts 0..12 (Python ints, int32 arrays and traced under ft.jit) against
  optax's values on Python int counts (float64 there too): rtol 1e-15.
"""

from __future__ import annotations

import doctest

import numpy as np
import optim_cases as C
import pytest

import functrace as ft
import functrace.numpy as fnp
from functrace import optim, tree_util
from functrace.optim import optimizers, schedules, transforms

REF = C.load_reference()
DTYPES = ("float64", "float32")
ULPS = 2


def _unflat(values, dtype):
    leaves, i = [], 0
    for shape in C.SHAPES:
        n = int(np.prod(shape, dtype=int))
        leaves.append(np.asarray(values[i:i + n], dtype).reshape(shape))
        i += n
    return C.build(leaves)


def _problem(dtype):
    return _unflat(REF["params0"], dtype), [_unflat(g, dtype) for g in REF["grads"]]


def _flat_params(params):
    return np.concatenate([np.ravel(x) for x in C.flat(params)])


def _uses_schedule(name):
    return bool(REF["float64"][name]["schedule_tables"])


def _assert_ulps(got, want, dtype, what, ulps=ULPS):
    got, want = np.asarray(got), np.asarray(want, dtype)
    assert got.dtype == np.dtype(dtype), f"{what}: dtype {got.dtype}, expected {dtype}"
    assert np.all(np.isfinite(want)), what
    # normwise: in ulps of the vector's largest entry (rounding errors scale with the terms
    # that were summed, and a momentum entry can be a small difference of large ones)
    scale = np.max(np.abs(want)) if want.size else 0.0
    err = np.abs(got.astype(np.float64) - want.astype(np.float64)) / np.spacing(
        scale.astype(dtype)).astype(np.float64)
    assert np.all(err <= ulps), f"{what}: {err.max():.1f} ulps apart\n{got}\n{want}"


def _check_against(name, dtype, history, state, want, rtol=None):
    for step, (params, expected) in enumerate(zip(history, want["params"])):
        got = _flat_params(params)
        if rtol is None:
            _assert_ulps(got, expected, dtype, f"{name} {dtype} params after step {step + 1}")
        else:
            assert got.dtype == np.dtype(dtype)
            np.testing.assert_allclose(got, np.asarray(expected, dtype), rtol=rtol,
                                       atol=rtol * 1e-2, err_msg=f"{name} step {step + 1}")
    leaves = [np.asarray(x) for x in tree_util.tree_leaves(state)]
    assert [str(x.dtype) for x in leaves] == want["state"]["dtypes"], name
    assert [list(x.shape) for x in leaves] == want["state"]["shapes"], name
    i = 0
    for leaf in leaves:
        expected = want["state"]["values"][i:i + leaf.size]
        i += leaf.size
        if leaf.dtype.kind in "iu":
            assert leaf.ravel().tolist() == expected, f"{name}: step count"
        elif rtol is None:
            _assert_ulps(leaf.ravel(), expected, str(leaf.dtype), f"{name} {dtype} state")
        else:
            np.testing.assert_allclose(leaf.ravel(), np.asarray(expected, leaf.dtype),
                                       rtol=rtol, atol=rtol * 1e-2, err_msg=f"{name} state")


# --------------------------------------------------------------------------------------------
# against optax's stored numbers
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(C.CASES))
def test_matches_optax_arithmetic(name, dtype):
    want = REF[dtype][name]
    params, grads = _problem(dtype)
    opt = C.CASES[name](C.Replay(optim, want["schedule_tables"]))
    history, state = C.run(opt, params, grads, optim.apply_updates)
    _check_against(name, dtype, history, state, want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(C.CASES))
def test_matches_optax_with_our_schedules(name, dtype):
    want = REF[dtype][name]
    params, grads = _problem(dtype)
    history, state = C.run(C.CASES[name](optim), params, grads, optim.apply_updates)
    # optax's schedules run in float32 on its int32 count, ours in float64 (module docstring)
    rtol = 1e-5 if (_uses_schedule(name) and dtype == "float64") else None
    _check_against(name, dtype, history, state, want, rtol=rtol)


def test_reference_file_covers_every_case():
    assert REF["optax"] == "0.2.8" and REF["jax_enable_x64"] is True
    assert REF["steps"] == C.STEPS == len(REF["grads"])
    for dtype in DTYPES:
        assert set(REF[dtype]) == set(C.CASES)
    assert set(REF["schedules"]) == set(C.SCHEDULES)
    # the chain with clip_by_global_norm(2.0) clips some steps and passes others
    norms = [np.sqrt(sum(np.sum(np.square(x)) for x in C.flat(g)))
             for g in _problem("float64")[1]]
    assert any(n < 2.0 for n in norms) and any(n > 2.0 for n in norms)


@pytest.mark.parametrize("name", list(C.SCHEDULES))
def test_schedules_match_optax(name):
    want = np.array(REF["schedules"][name])
    sched = C.SCHEDULES[name](optim)
    got = np.array([sched(n) for n in C.SCHEDULE_COUNTS], dtype=np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-15, atol=0)
    # on the optimizer's own count, a 0-d int32 array: still float64, same values
    on_int32 = [np.asarray(sched(np.asarray(n, np.int32))) for n in C.SCHEDULE_COUNTS]
    np.testing.assert_allclose(np.array(on_int32, np.float64), want, rtol=1e-15, atol=0)
    assert all(v.dtype == np.float64 for v in on_int32 if v.dtype.kind == "f")


def test_schedules_work_on_a_traced_count():
    traces = []

    def evaluate(count):
        traces.append(1)
        return tuple(fnp.asarray(C.SCHEDULES[name](optim)(count), dtype=np.float64)
                     for name in C.SCHEDULES)

    jitted = ft.jit(evaluate, backend="numpy")
    for n in C.SCHEDULE_COUNTS:
        got = jitted(np.asarray(n, np.int32))
        for name, value in zip(C.SCHEDULES, got):
            np.testing.assert_allclose(value, REF["schedules"][name][n], rtol=1e-15,
                                       err_msg=f"{name} at {n}")
    assert len(traces) == 1


# --------------------------------------------------------------------------------------------
# a training step under ft.jit
# --------------------------------------------------------------------------------------------

def _loss(params, batch):
    x, y = batch
    h = fnp.tanh(x @ params["w"] + params["b"])
    s, v = params["pair"]
    pred = fnp.sum(h, axis=1) * s + fnp.sum(v)
    return fnp.mean((pred - y) ** 2)


def _batch(dtype, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(8, 3)).astype(dtype), rng.normal(size=8).astype(dtype)


JIT_CASES = {
    "adam_warmup_cosine": lambda: optim.adam(optim.warmup_cosine_decay_schedule(
        0.0, 0.05, 2, 6, end_value=0.01)),
    "adamw_mask": lambda: optim.adamw(0.02, weight_decay=0.1,
                                      mask={"b": False, "pair": (False, True), "w": True}),
    "rmsprop_centered_momentum": lambda: optim.rmsprop(0.01, centered=True, momentum=0.9),
    "clip_sgd_nesterov_decay": lambda: optim.chain(
        optim.clip_by_global_norm(0.5),
        optim.sgd(optim.exponential_decay(0.1, 2, 0.5, staircase=True), momentum=0.9,
                  nesterov=True)),
    "adagrad": lambda: optim.adagrad(0.1),
}


@pytest.mark.parametrize("name", list(JIT_CASES))
def test_jitted_step_matches_eager_and_traces_once(name):
    opt = JIT_CASES[name]()
    traces = []

    def step(params, state, batch):
        traces.append(1)
        grads = ft.grad(_loss)(params, batch)
        updates, state = opt.update(grads, state, params)
        return optim.apply_updates(params, updates), state

    jitted = ft.jit(step)
    params0 = _problem("float64")[0]
    eager_p, eager_s = params0, opt.init(params0)
    jit_p, jit_s = params0, opt.init(params0)
    n_steps = 5        # the first calls run on the interpreter, the later ones compiled
    for k in range(n_steps):
        batch = _batch(np.float64, seed=k)
        eager_p, eager_s = step(eager_p, eager_s, batch)
        jit_p, jit_s = jitted(jit_p, jit_s, batch)
        assert tree_util.tree_structure(jit_s) == tree_util.tree_structure(eager_s)
        for got, want in zip(tree_util.tree_leaves((jit_p, jit_s)),
                             tree_util.tree_leaves((eager_p, eager_s))):
            assert np.asarray(got).dtype == np.asarray(want).dtype
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15,
                                       err_msg=f"{name} step {k + 1}")
    assert len(traces) == n_steps + 1    # n eager runs, one trace for all jitted steps
    counts = [x for x in tree_util.tree_leaves(jit_s) if np.asarray(x).dtype == np.int32]
    assert all(int(c) == n_steps for c in counts)
    # float32 parameters: a new signature, traced once more, and float32 all through
    p32 = tree_util.tree_map(lambda x: x.astype(np.float32), params0)
    s32 = opt.init(p32)
    for k in range(3):
        p32, s32 = jitted(p32, s32, _batch(np.float32, seed=k))
    assert len(traces) == n_steps + 2
    assert all(np.asarray(x).dtype in (np.float32, np.int32)
               for x in tree_util.tree_leaves((p32, s32)))


def test_training_loop_from_the_docs_converges():
    # the loop docs/optim.md shows: fit y = 2x - 1 with adam under ft.jit
    traces = []

    def loss(params, x, y):
        return fnp.mean((params["w"] * x + params["b"] - y) ** 2)

    opt = optim.chain(optim.clip_by_global_norm(1.0),
                      optim.adam(optim.cosine_decay_schedule(0.1, decay_steps=300)))

    @ft.jit
    def step(params, state, x, y):
        traces.append(1)
        value, grads = ft.value_and_grad(loss)(params, x, y)
        updates, state = opt.update(grads, state, params)
        return optim.apply_updates(params, updates), state, value

    rng = np.random.default_rng(0)
    params = {"w": np.zeros(()), "b": np.zeros(())}
    state = opt.init(params)
    for _ in range(300):
        x = rng.uniform(-1, 1, size=32)
        params, state, value = step(params, state, x, 2 * x - 1)
    assert len(traces) == 1
    assert float(value) < 1e-4
    np.testing.assert_allclose([params["w"], params["b"]], [2.0, -1.0], atol=1e-2)


def test_gradient_and_vmap_through_optimizer_steps():
    # a meta-gradient: the loss after two clipped Adam steps, as a function of the rate
    params = {"w": np.array([1.0, -2.0])}
    grads = {"w": np.array([0.3, 0.4])}

    def after_two_steps(lr):
        opt = optim.chain(optim.clip_by_global_norm(0.1), optim.adam(lr, eps_root=1e-8))
        state = opt.init(params)
        p = params
        for _ in range(2):
            updates, state = opt.update(grads, state, p)
            p = optim.apply_updates(p, updates)
        return fnp.sum(p["w"] ** 2)

    eps = 1e-6
    central = (after_two_steps(0.1 + eps) - after_two_steps(0.1 - eps)) / (2 * eps)
    np.testing.assert_allclose(ft.grad(after_two_steps)(0.1), central, rtol=1e-8)
    np.testing.assert_allclose(ft.vmap(after_two_steps)(np.array([0.1, 0.2])),
                               [after_two_steps(0.1), after_two_steps(0.2)], rtol=1e-14)


# --------------------------------------------------------------------------------------------
# behaviour and errors
# --------------------------------------------------------------------------------------------

def test_states_are_namedtuples_of_arrays_with_an_int32_count():
    params = _problem("float32")[0]
    state = optim.adam(1e-3).init(params)
    assert isinstance(state, tuple) and isinstance(state[0], optim.ScaleByAdamState)
    assert state[0].count.shape == () and state[0].count.dtype == np.int32
    assert tree_util.tree_structure(state[0].mu) == tree_util.tree_structure(params)
    assert all(x.dtype == np.float32 for x in tree_util.tree_leaves(state[0].nu))
    leaves, treedef = tree_util.tree_flatten(state)
    assert tree_util.tree_unflatten(treedef, leaves)[0].count is state[0].count
    sgd_state = optim.sgd(optim.linear_schedule(0.1, 0.0, 10)).init(params)
    assert isinstance(sgd_state[1], optim.ScaleByScheduleState)


def test_safe_increment_saturates():
    top = np.iinfo(np.int32).max
    assert optim.safe_increment(np.asarray(top, np.int32)) == top
    assert optim.safe_increment(np.asarray(3.0, np.float32)).dtype == np.float32


def test_mu_dtype_and_accumulator_dtype():
    params = {"w": np.ones(3)}
    opt = optim.adam(0.1, mu_dtype=np.float32)
    updates, state = opt.update({"w": np.full(3, 0.5)}, opt.init(params))
    assert state[0].mu["w"].dtype == np.float32 and state[0].nu["w"].dtype == np.float64
    assert updates["w"].dtype == np.float64
    opt = optim.sgd(0.1, momentum=0.9, accumulator_dtype="float32")
    _, state = opt.update({"w": np.full(3, 0.5)}, opt.init(params))
    assert state[0].trace["w"].dtype == np.float32


def test_clip_by_global_norm_of_zero_updates_is_quiet(recwarn):
    zeros = {"a": np.zeros(3), "b": np.zeros(2)}
    opt = optim.clip_by_global_norm(1.0)
    updates, _ = opt.update(zeros, opt.init(zeros))
    assert all(np.all(u == 0) for u in tree_util.tree_leaves(updates))
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_complex_parameters_use_the_squared_modulus():
    opt = optim.adam(0.1)
    g = np.array([3 + 4j])
    updates, state = opt.update(g, opt.init(np.zeros(1, complex)))
    np.testing.assert_allclose(state[0].nu, [0.001 * 25])
    assert state[0].nu.dtype == np.complex128
    np.testing.assert_allclose(updates, [-0.1 * (3 + 4j) / 5], rtol=1e-7)


def test_errors_say_what_to_do():
    params = {"w": np.ones(2)}
    with pytest.raises(ValueError, match="needs the parameters"):
        opt = optim.adamw(0.1)
        opt.update(params, opt.init(params))
    with pytest.raises(ValueError, match="state has 2 part"):
        optim.adamw(0.1).update(params, optim.adam(0.1).init(params), params)
    with pytest.raises(TypeError, match="expected ScaleByAdamState"):
        optim.adam(0.1).update(params, optim.sgd(0.1, momentum=0.9).init(params))
    with pytest.raises(TypeError, match="not a GradientTransformation"):
        optim.chain(optim.scale(1.0), 0.1)
    with pytest.raises(ValueError, match="decay_steps must be positive"):
        optim.cosine_decay_schedule(1.0, 0)
    with pytest.raises(ValueError, match="scales must be >= 0"):
        optim.piecewise_constant_schedule(1.0, {3: -1.0})
    with pytest.raises(ValueError, match="need 1 boundaries"):
        optim.join_schedules([optim.constant_schedule(1.0)] * 2, [])


def test_import_functrace_does_not_load_optim():
    import pathlib
    import subprocess
    import sys
    root = pathlib.Path(__file__).resolve().parents[2]     # this checkout's functrace
    code = "import sys, functrace; print('functrace.optim' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=root)
    assert out.stdout.strip() == "False"


# --------------------------------------------------------------------------------------------
# documentation
# --------------------------------------------------------------------------------------------

def test_every_public_name_has_an_example():
    missing = [n for n in optim.__all__ if ">>>" not in (getattr(optim, n).__doc__ or "")]
    assert not missing, f"optim names without a >>> example: {missing}"
    assert sorted(optim.__all__) == sorted(
        set(transforms.__all__) | set(schedules.__all__) | set(optimizers.__all__))


@pytest.mark.parametrize("module", [optim, transforms, schedules, optimizers],
                         ids=lambda m: m.__name__)
def test_doctests(module):
    res = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert res.failed == 0 and res.attempted > 0


# --------------------------------------------------------------------------------------------
# live, where optax is installed (never a requirement)
# --------------------------------------------------------------------------------------------

def test_live_against_optax():
    optax = pytest.importorskip("optax")
    import jax
    was = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        for dtype in DTYPES:
            params, grads = _problem(dtype)
            for name, make in C.CASES.items():
                recorder = C.Recorder(optax)
                as_jax = lambda t: tree_util.tree_map(jax.numpy.asarray, t)  # noqa: E731
                history, state = C.run(make(recorder), as_jax(params),
                                       [as_jax(g) for g in grads], optax.apply_updates)
                count = jax.numpy.arange(C.STEPS + 1, dtype=jax.numpy.int32)
                want = {
                    "params": [_flat_params(tree_util.tree_map(np.asarray, p)).tolist()
                               for p in history],
                    "state": {
                        "dtypes": [str(np.asarray(x).dtype)
                                   for x in jax.tree_util.tree_leaves(state)],
                        "shapes": [list(np.shape(x)) for x in jax.tree_util.tree_leaves(state)],
                        "values": [v.item() for x in jax.tree_util.tree_leaves(state)
                                   for v in np.asarray(x).ravel()]},
                }
                tables = [[float(s(c)) for c in count] for s in recorder.schedules]
                ours = C.CASES[name](C.Replay(optim, tables))
                history, state = C.run(ours, params, grads, optim.apply_updates)
                _check_against(name, dtype, history, state, want)
    finally:
        jax.config.update("jax_enable_x64", was)
