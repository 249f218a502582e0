"""Custom rules by name: the registry behind ``ft.register_custom_rule`` and the graph JSON
codec of ``custom_vjp_call`` / ``custom_jvp_call`` rules.

A rule is Python code, and a graph document never holds code: it names the rule. Each
``ft.custom_vjp`` / ``ft.custom_jvp`` object is registered under a name (``name=``, or by
default ``"module:qualname"`` of its function when that is unique, i.e. a module-level
function), and a document stores that name, the argument and result structures and the
nondiff values. Reading a document looks the name up in this process's registry: nothing is
imported or evaluated. A name nobody registered still loads (the graph runs: the call keeps
the function's graph), and differentiating it raises MissingRuleError naming the rule to
register. API layer: imports autodiff, batching, graph_json and symbol.
"""

from __future__ import annotations

from typing import Any

from .autodiff import CustomJvpRule, CustomVjpRule, bind_nondiff
from .batching import batched_jvp_rule, batched_vjp_rule
from .errors import FunctraceTypeError, GraphFormatError, MissingRuleError, where
from .graph_json import register_param_codec
from .symbol import tree_from_json, tree_to_json

__all__ = ["register_custom_rule", "registered", "default_name"]

# name -> the ft.custom_vjp / ft.custom_jvp object; the latest registration of a name wins
# (a module reloaded, a notebook cell run again)
_REGISTRY: dict[str, Any] = {}


def default_name(fun) -> str | None:
    """``"module:qualname"`` of a module-level function; None for a lambda, a closure or a
    method defined in a function (their names are not unique)."""
    qual = getattr(fun, "__qualname__", None)
    mod = getattr(fun, "__module__", None)
    if not qual or not mod or "<" in qual:
        return None
    return f"{mod}:{qual}"


def register_custom_rule(name: str, custom) -> Any:
    """Register the ``ft.custom_vjp`` / ``ft.custom_jvp`` function ``custom`` under ``name``,
    so that graph JSON can name its rule and ``Symbol.from_json`` find it again (in any
    process that registers it before loading). Returns ``custom``.

    Functions defined at module level are registered as ``"module:qualname"`` when created;
    ``ft.custom_vjp(f, name="mylib.softclip")`` chooses the name. Call this for the others
    (a lambda, a function defined inside a function), or to add a name.

    Example:
        >>> import functrace as ft, functrace.numpy as fnp
        >>> f = ft.custom_jvp(lambda x: fnp.sin(x))
        >>> _ = f.defjvp(lambda p, t: (f(p[0]), fnp.cos(p[0]) * t[0]))
        >>> ft.register_custom_rule("doc.sin", f) is f
        True
    """
    if not isinstance(name, str) or not name:
        raise FunctraceTypeError(f"register_custom_rule: the name must be a non-empty str, got "
                                 f"{name!r:.60} ({where()})")
    if getattr(custom, "kind", None) not in ("custom_vjp", "custom_jvp"):
        raise FunctraceTypeError(
            f"register_custom_rule: {name!r} must name an ft.custom_vjp or ft.custom_jvp "
            f"function, got {type(custom).__name__} ({where()})")
    _REGISTRY[name] = custom
    custom.registered_name = name
    return custom


def registered(name: str):
    """The custom function registered under ``name``, or None."""
    return _REGISTRY.get(name)


# --------------------------------------------------------------------------------------------
# the JSON codec
# --------------------------------------------------------------------------------------------

def _need_name(custom, kind: str, fname: str, where_: str) -> str:
    name = getattr(custom, "registered_name", None) if custom is not None else None
    if name is None:
        raise TypeError(
            f"{where_}: the {kind} function {fname} has no registered name, so a document "
            f"could not find its rule again. Fix: create it with ft.{kind}(f, name='pkg.{fname}')"
            f" or call ft.register_custom_rule('pkg.{fname}', {fname}) before to_json")
    return name


def _enc_nondiff(nondiff, fname: str, where_: str, enc) -> list:
    out = []
    for pos, v in nondiff:
        try:
            out.append([pos, enc(v, f"{where_}.nondiff[{pos}]")])
        except TypeError:
            raise TypeError(
                f"{where_}: argument {pos} of {fname} is in nondiff_argnums and is a "
                f"{type(v).__name__} ({v!r:.40}), which graph JSON cannot store (it stores "
                "None, bool, numbers, str, tuples, dtypes, slices). Fix: pass such a value as "
                "an ordinary argument, or trace a function that closes over it") from None
    return out


