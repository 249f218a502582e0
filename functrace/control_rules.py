"""The vjp, jvp and batch rules of the control-flow ops (``loop``, ``cond``, ``while``,
``specialize``), each a graph transform of the op's sub-graphs.

Owns the rules and the ``specialize`` recipes ``"vjp"``, ``"jvp"`` and ``"batch"``.
Transform layer: imports core, tracing, ops, autodiff, batching and passes.simplify; never
the API layer or a backend.

Reverse mode through a counted ``loop`` (``scan``, ``fori_loop``):
  The body's joint forward+backward graph (``vjp_graph``) is split by partial evaluation:
  equations that read no cotangent move into a *forward body*, which also returns, stacked
  over the trips, every value the backward equations read (the residuals: carries as they
  entered a trip, and computed intermediates; constants and per-trip reads are read again
  instead of stored). A *backward loop* then walks the trips in reverse, carrying the
  carries' cotangents and summing the constants' cotangents, and stacks the per-trip reads'
  cotangents, which are scattered back onto their arrays.

Reverse mode through ``while``:
  The forward ``while`` returns its trip count. The reverse pass is the reverse pass of a
  counted loop of that many trips, built when the count is known: a ``specialize``
  equation with the recipe ``("vjp", ("fori", body, ...), ...)``. Its own rules are the
  same recipes applied again, so any order works.

``cond``: each branch is replaced by its transform (the vjp of a branch recomputes the
branch's forward values, so a cond keeps no residuals); a batched index runs every branch
and selects per example.
"""

from __future__ import annotations

import numpy as np

from . import caches, ops
from .autodiff import active_vars, jvp_graph, vjp_graph, zeros_like
from .batching import batch_graph
from .core import AVal, Eqn, Graph, Var
from .ops.batch_rules import bdim_to_front, moveaxis, size_of
from .ops.control import (
    SPECIALIZERS,
    cond_p,
    loop_p,
    loop_read_spec,
    loop_slices,
    specialize_p,
    specialized_graph,
    while_p,
)
from .passes.simplify import dce
from .tracing import bind, cotangent_wanted, eval_graph, saved_forward, trace_to_graph

__all__ = ["partial_eval_vjp"]


def _float(aval: AVal) -> bool:
    return aval.dtype.kind in "fc"


def _aval(x) -> AVal:
    return x.aval if hasattr(x, "aval") else AVal.of(x)    # a device array: no copy


def _reaching(g: Graph) -> set[int]:
    """The inputs of ``g`` whose value reaches a float output through differentiable ops.
    The rules give the constants (and the operands of a branch) outside it no cotangent at
    all, not a zero one: a zero times an infinite derivative upstream would be NaN where the
    same Python loop gives a gradient. (Carries keep a cotangent in every trip, zero where
    it does not matter, as JAX's loops do.)"""
    outs = {o for o in g.outputs if isinstance(o, Var) and _float(o.aval)}
    return {i for i, v in enumerate(g.inputs) if _float(v.aval) and
            not outs.isdisjoint(active_vars(g, [i]))}


def _backward_only(g: Graph, wrt, seeds) -> Graph:
    """The backward part of ``g``'s vjp: inputs ``g.inputs + cotangents``, outputs one
    gradient per ``wrt`` input (forward values recomputed inside)."""
    joint = vjp_graph(g, list(wrt), list(seeds))
    return dce(Graph(joint.inputs, joint.eqns, joint.outputs[len(g.outputs):]))


def _tangents_only(g: Graph, wrt) -> Graph:
    """The tangent part of ``g``'s jvp: inputs ``g.inputs + tangents of wrt``, outputs one
    tangent per output of ``g``."""
    joint = jvp_graph(g, list(wrt))
    return dce(Graph(joint.inputs, joint.eqns, joint.outputs[len(g.outputs):]))


def _batched_outputs(g: Graph, batched_in) -> list[bool]:
    """Which outputs of ``g`` depend on the inputs marked in ``batched_in``."""
    b = {v for v, f in zip(g.inputs, batched_in) if f}
    for e in g.eqns:
        if any(isinstance(a, Var) and a in b for a in e.inputs):
            b.update(e.outputs)
    return [isinstance(o, Var) and o in b for o in g.outputs]


# --------------------------------------------------------------------------------------------
# partial evaluation of a body's vjp: forward-with-residuals and backward graphs
# --------------------------------------------------------------------------------------------

