"""``ft.config``: process-wide switches, read where they take effect (JAX's ``jax.config``).

Owns the switches and nothing else: each layer that honours one reads its attribute at the
moment it matters (one attribute read: the eager paths stay as fast as without it). Imports
nothing of functrace, so every layer may read it.

Example:
    >>> import functrace as ft
    >>> ft.config.eager_at
    False
    >>> ft.config.update("eager_at", True)
    >>> ft.config.eager_at
    True
    >>> ft.config.eager_at = False
"""

from __future__ import annotations

__all__ = ["Config", "config"]


class Config:
    """The switches (set them as attributes, or with ``update(name, value)`` as in JAX).

    Attributes:
        eager_at: the numpy arrays ``functrace.numpy`` functions return (outside
            transforms, and constants such as ``fnp.zeros(3)`` inside them) are
            ``fnp.AtArray``s (an ``np.ndarray`` subclass whose only addition is JAX's
            ``.at[idx]``) instead of plain ``np.ndarray``s, so code ported from JAX that
            writes ``x.at[i].set(v)`` also runs eagerly. Off by default: results are plain
            numpy arrays, as docs/api.md promises (and numpy's ufuncs cost about 1 µs more
            per call on a subclass of a small array). Without it, ``fnp.at(x)[i].set(v)``
            works on any array, and tracers always have ``.at``.
    """

    __slots__ = ("eager_at",)

    def __init__(self):
        self.eager_at = False

    def update(self, name: str, value) -> None:
        """Set a switch by name (``jax.config.update`` style); unknown names are an error."""
        if name not in self.__slots__:
            raise AttributeError(f"ft.config has no switch {name!r}; the switches are "
                                 f"{', '.join(self.__slots__)}")
        setattr(self, name, value)

    def __repr__(self):
        return "ft.config(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__) + ")"


config = Config()
