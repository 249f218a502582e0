"""A user's scalar function (``define_elementwise(..., scalar=fn)``) inside generated kernels.

Owns turning a Python function of scalars into text a kernel module can hold: its source is
found (``inspect``), parsed, checked and rewritten into a standalone ``def`` (``inline``), so
the module's content, hence its content-hashed cache key, includes the function's code: a
redefinition in a new process never runs a stale kernel. A function that cannot be located or
made standalone, or that numba cannot compile for the operand dtypes (``probe``), makes its op
an unfused op step on that target, with the reason (``why_not``); never an error at run time.

What a scalar function may use: its parameters and local names, numbers, the builtins numba
knows (``abs``, ``min``, ``max``, ``float``, ``int``, ``bool``, ``round``), the ``math``
module (any alias), and on the CPU ``numpy`` (any alias). Global or closed-over numbers are
inlined as constants. Anything else (another function, an object) is a reason not to fuse.
Imports core only; numba is imported by ``probe`` alone.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import inspect
import logging
import math
import re
import types

import numpy as np

__all__ = ["inline", "probe", "why_not", "helper_name", "Inlined"]

log = logging.getLogger("functrace")

_BUILTINS = frozenset({"abs", "min", "max", "float", "int", "bool", "round", "complex", "pow"})
#: what precedes the helper's def per target (CPU kernel modules do not import math)
_DECORATORS = {"cpu": 'import math  # noqa: E402\n\n\n@numba.njit(error_model="numpy")',
               "cuda": "@cuda.jit(device=True)"}


class Inlined:
    """A scalar function made standalone: ``name`` and ``source`` (a ``def`` without a
    decorator). As a template, ``(args, params, in_dtypes, out_dtype) -> "name(a, b)"``."""

    def __init__(self, name: str, source: str, target: str):
        self.name, self.source, self.target = name, source, target
        self.helper = f"{_DECORATORS[target]}\n{source}"

    def __call__(self, args, params, in_dtypes, out_dtype) -> str:
        return f"{self.name}({', '.join(args)})"


def helper_name(op_name: str) -> str:
    """The helper's name in a kernel module: an identifier, unique per op name."""
    tag = hashlib.sha256(op_name.encode()).hexdigest()[:8]
    return f"scalar_{re.sub(r'[^0-9A-Za-z_]', '_', op_name)}_{tag}"