def _encoder(kind: str):
    def encode(rule, where_: str, enc) -> dict:
        if rule.batched is not None:
            inner, size = rule.batched
            return {"batched": int(size), "rule": encode(inner, where_, enc)}
        o = rule.origin
        if o is None:
            raise TypeError(f"{where_}: a {kind} rule made inside functrace cannot be stored "
                            "in graph JSON")
        custom, nondiff, n = o[0], o[-2], o[-1]
        name = o[1] if isinstance(custom, _Missing) else _need_name(custom, kind, rule.name,
                                                                      where_)
        return {"name": name, "function": rule.name,
                "in_tree": tree_to_json(rule.in_tree), "out_tree": tree_to_json(rule.out_tree),
                "nondiff": _enc_nondiff(nondiff, rule.name, where_, enc), "n_args": int(n)}
    return encode


def _bad(where_: str, msg: str):
    raise GraphFormatError(f"bad graph JSON at {where_}: {msg}")


def _field(d: dict, key: str, kind, where_: str):
    v = d.get(key) if isinstance(d, dict) else None
    if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
        _bad(f"{where_}.{key}", f"expected {kind.__name__}")
    return v


# vmap of vmap of ... a custom function: real programs nest a few levels
_MAX_BATCHED = 16


class _Missing:
    """Stands for a custom function this process has not registered."""

    __slots__ = ()


def _missing_rule(kind: str, name: str, fname: str):
    def fail(*_a, **_k):
        raise MissingRuleError(
            f"cannot differentiate {fname}: its {kind} rule {name!r} (in a graph read from "
            f"JSON) is not registered in this process. Fix: import the module that defines "
            f"it (a module-level ft.{kind} function registers itself), or call "
            f"ft.register_custom_rule({name!r}, f) before Symbol.from_json ({where()})")
    return fail


def _decoder(kind: str):
    def decode(body: Any, where_: str, dec, depth: int = 0):
        if not isinstance(body, dict):
            _bad(where_, "expected an object")
        if "batched" in body:
            size = _field(body, "batched", int, where_)
            if not 0 <= size < 2 ** 62:
                _bad(f"{where_}.batched", "expected an axis size")
            if depth >= _MAX_BATCHED:
                _bad(where_, f"rules batched more than {_MAX_BATCHED} times: nested too deeply")
            inner = decode(body.get("rule"), f"{where_}.rule", dec, depth + 1)
            return (batched_vjp_rule if kind == "custom_vjp" else batched_jvp_rule)(inner, size)
        name = _field(body, "name", str, where_)
        fname = _field(body, "function", str, where_)[:200]
        in_tree = tree_from_json(body.get("in_tree"), f"{where_}.in_tree")
        out_tree = tree_from_json(body.get("out_tree"), f"{where_}.out_tree")
        n = _field(body, "n_args", int, where_)
        nondiff = []
        for i, item in enumerate(_field(body, "nondiff", list, where_)):
            if not (isinstance(item, list) and len(item) == 2 and type(item[0]) is int):
                _bad(f"{where_}.nondiff[{i}]", "expected [position, value]")
            nondiff.append((item[0], dec(item[1], f"{where_}.nondiff[{i}]")))
        nondiff = tuple(nondiff)
        pos = [p for p, _ in nondiff]
        if pos != sorted(set(pos)) or (pos and not 0 <= pos[0] <= pos[-1] < n):
            _bad(f"{where_}.nondiff", "positions must be distinct, sorted and below n_args")
        custom = _REGISTRY.get(name)
        if custom is not None and getattr(custom, "kind", None) != kind:
            _bad(f"{where_}.name", f"{name!r} is registered as a "
                                   f"{type(custom).__name__}, not a {kind}")
        if custom is None:
            missing = _missing_rule(kind, name, fname)
            if kind == "custom_vjp":
                return CustomVjpRule(missing, missing, in_tree, out_tree, fname,
                                     origin=(_Missing(), name, None, nondiff, n))
            return CustomJvpRule(missing, in_tree, out_tree, fname,
                                 origin=(_Missing(), name, nondiff, n))
        fname = getattr(custom.fun, "__name__", fname)
        if kind == "custom_vjp":
            _, fwd, bwd, _ = bind_nondiff(nondiff, n, fwd=custom.fwd, bwd=custom.bwd)
            return CustomVjpRule(fwd, bwd, in_tree, out_tree, fname,
                                 origin=(custom, custom.fwd, custom.bwd, nondiff, n))
        _, _, _, jvp = bind_nondiff(nondiff, n, jvp=custom.rule)
        return CustomJvpRule(jvp, in_tree, out_tree, fname,
                             origin=(custom, custom.rule, nondiff, n))
    return decode


register_param_codec(CustomVjpRule, "custom_vjp", _encoder("custom_vjp"), _decoder("custom_vjp"))
register_param_codec(CustomJvpRule, "custom_jvp", _encoder("custom_jvp"), _decoder("custom_jvp"))
