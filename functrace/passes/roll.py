"""Loop rolling: find the trips of a Python loop that tracing unrolled and fold them back into
one ``loop`` equation (``ops.control.loop_p``).

Owns ``roll_loops(graph, body_ok) -> Graph``. Tracing records ``for t in range(200): h =
tanh(W @ h + xs[t])`` as 200 copies of the same few equations, and its gradient as 200 more.
Run one equation at a time, that costs a Python dispatch per equation; compiled as one
function, it costs minutes of compile time (what ``jax.jit`` pays). Rolled back into a loop,
the body is compiled once and the trips run inside compiled code.

How a run is found (all on the equation list, which is in trace order):

* Each equation gets a *signature*: op, params, input/output avals, which inputs are literals
  (and their values). A ``slice``'s start indices are left out: a trip reads ``xs[t]``.
* A run is ``R >= min_trips`` repetitions of ``P`` consecutive signatures, starting anywhere
  (the first trip may differ, e.g. a literal zero initial state; it is simply left out).
* The data flow must repeat too. Every input of trip ``j`` must be one of: a literal (the
  same in every trip), a value computed earlier in the same trip, a value computed by trip
  ``j - 1`` (a *carry*; trip 0 reads the same external value at that place: its initial
  value), the same external value in every trip (a *constant*), or -- for a ``slice`` of an
  external array whose start moves by the same step each trip -- a *per-trip read*.
* Values of a trip that later equations use become outputs: the final carry, or every trip's
  value stacked on a new leading axis (later readers get ``reshape(slice(stack, j))``, placed
  just before their first reader, so a second loop that walks the first one's results -- a
  backward pass -- reads them as per-trip slices and rolls too).

The pass never changes what the graph computes; ``body_ok`` lets the backend refuse a loop
it could not compile (the run then stays unrolled). Imports core and ops only.
"""

from __future__ import annotations

from ..core import AVal, Eqn, Graph, Lit, Var

__all__ = ["roll_loops", "MIN_TRIPS", "MAX_PERIOD"]

#: fewer trips than this stay unrolled (the loop machinery costs more than it saves)
MIN_TRIPS = 8
#: the longest trip (in equations) looked for
MAX_PERIOD = 400
#: how many next occurrences of an equation's signature are tried as the trip length (an op
#: may appear several times in one trip)
_CANDIDATES = 8


def roll_loops(graph: Graph, body_ok=None, min_trips: int = MIN_TRIPS,
               max_period: int = MAX_PERIOD) -> Graph:
    """``graph`` with every rollable run of repeated trips replaced by a ``loop`` equation.

    Args:
        graph: the graph (not modified).
        body_ok: ``(loop Eqn) -> bool``; a run whose loop it rejects stays unrolled.
        min_trips: shortest run rolled.
        max_period: longest trip considered, in equations.
    """
    start = 0
    g = graph
    for _ in range(len(graph.eqns)):   # every roll removes at least one computing equation
        found = _find_run(g, start, body_ok, min_trips, max_period)
        if found is None:
            break
        g, start = found
    return g


# --------------------------------------------------------------------------------------------
# finding a run
# --------------------------------------------------------------------------------------------

def _lit_key(a: Lit):
    v = a.val
    return ("lit", v.dtype.str, v.tobytes())


def _signature(e: Eqn):
    if e.op.name == "slice":
        p = e.params
        params = (tuple(b - a for a, b in zip(p["start_indices"], p["limit_indices"])),
                  tuple(p["strides"]))
    else:
        params = e.params
    # scalar literals by value (kernels inline them); an array literal matches any value of
    # its type (trip 0 may read a literal initial state where later trips read a carry)
    ins = tuple(_lit_key(a) if isinstance(a, Lit) and a.val.ndim == 0 else a.aval
                for a in e.inputs)
    return (e.op.name, params, ins, tuple(o.aval for o in e.outputs))


def _find_run(g: Graph, start: int, body_ok, min_trips: int, max_period: int):
    eqns = g.eqns
    n = len(eqns)
    if n - start < 2 * min_trips:
        return None
    ids: dict = {}
    sig = [ids.setdefault(_signature(e), len(ids)) for e in eqns]
    nxt = [-1] * n                       # next equation with the same signature
    last: dict[int, int] = {}
    for i in range(n - 1, -1, -1):
        nxt[i] = last.get(sig[i], -1)
        last[sig[i]] = i
    producer = {o: i for i, e in enumerate(eqns) for o in e.outputs}
    readers: dict[Var, list[int]] = {}
    for i, e in enumerate(eqns):
        for a in e.inputs:
            if isinstance(a, Var):
                readers.setdefault(a, []).append(i)
    outputs = {a for a in g.outputs if isinstance(a, Var)}
    a = start
    while a < n - min_trips:
        b = nxt[a]
        tried = 0
        skip = 1
        while b != -1 and b - a <= max_period and tried < _CANDIDATES:
            P = b - a
            tried += 1
            if a + P * min_trips <= n and all(sig[a + k * P] == sig[a]
                                                for k in range(min_trips)):
                R = 1
                while a + (R + 1) * P <= n and sig[a + R * P:a + (R + 1) * P] == \
                        sig[a:a + P]:
                    R += 1
                if R >= min_trips:
                    if not all(eqns[a + ii].op.reindex for ii in range(P)):
                        # the first trip may differ (it reads the initial state): then the
                        # run from the second trip on rolls
                        for a0, r0 in ((a, R), (a + P, R - 1)):
                            if r0 < min_trips:
                                continue
                            rolled = _roll(g, a0, P, r0, producer, readers, outputs,
                                           body_ok)
                            if rolled is not None:
                                return rolled
                    # no start inside a run that failed can do better: skip it (this keeps
                    # the search linear on long runs that do not roll)
                    skip = max(skip, P * R)
            b = nxt[b]
        a += skip
    return None


