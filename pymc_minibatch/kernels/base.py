"""The protocol every sampling kernel of the package follows.

A kernel module is one algorithm's transition, in pure NumPy (no PyMC, no PyTensor), in
the manner of BlackJAX's ``base.py``. It exports four names:

- ``State``: a ``NamedTuple`` of what the next step needs (the position and whatever the
  algorithm carries: a cached log-density, momenta, thermostats, particles);
- ``Info``: a ``NamedTuple`` of what a step reports and the next step does not need
  (acceptance probability, rows evaluated, ...);
- ``init(...) -> State``: the state at a position (with the generator first when the
  state holds random draws: FlyMC's brightness, MINT's first batch);
- ``step(rng, state, <model callables>, <params>) -> (State, Info)``: one transition. The
  ``numpy.random.Generator`` comes first and is the only source of randomness, so that a
  step is a function of the generator's state and its arguments. The model enters as
  callables (log-densities, rows' log-likelihood terms, gradient estimates), never as a
  PyMC object; tuning parameters enter as plain values.

Tuning (a proposal scale, pCN's correlation, TunaMH's ``chi``, step sizes) is written as
``(init, update)`` pairs of pure functions over a small ``NamedTuple`` state (dual averaging
in :mod:`pymc_minibatch.kernels.adaptation`), which the PyMC wiring calls between steps
while tuning. An update that reads what only the step knows (TunaMH's ``chi`` reads the
metric of the move it decides) runs inside ``step``, given the tuning state in the
parameters, and ``Info`` returns the updated state.

A step method of :mod:`pymc_minibatch.step_methods` then only maps PyMC's ``RaveledVars`` to
``State`` and back, calls ``step`` once per draw and turns ``Info`` into sampler
statistics; the docs page "Architecture" shows a sampler added in one kernel module and
about 30 lines of wiring.
"""

from typing import Any, NamedTuple, Protocol

import numpy as np

#: Modules of :mod:`pymc_minibatch.kernels` that are algorithms, hence follow the protocol
#: (the other modules are their parts: bounds, batches, schedules, factorisations).
KERNEL_MODULES = ("exact_mh", "flymc", "group_sweep", "mint", "particles", "sg_chain")


class InitFn(Protocol):
    """``init(...) -> State``."""

    def __call__(self, *args: Any, **kwargs: Any) -> NamedTuple: ...


class StepFn(Protocol):
    """``step(rng, state, *model_callables_and_params) -> (State, Info)``."""

    def __call__(
        self, rng: np.random.Generator, state: NamedTuple, *args: Any, **kwargs: Any
    ) -> tuple[NamedTuple, NamedTuple]: ...
