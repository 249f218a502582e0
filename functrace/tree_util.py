"""Pytree flattening and unflattening, and the registry of pytree node types.

This module owns functrace's pytree machinery: turning nested containers
into a flat list of leaves plus a hashable :class:`PyTreeDef` describing the
structure, rebuilding containers from leaves, and the registry through which
user classes become pytree nodes. It imports nothing from ``functrace`` (only
the standard library), so every other module may import it freely.

Semantics follow ``jax.tree_util``:

* ``tuple``, ``list`` and ``dict`` are nodes. Dict keys are sorted when
  flattening, and unflattening rebuilds the dict in sorted-key order.
* ``None`` is a node with no children, so it holds no leaves.
* Namedtuples (any ``tuple`` subclass with ``_fields``) are nodes that keep
  their type; ``collections.OrderedDict`` keeps insertion order and
  ``collections.defaultdict`` keeps its ``default_factory``. Namedtuple types
  met so far, and those passed to :func:`register_namedtuple`, can be found by
  name with :func:`lookup_namedtuple` (how stored structures are read back
  without importing anything).
* Classes registered with :func:`register_pytree_node` or
  :func:`register_pytree_node_class` are nodes.
* Everything else (numpy arrays, scalars, other objects, subclasses of
  ``list``/``dict`` that are not registered) is a leaf.

Type dispatch is an exact ``type(x)`` dict lookup, with a fallback only for
namedtuples. A treedef stores its nodes in post-order as a tuple of small
records, so equality is a tuple comparison and the hash is computed at most
once per treedef.
"""

import collections
import functools

__all__ = [
    "PyTreeDef",
    "lookup_namedtuple",
    "register_namedtuple",
    "register_pytree_node",
    "register_pytree_node_class",
    "tree_all",
    "tree_flatten",
    "tree_leaves",
    "tree_map",
    "tree_reduce",
    "tree_structure",
    "tree_unflatten",
    "treedef_is_leaf",
]


class _Registration:
    """How one node type is flattened, rebuilt and printed (internal)."""

    __slots__ = ("type", "flatten", "unflatten", "kind")

    def __init__(self, nodetype, flatten, unflatten, kind):
        self.type = nodetype
        self.flatten = flatten  # obj -> (iterable of children, aux_data)
        self.unflatten = unflatten  # (aux_data, tuple of children) -> obj
        self.kind = kind  # used by repr: "tuple", "list", ..., "custom"

    def __repr__(self):
        return f"<pytree node {self.type.__qualname__}>"


def _flatten_dict(d):
    try:
        keys = sorted(d)
    except TypeError as e:
        raise ValueError(
            f"pytree dict keys must be mutually sortable; cannot sort keys "
            f"{list(d)!r}: {e}"
        ) from None
    return [d[k] for k in keys], tuple(keys)


def _flatten_defaultdict(d):
    children, keys = _flatten_dict(d)
    return children, (d.default_factory, keys)


def _flatten_ordereddict(d):
    return list(d.values()), tuple(d)


_NoneType = type(None)

# Exact-type registry: type -> _Registration.
_registry = {
    tuple: _Registration(tuple, lambda x: (x, None), lambda aux, ch: tuple(ch), "tuple"),
    list: _Registration(list, lambda x: (x, None), lambda aux, ch: list(ch), "list"),
    dict: _Registration(dict, _flatten_dict, lambda aux, ch: dict(zip(aux, ch)), "dict"),
    _NoneType: _Registration(_NoneType, lambda x: ((), None), lambda aux, ch: None, "none"),
    collections.OrderedDict: _Registration(
        collections.OrderedDict,
        _flatten_ordereddict,
        lambda aux, ch: collections.OrderedDict(zip(aux, ch)),
        "ordereddict",
    ),
    collections.defaultdict: _Registration(
        collections.defaultdict,
        _flatten_defaultdict,
        lambda aux, ch: collections.defaultdict(aux[0], zip(aux[1], ch)),
        "defaultdict",
    ),
}
_registry_get = _registry.get

# Namedtuple types met so far: type -> _Registration (one per type, so
# registrations can be compared by identity).
_namedtuple_registrations = {}

# The same types by name, for readers of stored structures (Symbol.from_json):
# (module, qualname, fields) -> the type met or registered last under that name.
_namedtuples_by_name = {}