# --------------------------------------------------------------------------------------------
# checking the data flow and rewriting
# --------------------------------------------------------------------------------------------

class _Mismatch(Exception):
    pass


def _roll(g, a, P, R, producer, readers, outputs, body_ok):
    """The rolled graph and the index to search on from, or None when the data flow of the
    run ``[a, a + P*R)`` does not repeat (or the backend rejects the body)."""
    try:
        plan = _classify(g, a, P, R, producer)
    except _Mismatch:
        return None
    eqns = g.eqns
    end = a + P * R
    from .. import ops
    # values used after the run (or returned)
    carry_src = plan["carry_src"]                # (ii, k) -> carry number
    stacked: list[tuple[int, int]] = []
    final_var: dict[int, Var] = {}              # carry number -> Var reused as final output
    users_after: dict[tuple[int, int, int], list[int]] = {}   # (j, ii, k) -> reader indices
    for j in range(R):
        for ii in range(P):
            e = eqns[a + j * P + ii]
            for k, o in enumerate(e.outputs):
                rs = [r for r in readers.get(o, ()) if r >= end]
                if rs or o in outputs:
                    users_after[(j, ii, k)] = rs
    need: dict[tuple[int, int], set[int]] = {}
    for (j, ii, k) in users_after:
        need.setdefault((ii, k), set()).add(j)
    for key, js in sorted(need.items()):
        if key in carry_src and js == {R - 1}:
            continue
        stacked.append(key)
    for key, c in carry_src.items():
        if (R - 1, key[0], key[1]) in users_after:
            final_var[c] = eqns[a + (R - 1) * P + key[0]].outputs[key[1]]

    # the body graph: fresh Vars for everything
    consts, inits, xs_arrays, xs_specs = plan["consts"], plan["inits"], plan["xs"], \
        plan["xs_specs"]
    c_vars = [Var(v.aval) for v in consts]
    i_vars = [Var(v.aval) for v in inits]
    x_vars = [Var(eqns[a + ii].outputs[0].aval) for ii in plan["xs_at"]]
    local: dict[tuple[int, int], Var] = {}
    for ii, xv in zip(plan["xs_at"], x_vars):
        local[(ii, 0)] = xv
    body_eqns = []
    for ii in range(P):
        if ii in plan["xs_at"]:
            continue
        e = eqns[a + ii]
        ins = []
        for slot, atom in enumerate(e.inputs):
            kind, ref = plan["inputs"][(ii, slot)]
            if kind == "lit":
                ins.append(atom)
            elif kind == "local":
                ins.append(local[ref])
            elif kind == "carry":
                ins.append(i_vars[ref])
            else:
                ins.append(c_vars[ref])
        outs = [Var(o.aval) for o in e.outputs]
        for k, o in enumerate(outs):
            local[(ii, k)] = o
        body_eqns.append(Eqn(e.op, ins, e.params, outs, e.source))
    carry_out = [local[key] for key, _ in sorted(carry_src.items(), key=lambda t: t[1])]
    body = Graph(c_vars + i_vars + x_vars, body_eqns, carry_out + [local[k] for k in stacked])

    # the loop equation
    n_carry = len(inits)
    loop_outs = [final_var.get(c, Var(i_vars[c].aval)) for c in range(n_carry)]
    stack_vars = [Var(AVal((R,) + local[k].aval.shape, local[k].aval.dtype)) for k in stacked]
    loop_eqn = Eqn(ops.loop_p, list(consts) + list(inits) + list(xs_arrays),
                   {"body": body, "length": R, "n_consts": len(consts), "n_carry": n_carry,
                    "xs": tuple(xs_specs)}, loop_outs + stack_vars, eqns[a].source)
    if body_ok is not None and not body_ok(loop_eqn):
        return None

    # readers after the run get their trip's value back as slice + reshape of the stack
    before: dict[int, list[Eqn]] = {}      # reader index -> equations to insert before it
    tail: list[Eqn] = []
    for key, sv in zip(stacked, stack_vars):
        shape = local[key].aval.shape
        for j in sorted(need[key]):
            v = eqns[a + j * P + key[0]].outputs[key[1]]
            c = carry_src.get(key)
            if c is not None and final_var.get(c) is v:
                continue                       # the final carry output is this very Var
            rs = users_after[(j, key[0], key[1])]
            tmp = Var(AVal((1,) + shape, sv.aval.dtype))
            sl = Eqn(ops.slice_p, [sv], {"start_indices": (j,) + (0,) * len(shape),
                                          "limit_indices": (j + 1,) + shape,
                                          "strides": (1,) * (len(shape) + 1)}, [tmp],
                     eqns[a + j * P + key[0]].source)
            rs_ = Eqn(ops.reshape_p, [tmp], {"new_sizes": shape}, [v], sl.source)
            if rs:
                before.setdefault(min(rs), []).extend([sl, rs_])
            else:
                tail.extend([sl, rs_])
    new = list(eqns[:a]) + [loop_eqn] + tail
    for i in range(end, len(eqns)):
        new.extend(before.get(i, ()))
        new.append(eqns[i])
    return Graph(g.inputs, new, g.outputs), a + 1


