"""The construction-time parity check: each row's log-likelihood ignores its batch.

Structure alone misses lags and reductions over rows hidden in a graph; evaluating the
same rows in batches of different make-up catches them (see
:meth:`MinibatchModel.check`).
"""

import numpy as np

from pymc_minibatch.exceptions import NonFactorizableError


def check_rows_factorise(minibatch_model, n_reference_rows, random_seed):
    """:meth:`MinibatchModel.check`: at the initial point and a jittered one, a reference
    batch of rows, then sub-batches of it (a single row, and a shuffled batch with
    repeats); every per-row value must equal the reference value of the same row.

    Raises
    ------
    NonFactorizableError
        Naming the observed variable whose per-row values differ or fail to evaluate.
    """
    mm = minibatch_model
    rng = np.random.default_rng(random_seed)
    n_ref = min(mm.n_data, n_reference_rows)
    ref_idx = rng.choice(mm.n_data, size=n_ref, replace=False)
    theta0 = mm.initial_theta()
    for theta in (theta0, theta0 + rng.normal(scale=0.1, size=theta0.shape)):
        reference = _row_terms(mm, theta, ref_idx)
        for positions in (np.array([0]), rng.choice(n_ref, size=min(7, 2 * n_ref))):
            values = _row_terms(mm, theta, ref_idx[positions])
            for name, ref, val in zip(mm.row_term_names, reference, values, strict=True):
                if not np.allclose(val, ref[positions], rtol=1e-8, atol=1e-10, equal_nan=True):
                    raise NonFactorizableError(
                        f"the log-likelihood of observed variable '{name}' at a row changes "
                        "with the other rows in the batch (lags, reductions over rows, or "
                        "other cross-row use of data): it does not factorise over rows"
                    )


def _row_terms(minibatch_model, theta, idx):
    mm = minibatch_model
    try:
        terms = mm.functions.call("row_terms", theta, *mm.row_source.gather(idx))
    except Exception as err:  # a graph that slices or reshapes rows fails on small batches
        raise NonFactorizableError(
            f"the per-row log-likelihood of {', '.join(mm.row_term_names)} failed on a "
            f"batch of {len(idx)} rows ({type(err).__name__}: {str(err)[:200]}); the "
            "likelihood uses the row axis in a way that does not factorise"
        ) from err
    for name, term in zip(mm.row_term_names, terms, strict=True):
        if np.shape(term) != (len(idx),):
            raise NonFactorizableError(
                f"observed variable '{name}' gave {np.shape(term)} values for {len(idx)} rows"
            )
    return terms
