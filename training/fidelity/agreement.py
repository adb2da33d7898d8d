"""Agreement of two verdicts on the same episodes (pure): a confusion matrix and Cohen's kappa.

A task reward becomes a verdict: `success` when it is at least the threshold, `failure` below it, and
`none` when there is no reward (no verifier, or one that could not say). The confusion matrix keeps
the `none` row and column; kappa is taken over the episodes with a reward on both sides only, since
"no verdict" is not a category either side chose.

Cohen's kappa is (p_o - p_e) / (1 - p_e): p_o the share of episodes both sides call the same, p_e the
share they would agree on by chance given how often each says each verdict. It is computed here on
integer counts (scikit-learn is not a dependency of training, and exact counts make the degenerate
cases exact): with n paired episodes, d of them agreeing and r_k, c_k each side's count of verdict k,
kappa = (n*d - sum r_k*c_k) / (n^2 - sum r_k*c_k). It is undefined when n is 0 and when p_e is 1,
which happens exactly when both sides give one and the same verdict on every episode: agreement is
then perfect, but nothing shows either side can tell success from failure. When only one side is
constant, p_e < 1 and kappa is 0 or below (no agreement beyond chance), which is the right reading.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

SUCCESS, FAILURE, NONE = "success", "failure", "none"
VERDICTS = (SUCCESS, FAILURE, NONE)
RATED = (SUCCESS, FAILURE)


def verdict(reward: float | None, threshold: float) -> str:
    if reward is None:
        return NONE
    return SUCCESS if reward >= threshold else FAILURE


@dataclass(frozen=True)
class Kappa:
    value: float | None  # None when undefined (then `undefined` says why)
    observed_agreement: float | None
    expected_agreement: float | None
    n: int  # episodes with a verdict on both sides
    undefined: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def cohens_kappa(pairs: Iterable[tuple[str, str]], categories: Sequence[str] = RATED) -> Kappa:
    """Kappa of (a, b) verdict pairs; pairs with a verdict outside `categories` (`none`) are left out."""
    kept = [(a, b) for a, b in pairs if a in categories and b in categories]
    n = len(kept)
    if n == 0:
        return Kappa(None, None, None, 0, "no episode has a reward on both sides")
    agree = sum(a == b for a, b in kept)
    rows, cols = Counter(a for a, _ in kept), Counter(b for _, b in kept)
    chance = sum(rows[k] * cols[k] for k in categories)  # n^2 * p_e
    observed, expected = agree / n, chance / (n * n)
    if chance == n * n:
        only = next(iter(rows))
        why = (
            f"both sides said {only} on all {n} episodes (chance agreement 1): they agree, but nothing "
            "shows either can tell success from failure"
        )
        return Kappa(None, observed, expected, n, why)
    return Kappa((n * agree - chance) / (n * n - chance), observed, expected, n)


def confusion(pairs: Iterable[tuple[str, str]]) -> dict[str, dict[str, int]]:
    """{real verdict: {simulated verdict: count}} over every verdict, `none` included."""
    counts = Counter(pairs)
    return {a: {b: counts[(a, b)] for b in VERDICTS} for a in VERDICTS}