def partial_eval_vjp(body: Graph, wrt, seeds):
    """Split the vjp of ``body`` into a forward part and a backward part.

    Returns ``(fwd, residuals, bwd)``: ``fwd`` is ``body`` with the backward equations that
    read no cotangent moved in, and the computed residuals appended to its outputs;
    ``residuals`` lists the values the backward part reads (Vars of ``body``: its inputs or
    computed values); ``bwd`` takes ``residuals + cotangents`` and returns one gradient per
    ``wrt`` input.
    """
    joint = vjp_graph(body, list(wrt), list(seeds))
    n_body, n_in = len(body.eqns), len(body.inputs)
    unknown = set(joint.inputs[n_in:])
    fwd_extra, bwd_eqns = [], []
    for e in joint.eqns[n_body:]:
        if any(isinstance(a, Var) and a in unknown for a in e.inputs):
            bwd_eqns.append(e)
            unknown.update(e.outputs)
        else:
            fwd_extra.append(e)
    grads = joint.outputs[len(body.outputs):]
    residuals: list[Var] = []
    seen: set = set()
    reads = [a for e in bwd_eqns for a in e.inputs] + list(grads)
    for a in reads:
        if isinstance(a, Var) and a not in unknown and a not in seen:
            seen.add(a)
            residuals.append(a)
    bwd = dce(Graph(residuals + list(joint.inputs[n_in:]), bwd_eqns, grads))
    used = set(bwd.inputs[:len(residuals)]) & {a for e in bwd.eqns for a in e.inputs
                                                if isinstance(a, Var)} | \
        {a for a in bwd.outputs if isinstance(a, Var)}
    residuals = [r for r in residuals if r in used]
    bwd = Graph(residuals + list(joint.inputs[n_in:]), bwd.eqns, bwd.outputs)
    fwd = Graph(body.inputs, list(body.eqns) + fwd_extra, list(body.outputs))
    return fwd, residuals, bwd


# --------------------------------------------------------------------------------------------
# loop
# --------------------------------------------------------------------------------------------

def _reversed_spec(spec, length: int):
    start, step, span, strides = spec
    return (tuple(s + (length - 1) * d for s, d in zip(start, step)),
            tuple(-d for d in step), span, strides)


def _is_scan_read(spec, shape, length: int):
    """``"fwd"``/``"rev"`` when ``spec`` reads row ``j`` / row ``L-1-j`` of an array of
    ``length`` rows (what ``scan`` does), else None."""
    start, step, span, strides = spec
    if not shape or shape[0] != length or tuple(span) != (1,) + tuple(shape[1:]):
        return None
    if set(strides) != {1}:
        return None
    if any(step[1:]) or any(start[1:]):
        return None
    if (start[0], step[0]) == (0, 1):
        return "fwd"
    if (start[0], step[0]) == (length - 1, -1):
        return "rev"
    return None


def _scatter_trips(ys, aval: AVal, spec, length: int):
    """The cotangent of an array read per trip with ``spec``, from the backward loop's
    stacked per-trip cotangents ``ys`` (row ``j`` belongs to forward trip ``L-1-j``)."""
    kind = _is_scan_read(spec, aval.shape, length)
    if kind is not None:
        ct = ops.reshape(ys, aval.shape)
        return ops.rev(ct, (0,)) if kind == "fwd" and length > 1 else ct
    flat_index = np.arange(aval.size, dtype=np.int64).reshape(aval.shape)
    idx = np.stack([flat_index[loop_slices(spec, length - 1 - j)] for j in range(length)])
    zeros = zeros_like(AVal((aval.size,), aval.dtype))
    vals = ops.reshape(ys, (idx.size,))
    flat = ops.scatter(zeros, vals, [idx.reshape(-1)], (("arr", 0),), "add")
    return ops.reshape(flat, aval.shape)


def _reread_views(body: Graph, residuals, bwd: Graph, pos: dict, nc: int, nh: int):
    """Residuals that are a re-indexing (reshape, slice, ...) of constants or per-trip reads
    are recomputed in the backward trip from what they re-index, instead of stacked: a
    scan's row of ``xs`` is reshaped in its body, and stacking it would copy ``xs``."""
    producer = {o: e for e in body.eqns for o in e.outputs}

    def rereadable(r):
        e = producer.get(r)
        return (e is not None and e.op.reindex and len(e.outputs) == 1 and
                all(not isinstance(a, Var) or pos.get(a, -1) in range(nc) or
                    pos.get(a, -1) >= nc + nh for a in e.inputs))
    views = [r for r in residuals if rereadable(r)]
    if not views:
        return residuals, bwd
    kept = [r for r in residuals if r not in set(views)]
    for r in views:
        for a in producer[r].inputs:
            if isinstance(a, Var) and a not in kept:
                kept.append(a)
    n_res = len(residuals)
    eqns = [producer[r] for r in views] + list(bwd.eqns)
    return kept, Graph(kept + list(bwd.inputs[n_res:]), eqns, bwd.outputs)


