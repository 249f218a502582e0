"""The reference interpreter: runs any Graph with each op's numpy impl.

This is the living definition of every op; every other backend is tested against it. A graph
is compiled once into a flat plan (slot numbers instead of dict lookups, literals resolved,
and for every step the values whose last use it is), so replaying a small graph costs little
more than calling the same numpy functions directly, and memory is freed as soon as a value is
dead.

Given GPU (cupy) arrays, the same plan runs with cupy as its array module: literals and host
arguments are copied to the device once, every impl runs on device arrays (impls are written
to be array-module generic, see ``ops.as_array``), and results stay on the device. An
impl cupy cannot run is run on the host (logged once per op). Imports core, ops and
caches.

Plans are cached per graph, holding the graph weakly: a plan never refers to its graph (only
to the impls, params, slot numbers and constant values it copied out of it), so dropping the
last reference to a graph (a Symbol, a jitted function) frees its plan too.
"""

from __future__ import annotations

import logging

import numpy as np

from .. import caches, debug_nans
from ..config import config
from ..core import Graph, Lit, Var, on_device, to_host
from ..ops import namespace_of
from ..ops.control import SUBGRAPH_RUNNER, holds_graphs
from .malloc_tuning import tune_once

log = logging.getLogger("functrace")

__all__ = ["Plan", "plan", "run"]


class Plan:
    """A graph lowered to a list of steps over a flat slot array."""

    # no ``graph`` slot: the plan cache holds graphs weakly, and a plan that referred to its
    # graph would keep it alive for ever
    __slots__ = ("steps", "names", "n_slots", "n_in", "consts", "const_base",
                 "out_slots", "device_consts", "hosts", "__weakref__")

    def __init__(self, graph: Graph):
        tune_once()
        slots: dict[Var, int] = {}
        for v in graph.inputs:
            slots[v] = len(slots)
        self.n_in = len(graph.inputs)
        for e in graph.eqns:
            for o in e.outputs:
                slots[o] = len(slots)
        consts: list = []
        const_idx: dict[Lit, int] = {}
        n_vars = len(slots)

        def ref(a):
            if isinstance(a, Lit):
                if a not in const_idx:
                    const_idx[a] = len(consts)
                    consts.append(a.val)
                return n_vars + const_idx[a]
            return slots[a]

        # last use of every var (graph outputs live to the end)
        last: dict[Var, int] = {}
        for i, e in enumerate(graph.eqns):
            for a in e.inputs:
                if isinstance(a, Var):
                    last[a] = i
        outs = {a for a in graph.outputs if isinstance(a, Var)}
        frees_at: list[list[int]] = [[] for _ in graph.eqns]
        for v, i in last.items():
            if v not in outs:
                frees_at[i].append(slots[v])
        steps = []
        for i, e in enumerate(graph.eqns):
            steps.append((e.op.impl, tuple(ref(a) for a in e.inputs), dict(e.params),
                          tuple(slots[o] for o in e.outputs), e.op.multiple_results,
                          tuple(frees_at[i])))
        self.steps = steps
        self.names = [e.op.name for e in graph.eqns]
        self.hosts = any(holds_graphs(e.params) for e in graph.eqns)
        self.device_consts: dict = {}
        self.out_slots = tuple(ref(a) for a in graph.outputs)
        self.consts = consts
        self.const_base = n_vars
        self.n_slots = n_vars

    def __call__(self, *args):
        return self._execute(list(args), self.consts, None)

    def _execute(self, env, consts, xp) -> list:
        """Run the steps over ``env`` (the arguments); ``xp``: the device array module whose
        impls may fall back to the host (``run_impl_on_device``), or None on the host."""
        env.extend([None] * (self.n_slots - self.n_in))
        env.extend(consts)
        for k, (impl, ins, params, outs, multi, frees) in enumerate(self.steps):
            if xp is None:
                res = impl(*[env[i] for i in ins], **params)
            else:
                res = run_impl_on_device(self.names[k], impl, [env[i] for i in ins], params,
                                         multi, xp)
            if multi:
                for o, r in zip(outs, res):
                    env[o] = r
            else:
                env[outs[0]] = res
            for f in frees:
                env[f] = None
        return [env[i] for i in self.out_slots]

    def run_on_device(self, xp, args) -> list:
        """Run with array module ``xp`` (cupy) on the device of the first device argument:
        host arguments and literals are copied there (literals once per device), outputs are
        device arrays."""
        dev = _device_id(next(a for a in args if on_device(a)))
        cuda = getattr(xp, "cuda", None)
        if dev is None or cuda is None:
            return self._run_on_device(xp, args, dev)
        with cuda.Device(dev):
            return self._run_on_device(xp, args, dev)

    def _run_on_device(self, xp, args, dev) -> list:
        consts = self.device_consts.get((id(xp), dev))
        if consts is None:
            consts = self.device_consts[(id(xp), dev)] = [xp.asarray(c) for c in self.consts]
        # sub-graphs of control-flow steps run by this interpreter on the device too (not
        # by ``eval_graph``, whose literals are host arrays)
        token = SUBGRAPH_RUNNER.set(run) if self.hosts else None
        try:
            return self._execute([a if on_device(a) else xp.asarray(a) for a in args], consts,
                                 xp)
        finally:
            if token is not None:
                SUBGRAPH_RUNNER.reset(token)


