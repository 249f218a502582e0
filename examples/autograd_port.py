"""What the examples ported from autograd share: their own file with autograd's imports put
back, run as a second module, so each can check that autograd computes what functrace does.

A ported example keeps a table ``IMPORTS`` of its import lines and autograd's (the only lines
of the program that differ) and defines ``autograd_version()`` as
``with_imports(__file__, IMPORTS)``.

Run:  python examples/autograd_port.py   (checks every ported example's table against its file)
"""

import os


def with_imports(path: str, imports: dict[str, str]):
    """The module at ``path`` run with each line ``imports`` maps replaced by its value, as a
    namespace; None where autograd is not installed."""
    try:
        import autograd  # noqa: F401
    except ImportError:
        return None
    with open(path) as f:
        src = f.read()
    for ours, theirs in imports.items():
        assert ours in src, ours
        src = src.replace(ours, theirs)
    namespace = {"__name__": "autograd_version", "__file__": path}
    exec(compile(src, path, "exec"), namespace)
    return namespace


if __name__ == "__main__":
    import importlib

    here = os.path.dirname(os.path.abspath(__file__))
    ported = sorted(n[:-3] for n in os.listdir(here)
                    if n.endswith(".py") and n != "autograd_port.py"
                    and "with_imports(__file__, IMPORTS)" in open(os.path.join(here, n)).read())
    assert len(ported) >= 8, ported
    for name in ported:
        mod = importlib.import_module(name)
        src = open(mod.__file__).read()
        missing = [line for line in mod.IMPORTS if line not in src]
        assert not missing, (name, missing)
    print(f"{len(ported)} ported examples: every import line they swap is in their file")
