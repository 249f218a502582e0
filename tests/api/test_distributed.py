"""functrace.distributed on a local Dask cluster of two worker processes.

Every gradient is compared with ``ft.value_and_grad`` in this process on the whole batch
(float64, rtol 1e-12): unequal shards, both reductions, pytrees of parameters, has_aux, the
compiled (``cpu``) and interpreted (``numpy``) worker backends. Then: the workers' graph
cache (a second step reuses the first one's compiled graph), what cannot be shipped (an
unnamed ``ft.custom_vjp``; a graph that changes between calls), argument errors, ``map``,
and a worker process killed in the middle of a step (Dask re-runs its tasks and the step
returns the right value; with retries turned off, it raises instead of returning a partial
sum). One cluster serves the module; the file takes about 20 s on a 2-core machine.
"""

from __future__ import annotations

import concurrent.futures
import doctest
import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import functrace as ft
import functrace.numpy as fnp

distributed_dask = pytest.importorskip("distributed")
from functrace import distributed  # noqa: E402

RTOL = 1e-12

# one pytest-xdist worker runs the whole file (with `--dist loadgroup`, as .ci/run asks), so
# that CI starts one Dask cluster, not one per xdist worker
pytestmark = pytest.mark.xdist_group("dask_cluster")


@pytest.fixture(scope="module")
def client():
    cluster = distributed_dask.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                            dashboard_address=None)
    c = distributed_dask.Client(cluster)
    yield c
    c.close()
    cluster.close()


def loss(params, x, y):
    """A tiny two-layer net's mean squared error plus a weight penalty (counted once)."""
    w1, b1 = params["layer"]
    h = fnp.tanh(x @ w1 + b1)
    pred = h @ params["out"]
    return fnp.mean((pred - y) ** 2) + 1e-3 * fnp.sum(w1 ** 2)


def lin_loss(params, x, y):
    """A linear model's mean squared error: few kernels, so the workers compile it fast."""
    w, b = params["lin"]
    return fnp.mean((x @ w + b - y) ** 2)


def lin_sum_loss(params, x, y):
    w, b = params["lin"]
    return fnp.sum((x @ w + b - y) ** 2)


def make(n=11, seed=0):
    rng = np.random.default_rng(seed)
    params = {"layer": (rng.normal(size=(3, 4)), rng.normal(size=4)),
              "out": rng.normal(size=(4, 1))}
    return params, rng.normal(size=(n, 3)), rng.normal(size=(n, 1))


def assert_tree_close(got, want, rtol=RTOL):
    g_leaves, g_tree = ft.tree_util.tree_flatten(got)
    w_leaves, w_tree = ft.tree_util.tree_flatten(want)
    assert g_tree == w_tree
    for a, b in zip(g_leaves, w_leaves):
        assert np.asarray(a).dtype == np.asarray(b).dtype
        np.testing.assert_allclose(a, b, rtol=rtol, atol=0)


def test_import_functrace_does_not_import_dask():
    code = ("import sys, functrace, functrace.distributed; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')]; "
            "assert not bad, bad")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(pathlib.Path(ft.__file__).parents[1])})
    assert r.returncode == 0, r.stderr


def test_shard_bounds():
    assert distributed.shard_bounds(10, 4) == [(0, 3), (3, 6), (6, 8), (8, 10)]
    assert distributed.shard_bounds(3, 8) == [(0, 1), (1, 2), (2, 3)]
    for n in range(1, 30):
        for k in range(1, 9):
            b = distributed.shard_bounds(n, k)
            assert b[0][0] == 0 and b[-1][1] == n and len(b) == min(n, k)
            assert all(hi > lo for lo, hi in b) and all(b[i][1] == b[i + 1][0]
                                                        for i in range(len(b) - 1))