def _device_id(x):
    return getattr(getattr(x, "device", None), "id", None)


_host_ops: set[str] = set()


def run_impl_on_device(name: str, impl, args, params, multi: bool, xp):
    """``impl(*args, **params)`` on device arrays; results on the device. An impl the array
    module cannot run (a keyword or function cupy lacks) runs on host copies instead, logged
    once per op: correct, but a synchronisation point and two copies."""
    try:
        res = impl(*args, **params)
    except Exception as exc:
        if name not in _host_ops:
            _host_ops.add(name)
            log.warning("functrace: %s runs on the host (%s cannot run its impl: %s)", name,
                        getattr(xp, "__name__", xp), str(exc)[:200])
        res = impl(*[to_host(a) if on_device(a) else a for a in args], **params)
    if multi:
        return tuple(r if on_device(r) else xp.asarray(r) for r in res)
    return res if on_device(res) else xp.asarray(res)


def device_module(args):
    """The array module of the device arrays among ``args`` (cupy), or None if all are host
    values."""
    for a in args:
        if on_device(a):
            xp = namespace_of(a)
            if xp is np:
                raise TypeError(
                    f"functrace computes on GPU arrays with cupy; got a {type(a).__name__}. "
                    "Convert it with cupy.asarray(x) (no copy) or ft.device_put(x).")
            return xp
    return None


# graph -> Plan; weak keys (see the module docstring), equal graphs share a plan
_plans = caches.LRU("numpy_ref.plans", scale=4, weak_keys=True)


def plan(graph: Graph) -> Plan:
    """The cached Plan of a graph (held weakly; structurally equal graphs share one)."""
    p = _plans.get(graph)
    if p is None:
        p = _plans[graph] = Plan(graph)
    return p


def run(graph: Graph, args) -> list:
    """Evaluate ``graph`` on numpy arrays (or on cupy arrays, with cupy: see the module
    docstring); returns the list of outputs as arrays.

    Example:
        >>> import numpy as np, functrace as ft, functrace.numpy as fnp
        >>> g = ft.trace(lambda x: fnp.sin(x) * 2)(np.ones(2)).graph
        >>> run(g, [np.zeros(2)])
        [array([0., 0.])]
    """
    if config.debug_nans:
        return [o if on_device(o) else _own(o) for o in _run_checked(graph, list(args))]
    p = plan(graph)
    xp = device_module(args)
    if xp is not None:
        return p.run_on_device(xp, args)
    return [_own(o) for o in p(*args)]


def _run_checked(graph: Graph, args) -> list:
    """``ft.config.debug_nans``: evaluate ``graph`` equation by equation, checking each
    result for a NaN its operands did not have (``debug_nans.check``: the error names the
    op, the equation's source line and, for equations a derivative rule emitted, the rule).
    Slow, and only used while debugging."""
    xp = device_module(args)
    env = dict(zip(graph.inputs, args))

    def read(a):
        return a.val if isinstance(a, Lit) else env[a]
    for e in graph.eqns:
        vals = [read(a) for a in e.inputs]
        if xp is None:
            res = e.op.impl(*vals, **e.params)
        else:
            res = run_impl_on_device(e.op.name, e.op.impl, vals, dict(e.params),
                                     e.op.multiple_results, xp)
        debug_nans.check(e.op.name, vals, res, e.source)
        if e.op.multiple_results:
            env.update(zip(e.outputs, res))
        else:
            env[e.outputs[0]] = res
    return [read(a) for a in graph.outputs]


def _apply_on_device(op, args, params):
    """``op``'s impl on operands some of which are device arrays, for eager transforms: host
    operands are copied to the first device operand's device, results stay there."""
    first = next(a for a in args if on_device(a))
    xp = namespace_of(first)
    dev = _device_id(first)
    cuda = getattr(xp, "cuda", None)

    def run():
        vals = [a if on_device(a) else xp.asarray(a) for a in args]
        return run_impl_on_device(op.name, op.impl, vals, params, op.multiple_results, xp)
    if dev is None or cuda is None:
        return run()
    with cuda.Device(dev):
        return run()


def _own(x):
    """Outputs handed to users are writeable arrays (impls may return read-only views)."""
    a = np.asarray(x)
    if not a.flags.writeable:
        a = a.copy()
    return a


def _install_device_hook():
    from .. import tracing
    tracing.device_apply = _apply_on_device


_install_device_hook()
