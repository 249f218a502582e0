"""The CUDA target (numba-cuda kernels, cupy arrays, cuBLASLt): what it fuses and its kernel
templates (``codegen``), launch configuration (``launch``), the lowered program and kernel
modules (``program``), the executable (``executor``), the device side (``device``: arrays,
streams, the simulator) and cuBLASLt (``cublaslt``)."""