@pytest.mark.parametrize("reduce_, fun", [("mean", lin_loss), ("sum", lin_sum_loss)])
def test_equals_single_process_gradient_compiled(client, reduce_, fun):
    # 11 rows in 3 shards (4, 4, 3): two graphs per worker, weighted by 4/11 and 3/11. Three
    # calls: ft.jit interprets the first and compiles the graph once it is hot (the second).
    rng = np.random.default_rng(2)
    params = {"lin": (rng.normal(size=(3, 1)), rng.normal(size=1))}
    x, y = rng.normal(size=(11, 3)), rng.normal(size=(11, 1))
    step = distributed.value_and_grad(fun, client, batch_argnums=(1, 2), reduce=reduce_,
                                      shards=3)
    want = ft.value_and_grad(fun)(params, x, y)
    # compile the same kernels here first: the workers then load them from the kernel cache
    # on disk instead of both compiling them at once (on a 2-core machine, 3x faster cold)
    local = ft.jit(ft.value_and_grad(fun))
    for lo, hi in distributed.shard_bounds(len(x), 3)[-2:]:
        for _ in range(2):
            local(params, x[lo:hi], y[lo:hi])
    for _ in range(3):
        assert_tree_close(step(params, x, y), want)


@pytest.mark.parametrize("n, shards", [(7, 2), (5, 5), (9, 4), (3, None)])
def test_unequal_and_default_shards(client, n, shards):
    params, x, y = make(n, seed=n)
    step = distributed.value_and_grad(loss, client, batch_argnums=(1, 2), shards=shards,
                                      backend="numpy")
    assert_tree_close(step(params, x, y), ft.value_and_grad(loss)(params, x, y))


def test_weights_matter(client):
    # the differential check can fail: an unweighted mean of shard means is another number
    params, x, y = make(7)
    v, _ = distributed.value_and_grad(loss, client, batch_argnums=(1, 2), shards=2,
                                      backend="numpy")(params, x, y)
    halves = [ft.value_and_grad(loss)(params, x[a:b], y[a:b])[0] for a, b in [(0, 4), (4, 7)]]
    assert not np.isclose(v, np.mean(halves), rtol=1e-6)


def test_argnums_tuple_kwargs_float32_and_has_aux(client):
    rng = np.random.default_rng(3)
    w = rng.normal(size=3).astype(np.float32)
    b = np.float32(0.5) * np.ones((), np.float32)
    x = rng.normal(size=(9, 3)).astype(np.float32)

    def f(w, x, b, scale):
        r = x @ w + b
        return fnp.mean(r ** 2) * scale, {"max": fnp.max(r), "first": r[0]}

    step = distributed.value_and_grad(f, client, argnums=(0, 2), batch_argnums=1,
                                      has_aux=True, shards=2, backend="numpy")
    scale = np.float32(2.0)
    (value, auxes), grads = step(w, x, b, scale=scale)
    (v0, _), g0 = ft.value_and_grad(f, argnums=(0, 2), has_aux=True)(w, x, b, scale=scale)
    assert_tree_close((value, grads), (v0, g0), rtol=1e-6)
    assert grads[0].dtype == np.float32
    want = [ft.value_and_grad(f, has_aux=True)(w, x[lo:hi], b, scale)[0][1]
            for lo, hi in distributed.shard_bounds(9, 2)]
    assert_tree_close(auxes, want, rtol=1e-6)


def test_step_two_reuses_step_one_compiled_graph(client):
    params, x, y = make(8, seed=5)
    step = distributed.value_and_grad(loss, client, batch_argnums=(1, 2), shards=2,
                                      backend="numpy")
    step(params, x, y)
    before = distributed.cache_info(client)
    step({k: v for k, v in params.items()}, x + 1.0, y)     # new values, same types
    after = distributed.cache_info(client)
    assert sum(a["misses"] for a in after.values()) == sum(a["misses"]
                                                           for a in before.values())
    assert sum(a["hits"] for a in after.values()) == sum(a["hits"]
                                                         for a in before.values()) + 2


