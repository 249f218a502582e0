"""A hidden Markov model fitted by expectation-maximisation, the E step a gradient.

The expected sufficient statistics of an exponential family are the gradient of its log
partition function: ``vgrad(log_partition_function)`` of the HMM's forward recursion (a
Python loop over each character, ``logsumexp`` per step) gives the log-likelihood and, as its
gradient with respect to the log-parameters, the expected counts the M step normalises.

Ported from autograd's examples/hmm_em.py (HIPS/autograd, MIT licence). The program is
autograd's, unchanged but for its imports and the data file:

* ``functrace.numpy``, ``functrace.numpy.random``, ``functrace.value_and_grad`` and
  ``functrace.scipy.special.logsumexp`` for autograd's (``np.random.seed`` and ``np.seterr``
  are numpy's, through ``functrace.numpy`` as through ``autograd.numpy``);
* autograd's program reads the first 60 lines of its ``lstm.py`` (not ported here) as
  training text; this one reads the ported ``neural_net.py`` next to it, and takes the number
  of lines from the command line (default 60; CI reads 4, which takes 45 EM steps);
* the printing callback also keeps the log-likelihoods, for the checks.

Then it checks that EM's log-likelihood never fell (to 1e-6 relative) and rose overall, that
the fitted distributions are normalised, and, with autograd installed, that this file with
autograd's imports put back (``IMPORTS``) computes the same log-likelihood and expected counts
at the initial parameters (at the fitted ones, where EM has driven some probabilities to 0,
autograd's ``logsumexp`` gradient is nan wherever all the terms are -inf; functrace's is 0). (The whole trajectory agrees too: on the same file and lines the
two print the same log-likelihoods to 3e-11.)

``ft.jit`` is not used: the recursion is a Python loop over a data-dependent number of
characters per line, so each line would be its own trace of hundreds of steps. The 60-line
run takes about 3.5 minutes of CPU here, the same as autograd's.

Run:  python examples/hmm_em.py [lines]
"""

# ruff: noqa: E501, E731, I001  (autograd's lines as they are, its lambdas, its import order)

import sys
import string
from functools import partial
from os.path import dirname, join

import functrace.numpy as np
import functrace.numpy.random as npr
from functrace import value_and_grad as vgrad
from functrace.scipy.special import logsumexp


def EM(init_params, data, callback=None):
    def EM_update(params):
        natural_params = list(map(np.log, params))
        loglike, E_stats = vgrad(log_partition_function)(natural_params, data)  # E step
        if callback:
            callback(loglike, params)
        return list(map(normalize, E_stats))  # M step

    def fixed_point(f, x0):
        x1 = f(x0)
        while different(x0, x1):
            x0, x1 = x1, f(x1)
        return x1

    def different(params1, params2):
        allclose = partial(np.allclose, atol=1e-3, rtol=1e-3)
        return not all(map(allclose, params1, params2))

    return fixed_point(EM_update, init_params)


def normalize(a):
    def replace_zeros(a):
        return np.where(a > 0.0, a, 1.0)

    return a / replace_zeros(a.sum(-1, keepdims=True))


def log_partition_function(natural_params, data):
    if isinstance(data, list):
        return sum(map(partial(log_partition_function, natural_params), data))

    log_pi, log_A, log_B = natural_params

    log_alpha = log_pi
    for y in data:
        log_alpha = logsumexp(log_alpha[:, None] + log_A, axis=0) + log_B[:, y]

    return logsumexp(log_alpha)


def initialize_hmm_parameters(num_states, num_outputs):
    init_pi = normalize(npr.rand(num_states))
    init_A = normalize(npr.rand(num_states, num_states))
    init_B = normalize(npr.rand(num_states, num_outputs))
    return init_pi, init_A, init_B


def build_dataset(filename, max_lines=-1):
    """Loads a text file, and turns each line into an encoded sequence."""
    encodings = dict(list(map(reversed, enumerate(string.printable))))
    digitize = lambda char: encodings[char] if char in encodings else len(encodings)
    encode_line = lambda line: np.array(list(map(digitize, line)))
    nonblank_line = lambda line: len(line) > 2

    with open(filename) as f:
        lines = f.readlines()

    encoded_lines = list(map(encode_line, list(filter(nonblank_line, lines))[:max_lines]))
    num_outputs = len(encodings) + 1

    return encoded_lines, num_outputs



# ---- not autograd's: the checks ------------------------------------------------------------

# this file's import lines -> autograd's (the only lines of the program that differ)
IMPORTS = {
    "import functrace.numpy as np\n": "import autograd.numpy as np\n",
    "import functrace.numpy.random as npr\n": "import autograd.numpy.random as npr\n",
    "from functrace import value_and_grad as vgrad\n": "from autograd import value_and_grad as vgrad\n",
    "from functrace.scipy.special import logsumexp\n": "from autograd.scipy.special import logsumexp\n",
}


def autograd_version():
    """This module's functions with autograd's imports put back, or None without autograd."""
    from autograd_port import with_imports
    return with_imports(__file__, IMPORTS)


if __name__ == "__main__":
    loglikes = []
    np.random.seed(0)
    np.seterr(divide="ignore")

    # callback to print log likelihoods during training
    print_loglike = lambda loglike, params: print(loglike) or loglikes.append(loglike)

    # load training data
    lstm_filename = join(dirname(__file__), "neural_net.py")
    train_inputs, num_outputs = build_dataset(lstm_filename, max_lines=int(sys.argv[1]) if len(sys.argv) > 1 else 60)

    # train with EM
    num_states = 20
    init_params = initialize_hmm_parameters(num_states, num_outputs)
    pi, A, B = EM(init_params, train_inputs, print_loglike)

    # ---- not autograd's: the checks --------------------------------------------------------
    import numpy

    steps = numpy.diff(loglikes)
    print(f"{len(loglikes)} EM steps: log-likelihood {loglikes[0]:.3f} -> {loglikes[-1]:.3f}")
    assert (steps > -1e-6 * numpy.abs(loglikes[1:])).all() and loglikes[-1] > loglikes[0] + 100
    for p in (pi, A, B):
        numpy.testing.assert_allclose(p.sum(-1), 1.0, rtol=1e-12)

    theirs = autograd_version()
    if theirs is None:
        print("autograd not installed: skipping the side-by-side run")
    else:
        natural_params = [numpy.log(p) for p in init_params]   # (fitted ones have log 0s:
        # autograd's logsumexp gradient is nan where a whole column is -inf, functrace's is 0)
        ll, stats = vgrad(log_partition_function)(natural_params, train_inputs)
        their_ll, their_stats = theirs["vgrad"](theirs["log_partition_function"])(natural_params, train_inputs)
        numpy.testing.assert_allclose(ll, their_ll, rtol=1e-12)
        for a, b in zip(stats, their_stats):
            numpy.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
        print("autograd computes the same log-likelihood and expected counts")