def _node_of(fn) -> ast.AST | str:
    """The Lambda or FunctionDef node of ``fn`` in its file, or why it cannot be found."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return f"{fn!r} is not a Python function"
    try:
        lines, _ = inspect.findsource(fn)
    except (OSError, TypeError) as exc:
        return f"the source of {fn.__qualname__} cannot be found ({exc})"
    try:
        tree = ast.parse("".join(lines))
    except SyntaxError as exc:
        return f"the file of {fn.__qualname__} does not parse ({exc})"
    want = code.co_firstlineno
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda | ast.FunctionDef)
             and (n.lineno == want or (isinstance(n, ast.FunctionDef) and n.decorator_list
                                       and n.decorator_list[0].lineno == want))]
    if isinstance(fn, types.LambdaType) and fn.__name__ == "<lambda>":
        found = [n for n in found if isinstance(n, ast.Lambda)]
    else:
        found = [n for n in found if isinstance(n, ast.FunctionDef) and n.name == fn.__name__]
    nargs = code.co_argcount
    found = [n for n in found if len(n.args.args) == nargs]
    if len(found) > 1:   # several lambdas on one line: the one whose code matches
        same = [n for n in found if _code_of(n) == code.co_code]
        found = same
    if len(found) != 1:
        return (f"the source of {fn.__qualname__} is ambiguous or missing at line {want} "
                "(define it with def, or one lambda per line)")
    return found[0]


def _code_of(node) -> bytes | None:
    try:
        expr = ast.Expression(node) if isinstance(node, ast.Lambda) else None
        if expr is not None:
            fn = eval(compile(ast.fix_missing_locations(expr), "<scalar>", "eval"))
            return fn.__code__.co_code
    except Exception:
        return None
    return None


def _bound_names(node) -> set[str]:
    args = node.args
    names = {a.arg for a in args.args + args.posonlyargs + args.kwonlyargs}
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            names.add(n.id)
    return names


def _resolve(fn, name: str):
    """(kind, value) of a free name of ``fn``: its closure cell, global, or builtin."""
    code = fn.__code__
    if name in code.co_freevars and fn.__closure__:
        cell = fn.__closure__[code.co_freevars.index(name)]
        return "value", cell.cell_contents
    if name in fn.__globals__:
        return "value", fn.__globals__[name]
    if hasattr(builtins, name):
        return "builtin", getattr(builtins, name)
    return "missing", None


class _Rewrite(ast.NodeTransformer):
    def __init__(self, names: dict):
        self.names = names

    def visit_Name(self, n):
        if isinstance(n.ctx, ast.Load) and n.id in self.names:
            return ast.copy_location(self.names[n.id], n)
        return n


def inline(op, target: str) -> Inlined | str:
    """``op.scalar`` as a standalone ``def`` for ``target``'s kernel modules, or the reason it
    cannot be one. Cached on the op per target."""
    cache = op.__dict__.setdefault("_inlined", {})
    got = cache.get(target)
    if got is None:
        got = cache[target] = _inline(op, op.scalar, target)
        if isinstance(got, str):
            log.info("functrace: %s stays unfused on %s: %s", op.name, target, got)
    return got


def _inline(op, fn, target: str) -> Inlined | str:
    node = _node_of(fn)
    if isinstance(node, str):
        return node
    bound = _bound_names(node)
    subst: dict[str, ast.AST] = {}
    for n in ast.walk(node):
        if not (isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)) or n.id in bound:
            continue
        kind, val = _resolve(fn, n.id)
        if kind == "builtin" and n.id in _BUILTINS:
            continue
        if val is math:
            subst[n.id] = ast.Name("math", ast.Load())
        elif val is np and target == "cpu":
            subst[n.id] = ast.Name("np", ast.Load())
        elif isinstance(val, bool | int | float) and not isinstance(val, np.ndarray):
            subst[n.id] = ast.Constant(val)
        elif isinstance(val, np.generic) and val.dtype.kind in "biuf":
            subst[n.id] = ast.Constant(val.item())
        else:
            what = "an unknown name" if kind == "missing" else f"a {type(val).__name__}"
            return (f"its scalar function {fn.__qualname__} uses {n.id!r} ({what}); a kernel "
                    "can inline only math" + (", numpy" if target == "cpu" else "")
                    + ", numbers and builtins")
    name = helper_name(op.name)
    node = _Rewrite(subst).visit(node)
    try:
        if isinstance(node, ast.Lambda):
            src = f"def {name}({ast.unparse(node.args)}):\n    return {ast.unparse(node.body)}"
        else:
            node.name, node.decorator_list, node.returns = name, [], None
            src = ast.unparse(node)
        ast.parse(src)
    except Exception as exc:     # pragma: no cover - unparse of a parsed tree
        return f"its scalar function {fn.__qualname__} cannot be rewritten ({exc})"
    return Inlined(name, src, target)


_probed: dict = {}


def probe(op, target: str, in_dtypes) -> str | None:
    """Why ``op``'s inlined scalar function cannot run on ``target`` for ``in_dtypes`` (None:
    it compiles and returns a number). Compiles it once per (op, target, dtypes)."""
    key = (op.name, id(op), target, tuple(np.dtype(d).str for d in in_dtypes))
    if key in _probed:
        return _probed[key]
    inl = inline(op, target)
    reason = inl if isinstance(inl, str) else _compile(inl, target, in_dtypes)
    if reason is not None:
        log.warning("functrace: %s is not fused on %s: %s", op.name, target, reason)
    _probed[key] = reason
    return reason


def _compile(inl: Inlined, target: str, in_dtypes) -> str | None:
    ns: dict = {"math": math, "np": np}
    try:
        if target == "cpu":
            import numba

            from ..cpu.numba_target import configure
            configure()                # numba's CPU features, before its first @njit
            ns["numba"] = numba
            exec(compile(inl.helper, f"<scalar {inl.name}>", "exec"), ns)
            fn = ns[inl.name]
            sig = tuple(numba.from_dtype(np.dtype(d)) for d in in_dtypes)
            fn.compile(sig)
            ret = fn.overloads[sig].signature.return_type
            if not isinstance(ret, numba.types.Number | numba.types.Boolean):
                return f"numba types its result as {ret}, not a number"
            return None
        from ..cuda.device import SimMath, simulator_enabled
        if simulator_enabled():
            ns["math"] = SimMath
            exec(compile(inl.source, f"<scalar {inl.name}>", "exec"), ns)
            out = ns[inl.name](*[np.dtype(d).type(1) for d in in_dtypes])
            if not isinstance(out, bool | int | float | np.number | np.bool_):
                return f"it returns {type(out).__name__}, not a number"
            return None
        from numba import cuda
        ns["cuda"] = cuda
        exec(compile(inl.source, f"<scalar {inl.name}>", "exec"), ns)
        import numba
        cuda.compile_ptx_for_current_device(
            ns[inl.name], tuple(numba.from_dtype(np.dtype(d)) for d in in_dtypes), device=True)
        return None
    except Exception as exc:
        return f"numba cannot compile its scalar function ({type(exc).__name__}: " \
               f"{str(exc).splitlines()[0][:200] if str(exc) else ''})"


def why_not(op, target: str, in_dtypes) -> str | None:
    """``probe`` for ops whose kernel code is a scalar function; None for the others."""
    if not callable(op.scalar) or (target in op.code and op.code[target] is not None and \
            not isinstance(op.code[target], str) and op.code[target].expr is not None):
        return None
    return probe(op, target, in_dtypes)
