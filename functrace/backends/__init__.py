"""Backends: run a Graph. ``numpy_ref`` is the living definition of every op; compiled
backends (numba CPU, CUDA) are checked against it. Imports ops/passes, never the API layer."""