def _namedtuple_registration(cls):
    reg = _namedtuple_registrations.get(cls)
    if reg is None:
        reg = _Registration(
            cls, lambda x: (x, None), lambda aux, ch, _cls=cls: _cls(*ch), "namedtuple"
        )
        _namedtuple_registrations[cls] = reg
        _namedtuples_by_name[_namedtuple_name(cls)] = cls
    return reg


def _namedtuple_name(cls):
    return (cls.__module__, cls.__qualname__, tuple(cls._fields))


def _lookup(x):
    """Registration for node ``x``, or None if ``x`` is a leaf."""
    reg = _registry_get(type(x))
    if reg is None and isinstance(x, tuple) and hasattr(type(x), "_fields"):
        reg = _namedtuple_registration(type(x))
    return reg


# A treedef record is (registration or None for a leaf, aux_data,
# number of children, number of leaves in the subtree, number of nodes in the
# subtree, counting itself). Records are kept in post-order.
_LEAF_RECORD = (None, None, 0, 1, 1)


def register_pytree_node(nodetype, flatten_func, unflatten_func):
    """Registers ``nodetype`` as a pytree node type.

    Args:
      nodetype: the class to register. Dispatch is on the exact type, so
        subclasses must be registered separately.
      flatten_func: ``flatten_func(obj) -> (children, aux_data)`` where
        ``children`` is an iterable of subtrees and ``aux_data`` is hashable
        static data that is compared with ``==`` when treedefs are compared.
      unflatten_func: ``unflatten_func(aux_data, children) -> obj`` where
        ``children`` is a tuple of rebuilt subtrees.

    Raises:
      ValueError: if ``nodetype`` is already registered (builtins included).

    Example:
      >>> class Pair:
      ...     def __init__(self, a, b):
      ...         self.a, self.b = a, b
      >>> register_pytree_node(
      ...     Pair, lambda p: ((p.a, p.b), None), lambda aux, ch: Pair(*ch))
      >>> tree_leaves([Pair(1, 2), 3])
      [1, 2, 3]
    """
    if not isinstance(nodetype, type):
        raise TypeError(f"register_pytree_node expects a class, got {nodetype!r}")
    if nodetype in _registry:
        raise ValueError(f"Duplicate pytree node registration for {nodetype!r}")
    _registry[nodetype] = _Registration(nodetype, flatten_func, unflatten_func, "custom")


def register_pytree_node_class(cls):
    """Class decorator registering ``cls`` through its own methods.

    The class defines ``tree_flatten(self) -> (children, aux_data)`` and a
    classmethod ``tree_unflatten(cls, aux_data, children)``.

    Args:
      cls: the class to register.

    Returns:
      ``cls`` itself, so it can be used as a decorator.

    Example:
      >>> @register_pytree_node_class
      ... class Scaled:
      ...     def __init__(self, value, scale):
      ...         self.value, self.scale = value, scale
      ...     def tree_flatten(self):
      ...         return (self.value,), self.scale
      ...     @classmethod
      ...     def tree_unflatten(cls, scale, children):
      ...         return cls(children[0], scale)
      >>> s = tree_map(lambda x: x + 1, Scaled(10, scale=2))
      >>> (s.value, s.scale)
      (11, 2)
    """
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)
    return cls


def register_namedtuple(cls):
    """Makes a namedtuple class known by name, for structures read back from storage.

    Namedtuples are pytree nodes without registration. This only records the
    class under its module, qualified name and fields, so that
    :func:`lookup_namedtuple` (and through it ``Symbol.from_json``) can rebuild
    a stored structure with the class itself in a process that has not yet
    flattened an instance of it. Readers never import a module a document
    names: a namedtuple that is neither met nor registered comes back as a
    stand-in with the same name and fields.

    Args:
      cls: a namedtuple class (``collections.namedtuple`` or
        ``typing.NamedTuple``).

    Returns:
      ``cls`` itself, so it can be used as a decorator.

    Raises:
      TypeError: if ``cls`` is not a namedtuple class.

    Example:
      >>> Params = collections.namedtuple("Params", "w b")
      >>> register_namedtuple(Params) is Params
      True
      >>> lookup_namedtuple(Params.__module__, "Params", ("w", "b")) is Params
      True
    """
    if not (isinstance(cls, type) and issubclass(cls, tuple)
            and isinstance(getattr(cls, "_fields", None), tuple)):
        raise TypeError(f"register_namedtuple expects a namedtuple class, got {cls!r}")
    _namedtuple_registration(cls)
    _namedtuples_by_name[_namedtuple_name(cls)] = cls
    return cls