class _LoopVjpPlan:
    """What the reverse rule of one loop binds, for one (body, length, reads, wrt, seeds):
    the forward body with residual stacks and the backward trip's body. Built from types
    only, so it is cached and shared by every call (the un-jitted gradient re-runs the rule
    on each call)."""

    def __init__(self, body: Graph, length: int, nc: int, nh: int, xs: tuple, wrt: tuple,
                 seeds: tuple):
        n_out = len(body.outputs)
        fwd, residuals, bwd = partial_eval_vjp(body, wrt, seeds)
        pos = {v: i for i, v in enumerate(body.inputs)}
        residuals, bwd = _reread_views(body, residuals, bwd, pos, nc, nh)
        self.res_const = [pos[r] for r in residuals if pos.get(r, -1) in range(nc)]
        self.res_x = [pos[r] - nc - nh for r in residuals if pos.get(r, -1) >= nc + nh]
        const_x = {r for r in residuals if pos.get(r, -1) in range(nc) or
                   pos.get(r, -1) >= nc + nh}
        stacked = [r for r in residuals if r not in const_x]
        self.fwd = dce(Graph(fwd.inputs, fwd.eqns, list(fwd.outputs) + stacked))
        self.body = body
        self.ct_carry = [k for k in range(nh) if seeds[k] is not None]
        self.ct_ys = [k for k in range(nh, n_out) if seeds[k] is not None]
        self.wrt_const = [i for i in wrt if i < nc]
        self.wrt_carry = [i for i in wrt if nc <= i < nc + nh]
        self.wrt_x = [i for i in wrt if i >= nc + nh]
        self.zero_carry = [body.outputs[k].aval for k in self.ct_carry]
        self.zero_const = [body.inputs[i].aval for i in self.wrt_const]
        # per-trip reads of the backward loop: stacks, re-read arrays, the ys' cotangents
        specs = [loop_read_spec((length,) + r.aval.shape, reverse=True) for r in stacked]
        specs += [_reversed_spec(xs[k], length) for k in self.res_x]
        specs += [loop_read_spec((length,) + body.outputs[k].aval.shape, reverse=True)
                  for k in self.ct_ys]
        self.specs = tuple(specs)
        n_bc, n_bh = len(self.res_const), len(self.ct_carry) + len(self.wrt_const)
        n_stacked, n_rx, n_cc = len(stacked), len(self.res_x), len(self.ct_carry)
        in_var = {i: v for i, v in enumerate(body.inputs)}
        res_const_vars = [in_var[i] for i in self.res_const]
        res_x_vars = [in_var[nc + nh + k] for k in self.res_x]
        wrt_l, wrt_const, wrt_x, ct_carry, ct_ys = (list(wrt), self.wrt_const, self.wrt_x,
                                                    self.ct_carry, self.ct_ys)

        def trip(*vals):
            bc, bh, rows = vals[:n_bc], vals[n_bc:n_bc + n_bh], vals[n_bc + n_bh:]
            env = dict(zip(res_const_vars, bc))
            for r, row in zip(stacked, rows[:n_stacked]):
                env[r] = ops.reshape(row, r.aval.shape)
            env.update(zip(res_x_vars, rows[n_stacked:n_stacked + n_rx]))
            ct_in = list(bh[:n_cc])
            for k, row in zip(ct_ys, rows[n_stacked + n_rx:]):
                ct_in.append(ops.reshape(row, body.outputs[k].aval.shape))
            g = dict(zip(wrt_l, eval_graph(bwd, [env[r] for r in residuals] + ct_in)))
            new_ct = [g[nc + k] if nc + k in g else zeros_like(body.inputs[nc + k].aval)
                      for k in ct_carry]
            acc = [ops.add(a, g[i]) for a, i in zip(bh[n_cc:], wrt_const)]
            return new_ct + acc + [g[i] for i in wrt_x]

        in_avals = ([body.inputs[i].aval for i in self.res_const] + self.zero_carry +
                    self.zero_const)
        read_src = ([AVal((length,) + r.aval.shape, r.aval.dtype) for r in stacked] +
                    [body.inputs[nc + nh + k].aval for k in self.res_x] +
                    [AVal((length,) + body.outputs[k].aval.shape, body.outputs[k].aval.dtype)
                     for k in self.ct_ys])
        in_avals += [AVal(tuple(len(range(0, n, st)) for n, st in zip(sp[2], sp[3])),
                          a.dtype) for sp, a in zip(specs, read_src)]
        tr = trace_to_graph(trip, in_avals)
        if tr.captured:
            raise AssertionError("the backward trip of a loop read an outer value")
        self.bbody = tr.graph
        self.n_bc, self.n_bh = n_bc, n_bh


    def fwd_for(self, body: Graph) -> Graph:
        """The forward body for ``body`` (equal to the one the plan was built from): on
        ``body``'s own variables, so that ``passes.loops.merge_loop_twins`` recognises it
        as a twin of the loop it came from."""
        if body is self.body:
            return self.fwd
        m: dict = dict(zip(self.body.inputs, body.inputs))
        for old, new in zip(self.body.eqns, body.eqns):
            m.update(zip(old.outputs, new.outputs))

        def ren(a):
            return m.get(a, a) if isinstance(a, Var) else a
        eqns = [Eqn(e.op, [ren(a) for a in e.inputs], e.params, [ren(o) for o in e.outputs],
                    e.source) for e in self.fwd.eqns]
        return Graph(body.inputs, eqns, [ren(a) for a in self.fwd.outputs])


