"""Helpers the tests share: the model zoos and their stored NUTS references, Monte Carlo
standard errors, quadrature references, the logistic rows of the data-source tests and the
checks of the hierarchical statistical tests. The fixtures that several test modules share
are in ``tests/conftest.py``."""