def lookup_namedtuple(module, qualname, fields):
    """Returns the namedtuple node type known by this name, or None.

    Known types are those flattened in this process and those passed to
    :func:`register_namedtuple`. Nothing is imported: the lookup is a dict
    lookup on the three strings.

    Args:
      module: the class's ``__module__``.
      qualname: its ``__qualname__``.
      fields: its ``_fields`` (a tuple or list of strings).

    Returns:
      The class, or None if no known namedtuple has this module, name and
      fields.

    Example:
      >>> lookup_namedtuple("no.such.module", "Point", ("x", "y")) is None
      True
    """
    try:
        return _namedtuples_by_name.get((module, qualname, tuple(fields)))
    except TypeError:   # unhashable parts: no such type
        return None


# --------------------------------------------------------------------------
# Flattening.


def _flatten_node(node, reg, leaves, records, _get=_registry_get, _leaf=_LEAF_RECORD):
    # Flattens a node known to be a pytree node (reg is its registration).
    children, aux = reg.flatten(node)
    nl0 = len(leaves)
    nr0 = len(records)
    n = 0
    for c in children:
        n += 1
        r = _get(type(c))
        if r is None:
            if isinstance(c, tuple) and hasattr(type(c), "_fields"):
                r = _namedtuple_registration(type(c))
            else:
                leaves.append(c)
                records.append(_leaf)
                continue
        _flatten_node(c, r, leaves, records)
    records.append((reg, aux, n, len(leaves) - nl0, len(records) - nr0 + 1))


def _flatten_node_is_leaf(node, reg, leaves, records, is_leaf):
    # Same as _flatten_node, but asks is_leaf about every child first.
    children, aux = reg.flatten(node)
    nl0 = len(leaves)
    nr0 = len(records)
    n = 0
    for c in children:
        n += 1
        r = None if is_leaf(c) else _lookup(c)
        if r is None:
            leaves.append(c)
            records.append(_LEAF_RECORD)
        else:
            _flatten_node_is_leaf(c, r, leaves, records, is_leaf)
    records.append((reg, aux, n, len(leaves) - nl0, len(records) - nr0 + 1))


def tree_flatten(tree, is_leaf=None):
    """Flattens a pytree into a list of leaves and a treedef.

    Args:
      tree: the pytree to flatten.
      is_leaf: optional predicate; a subtree for which it returns True is
        treated as a leaf (it is called on every node, the root included).

    Returns:
      A pair ``(leaves, treedef)``: the leaves in order (dict values in
      sorted-key order) and the :class:`PyTreeDef` of the structure.

    Example:
      >>> leaves, treedef = tree_flatten((1, {'b': 2, 'a': [3, None]}))
      >>> leaves
      [1, 3, 2]
      >>> treedef
      PyTreeDef((*, {'a': [*, None], 'b': *}))
    """
    leaves = []
    if is_leaf is None:
        reg = _lookup(tree)
        if reg is None:
            return [tree], _LEAF_TREEDEF
        records = []
        _flatten_node(tree, reg, leaves, records)
    else:
        reg = None if is_leaf(tree) else _lookup(tree)
        if reg is None:
            return [tree], _LEAF_TREEDEF
        records = []
        _flatten_node_is_leaf(tree, reg, leaves, records, is_leaf)
    return leaves, PyTreeDef._make(tuple(records))


def tree_unflatten(treedef, leaves):
    """Rebuilds a pytree from a treedef and its leaves.

    Args:
      treedef: a :class:`PyTreeDef`, e.g. from :func:`tree_flatten`.
      leaves: an iterable of exactly ``treedef.num_leaves`` leaves.

    Returns:
      The rebuilt pytree.

    Raises:
      ValueError: if the number of leaves does not match the treedef.

    Example:
      >>> treedef = tree_structure({'x': 0, 'y': (0, 0)})
      >>> tree_unflatten(treedef, [1, 2, 3])
      {'x': 1, 'y': (2, 3)}
    """
    return treedef.unflatten(leaves)


