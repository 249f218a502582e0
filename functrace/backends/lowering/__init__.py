"""What every compiled target shares: kernel specs and per-element code (``spec``), a user's
scalar function inlined into a kernel module (``scalar_fn``), the ``Target`` interface and the
planning loop "plan until every group compiles" (``plan``), and the head of an executable
(``executable``). Text only: never imports numba. Imports core, ops and passes."""
