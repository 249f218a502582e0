"""functrace.scipy: scipy's API, traceable and differentiable (like jax.scipy).

Each submodule is imported explicitly (``import functrace.scipy.integrate``), so importing
functrace stays cheap. Layer: may import api, control and numpy, never be imported by them.
"""
