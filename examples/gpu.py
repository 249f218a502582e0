"""The CUDA target: a compiled MLP gradient on the GPU, and cupy arrays through transforms.

On a machine with an NVIDIA GPU and functrace[cuda13] (or [cuda12]) installed, this runs on
the GPU with cupy arrays. Without one it runs the same code under numba's CUDA simulator
(slow, so the sizes are small; arrays are then numpy arrays standing in for device arrays):
that is how CI runs it.

    python examples/gpu.py
"""

import importlib.util
import os


def _gpu_available() -> bool:
    if importlib.util.find_spec("cupy") is None:
        return False
    try:
        import cupy
        return bool(cupy.is_available())
    except Exception:
        return False


ON_GPU = _gpu_available()
if not ON_GPU:   # must be set before numba is first imported
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"

import numpy as np  # noqa: E402

import functrace as ft  # noqa: E402
import functrace.numpy as fnp  # noqa: E402


def loss(params, x, labels):
    w1, b1, w2 = params
    h = fnp.tanh(x @ w1 + b1)
    logits = h @ w2
    picked = fnp.take_along_axis(logits, labels[:, None], axis=1)[:, 0]
    return fnp.mean(fnp.logsumexp(logits, axis=1) - picked)


def main():
    rng = np.random.default_rng(0)
    batch, n_in, n_hidden, n_out = (4096, 784, 2048, 10) if ON_GPU else (16, 8, 16, 4)
    params = [rng.standard_normal((n_in, n_hidden)).astype(np.float32) * 0.1,
              np.zeros(n_hidden, np.float32),
              rng.standard_normal((n_hidden, n_out)).astype(np.float32) * 0.1]
    x = rng.standard_normal((batch, n_in)).astype(np.float32)
    labels = rng.integers(0, n_out, batch)

    # 1. arrays on the device (cupy arrays on a GPU), a compiled gradient that stays there
    d_params, d_x, d_labels = ft.device_put((params, x, labels))
    step = ft.jit(ft.value_and_grad(loss), backend="cuda")
    for _ in range(3):                   # first call: interpreter; second: compiles
        value, grads = step(d_params, d_x, d_labels)
    print("where:", "GPU (cupy arrays)" if ON_GPU else "numba's CUDA simulator (numpy arrays)")
    print(f"loss {float(value):.6f}; gradient shapes {[g.shape for g in grads]}")

    # the CPU reference agrees
    ref_value, ref_grads = ft.value_and_grad(loss)(params, x, labels)
    np.testing.assert_allclose(float(value), float(ref_value), rtol=1e-5)
    for g, r in zip(ft.device_get(grads), ref_grads, strict=True):
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-6)

    # 2. the generated kernels (no GPU needed to look at them)
    src = step.lower(d_params, d_x, d_labels).source
    print(src.split("# ---- steps ----")[1].strip())

    # 3. outside jit: transforms and functrace.numpy take device arrays too
    g_x = ft.grad(loss, argnums=1)(d_params, d_x, d_labels)
    positive = fnp.sum(d_x, axis=1, where=d_x > 0)          # numpy's where=, on the device
    assert ft.device.array_module(g_x) is ft.device.array_module(d_x)
    np.testing.assert_allclose(ft.device_get(positive), np.sum(x, axis=1, where=x > 0),
                               rtol=1e-5)
    print("grad of the input:", g_x.shape, "| sums of positive entries:", positive.shape)


if __name__ == "__main__":
    main()
