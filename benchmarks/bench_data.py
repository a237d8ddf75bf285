"""Data sets shared by the benchmark scripts."""

import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split


def breast_cancer_data(seed=0):
    """scikit-learn's breast-cancer data: a stratified 70/30 split, features standardised
    with the training statistics, and an intercept column. Returns
    ``((x_train, y_train), (x_test, y_test))``."""
    x, y = load_breast_cancer(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=0.3, random_state=seed, stratify=y
    )
    mean, sd = x_train.mean(axis=0), x_train.std(axis=0)

    def design(x):
        return np.column_stack([np.ones(len(x)), (x - mean) / sd])

    return (design(x_train), y_train), (design(x_test), y_test)
