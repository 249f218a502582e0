"""Shared pytest setup: ``tests/op_cases.py`` (the OpCase table) is importable as ``op_cases``
from every test file, whatever pytest's import mode."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# CI runs the hypothesis tests with a fixed seed (a red CI must be reproducible); local runs
# keep exploring new examples.
if os.environ.get("CI"):
    from hypothesis import settings
    settings.register_profile("ci", derandomize=True)
    settings.load_profile("ci")