_vjp_plans = caches.LRU("control.loop_vjp_plans", scale=1)


def _loop_plan(has_ct, body, length, nc, nh, xs):
    """The cached ``_LoopVjpPlan`` and its key, for cotangents on the outputs ``has_ct``
    says; None when no input gets a cotangent."""
    # carries always: their cotangent flows from trip to trip even when the initial value
    # needs none; constants and per-trip reads only where a cotangent is wanted
    reach = _reaching(body)
    wrt = tuple(i for i, v in enumerate(body.inputs) if _float(v.aval) and (
        nc <= i < nc + nh or (cotangent_wanted(i) and i in reach)))
    seeds = tuple(None if not _float(o.aval) else "input" if k < nh or has_ct(k)
                  else None for k, o in enumerate(body.outputs))
    if not wrt:     # no float carry and nothing reaches a result: no cotangent anywhere
        return None, None
    key = (body, length, nc, nh, xs, wrt, seeds)
    plan = _vjp_plans.get(key)
    if plan is None:
        plan = _vjp_plans[key] = _LoopVjpPlan(body, length, nc, nh, xs, wrt, seeds)
    return plan, key


def _loop_vjp_forward(ins, *, body, length, n_consts, n_carry, xs):
    """``loop_p.vjp_forward``: the loop's results from its forward loop with residual stacks
    (the one the vjp rule runs), the stacks saved for the rule, for a cotangent on every
    result (the usual case; the rule recomputes when fewer come)."""
    nc, nh = n_consts, n_carry
    plan = key = None
    if length:
        plan, key = _loop_plan(lambda k: True, body, length, nc, nh, xs)
    if plan is None:
        return loop_p.impl(*ins, body=body, length=length, n_consts=nc, n_carry=nh,
                           xs=xs), None
    fouts = bind(loop_p, *ins, body=plan.fwd_for(body), length=length, n_consts=nc,
                 n_carry=nh, xs=xs)
    return tuple(fouts[:len(body.outputs)]), (key, fouts)


def _loop_vjp(cts, ins, outs, *, body, length, n_consts, n_carry, xs):
    nc, nh, nx = n_consts, n_carry, len(xs)
    n_out = len(body.outputs)
    if length == 0:   # nothing ran: the initial carries are the results
        return (None,) * nc + tuple(cts[:nh]) + (None,) * nx
    plan, key = _loop_plan(lambda k: cts[k] is not None, body, length, nc, nh, xs)
    if plan is None:
        return (None,) * len(ins)
    saved = saved_forward()
    if saved is not None and saved[0] == key:   # computed by the tape's forward pass
        fouts = saved[1]
    else:
        fouts = bind(loop_p, *ins, body=plan.fwd_for(body), length=length, n_consts=nc,
                     n_carry=nh, xs=xs)
    arrays = ins[nc + nh:]
    b_consts = [ins[i] for i in plan.res_const]
    b_carry = [cts[k] if cts[k] is not None else zeros_like(a)
               for k, a in zip(plan.ct_carry, plan.zero_carry)]
    b_carry += [zeros_like(a) for a in plan.zero_const]
    b_arrays = (list(fouts[n_out:]) + [arrays[k] for k in plan.res_x] +
                [cts[k] for k in plan.ct_ys])
    bouts = bind(loop_p, *b_consts, *b_carry, *b_arrays, body=plan.bbody, length=length,
                 n_consts=plan.n_bc, n_carry=plan.n_bh, xs=plan.specs)
    res = [None] * len(ins)
    n_cc = len(plan.ct_carry)
    for k, c in zip(plan.ct_carry, bouts[:n_cc]):
        if nc + k in plan.wrt_carry and cotangent_wanted(nc + k):
            res[nc + k] = c
    for i, c in zip(plan.wrt_const, bouts[n_cc:plan.n_bh]):
        res[i] = c
    for i, ys in zip(plan.wrt_x, bouts[plan.n_bh:]):
        k = i - nc - nh
        res[i] = _scatter_trips(ys, _aval(arrays[k]), xs[k], length)
    return tuple(res)


