"""Tests for functrace.tree_util (pytree flatten/unflatten and registry)."""

import collections
import copy
import doctest
import operator

import numpy as np
import pytest

from functrace import tree_util
from functrace.tree_util import (
    PyTreeDef,
    register_pytree_node,
    register_pytree_node_class,
    tree_all,
    tree_flatten,
    tree_leaves,
    tree_map,
    tree_reduce,
    tree_structure,
    tree_unflatten,
    treedef_is_leaf,
)

Point = collections.namedtuple("Point", ["x", "y"])
Other = collections.namedtuple("Other", ["x", "y"])


class Box:
    """Registered through register_pytree_node; `label` is aux data."""

    def __init__(self, label, a, b):
        self.label, self.a, self.b = label, a, b

    def __eq__(self, other):
        return (type(other) is Box and self.label == other.label
                and self.a == other.a and self.b == other.b)

    def __repr__(self):
        return f"Box({self.label!r}, {self.a!r}, {self.b!r})"


register_pytree_node(
    Box,
    lambda box: ((box.a, box.b), box.label),
    lambda label, children: Box(label, *children),
)


@register_pytree_node_class
class Scaled:
    def __init__(self, value, scale):
        self.value, self.scale = value, scale

    def tree_flatten(self):
        return [self.value], self.scale

    @classmethod
    def tree_unflatten(cls, scale, children):
        (value,) = children
        return cls(value, scale)


class Opaque:
    """Not registered: a leaf."""


# ---------------------------------------------------------------- doctests


