"""The kernel cache (functrace.backends.modfiles) trusts nothing on disk.

Where it lives (FUNCTRACE_CACHE_DIR, XDG_CACHE_HOME, ~/.cache), that it is created 0700 and
refused when another user owns it or others may write to it, that a cached module whose bytes
differ from its source is rewritten (and never run), that writes are atomic and fsync'ed, and
that numba's own cache of our modules (pickled index and machine code) lands in the checked
directory even when NUMBA_CACHE_DIR says otherwise.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
import warnings

import pytest

from functrace.backends import modfiles
from functrace.backends.modfiles import KernelCacheWarning

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def fresh(monkeypatch):
    """modfiles with no directory checked yet (each test sees its own first call)."""
    monkeypatch.setattr(modfiles, "_dirs", {})
    monkeypatch.setattr(modfiles, "_checked", set())
    monkeypatch.setattr(modfiles, "_warned", set())
    monkeypatch.setattr(modfiles, "_private", [])
    return monkeypatch


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


# --------------------------------------------------------------------------------------------
# location and permissions
# --------------------------------------------------------------------------------------------

def test_default_location_follows_xdg_then_home(fresh, tmp_path):
    fresh.delenv("FUNCTRACE_CACHE_DIR", raising=False)
    fresh.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    fresh.setenv("HOME", str(tmp_path / "home"))
    want = tmp_path / "xdg" / "functrace" / "kernels"
    assert modfiles.configured_cache_dir() == str(want)
    assert modfiles.cache_dir() == str(want)
    assert _mode(want) == 0o700 and _mode(want / "__pycache__") == 0o700
    fresh.setenv("XDG_CACHE_HOME", "relative/dir")          # ignored, as the XDG spec says
    assert modfiles.configured_cache_dir() == str(tmp_path / "home" / ".cache" / "functrace"
                                                  / "kernels")
    fresh.delenv("XDG_CACHE_HOME")
    assert modfiles.cache_dir() == str(tmp_path / "home" / ".cache" / "functrace" / "kernels")
    assert _mode(tmp_path / "home" / ".cache" / "functrace" / "kernels") == 0o700


def test_functrace_cache_dir_overrides(fresh, tmp_path):
    fresh.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    fresh.setenv("FUNCTRACE_CACHE_DIR", str(tmp_path / "mine"))
    assert modfiles.cache_dir() == str(tmp_path / "mine")
    assert _mode(tmp_path / "mine") == 0o700
    assert not (tmp_path / "xdg").exists()


def _refused(fresh, path, match):
    fresh.setenv("FUNCTRACE_CACHE_DIR", str(path))
    with pytest.warns(KernelCacheWarning, match=match):
        got = modfiles.cache_dir()
    assert got != str(path)
    st = os.stat(got)
    assert st.st_uid == os.geteuid() and _mode(got) == 0o700
    with warnings.catch_warnings():
        warnings.simplefilter("error")                       # warned once only
        assert modfiles.cache_dir() == got
    return got


@pytest.mark.parametrize("mode", [0o770, 0o720, 0o707, 0o777, 0o1777])
def test_group_or_world_writable_directory_is_refused(fresh, tmp_path, mode):
    d = tmp_path / "shared"
    d.mkdir()
    os.chmod(d, mode)
    _refused(fresh, d, "group- or world-writable")


def test_directory_of_another_user_is_refused(fresh, tmp_path):
    d = tmp_path / "theirs"
    d.mkdir(mode=0o700)
    if os.geteuid() == 0:
        os.chown(d, 54321, 54321)
    else:                               # cannot chown: pretend to be someone else
        fresh.setattr(modfiles.os, "geteuid", lambda: os.stat(d).st_uid + 1)
    _refused(fresh, d, "belongs to another user")


def test_writable_pycache_is_refused(fresh, tmp_path):
    d = tmp_path / "k"
    (d / "__pycache__").mkdir(parents=True, mode=0o700)
    os.chmod(d, 0o700)
    os.chmod(d / "__pycache__", 0o777)
    _refused(fresh, d, "__pycache__")


def test_a_file_in_place_of_the_directory_is_refused(fresh, tmp_path):
    (tmp_path / "afile").write_text("x")
    _refused(fresh, tmp_path / "afile", "cannot be used")


def test_refused_directory_is_not_written_and_kernels_still_load(fresh, tmp_path):
    d = tmp_path / "shared"
    d.mkdir()
    os.chmod(d, 0o777)
    fresh.setenv("FUNCTRACE_CACHE_DIR", str(d))
    with pytest.warns(KernelCacheWarning):
        mod = modfiles.load_source_module("ft_test_pkg", "ftt_", "refused1",
                                          "def kernel(x):\n    return 2 * x\n")
    assert mod.kernel(21) == 42
    assert os.listdir(d) == []
    assert os.path.dirname(mod.__file__) == modfiles.cache_dir() != str(d)
    sys.modules.pop("ft_test_pkg.ftt_refused1", None)


def test_an_existing_private_directory_is_kept_as_it_is(fresh, tmp_path):
    d = tmp_path / "k"
    d.mkdir()
    os.chmod(d, 0o755)                       # readable by others, writable by us alone
    fresh.setenv("FUNCTRACE_CACHE_DIR", str(d))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert modfiles.cache_dir() == str(d)
    assert _mode(d) == 0o755


# --------------------------------------------------------------------------------------------
# contents: verified against the source in hand, written atomically
# --------------------------------------------------------------------------------------------

SOURCE = "def kernel(x):\n    return x * 2.0\n"


def _load(key, source=SOURCE):
    name = f"ft_test_pkg.ftt_{key}"
    sys.modules.pop(name, None)          # a new process has no module in memory
    try:
        return modfiles.load_source_module("ft_test_pkg", "ftt_", key, source)
    finally:
        sys.modules.pop(name, None)


@pytest.mark.parametrize("damage", [
    lambda s: s.replace("2.0", "3.0"),                    # same size, wrong numbers
    lambda s: s[: len(s) // 2],                           # truncated: a syntax error
    lambda s: "",                                         # emptied
    lambda s: s + "kernel = lambda x: -1\n",              # a rebinding appended
    lambda s: "import os\nos._exit(3)\n",                 # code that must never run
])
def test_a_damaged_module_is_rewritten_and_never_run(fresh, tmp_path, damage, caplog):
    fresh.setenv("FUNCTRACE_CACHE_DIR", str(tmp_path))
    assert _load("dmg").kernel(1.5) == 3.0
    path = tmp_path / "ftt_dmg.py"
    assert path.read_text() == SOURCE
    path.write_text(damage(SOURCE))
    with caplog.at_level("WARNING", logger="functrace"):
        assert _load("dmg").kernel(1.5) == 3.0
    assert path.read_text() == SOURCE
    assert "differs from its source" in caplog.text


def test_an_intact_module_is_not_rewritten(fresh, tmp_path):
    fresh.setenv("FUNCTRACE_CACHE_DIR", str(tmp_path))
    _load("keep")
    path = tmp_path / "ftt_keep.py"
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - 10**9))
    before = os.stat(path).st_mtime_ns
    _load("keep")
    assert os.stat(path).st_mtime_ns == before and os.stat(path).st_ino == st.st_ino


def test_a_symlink_in_place_of_a_module_is_replaced(fresh, tmp_path):
    fresh.setenv("FUNCTRACE_CACHE_DIR", str(tmp_path / "k"))
    elsewhere = tmp_path / "elsewhere.py"
    elsewhere.write_text("def kernel(x):\n    return -1\n")
    modfiles.cache_dir()
    os.symlink(elsewhere, tmp_path / "k" / "ftt_link.py")
    assert _load("link").kernel(2.0) == 4.0
    assert not os.path.islink(tmp_path / "k" / "ftt_link.py")
    assert elsewhere.read_text() == "def kernel(x):\n    return -1\n"


def test_writes_are_fsynced_file_then_directory(fresh, tmp_path):
    fresh.setenv("FUNCTRACE_CACHE_DIR", str(tmp_path))
    modfiles.cache_dir()
    synced = []
    real_fsync = os.fsync

    def fsync(fd):
        st = os.fstat(fd)
        synced.append("dir" if stat.S_ISDIR(st.st_mode) else f"file:{st.st_size}")
        real_fsync(fd)

    fresh.setattr(modfiles.os, "fsync", fsync)
    _load("sync")
    assert synced == [f"file:{len(SOURCE)}", "dir"]
    assert sorted(os.listdir(tmp_path)) == ["__pycache__", "ftt_sync.py"]


def test_a_failed_write_leaves_no_partial_file(fresh, tmp_path):
    fresh.setenv("FUNCTRACE_CACHE_DIR", str(tmp_path))
    modfiles.cache_dir()

    def replace(src, dst):
        raise OSError(28, "No space left on device")

    fresh.setattr(modfiles.os, "replace", replace)
    with pytest.raises(OSError, match="No space"):
        _load("full")
    assert sorted(os.listdir(tmp_path)) == ["__pycache__"]


def test_no_python_bytecode_is_written_or_read(fresh, tmp_path):
    fresh.setenv("FUNCTRACE_CACHE_DIR", str(tmp_path))
    _load("nopyc")
    assert not [n for n in os.listdir(tmp_path / "__pycache__") if n.endswith(".pyc")]


# --------------------------------------------------------------------------------------------
# the real backend, in fresh processes (numba's on-disk cache included)
# --------------------------------------------------------------------------------------------

def _run(code, **env):
    full = dict(os.environ, PYTHONPATH=ROOT, OPENBLAS_NUM_THREADS="1", **env)
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full, cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-4000:]
    return out


_JIT = textwrap.dedent("""
    import logging, os, sys
    logging.basicConfig(level=logging.WARNING)
    import numpy as np, functrace as ft, functrace.numpy as fnp
    from functrace.backends.cpu import executor as numba_cpu
    from functrace.backends.cpu import kernels as cpu_kernels
    from functrace.backends import modfiles
    f = ft.jit(lambda x: fnp.sum(fnp.tanh(x) * 2.0 + 1.0), eager=True)
    x = np.linspace(0.1, 1.0, 9)   # not symmetric: sum(tanh) != 0
    got = f(x)
    want = np.sum(np.tanh(x) * 2.0 + 1.0)
    assert abs(got - want) < 1e-12, (got, want)
    assert cpu_kernels._kernels, "no kernel was compiled"
    for k in cpu_kernels._kernels.values():
        loc = k._cache._impl.locator
        assert type(loc).__name__ == "FunctraceKernelLocator", loc
        assert loc.get_cache_path() == os.path.join(modfiles.cache_dir(), "__pycache__")
    print("OK", sum(sum(k.stats.cache_hits.values()) for k in cpu_kernels._kernels.values()))