def _loop_jvp(primals, tangents, outs, *, body, length, n_consts, n_carry, xs):
    nc, nh = n_consts, n_carry
    n_in, n_out = len(body.inputs), len(body.outputs)
    has = [t is not None and _float(v.aval) for t, v in zip(tangents, body.inputs)]
    # every float carry gets a tangent: one may become non-zero after a trip
    wrt = [i for i in range(n_in) if has[i] or (nc <= i < nc + nh and _float(
        body.inputs[i].aval))]
    joint = jvp_graph(body, wrt)
    t_in = dict(zip(wrt, joint.inputs[n_in:]))
    t_out = joint.outputs[n_out:]
    groups = [range(nc), range(nc, nc + nh), range(nc + nh, n_in)]
    order_in, operands = [], []
    new_counts = []
    for grp in groups:
        prim = [body.inputs[i] for i in grp]
        tans = [t_in[i] for i in grp if i in t_in]
        order_in.append(prim + tans)
        new_counts.append(len(prim) + len(tans))
        operands += [primals[i] for i in grp]
        operands += [tangents[i] if tangents[i] is not None else
                     zeros_like(body.inputs[i].aval) for i in grp if i in t_in]
    carry_t = [k for k in range(nh) if nc + k in t_in]
    ys_t = [k for k in range(nh, n_out) if _float(body.outputs[k].aval)]
    outputs = (list(body.outputs[:nh]) + [t_out[k] for k in carry_t] +
               list(body.outputs[nh:]) + [t_out[k] for k in ys_t])
    new_body = dce(Graph(order_in[0] + order_in[1] + order_in[2], joint.eqns, outputs))
    x_specs = list(xs) + [xs[i - nc - nh] for i in range(nc + nh, n_in) if i in t_in]
    res = bind(loop_p, *operands, body=new_body, length=length, n_consts=new_counts[0],
               n_carry=new_counts[1], xs=tuple(x_specs))
    n_ct = len(carry_t)
    t_res = [None] * n_out
    for k, t in zip(carry_t, res[nh:nh + n_ct]):
        t_res[k] = t if _float(body.outputs[k].aval) else None
    ys_res = res[nh + n_ct + (n_out - nh):]
    for k, t in zip(ys_t, ys_res):
        t_res[k] = t
    return tuple(t_res)


def _loop_batch(args, dims, *, body, length, n_consts, n_carry, xs):
    nc, nh = n_consts, n_carry
    size = size_of(args, dims)
    batched = [d is not None for d in dims]
    for _ in range(nh + 1):   # carries become batched when a trip makes them so
        outb = _batched_outputs(body, batched)
        grow = [k for k in range(nh) if outb[k] and not batched[nc + k]]
        if not grow:
            break
        for k in grow:
            batched[nc + k] = True
    outb = _batched_outputs(body, batched)
    new_args, in_dims, specs = [], [], []
    for i, (a, d) in enumerate(zip(args, dims)):
        if i < nc + nh:
            new_args.append(bdim_to_front(a, d, size) if batched[i] else a)
            in_dims.append(0 if batched[i] else None)
            continue
        spec = xs[i - nc - nh]
        if d is None:
            new_args.append(a)
            in_dims.append(None)
            specs.append(spec)
            continue
        a = moveaxis(a, d, len(_aval(a).shape) - 1)   # the batch axis last: read whole
        start, step, span, strides = spec
        specs.append((start + (0,), step + (0,), span + (size,), strides + (1,)))
        new_args.append(a)
        in_dims.append(len(span))
    # a batched carry stays batched even where a trip's new value does not depend on it
    outb = [batched[nc + k] for k in range(nh)] + list(outb[nh:])
    out_dims = [0 if outb[k] else None for k in range(len(body.outputs))]
    bbody = batch_graph(body, in_dims, size, out_dims)
    res = bind(loop_p, *new_args, body=bbody, length=length, n_consts=nc, n_carry=nh,
               xs=tuple(specs))
    odims = [0 if outb[k] else None for k in range(nh)]
    odims += [1 if outb[k] else None for k in range(nh, len(body.outputs))]
    return list(res), odims


loop_p.vjp, loop_p.jvp, loop_p.batch = _loop_vjp, _loop_jvp, _loop_batch
loop_p.vjp_forward = _loop_vjp_forward