def _same(x, y) -> bool:
    """The same Var, or literals with equal bits (each trip of a forward-mode loop may carry
    its own copy of the tangent basis)."""
    if isinstance(x, Lit) and isinstance(y, Lit):
        return x.val is y.val or x == y
    return x is y


def _classify(g, a, P, R, producer):
    """Where every input of the run's equations comes from (the same in every trip), or
    raise ``_Mismatch``."""
    eqns = g.eqns
    end = a + P * R

    def where(v):
        i = producer.get(v)
        if i is None or i < a or i >= end:
            return None
        j, ii = divmod(i - a, P)
        return j, ii, eqns[i].outputs.index(v)

    consts: list[Var] = []
    const_ix: dict[Var, int] = {}
    inits: list = []
    carry_src: dict[tuple[int, int], int] = {}
    inputs: dict[tuple[int, int], tuple] = {}
    xs_at: list[int] = []
    xs: list = []
    xs_specs: list = []
    for ii in range(P):
        trips = [eqns[a + j * P + ii] for j in range(R)]
        e0 = trips[0]
        if e0.op.name == "slice":
            starts = [t.params["start_indices"] for t in trips]
            if any(s != starts[0] for s in starts):
                src = e0.inputs[0]
                if isinstance(src, Var) and where(src) is not None:
                    raise _Mismatch
                if any(not _same(t.inputs[0], src) for t in trips):
                    raise _Mismatch
                step = tuple(y - x for x, y in zip(starts[0], starts[1]))
                for j, s in enumerate(starts):
                    if tuple(x + j * d for x, d in zip(starts[0], step)) != tuple(s):
                        raise _Mismatch
                p = e0.params
                span = tuple(b - s for s, b in zip(p["start_indices"], p["limit_indices"]))
                xs_at.append(ii)
                xs.append(src)
                xs_specs.append((tuple(starts[0]), step, span, tuple(p["strides"])))
                continue
        for slot in range(len(e0.inputs)):
            atoms = [t.inputs[slot] for t in trips]
            a0 = atoms[0]
            if isinstance(a0, Lit) and all(isinstance(x, Lit) and _same(x, a0)
                                           for x in atoms):
                inputs[(ii, slot)] = ("lit", None)
                continue
            w = [where(x) for x in atoms]
            if all(x is not None and x[0] == j for j, x in enumerate(w)):
                ref = w[0][1:]
                if any(x[1:] != ref for x in w):
                    raise _Mismatch
                inputs[(ii, slot)] = ("local", ref)
                continue
            if w[0] is None and all(x is not None and x[0] == j - 1
                                    for j, x in enumerate(w) if j):
                ref = w[1][1:]
                if any(x[1:] != ref for x in w[1:]):
                    raise _Mismatch
                c = carry_src.get(ref)
                if c is None:
                    c = carry_src[ref] = len(inits)
                    inits.append(a0)
                elif inits[c] is not a0:
                    raise _Mismatch
                inputs[(ii, slot)] = ("carry", c)
                continue
            if all(x is None for x in w) and all(x is a0 for x in atoms):
                k = const_ix.get(a0)
                if k is None:
                    k = const_ix[a0] = len(consts)
                    consts.append(a0)
                inputs[(ii, slot)] = ("const", k)
                continue
            raise _Mismatch
    for ref in carry_src:
        if inits[carry_src[ref]].aval != eqns[a + ref[0]].outputs[ref[1]].aval:
            raise _Mismatch
    if not xs and not carry_src:
        raise _Mismatch       # independent repeats: nothing to roll (CSE territory)
    if all(eqns[a + ii].op.reindex for ii in range(P) if ii not in xs_at):
        raise _Mismatch       # only moves data (e.g. the readers of another loop's stack)
    return {"consts": consts, "inits": inits, "carry_src": carry_src, "inputs": inputs,
            "xs_at": xs_at, "xs": xs, "xs_specs": xs_specs}
