"""Passes: Graph -> Graph rewrites (dce, cse, constant folding, algebraic simplification) and
analyses that return side tables (fusion groups, liveness). Never mutate a node."""