# --------------------------------------------------------------------------------------------
# cond
# --------------------------------------------------------------------------------------------

def _cond_vjp(cts, ins, outs, *, branches):
    ops_ = ins[1:]
    g0 = branches[0]
    reach = set().union(*(_reaching(b) for b in branches))
    wrt = [i for i, v in enumerate(g0.inputs) if _float(v.aval) and i in reach]
    seeds = ["input" if c is not None and _float(o.aval) else None
             for c, o in zip(cts, g0.outputs)]
    if not wrt or all(s is None for s in seeds):
        return (None,) * len(ins)
    bwds = tuple(_backward_only(b, wrt, seeds) for b in branches)
    cts_in = [c for c, s in zip(cts, seeds) if s is not None]
    grads = bind(cond_p, ins[0], *ops_, *cts_in, branches=bwds)
    res = [None] * len(ins)
    for i, gv in zip(wrt, grads):
        res[1 + i] = gv
    return tuple(res)


def _cond_jvp(primals, tangents, outs, *, branches):
    g0 = branches[0]
    wrt = [i for i, (t, v) in enumerate(zip(tangents[1:], g0.inputs))
           if t is not None and _float(v.aval)]
    if not wrt:
        return (None,) * len(g0.outputs)
    tgs = tuple(_tangents_only(b, wrt) for b in branches)
    touts = bind(cond_p, primals[0], *primals[1:], *[tangents[1 + i] for i in wrt],
                 branches=tgs)
    return tuple(t if _float(o.aval) else None for t, o in zip(touts, g0.outputs))


def _cond_batch(args, dims, *, branches):
    size = size_of(args, dims)
    index, idim = args[0], dims[0]
    operands, odims = list(args[1:]), list(dims[1:])
    in_dims = [0 if d is not None else None for d in odims]
    new_ops = [bdim_to_front(a, d, size) if d is not None else a
               for a, d in zip(operands, odims)]
    n_out = len(branches[0].outputs)
    if idim is None:
        bb = tuple(batch_graph(b, in_dims, size, [0] * n_out) for b in branches)
        out = bind(cond_p, index, *new_ops, branches=bb)
        return list(out), [0] * n_out
    # a batched index: every branch runs on every example, then one result is chosen each
    idx = bdim_to_front(index, idim, size)
    n = len(branches)
    idx = ops.clip(idx, np.zeros((), idx.dtype), np.asarray(n - 1, idx.dtype)) if n > 1 \
        else idx
    results = [eval_graph(batch_graph(b, in_dims, size, [0] * n_out), new_ops)
               for b in branches]
    out = list(results[0])
    for i in range(1, n):
        pick = ops.eq(idx, np.asarray(i, idx.dtype))
        for k in range(n_out):
            shape = _aval(out[k]).shape
            mask = ops.broadcast_in_dim(pick, shape, (0,)) if len(shape) > 1 else pick
            out[k] = ops.select(mask, results[i][k], out[k])
    return out, [0] * n_out


cond_p.vjp, cond_p.jvp, cond_p.batch = _cond_vjp, _cond_jvp, _cond_batch


# --------------------------------------------------------------------------------------------
# while
# --------------------------------------------------------------------------------------------

def _types(xs) -> tuple:
    return tuple((_aval(x).shape, _aval(x).dtype) for x in xs)


def _while_vjp(cts, ins, outs, *, cond, body, n_cond_consts, n_body_consts):
    ncc, nbc = n_cond_consts, n_body_consts
    nh = len(body.outputs)
    args = list(ins[ncc:])             # body consts, then initial carries
    reach = _reaching(body)      # constants only: a carry's cotangent is dense, as in loops
    wrt = [i for i, v in enumerate(body.inputs) if _float(v.aval) and (i >= nbc or i in reach)]
    seeds = tuple("input" if cts[k] is not None and _float(body.outputs[k].aval) else None
                  for k in range(nh))
    if not wrt or all(s is None for s in seeds):
        return (None,) * len(ins)
    build = ("vjp", ("fori", body, nbc, nh), tuple(wrt), seeds)
    cts_in = [c for c, s in zip(cts[:nh], seeds) if s is not None]
    grads = bind(specialize_p, outs[-1], *args, *cts_in, build=build,
                 out_types=_types([args[i] for i in wrt]))
    res = [None] * len(ins)
    for i, gv in zip(wrt, grads):
        res[ncc + i] = gv
    return tuple(res)


