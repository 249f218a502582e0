"""The numba CPU target: what it fuses (``target``), its loop template (``render``), the
contractions it runs as loops or on BLAS (``dots``), the generated driver (``driver``),
compiled ``loop`` equations (``loop``), loading kernels and the disk cache (``kernels``), the
executable and its tiers (``executor``), and the math kernels call (``vecmath``, ``scalar``).
Only ``kernels``, ``executor`` and the generated modules import numba, when a kernel loads."""