""")


@pytest.mark.slow
def test_a_replaced_module_does_not_reach_the_next_process(tmp_path):
    cache = tmp_path / "k"
    nb = tmp_path / "numba-elsewhere"
    env = dict(FUNCTRACE_CACHE_DIR=str(cache), NUMBA_CACHE_DIR=str(nb))
    first = _run(_JIT, **env)
    assert first.stdout.split() == ["OK", "0"]
    mods = sorted(cache.glob("ftk_*.py"))
    assert mods
    # numba's pickled index and machine code sit next to the modules, not in NUMBA_CACHE_DIR
    assert list((cache / "__pycache__").glob("ftk_*.nbi"))
    assert not [p for p in nb.rglob("*") if p.is_file()] if nb.exists() else True
    sources = {p: p.read_text() for p in mods}
    assert all("np.float64(2.0)" in s for s in sources.values())
    # replace the constant (same size: numba's bytecode key does not see constants) ...
    for p, s in sources.items():
        p.write_text(s.replace("np.float64(2.0)", "np.float64(3.0)"))
    second = _run(_JIT, **env)
    assert second.stdout.startswith("OK")           # ... right numbers all the same
    assert "differs from its source" in second.stderr
    assert {p: p.read_text() for p in mods} == sources
    # truncate them: the next process compiles the right kernel (no numpy fallback)
    for p, s in sources.items():
        p.write_text(s[: len(s) // 3])
    third = _run(_JIT, **env)
    assert third.stdout.startswith("OK") and "differs from its source" in third.stderr
    assert {p: p.read_text() for p in mods} == sources
    fourth = _run(_JIT, **env)                       # intact again: numba's cache is used
    assert fourth.stdout.split()[0] == "OK" and int(fourth.stdout.split()[1]) > 0
    assert "differs" not in fourth.stderr


@pytest.mark.slow
def test_an_unsafe_cache_directory_is_refused_by_the_backend(tmp_path):
    cache = tmp_path / "shared"
    cache.mkdir()
    os.chmod(cache, 0o777)
    out = _run(_JIT + "\nprint(modfiles.cache_dir())\n", FUNCTRACE_CACHE_DIR=str(cache))
    assert "group- or world-writable" in out.stderr
    private = out.stdout.split()[-1]
    assert private != str(cache) and not os.path.exists(private)   # removed at exit
    assert os.listdir(cache) == []
