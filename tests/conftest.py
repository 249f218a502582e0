"""Shared pytest setup: ``tests/op_cases.py`` (the OpCase table) is importable as ``op_cases``
from every test file, whatever pytest's import mode."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