def tree_leaves(tree, is_leaf=None):
    """Returns the leaves of a pytree in flattening order.

    Args:
      tree: the pytree.
      is_leaf: optional predicate marking subtrees to treat as leaves.

    Returns:
      The list of leaves. ``None`` is an empty node, so it contributes none.

    Example:
      >>> tree_leaves([None, 1, {'b': 3, 'a': 2}])
      [1, 2, 3]
    """
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree, is_leaf=None):
    """Returns the :class:`PyTreeDef` of a pytree.

    Args:
      tree: the pytree.
      is_leaf: optional predicate marking subtrees to treat as leaves.

    Returns:
      The treedef describing the structure of ``tree``.

    Example:
      >>> tree_structure([1, (2, 3)])
      PyTreeDef([*, (*, *)])
      >>> tree_structure([1, (2, 3)], is_leaf=lambda x: isinstance(x, tuple))
      PyTreeDef([*, *])
    """
    return tree_flatten(tree, is_leaf)[1]


def treedef_is_leaf(treedef):
    """Tells whether a treedef has a single node, as ``jax.tree_util`` does.

    As in JAX this is ``treedef.num_nodes == 1``, which holds for a leaf and
    also for a childless node such as ``None`` or ``()``.

    Args:
      treedef: a :class:`PyTreeDef`.

    Returns:
      True if the treedef consists of one node.

    Example:
      >>> treedef_is_leaf(tree_structure(1.0))
      True
      >>> treedef_is_leaf(tree_structure([1.0]))
      False
      >>> treedef_is_leaf(tree_structure(None))
      True
    """
    return treedef.num_nodes == 1


def tree_map(f, tree, *rest, is_leaf=None):
    """Applies ``f`` leafwise to one or more pytrees of the same structure.

    Args:
      f: function taking ``1 + len(rest)`` arguments, one leaf per tree.
      tree: the pytree whose structure the result takes.
      *rest: further pytrees. Each must have the structure of ``tree``, or
        have it as a prefix (a subtree standing where ``tree`` has a leaf is
        passed to ``f`` whole), as in JAX.
      is_leaf: optional predicate applied to ``tree`` only.

    Returns:
      A pytree with the structure of ``tree`` whose leaves are
      ``f(x, *ys)`` for the corresponding leaves.

    Raises:
      ValueError: if a tree in ``rest`` does not match; the message names the
        structure of ``tree`` and that of the offending tree.

    Example:
      >>> tree_map(lambda x, y: x + y, {'a': 1, 'b': (2, 3)},
      ...          {'a': 10, 'b': (20, 30)})
      {'a': 11, 'b': (22, 33)}
      >>> tree_map(lambda x: x * 2, [1, None, (2,)])
      [2, None, (4,)]
    """
    leaves, treedef = tree_flatten(tree, is_leaf)
    if not rest:
        return treedef.unflatten([f(x) for x in leaves])
    all_leaves = [leaves]
    for i, r in enumerate(rest, 1):
        try:
            r_leaves, r_treedef = tree_flatten(r)
        except (TypeError, ValueError):
            r_treedef = None
        if r_treedef is None or r_treedef != treedef:
            r_leaves = treedef._flatten_up_to(
                r, what=f"tree_map argument {i} (0 is the first tree)")
        all_leaves.append(r_leaves)
    return treedef.unflatten([f(*xs) for xs in zip(*all_leaves)])


_NO_INITIALIZER = object()


def tree_reduce(function, tree, initializer=_NO_INITIALIZER, is_leaf=None):
    """Reduces the leaves of a pytree with ``functools.reduce``.

    Args:
      function: binary function ``(accumulated, leaf) -> accumulated``.
      tree: the pytree.
      initializer: optional starting value.
      is_leaf: optional predicate marking subtrees to treat as leaves.

    Returns:
      The reduced value.

    Raises:
      TypeError: if the tree has no leaves and no initializer was given.

    Example:
      >>> import operator
      >>> tree_reduce(operator.add, [1, (2, 3), {'a': 4}])
      10
      >>> tree_reduce(operator.add, [], initializer=0)
      0
    """
    leaves = tree_leaves(tree, is_leaf)
    if initializer is _NO_INITIALIZER:
        return functools.reduce(function, leaves)
    return functools.reduce(function, leaves, initializer)


