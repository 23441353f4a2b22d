"""Empirical-Bayes Beta priors per category and Beta posteriors for rates on fractional counts."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize, special, stats

MIN_PRODUCTS = 5  # fewer products with data than this: the category borrows the pooled prior


@dataclass(frozen=True)
class BetaPrior:
    """Beta(a, b): mean a / (a + b), worth a + b observations."""

    a: float
    b: float
    products: int  # products with data it was fitted on (0: borrowed from the pool)

    @property
    def mean(self) -> float:
        return self.a / (self.a + self.b)


def _neg_marginal(params: np.ndarray, x: np.ndarray, n: np.ndarray) -> float:
    mu, kappa = special.expit(params[0]), np.exp(params[1])
    a, b = mu * kappa, (1 - mu) * kappa
    return -float(np.sum(special.betaln(a + x, b + n - x) - special.betaln(a, b)))


def fit_beta_prior(x, n) -> BetaPrior:
    """Beta prior of rates ``x / n`` by beta-binomial marginal likelihood (fractional counts
    allowed), started from the method of moments."""
    x, n = np.asarray(x, np.float64), np.asarray(n, np.float64)
    m = n > 0
    x, n = x[m], n[m]
    if not m.any():
        return BetaPrior(1.0, 1.0, 0)
    mu = float(np.clip(x.sum() / n.sum(), 1e-4, 1 - 1e-4))
    noise = mu * (1 - mu) * float(np.mean(1 / n))
    spread = max(float(np.average((x / n - mu) ** 2, weights=n)) - noise, mu * (1 - mu) * 1e-3)
    kappa0 = float(np.clip(mu * (1 - mu) / spread - 1, 1.0, 1e5))
    res = optimize.minimize(_neg_marginal, [special.logit(mu), np.log(kappa0)], args=(x, n),
                            method="L-BFGS-B", bounds=[(-12, 12), (np.log(0.5), np.log(1e6))])
    mu, kappa = float(special.expit(res.x[0])), float(np.exp(res.x[1]))
    return BetaPrior(mu * kappa, (1 - mu) * kappa, int(m.sum()))


def category_priors(x, n, category) -> list[BetaPrior]:
    """One prior per category id (index = id); small categories get the pooled prior."""
    category = np.asarray(category, np.int64)
    n_cat = int(category.max()) + 1 if category.size else 0
    pooled = fit_beta_prior(x, n)
    has_data = np.asarray(n) > 0
    priors = []
    for c in range(n_cat):
        m = category == c
        if int((m & has_data).sum()) < MIN_PRODUCTS:
            priors.append(BetaPrior(pooled.a, pooled.b, 0))
        else:
            priors.append(fit_beta_prior(np.asarray(x)[m], np.asarray(n)[m]))
    return priors


def beta_posterior(x, n, category, priors: list[BetaPrior], level: float = 0.95):
    """Posterior mean, equal-tailed ``level`` interval and the prior's weight
    ``(a + b) / (a + b + n)`` of each rate; no data gives the prior itself."""
    a0 = np.array([p.a for p in priors])[category]
    b0 = np.array([p.b for p in priors])[category]
    x = np.asarray(x, np.float64)
    n = np.maximum(np.asarray(n, np.float64), x)
    a, b = a0 + x, b0 + n - x
    tail = (1 - level) / 2
    return a / (a + b), stats.beta.ppf(tail, a, b), stats.beta.ppf(1 - tail, a, b), (a0 + b0) / (a + b)