def _while_jvp(primals, tangents, outs, *, cond, body, n_cond_consts, n_body_consts):
    ncc, nbc = n_cond_consts, n_body_consts
    nh = len(body.outputs)
    bt = tangents[ncc:]
    wrt = [i for i, v in enumerate(body.inputs) if _float(v.aval) and (
        i >= nbc or bt[i] is not None)]
    if not any(bt[i] is not None for i in wrt):
        return (None,) * (nh + 1)
    joint = jvp_graph(body, wrt)
    t_in = dict(zip(wrt, joint.inputs[len(body.inputs):]))
    t_out = joint.outputs[nh:]
    carry_t = [k for k in range(nh) if nbc + k in t_in]
    c_wrt = [i for i in range(nbc) if i in t_in]
    ins_order = ([body.inputs[i] for i in range(nbc)] + [t_in[i] for i in c_wrt] +
                 list(body.inputs[nbc:]) + [t_in[nbc + k] for k in carry_t])
    new_body = dce(Graph(ins_order, joint.eqns,
                         list(body.outputs) + [t_out[k] for k in carry_t]))
    extra = [Var(body.inputs[nbc + k].aval) for k in carry_t]
    new_cond = Graph(list(cond.inputs) + extra, cond.eqns, cond.outputs)
    prim = list(primals)
    operands = (prim[:ncc] + prim[ncc:ncc + nbc] +
                [bt[i] for i in c_wrt] + prim[ncc + nbc:] +
                [bt[nbc + k] if bt[nbc + k] is not None else
                 zeros_like(body.inputs[nbc + k].aval) for k in carry_t])
    res = bind(while_p, *operands, cond=new_cond, body=new_body, n_cond_consts=ncc,
               n_body_consts=nbc + len(c_wrt))
    t_res = [None] * (nh + 1)
    for k, t in zip(carry_t, res[nh:nh + len(carry_t)]):
        t_res[k] = t if _float(body.outputs[k].aval) else None
    return tuple(t_res)


def _while_batch(args, dims, *, cond, body, n_cond_consts, n_body_consts):
    ncc, nbc = n_cond_consts, n_body_consts
    nh = len(body.outputs)
    size = size_of(args, dims)
    batched = [d is not None for d in dims]
    for _ in range(nh + 1):
        outb = _batched_outputs(body, batched[ncc:])
        grow = [k for k in range(nh) if outb[k] and not batched[ncc + nbc + k]]
        if not grow:
            break
        for k in grow:
            batched[ncc + nbc + k] = True
    pred_b = _batched_outputs(cond, batched[:ncc] + batched[ncc + nbc:])[0]
    if pred_b:    # lanes stop at different trips: every carry differs per lane
        batched = batched[:ncc + nbc] + [True] * nh
    new = [bdim_to_front(a, d, size) if b else a for a, d, b in zip(args, dims, batched)]
    cdims = [0 if b else None for b in batched[:ncc] + batched[ncc + nbc:]]
    bdims = [0 if b else None for b in batched[ncc:]]
    carry_dims = bdims[nbc:]
    bcond = batch_graph(cond, cdims, size, [0 if pred_b else None])
    bbody = batch_graph(body, bdims, size, carry_dims)
    if not pred_b:
        res = bind(while_p, *new, cond=bcond, body=bbody, n_cond_consts=ncc,
                   n_body_consts=nbc)
        return list(res), carry_dims + [None]
    # run until every lane is done; a finished lane keeps its carry and its trip count
    cc, bc, init = new[:ncc], new[ncc:ncc + nbc], new[ncc + nbc:]
    c_avals = [_aval(x) for x in cc + init]
    b_avals = [_aval(x) for x in bc + init]
    trips0 = np.zeros((size,), np.int64)

    def any_lane(*xs):
        return [ops.reduce_or(eval_graph(bcond, list(xs[:-1]))[0], (0,))]

    def step(*xs):
        ccv, bcv = xs[:ncc], xs[ncc:ncc + nbc]
        carry, trips = xs[ncc + nbc:-1], xs[-1]
        live = eval_graph(bcond, list(ccv) + list(carry))[0]
        nxt = eval_graph(bbody, list(bcv) + list(carry))
        out = []
        for old, upd in zip(carry, nxt):
            shape = _aval(old).shape
            m = ops.broadcast_in_dim(live, shape, (0,)) if len(shape) > 1 else live
            out.append(ops.select(m, upd, old))
        inc = ops.convert_element_type(live, np.dtype(np.int64))
        return out + [ops.add(trips, inc)]

    t_aval = AVal((size,), np.int64)
    gc = trace_to_graph(any_lane, c_avals + [t_aval])
    gb = trace_to_graph(step, c_avals[:ncc] + b_avals + [t_aval])
    # the step graph reads the cond consts too: they join the body's consts
    res = bind(while_p, *cc, *cc, *bc, *init, trips0, cond=gc.graph, body=gb.graph,
               n_cond_consts=ncc, n_body_consts=ncc + nbc)
    return list(res[:nh]) + [res[nh]], [0] * nh + [0]