def tree_all(tree, *, is_leaf=None):
    """Tells whether every leaf of a pytree is truthy.

    Args:
      tree: the pytree.
      is_leaf: optional predicate marking subtrees to treat as leaves.

    Returns:
      ``all(tree_leaves(tree))``; True for a tree with no leaves.

    Example:
      >>> tree_all([True, (1, {'a': 'yes'})])
      True
      >>> tree_all([True, (0,)])
      False
      >>> tree_all([None, ()])
      True
    """
    return all(tree_leaves(tree, is_leaf))


# --------------------------------------------------------------------------
# Treedefs.


class _Mismatch(Exception):
    pass


def _child_ends(records, end):
    """Indices of the last record of each child of the node at ``end``."""
    n = records[end][2]
    ends = []
    pos = end - 1
    for _ in range(n):
        ends.append(pos)
        pos -= records[pos][4]
    ends.reverse()
    return ends


def _format_node(reg, aux, children):
    kind = reg.kind
    if kind == "tuple":
        if len(children) == 1:
            return f"({children[0]},)"
        return "(" + ", ".join(children) + ")"
    if kind == "list":
        return "[" + ", ".join(children) + "]"
    if kind == "dict":
        return "{" + ", ".join(f"{k!r}: {c}" for k, c in zip(aux, children)) + "}"
    if kind == "none":
        return "None"
    if kind == "namedtuple":
        fields = reg.type._fields
        inner = ", ".join(f"{k}={c}" for k, c in zip(fields, children))
        return f"{reg.type.__name__}({inner})"
    if kind == "ordereddict":
        inner = ", ".join(f"{k!r}: {c}" for k, c in zip(aux, children))
        return "OrderedDict({" + inner + "})"
    if kind == "defaultdict":
        inner = ", ".join(f"{k!r}: {c}" for k, c in zip(aux[1], children))
        return f"defaultdict({aux[0]!r}, {{{inner}}})"
    return f"CustomNode({reg.type.__name__}[{aux!r}], [{', '.join(children)}])"