def test_doctests():
    result = doctest.testmod(tree_util, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 20
    assert result.failed == 0


def test_module_docstring_and_no_functrace_imports():
    assert tree_util.__doc__.startswith("Pytree flattening and unflattening")
    with open(tree_util.__file__) as f:
        src = f.read()
    assert "from functrace" not in src
    assert "import functrace" not in src
    assert "jax" not in [line.split()[1] for line in src.splitlines()
                         if line.startswith("import ")]


# ------------------------------------------------------------- round trips


def test_round_trip_nested_mixture():
    arr = np.arange(3.0)
    tree = (1, [2.5, {"b": arr, "a": (None, "s")}], Point(3, [4]),
            collections.OrderedDict([("z", 5), ("y", 6)]), Box("k", 7, (8,)))
    leaves, treedef = tree_flatten(tree)
    assert leaves[:3] == [1, 2.5, "s"]
    assert leaves[3] is arr
    assert leaves[4:] == [3, 4, 5, 6, 7, 8]
    assert treedef.num_leaves == 10
    rebuilt = tree_unflatten(treedef, leaves)
    assert type(rebuilt) is tuple and len(rebuilt) == 5
    assert rebuilt[0] == 1
    assert rebuilt[1][0] == 2.5
    assert rebuilt[1][1]["a"] == (None, "s")
    assert rebuilt[1][1]["b"] is arr
    assert rebuilt[2] == Point(3, [4]) and type(rebuilt[2]) is Point
    assert rebuilt[3] == collections.OrderedDict([("z", 5), ("y", 6)])
    assert rebuilt[4] == Box("k", 7, (8,))
    assert tree_structure(rebuilt) == treedef


def test_leaf_tree():
    arr = np.zeros((2, 2))
    leaves, treedef = tree_flatten(arr)
    assert len(leaves) == 1 and leaves[0] is arr
    assert treedef.num_leaves == 1 and treedef.num_nodes == 1
    assert repr(treedef) == "PyTreeDef(*)"
    assert tree_unflatten(treedef, ["x"]) == "x"
    for leaf in (3, 2.0, "str", b"b", Opaque(), np.float32(1), {1, 2}):
        assert tree_leaves(leaf) == [leaf]
        assert tree_structure(leaf) == treedef


def test_list_and_dict_subclasses_are_leaves():
    class MyList(list):
        pass

    class MyDict(dict):
        pass

    assert tree_leaves([MyList([1, 2]), MyDict(a=1)]) == [[1, 2], {"a": 1}]


def test_empty_containers():
    for tree in ((), [], {}, None, collections.OrderedDict()):
        leaves, treedef = tree_flatten(tree)
        assert leaves == []
        assert treedef.num_leaves == 0
        assert tree_unflatten(treedef, []) == tree
        assert type(tree_unflatten(treedef, [])) is type(tree)
    assert tree_structure(()) != tree_structure([])
    assert tree_structure({}) != tree_structure(None)


# ------------------------------------------------------------------- None


def test_none_is_empty_node():
    assert tree_leaves([None, 1]) == [1]
    assert tree_leaves(None) == []
    leaves, treedef = tree_flatten({"a": None, "b": (None, 2)})
    assert leaves == [2]
    assert repr(treedef) == "PyTreeDef({'a': None, 'b': (None, *)})"
    assert tree_unflatten(treedef, [9]) == {"a": None, "b": (None, 9)}
    assert tree_structure([None, 1]) != tree_structure([1, 1])
    assert tree_map(lambda x: x + 1, [None, 1, (None,)]) == [None, 2, (None,)]


def test_none_as_leaf_with_is_leaf():
    leaves, treedef = tree_flatten([None, 1], is_leaf=lambda x: x is None)
    assert leaves == [None, 1]
    assert treedef.num_leaves == 2
    assert tree_unflatten(treedef, ["a", "b"]) == ["a", "b"]


# ------------------------------------------------------------------- dicts


def test_dict_keys_sorted():
    tree = {"b": 2, "c": 3, "a": 1}
    leaves, treedef = tree_flatten(tree)
    assert leaves == [1, 2, 3]
    rebuilt = tree_unflatten(treedef, [10, 20, 30])
    assert rebuilt == {"a": 10, "b": 20, "c": 30}
    assert list(rebuilt) == ["a", "b", "c"]
    assert tree_structure({"a": 0, "b": 0, "c": 0}) == treedef
    assert tree_structure({"a": 0, "b": 0, "d": 0}) != treedef
    assert tree_leaves({2: "two", 1: "one", 3: "three"}) == ["one", "two", "three"]


def test_unsortable_dict_keys_raise():
    with pytest.raises(ValueError, match="sortable"):
        tree_flatten({1: "a", "b": 2})


def test_defaultdict_keeps_factory():
    tree = collections.defaultdict(list, {"b": 2, "a": 1})
    leaves, treedef = tree_flatten(tree)
    assert leaves == [1, 2]
    rebuilt = tree_unflatten(treedef, [5, 6])
    assert type(rebuilt) is collections.defaultdict
    assert rebuilt.default_factory is list
    assert dict(rebuilt) == {"a": 5, "b": 6}
    assert treedef != tree_structure({"a": 1, "b": 2})


# -------------------------------------------------------------- namedtuple


def test_namedtuple_type_preserved():
    tree = Point(x=np.float64(1.0), y=(2, 3))
    leaves, treedef = tree_flatten(tree)
    assert leaves == [1.0, 2, 3]
    rebuilt = tree_unflatten(treedef, [7, 8, 9])
    assert type(rebuilt) is Point
    assert rebuilt == Point(7, (8, 9))
    assert repr(treedef) == "PyTreeDef(Point(x=*, y=(*, *)))"
    mapped = tree_map(lambda v: v * 2, Point(1, 2))
    assert type(mapped) is Point and mapped == Point(2, 4)


def test_namedtuple_distinct_from_tuple_and_other_namedtuple():
    assert tree_structure(Point(1, 2)) != tree_structure((1, 2))
    assert tree_structure(Point(1, 2)) != tree_structure(Other(1, 2))
    assert tree_structure(Point(1, 2)) == tree_structure(Point("a", "b"))


def test_typing_namedtuple():
    from typing import NamedTuple

    class Pair(NamedTuple):
        first: int
        second: int

    rebuilt = tree_map(str, Pair(1, 2))
    assert type(rebuilt) is Pair and rebuilt == Pair("1", "2")


# ------------------------------------------------------------- OrderedDict


def test_ordereddict_keeps_insertion_order():
    tree = collections.OrderedDict([("b", 1), ("a", 2)])
    leaves, treedef = tree_flatten(tree)
    assert leaves == [1, 2]
    rebuilt = tree_unflatten(treedef, [3, 4])
    assert type(rebuilt) is collections.OrderedDict
    assert list(rebuilt.items()) == [("b", 3), ("a", 4)]
    assert repr(treedef) == "PyTreeDef(OrderedDict({'b': *, 'a': *}))"
    other_order = collections.OrderedDict([("a", 1), ("b", 2)])
    assert tree_structure(other_order) != treedef
    assert tree_structure({"b": 1, "a": 2}) != treedef


# ------------------------------------------------------- registered classes


def test_registered_class_round_trip():
    tree = [Box("lbl", 1, {"q": 2}), 3]
    leaves, treedef = tree_flatten(tree)
    assert leaves == [1, 2, 3]
    assert treedef.num_leaves == 3
    rebuilt = tree_unflatten(treedef, ["x", "y", "z"])
    assert rebuilt == [Box("lbl", "x", {"q": "y"}), "z"]
    assert repr(treedef) == "PyTreeDef([CustomNode(Box['lbl'], [*, {'q': *}]), *])"


def test_registered_class_aux_data_in_equality():
    assert tree_structure(Box("a", 1, 2)) == tree_structure(Box("a", 3, 4))
    assert tree_structure(Box("a", 1, 2)) != tree_structure(Box("b", 1, 2))


def test_register_pytree_node_class_decorator():
    s = Scaled(np.array([1.0, 2.0]), scale=3)
    leaves, treedef = tree_flatten(s)
    assert len(leaves) == 1
    np.testing.assert_array_equal(leaves[0], [1.0, 2.0])
    out = tree_map(lambda v: v + 1, s)
    assert isinstance(out, Scaled) and out.scale == 3
    np.testing.assert_array_equal(out.value, [2.0, 3.0])
    assert tree_structure(Scaled(0, 3)) != tree_structure(Scaled(0, 4))


def test_duplicate_registration_raises():
    with pytest.raises(ValueError, match="Duplicate"):
        register_pytree_node(Box, lambda b: ((), None), lambda a, c: None)
    with pytest.raises(ValueError):
        register_pytree_node(tuple, lambda b: ((), None), lambda a, c: None)


def test_registration_is_exact_type():
    class SubBox(Box):
        pass

    assert tree_leaves(SubBox("l", 1, 2)) != [1, 2]
    assert len(tree_leaves(SubBox("l", 1, 2))) == 1


def test_unhashable_aux_data_still_hashable_treedef():
    class ListAux:
        def __init__(self, meta, v):
            self.meta, self.v = meta, v

    register_pytree_node(ListAux, lambda o: ((o.v,), list(o.meta)),
                         lambda aux, ch: ListAux(aux, ch[0]))
    t1 = tree_structure(ListAux([1, 2], 0))
    t2 = tree_structure(ListAux([1, 2], 5))
    t3 = tree_structure(ListAux([1, 3], 5))
    assert t1 == t2 and hash(t1) == hash(t2)
    assert t1 != t3


# ----------------------------------------------------------------- treedefs


def test_treedef_equality_and_hash():
    t1 = tree_structure((1, {"a": 2, "b": [3, 4]}))
    t2 = tree_structure(("x", {"b": [np.ones(2), 0], "a": 0}))
    assert t1 == t2
    assert not (t1 != t2)
    assert hash(t1) == hash(t2)
    assert hash(t1) == hash(t1)  # cached value, stable
    different = [
        tree_structure((1, {"a": 2, "b": [3]})),
        tree_structure((1, {"a": 2, "c": [3, 4]})),
        tree_structure([1, {"a": 2, "b": [3, 4]}]),
        tree_structure((1, {"a": 2, "b": (3, 4)})),
        tree_structure((1, {"a": None, "b": [3, 4]})),
        tree_structure((1, {"a": (2,), "b": [3, 4]})),
    ]
    for d in different:
        assert d != t1
        assert not (d == t1)
    assert t1 != "PyTreeDef"
    assert t1 != None  # noqa: E711


def test_treedef_as_dict_key():
    cache = {}
    cache[tree_structure((1, 2))] = "pair"
    cache[tree_structure([1, 2])] = "list"
    cache[tree_structure({"a": 1})] = "dict"
    assert cache[tree_structure((np.ones(3), "x"))] == "pair"
    assert cache[tree_structure([0, 0])] == "list"
    assert cache[tree_structure({"a": [0]}, is_leaf=lambda x: isinstance(x, list))] == "dict"
    assert tree_structure((1, 2, 3)) not in cache
    assert len({tree_structure((i, i)) for i in range(10)}) == 1


def test_treedef_immutable_and_not_constructible():
    td = tree_structure([1, 2])
    with pytest.raises(AttributeError):
        td.num_leaves = 5
    with pytest.raises(AttributeError):
        td._records = ()
    with pytest.raises(TypeError):
        PyTreeDef()
    assert copy.copy(td) is td and copy.deepcopy(td) is td


def test_treedef_repr():
    assert repr(tree_structure((1, {"a": 2, "b": [3, 4]}))) == \
        "PyTreeDef((*, {'a': *, 'b': [*, *]}))"
    assert repr(tree_structure((1,))) == "PyTreeDef((*,))"
    assert repr(tree_structure(())) == "PyTreeDef(())"
    assert repr(tree_structure(None)) == "PyTreeDef(None)"
    assert repr(tree_structure({1: 0, 2: [None]})) == "PyTreeDef({1: *, 2: [None]})"


def test_treedef_num_leaves_and_nodes():
    td = tree_structure([1, (2, None), {"a": 3}])
    assert td.num_leaves == 3
    assert td.num_nodes == 7  # list, 1, tuple, 2, None, dict, 3


def test_treedef_children():
    td = tree_structure((1, [2, 3], None, {"a": (4,)}))
    kids = td.children()
    assert kids == [tree_structure(0), tree_structure([0, 0]),
                    tree_structure(None), tree_structure({"a": (0,)})]
    assert [k.num_leaves for k in kids] == [1, 2, 0, 1]
    assert tree_structure(5).children() == []


def test_treedef_unflatten_method_and_iterables():
    td = tree_structure({"a": [0, 0], "b": 0})
    assert td.unflatten([1, 2, 3]) == {"a": [1, 2], "b": 3}
    assert td.unflatten(iter([1, 2, 3])) == {"a": [1, 2], "b": 3}
    assert td.unflatten(x for x in "xyz") == {"a": ["x", "y"], "b": "z"}


def test_treedef_is_leaf():
    assert treedef_is_leaf(tree_structure(np.ones(2)))
    assert treedef_is_leaf(tree_structure(1))
    assert not treedef_is_leaf(tree_structure([1]))
    assert not treedef_is_leaf(tree_structure((1, 2)))
    # JAX semantics: num_nodes == 1, so childless nodes count too.
    assert treedef_is_leaf(tree_structure(None))
    assert treedef_is_leaf(tree_structure(()))


# ------------------------------------------------------------ leaf count


def test_wrong_leaf_count_raises():
    td = tree_structure((1, [2, 3]))
    with pytest.raises(ValueError, match="expected 3 leaves, got 2"):
        tree_unflatten(td, [1, 2])
    with pytest.raises(ValueError, match="expected 3 leaves, got 4"):
        td.unflatten([1, 2, 3, 4])
    with pytest.raises(ValueError, match="expected 1 leaves, got 0"):
        tree_unflatten(tree_structure(1), [])
    with pytest.raises(ValueError, match="expected 0 leaves, got 1"):
        tree_unflatten(tree_structure(None), [1])


# ---------------------------------------------------------------- is_leaf


def test_is_leaf():
    tree = [(1, 2), [3, (4, 5)], {"a": (6,)}]
    is_tuple = lambda x: isinstance(x, tuple)  # noqa: E731
    leaves, treedef = tree_flatten(tree, is_leaf=is_tuple)
    assert leaves == [(1, 2), 3, (4, 5), (6,)]
    assert treedef == tree_structure([0, [0, 0], {"a": 0}])
    assert tree_unflatten(treedef, leaves) == tree
    assert tree_leaves(tree, is_leaf=is_tuple) == leaves
    # is_leaf is consulted on the root too.
    assert tree_leaves((1, 2), is_leaf=is_tuple) == [(1, 2)]
    sizes = tree_map(lambda t: len(t) if isinstance(t, tuple) else -t, tree, is_leaf=is_tuple)
    assert sizes == [2, [-3, 2], {"a": 1}]
    # Registered and namedtuple nodes can be turned into leaves.
    box = Box("l", 1, 2)
    assert tree_leaves([box, Point(1, 2)],
                       is_leaf=lambda x: isinstance(x, (Box, Point))) == [box, Point(1, 2)]


# ---------------------------------------------------------------- tree_map


def test_tree_map_single_tree():
    arr = np.array([1.0, 2.0])
    out = tree_map(lambda x: x * 2, {"w": arr, "b": (3, None)})
    np.testing.assert_array_equal(out["w"], [2.0, 4.0])
    assert out["b"] == (6, None)


def test_tree_map_several_trees():
    t1 = {"a": 1, "b": [2, Point(3, 4)]}
    t2 = {"b": [20, Point(30, 40)], "a": 10}
    t3 = {"a": 100, "b": [200, Point(300, 400)]}
    out = tree_map(lambda x, y, z: x + y + z, t1, t2, t3)
    assert out == {"a": 111, "b": [222, Point(333, 444)]}
    assert type(out["b"][1]) is Point


def test_tree_map_with_numpy_arrays():
    xs = (np.ones(3), np.arange(3.0))
    ys = (np.full(3, 2.0), np.ones(3))
    out = tree_map(np.add, xs, ys)
    np.testing.assert_array_equal(out[0], [3.0, 3.0, 3.0])
    np.testing.assert_array_equal(out[1], [1.0, 2.0, 3.0])


def test_tree_map_prefix_structure():
    # As in JAX, later trees may hold a subtree where the first has a leaf.
    out = tree_map(lambda x, y: (x, y), [1, 2], [(3, 4), {"k": 5}])
    assert out == [(1, (3, 4)), (2, {"k": 5})]
    out = tree_map(lambda x, y: y, [1, 2], [None, 5])
    assert out == [None, 5]


def test_tree_map_mismatch_error():
    with pytest.raises(ValueError) as excinfo:
        tree_map(lambda x, y: x + y, (1, [2, 3]), (1, [2]))
    msg = str(excinfo.value)
    assert "PyTreeDef((*, [*, *]))" in msg  # structure of the first tree
    assert "PyTreeDef((*, [*]))" in msg  # structure of the other tree
    assert "argument 1" in msg


def test_tree_map_mismatch_error_node_types():
    with pytest.raises(ValueError, match=r"PyTreeDef\(\(\*, \*\)\).*PyTreeDef\(\[\*, \*\]\)"
                       r"|PyTreeDef\(\[\*, \*\]\).*PyTreeDef\(\(\*, \*\)\)"):
        tree_map(lambda x, y: x, (1, 2), [1, 2])
    with pytest.raises(ValueError, match="'c'"):
        tree_map(lambda x, y: x, {"a": 1, "b": 2}, {"a": 1, "c": 2})
    with pytest.raises(ValueError, match="argument 2"):
        tree_map(lambda x, y, z: x, [1], [2], [3, 4])
    with pytest.raises(ValueError):
        tree_map(lambda x, y: x, Point(1, 2), (1, 2))
    with pytest.raises(ValueError):
        tree_map(lambda x, y: x, [None], [1])
    with pytest.raises(ValueError):
        tree_map(lambda x, y: x, Box("a", 1, 2), Box("b", 1, 2))


def test_flatten_up_to():
    td = tree_structure({"a": 0, "b": [0, 0]})
    assert td.flatten_up_to({"b": [(1,), 2], "a": {"x": 3}}) == [{"x": 3}, (1,), 2]
    with pytest.raises(ValueError, match="expected 2 children, got 3"):
        td.flatten_up_to({"a": 0, "b": [0, 0, 0]})


# ------------------------------------------------------- reduce / all


def test_tree_reduce():
    tree = [1, (2, {"a": 3, "b": None}), Point(4, 5)]
    assert tree_reduce(operator.add, tree) == 15
    assert tree_reduce(operator.add, tree, 100) == 115
    assert tree_reduce(operator.add, [], initializer=7) == 7
    assert tree_reduce(lambda acc, x: acc + [x], {"b": 2, "a": 1}, []) == [1, 2]
    with pytest.raises(TypeError):
        tree_reduce(operator.add, [None])


def test_tree_all():
    assert tree_all([1, (True, "x"), {"a": np.True_}])
    assert not tree_all([1, (True, 0)])
    assert tree_all([])
    assert tree_all(None)
    assert tree_all([(0,), 1], is_leaf=lambda x: isinstance(x, tuple))
    assert not tree_all([(0,), 1])