while_p.vjp, while_p.jvp, while_p.batch = _while_vjp, _while_jvp, _while_batch


# --------------------------------------------------------------------------------------------
# specialize: recipes of recipes
# --------------------------------------------------------------------------------------------

def _vjp_recipe(build, n: int) -> Graph:
    _, inner, wrt, seeds = build
    return _backward_only(specialized_graph(inner, n), wrt, seeds)


def _jvp_recipe(build, n: int) -> Graph:
    _, inner, wrt = build
    return _tangents_only(specialized_graph(inner, n), wrt)


def _batch_recipe(build, n: int) -> Graph:
    _, inner, in_dims, size = build
    g = specialized_graph(inner, n)
    return batch_graph(g, list(in_dims), size, [0] * len(g.outputs))


SPECIALIZERS.update(vjp=_vjp_recipe, jvp=_jvp_recipe, batch=_batch_recipe)


def _spec_vjp(cts, ins, outs, *, build, out_types):
    n, args = ins[0], ins[1:]
    wrt = tuple(i for i, a in enumerate(args) if _float(_aval(a)))
    seeds = tuple("input" if c is not None and _float(AVal(*t)) else None
                  for c, t in zip(cts, out_types))
    if not wrt or all(s is None for s in seeds):
        return (None,) * len(ins)
    cts_in = [c for c, s in zip(cts, seeds) if s is not None]
    grads = bind(specialize_p, n, *args, *cts_in, build=("vjp", build, wrt, seeds),
                 out_types=_types([args[i] for i in wrt]))
    res = [None] * len(ins)
    for i, gv in zip(wrt, grads):
        res[1 + i] = gv
    return tuple(res)


def _spec_jvp(primals, tangents, outs, *, build, out_types):
    n, args, tans = primals[0], primals[1:], tangents[1:]
    wrt = tuple(i for i, (a, t) in enumerate(zip(args, tans))
                if t is not None and _float(_aval(a)))
    if not wrt:
        return (None,) * len(out_types)
    touts = bind(specialize_p, n, *args, *[tans[i] for i in wrt], build=("jvp", build, wrt),
                 out_types=out_types)
    return tuple(t if _float(AVal(*ty)) else None for t, ty in zip(touts, out_types))


def _spec_batch(args, dims, *, build, out_types):
    size = size_of(args, dims)
    n, ndim = args[0], dims[0]
    rest = [bdim_to_front(a, d, size) if d is not None else a
            for a, d in zip(args[1:], dims[1:])]
    in_dims = tuple(0 if d is not None else None for d in dims[1:])
    b_types = tuple(((size,) + tuple(s), d) for s, d in out_types)
    if ndim is None:
        out = bind(specialize_p, n, *rest, build=("batch", build, in_dims, size),
                   out_types=b_types)
        return list(out), [0] * len(out_types)
    # each example has its own count: one specialized graph per example, in a loop
    ns = bdim_to_front(n, ndim, size)
    consts = [a for a, d in zip(rest, in_dims) if d is None]
    per = [a for a, d in zip(rest, in_dims) if d is not None]
    rows = [ns] + per

    def lane(*vals):
        cv, rv = vals[:len(consts)], vals[len(consts):]
        it = iter(cv)
        jt = iter(ops.reshape(r, _aval(r).shape[1:]) for r in rv[1:])
        full = [next(jt) if d is not None else next(it) for d in in_dims]
        nj = ops.reshape(rv[0], ())
        return list(bind(specialize_p, nj, *full, build=build, out_types=out_types))

    avals = [_aval(c) for c in consts] + [AVal((1,) + _aval(r).shape[1:], _aval(r).dtype)
                                          for r in rows]
    tr = trace_to_graph(lane, avals)
    g = tr.graph
    n_cap = len(tr.captured)
    k = len(g.inputs)
    g = Graph([g.inputs[i] for i in list(range(k - n_cap, k)) + list(range(k - n_cap))],
              g.eqns, g.outputs)
    specs = tuple(loop_read_spec(_aval(r).shape) for r in rows)
    out = bind(loop_p, *tr.captured, *consts, *rows, body=g, length=size,
               n_consts=n_cap + len(consts), n_carry=0, xs=specs)
    return list(out), [0] * len(out_types)


specialize_p.vjp, specialize_p.jvp, specialize_p.batch = _spec_vjp, _spec_jvp, _spec_batch