class PyTreeDef:
    """Immutable, hashable description of a pytree's structure.

    Obtain one from :func:`tree_flatten` or :func:`tree_structure`; do not
    construct it directly. Two treedefs are equal when they have the same
    node types, the same aux data (dict keys, namedtuple types, custom
    ``aux_data``) and the same shape. The hash is computed once and cached.

    Attributes:
      num_leaves: number of leaves.
      num_nodes: number of nodes, leaves and ``None`` included.

    Example:
      >>> td = tree_structure((1, {'a': 2, 'b': [3, 4]}))
      >>> td
      PyTreeDef((*, {'a': *, 'b': [*, *]}))
      >>> td.num_leaves
      4
      >>> td == tree_structure((0, {'b': [0, 0], 'a': 0}))
      True
      >>> td.unflatten([5, 6, 7, 8])
      (5, {'a': 6, 'b': [7, 8]})
    """

    __slots__ = ("_records", "_hash")

    def __init__(self, *args, **kwargs):
        raise TypeError(
            "PyTreeDef cannot be constructed directly; use tree_structure()")

    @classmethod
    def _make(cls, records, _new=object.__new__):
        self = _new(cls)
        _set_records(self, records)
        return self

    def __setattr__(self, name, value):
        raise AttributeError("PyTreeDef is immutable")

    def __delattr__(self, name):
        raise AttributeError("PyTreeDef is immutable")

    @property
    def num_leaves(self):
        return self._records[-1][3]

    @property
    def num_nodes(self):
        return len(self._records)

    def __eq__(self, other):
        if self is other:
            return True
        if not isinstance(other, PyTreeDef):
            return NotImplemented
        return self._records == other._records

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self):
        try:
            return self._hash
        except AttributeError:
            pass
        records = self._records
        try:
            h = hash(records)
        except TypeError:
            # Unhashable custom aux_data: hash the shape only (equal
            # treedefs still hash equal; == compares the aux data).
            h = hash(tuple((r[0], r[2]) for r in records))
        _set_hash(self, h)
        return h

    def __repr__(self):
        stack = []
        for reg, aux, n, _, _ in self._records:
            if reg is None:
                stack.append("*")
                continue
            if n:
                children = stack[-n:]
                del stack[-n:]
            else:
                children = []
            stack.append(_format_node(reg, aux, children))
        return f"PyTreeDef({stack[0]})"

    def __reduce__(self):
        raise TypeError("PyTreeDef objects cannot be pickled")

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def unflatten(self, leaves):
        """Rebuilds a pytree of this structure from ``leaves``.

        Args:
          leaves: an iterable of exactly ``num_leaves`` leaves.

        Returns:
          The rebuilt pytree.

        Raises:
          ValueError: if the number of leaves is wrong.

        Example:
          >>> tree_structure([0, (0, None)]).unflatten('ab')
          ['a', ('b', None)]
        """
        if not isinstance(leaves, (list, tuple)):
            leaves = list(leaves)
        records = self._records
        expected = records[-1][3]
        if len(leaves) != expected:
            raise ValueError(
                f"Too {'few' if len(leaves) < expected else 'many'} leaves for "
                f"{self!r}: expected {expected} leaves, got {len(leaves)}")
        if records[-1][0] is None:  # the whole tree is a leaf
            return leaves[0]
        stack = []
        push = stack.append
        it = iter(leaves)
        for reg, aux, n, _, _ in records:
            if reg is None:
                push(next(it))
            elif n:
                children = tuple(stack[-n:])
                del stack[-n:]
                push(reg.unflatten(aux, children))
            else:
                push(reg.unflatten(aux, ()))
        return stack[0]

    def children(self):
        """Returns the treedefs of the root's children, in order.

        Returns:
          A list of :class:`PyTreeDef`; empty for a leaf or ``None``.

        Example:
          >>> tree_structure((1, [2, 3], None)).children()
          [PyTreeDef(*), PyTreeDef([*, *]), PyTreeDef(None)]
        """
        records = self._records
        out = []
        for end in _child_ends(records, len(records) - 1):
            start = end - records[end][4] + 1
            out.append(PyTreeDef._make(records[start:end + 1]))
        return out

    def flatten_up_to(self, tree):
        """Flattens ``tree`` only as deep as this treedef goes.

        Where this treedef has a leaf, the corresponding subtree of ``tree``
        is returned whole.

        Args:
          tree: a pytree that has this treedef as a prefix.

        Returns:
          A list of ``num_leaves`` subtrees of ``tree``.

        Raises:
          ValueError: if ``tree`` does not have this structure as a prefix.

        Example:
          >>> tree_structure([0, 0]).flatten_up_to([(1, 2), {'a': 3}])
          [(1, 2), {'a': 3}]
        """
        return self._flatten_up_to(tree, what="the tree")

    def _flatten_up_to(self, tree, what):
        out = []
        records = self._records
        try:
            _up_to(records, len(records) - 1, tree, out, ())
        except _Mismatch as e:
            try:
                got = repr(tree_structure(tree))
            except Exception:  # e.g. unsortable dict keys
                got = f"<unflattenable {type(tree).__name__}>"
            raise ValueError(
                f"Pytree structure mismatch: {what} has structure {got}, "
                f"which does not match the expected structure {self!r}: "
                f"{e.args[0]}") from None
        return out


def _path_str(path):
    return "".join(f"[{p!r}]" for p in path) or "the root"


def _up_to(records, end, x, out, path):
    reg, aux, n, _, _ = records[end]
    if reg is None:
        out.append(x)
        return
    actual = _lookup(x)
    if actual is not reg:
        raise _Mismatch(
            f"at {_path_str(path)}: expected a {reg.type.__name__} node, got "
            f"{type(x).__name__} {'node' if actual is not None else 'leaf'}")
    children, x_aux = reg.flatten(x)
    children = list(children)
    if not (x_aux is aux or x_aux == aux):
        raise _Mismatch(
            f"at {_path_str(path)}: node data differ: expected {aux!r}, "
            f"got {x_aux!r}")
    if len(children) != n:
        raise _Mismatch(
            f"at {_path_str(path)}: expected {n} children, got {len(children)}")
    if reg.kind == "dict" or reg.kind == "ordereddict":
        keys = aux
    elif reg.kind == "defaultdict":
        keys = aux[1]
    else:
        keys = range(n)
    for k, c, e in zip(keys, children, _child_ends(records, end)):
        _up_to(records, e, c, out, path + (k,))


_set_records = PyTreeDef._records.__set__
_set_hash = PyTreeDef._hash.__set__
_LEAF_TREEDEF = PyTreeDef._make((_LEAF_RECORD,))