def test_doctests(client):
    res = doctest.testmod(distributed, extraglobs={"client": client},
                          optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert res.failed == 0 and res.attempted >= 8, res


# --- what cannot be shipped ------------------------------------------------------------------

def test_changed_closure_raises_naming_the_line(client):
    state = {"scale": 1.0}

    def f(w, x):
        return fnp.mean((x @ w) ** 2) * state["scale"]     # the line the error must name

    step = distributed.value_and_grad(f, client, batch_argnums=1, shards=2, backend="numpy")
    w, x = np.ones(3), np.ones((4, 3))
    step(w, x)
    step(w, x)                                              # unchanged: fine
    state["scale"] = 2.0
    with pytest.raises(ft.FunctraceValueError, match=r"changed since the last call") as e:
        step(w, x)
    assert "test_distributed.py" in str(e.value) and "state[" in str(e.value)
    assert "pass that value as an argument" in str(e.value)
    # a new distributed function takes the new graph, and computes with the new value
    v, _ = distributed.value_and_grad(f, client, batch_argnums=1, shards=2,
                                      backend="numpy")(w, x)
    assert v == pytest.approx(18.0)


@ft.custom_vjp
def clipped_square(x):          # module level: registered as "<module>:clipped_square"
    return x ** 2


clipped_square.defvjp(lambda x: (x ** 2, x), lambda x, g: (fnp.clip(2 * x, -1.0, 1.0) * g,))


def test_named_custom_vjp_is_shipped(client):
    def f(w, x):
        return fnp.mean(clipped_square(x @ w))

    w, x = np.array([0.1, 2.0]), np.random.default_rng(0).normal(size=(6, 2))
    step = distributed.value_and_grad(f, client, batch_argnums=1, shards=2, backend="numpy")
    assert_tree_close(step(w, x), ft.value_and_grad(f)(w, x))


def test_unnamed_custom_vjp_raises_with_the_fix(client):
    def make_rule():
        sq = ft.custom_vjp(lambda x: x ** 2)             # a lambda: no unique name
        sq.defvjp(lambda x: (x ** 2, x), lambda x, g: (2 * x * g,))
        return sq

    sq = make_rule()
    step = distributed.value_and_grad(lambda w, x: fnp.mean(sq(x @ w)), client,
                                      batch_argnums=1, shards=2, backend="numpy")
    with pytest.raises(ft.FunctraceTypeError, match="cannot be shipped") as e:
        step(np.ones(2), np.ones((4, 2)))
    assert "register_custom_rule" in str(e.value) and "name=" in str(e.value)


def test_python_control_flow_on_values_names_the_fix(client):
    def f(w, x):
        if fnp.sum(x) > 0:                                  # a value-dependent decision
            return fnp.mean(x @ w)
        return fnp.mean((x @ w) ** 2)

    step = distributed.value_and_grad(f, client, batch_argnums=1, shards=2, backend="numpy")
    with pytest.raises(ft.ConcretizationError, match="cond"):
        step(np.ones(2), np.ones((4, 2)))


def test_namedtuple_params(client):
    import collections
    Params = collections.namedtuple("Params", ["w", "b"])

    def f(p, x):
        return fnp.mean(fnp.tanh(x @ p.w + p.b) ** 2)

    p = Params(np.array([0.3, -0.2]), np.array(0.1))
    x = np.random.default_rng(4).normal(size=(5, 2))
    got = distributed.value_and_grad(f, client, batch_argnums=1, shards=2,
                                     backend="numpy")(p, x)
    assert isinstance(got[1], Params)
    assert_tree_close(got, ft.value_and_grad(f)(p, x))


def test_extension_op_needs_its_module_on_the_workers(client):
    import importlib

    import extend_ops  # tests/support: ops defined with functrace.extend, as a user would

    def f(w, x):
        return fnp.mean(extend_ops.softplus(x @ w))

    w, x = np.array([0.5, -1.0]), np.random.default_rng(6).normal(size=(6, 2))
    step = distributed.value_and_grad(f, client, batch_argnums=1, shards=2, backend="numpy")
    with pytest.raises(ft.GraphFormatError, match="ext_softplus") as e:
        step(w, x)                        # the workers have not imported extend_ops
    assert "client.run(importlib.import_module" in str(e.value)
    client.run(importlib.import_module, "extend_ops")      # the documented fix
    assert_tree_close(step(w, x), ft.value_and_grad(f)(w, x))


def test_version_mismatch_is_refused():
    text = ft.Symbol(ft.trace(fnp.sin)(np.ones(2)).graph).to_json()
    with pytest.raises(ft.FunctraceValueError, match=r"same version on every worker|9\.9"):
        distributed._compiled(text, "9.9", "numpy")


def test_argument_errors(client):
    params, x, y = make()
    with pytest.raises(ft.FunctraceValueError, match="both argnums and batch_argnums"):
        distributed.value_and_grad(loss, client, argnums=(0, 1),
                                   batch_argnums=(1, 2))(params, x, y)
    with pytest.raises(ft.FunctraceValueError, match="different lengths"):
        distributed.value_and_grad(loss, client, batch_argnums=(1, 2))(params, x, y[:5])
    with pytest.raises(ft.FunctraceValueError, match="reduce must be one of"):
        distributed.value_and_grad(loss, client, batch_argnums=1, reduce="avg")
    with pytest.raises(ft.FunctraceTypeError, match=r"dask\.distributed\.Client"):
        distributed.value_and_grad(loss, "tcp://localhost:8786", batch_argnums=1)
    with pytest.raises(TypeError, match="batch_argnums"):
        distributed.value_and_grad(loss, client)           # keyword-only, no default
    with pytest.raises(ft.FunctraceValueError, match="out of range"):
        distributed.value_and_grad(loss, client, batch_argnums=5)(params, x, y)


# --- map ---------------------------------------------------------------------------------------

def test_map_keeps_order_across_signatures_and_chunks(client):
    rng = np.random.default_rng(1)
    xs = [rng.normal(size=n) for n in (3, 5, 3, 4, 3, 5, 2)]
    ws = [rng.normal(size=n) for n in (3, 5, 3, 4, 3, 5, 2)]

    @ft.jit(backend="numpy")
    def f(x, w):
        return {"dot": fnp.dot(x, w), "y": fnp.tanh(x) * w}

    got = distributed.map(f, client, xs, ws, chunksize=3, backend="numpy")
    want = [f(x, w) for x, w in zip(xs, ws)]
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert_tree_close(a, b)
    assert distributed.map(f, client, []) == []
    with pytest.raises(ft.FunctraceValueError, match="different lengths"):
        distributed.map(f, client, xs, ws[:2])


# --- failures ----------------------------------------------------------------------------------

def _stall_first_shard_plugin(marker: str):
    """A worker plugin that stalls the first shard task any worker starts (the worker writes
    its pid to ``marker`` and blocks), so that the test can kill that worker mid-step."""
    from distributed.diagnostics.plugin import WorkerPlugin

    class StallFirstShard(WorkerPlugin):
        name = "functrace-test-stall"

        def transition(self, key, start, finish, *args, **kwargs):
            if finish != "executing" or "-shard" not in str(key):
                return
            try:
                fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return                                # only the first attempt anywhere
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
            time.sleep(20)                            # killed long before

    return StallFirstShard()


def _kill_mid_step(client, tmp_path, step, args):
    marker = str(tmp_path / "stalled_pid")
    pids = set(client.run(os.getpid).values())       # asked now: a stalled worker cannot answer
    client.register_plugin(_stall_first_shard_plugin(marker))
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            fut = pool.submit(step, *args)
            deadline = time.monotonic() + 30
            while not (os.path.exists(marker) and open(marker).read()):
                assert time.monotonic() < deadline, "no shard task started"
                time.sleep(0.02)
            pid = int(open(marker).read())
            assert pid in pids
            assert not fut.done()
            os.kill(pid, signal.SIGKILL)              # the worker process, mid-step
            return fut.result(timeout=60)
    finally:
        client.unregister_worker_plugin("functrace-test-stall")
        client.wait_for_workers(2, timeout=60)        # the nanny restarts the killed worker


def test_worker_killed_mid_step_is_retried(client, tmp_path):
    params, x, y = make(10, seed=7)
    step = distributed.value_and_grad(loss, client, batch_argnums=(1, 2), shards=4,
                                      backend="numpy")
    got = _kill_mid_step(client, tmp_path, step, (params, x, y))
    assert_tree_close(got, ft.value_and_grad(loss)(params, x, y))


def test_worker_killed_without_retries_raises(client, tmp_path):
    from distributed import KilledWorker
    params, x, y = make(10, seed=8)
    step = distributed.value_and_grad(loss, client, batch_argnums=(1, 2), shards=4,
                                      backend="numpy")
    scheduler = client.cluster.scheduler          # LocalCluster: in this process
    saved, scheduler.allowed_failures = scheduler.allowed_failures, 0
    try:
        with pytest.raises(KilledWorker):
            _kill_mid_step(client, tmp_path, step, (params, x, y))
    finally:
        scheduler.allowed_failures = saved
    # the cluster still serves the next step
    assert_tree_close(step(params, x, y), ft.value_and_grad(loss)(params, x, y))
