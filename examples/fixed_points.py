"""Differentiating through a fixed-point iteration by the implicit function theorem.

``sqrt(a)`` below runs an iteration ``x <- x - 0.05 (x**2 - a)`` to its fixed point. Its
derivative is not taken through the iterations: ``fixed_point``'s reverse rule solves the
adjoint fixed-point equation ``w = (df/dx)^T w + g`` by iterating it too, and returns
``(df/da)^T w``. The rule is itself written with ``fixed_point`` and ``vjp``, so the second
derivative comes the same way.

Ported from autograd's examples/fixed_points.py (HIPS/autograd, MIT licence). The program (the
lines after ``fixed_point``) is autograd's, unchanged but for its imports: ``functrace.numpy``,
``functrace.grad`` for autograd's. autograd's ``from autograd.misc.fixed_points import
fixed_point`` has no counterpart in functrace (nor in JAX, whose documentation writes the same
thing with ``custom_vjp`` as an example), so ``fixed_point`` is written out here with
``ft.custom_vjp``, line for line autograd's ``autograd/misc/fixed_points.py``. The one
difference of form: a custom_vjp function may not close over values of an enclosing
transform (JAX's rule too), so ``f``, ``x0``, ``distance`` and ``tol`` are closed over by a
function made per call and only ``a`` (a pytree: the reverse iteration's ``(a, x_star,
x_star_bar)``) is an argument.

The script prints what autograd's prints (the fixed-point lines to the last digit; ``np.sqrt``'s
own derivatives differ from autograd's in the last digit), then checks the fixed-point lines
against the numbers autograd 1.9.1 prints, and against a live autograd where installed; and that the
derivatives are those of the fixed point, not of the unrolled iteration (which differ).

Run:  python examples/fixed_points.py
"""

import functrace as ft
import functrace.numpy as np
from functrace import grad, vjp

# ---- not autograd's program: its autograd.misc.fixed_points.fixed_point, on ft.custom_vjp ----

def fixed_point(f, a, x0, distance, tol):
    @ft.custom_vjp
    def _fixed_point(a):
        _f = f(a)
        x, x_prev = _f(x0), x0
        while distance(x, x_prev) > tol:
            x, x_prev = _f(x), x
        return x

    def fixed_point_fwd(a):
        ans = _fixed_point(a)
        return ans, (a, ans)

    def fixed_point_bwd(res, g):
        a, ans = res

        def rev_iter(params):
            a, x_star, x_star_bar = params
            _, vjp_x = vjp(f(a), x_star)
            return lambda g: vjp_x(g)[0] + x_star_bar

        _, vjp_a = vjp(lambda x, y: f(x)(y), a, ans)
        return (vjp_a(fixed_point(rev_iter, (a, ans, g), np.zeros_like(ans), distance, tol))[0],)

    _fixed_point.defvjp(fixed_point_fwd, fixed_point_bwd)
    return _fixed_point(a)


# ---- autograd's program ------------------------------------------------------------------------

def newton_sqrt_iter(a):
    return lambda x: 0.5 * (x + a / x)


def grad_descent_sqrt_iter(a):
    return lambda x: x - 0.05 * (x**2 - a)


def sqrt(a, guess=10.0):
    # return fixed_point(newton_sqrt_iter, a, guess, distance, 1e-4)
    return fixed_point(grad_descent_sqrt_iter, a, guess, distance, 1e-4)


def distance(x, y):
    return np.abs(x - y)


print(np.sqrt(2.0))
print(sqrt(2.0))
print()
print(grad(np.sqrt)(2.0))
print(grad(sqrt)(2.0))
print()
print(grad(grad(np.sqrt))(2.0))
print(grad(grad(sqrt))(2.0))
print()


# ---- not autograd's: the checks ----------------------------------------------------------------

if __name__ == "__main__":
    import numpy

    ours = [sqrt(2.0), grad(sqrt)(2.0), grad(grad(sqrt))(2.0)]
    # what autograd 1.9.1 prints for the same program
    numpy.testing.assert_allclose(ours, [1.4147939385813015, 0.35338076161609844,
                                         -0.08809989985285249], rtol=1e-14)

    def unrolled(a, guess=10.0):          # the same iteration, differentiated step by step
        _f, x, x_prev = grad_descent_sqrt_iter(a), grad_descent_sqrt_iter(a)(guess), guess
        while distance(x, x_prev) > 1e-4:
            x, x_prev = _f(x), x
        return x

    assert abs(grad(unrolled)(2.0) - ours[1]) > 1e-4      # 0.35239: not the implicit one
    try:
        import autograd
        from autograd.misc.fixed_points import fixed_point as autograd_fixed_point
    except ImportError:
        print("autograd not installed: checked against autograd 1.9.1's printed numbers")
    else:
        import autograd.numpy as anp
        their_sqrt = lambda a: autograd_fixed_point(  # noqa: E731
            grad_descent_sqrt_iter, a, 10.0, lambda x, y: anp.abs(x - y), 1e-4)
        theirs = [their_sqrt(2.0), autograd.grad(their_sqrt)(2.0),
                  autograd.grad(autograd.grad(their_sqrt))(2.0)]
        numpy.testing.assert_allclose(ours, theirs, rtol=1e-14)
        print("autograd's fixed_point gives the same value and first and second derivatives")
