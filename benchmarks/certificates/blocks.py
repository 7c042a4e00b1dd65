# SPDX-License-Identifier: Apache-2.0
"""The blocks of the certificate study: synthetic clustered blocks and three scikit-learn data sets.

- `synthetic(n, d)`: the recipe of benchmarks/synthetic.hpp (64 clusters in R^d, columns correlated
  through a shared rank-16 mixing, quality partly predictable from the embedding), drawn with
  numpy's generator: the same kind of block, not the same numbers.
- `real(name)`: digits, wine or breast cancer; embeddings = the standardised features; quality =
  a logistic regression's 5-fold cross-validated probability of the item's true class.
"""
import numpy as np


def synthetic(n: int, d: int, seed: int = 12345, clusters: int = 64, rank: int = 16):
    g = np.random.default_rng(seed)
    centers = g.standard_normal((clusters, d))
    mixing = 0.5 * g.standard_normal((rank, d))
    label = g.integers(0, clusters, n)
    x = centers[label] + g.standard_normal((n, d)) + g.standard_normal((n, rank)) @ mixing
    q = 0.5 * (x[:, 0] - x[:, 1]) / 3.0 + g.standard_normal(n)
    return x, q


def real(name: str):
    from sklearn import datasets
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    load = {"digits": datasets.load_digits, "wine": datasets.load_wine,
            "breast_cancer": datasets.load_breast_cancer}[name]
    features, label = load(return_X_y=True)
    x = StandardScaler().fit_transform(features)
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    proba = cross_val_predict(model, features, label, cv=5, method="predict_proba")
    q = proba[np.arange(label.size), np.searchsorted(np.unique(label), label)]
    return x, q
