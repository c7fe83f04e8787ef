"""Percentiles: exact ones over a sorted sample, approximate ones over a log-bucket sketch.

Both use the nearest-rank definition: the p-th percentile of n values is the smallest value
such that at least p% of the values are less than or equal to it, i.e. the value of rank
``ceil(p * n / 100)`` (1-based) in sorted order. It always returns an observed value (or, for
the sketch, the representative of an observed bucket), never an interpolation, so a p99 of
"1.2 ms" means some request really took that long.

Thread-safety: ``LogSketch`` is not locked; its owner confines it to one thread.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def nearest_rank(sorted_values: Sequence[float], percent: float) -> float:
    """The ``percent``-th percentile of ``sorted_values`` (ascending), 0.0 when empty.

    >>> nearest_rank([1.0, 2.0, 3.0, 4.0], 50)
    2.0
    >>> nearest_rank([1.0, 2.0, 3.0, 4.0], 99)
    4.0
    """
    count = len(sorted_values)
    if count == 0:
        return 0.0
    rank = max(1, math.ceil(percent * count / 100))
    return sorted_values[min(rank, count) - 1]


class LogSketch:
    """A bounded histogram of positive values whose percentiles carry a bounded relative error.

    Why: percentiles "since start" must not keep every sample. Bucket ``i`` holds values in
    ``(gamma**(i-1), gamma**i]`` with ``gamma = (1+a)/(1-a)``; answering with the bucket's
    midpoint ``2*gamma**i/(gamma+1)`` is within ``a`` (relative) of any value in it (the
    DDSketch construction). Values at or below ``floor`` count as 0 and values above
    ``ceiling`` as ``ceiling``, so the number of buckets is fixed by the range, not by traffic:
    about 1,150 for the defaults (1 µs .. 10,000 s at 1%).
    """

    def __init__(
        self, relative_error: float = 0.01, floor: float = 1e-6, ceiling: float = 1e4
    ) -> None:
        if not 0 < relative_error < 1:
            raise ValueError("relative_error must be in (0, 1)")
        self._gamma = (1 + relative_error) / (1 - relative_error)
        self._log_gamma = math.log(self._gamma)
        self._floor = floor
        self._ceiling = ceiling
        self._zero_count = 0
        self._counts: dict[int, int] = {}
        self.count = 0
        self.sum = 0.0

    def add(self, value: float) -> None:
        """Count one observation."""
        self.count += 1
        self.sum += value
        if value <= self._floor:
            self._zero_count += 1
            return
        index = math.ceil(math.log(min(value, self._ceiling)) / self._log_gamma)
        self._counts[index] = self._counts.get(index, 0) + 1

    def percentile(self, percent: float) -> float:
        """The nearest-rank percentile, within the relative error; 0.0 when empty."""
        if self.count == 0:
            return 0.0
        rank = max(1, math.ceil(percent * self.count / 100))
        seen = self._zero_count
        if seen >= rank:
            return 0.0
        for index in sorted(self._counts):
            seen += self._counts[index]
            if seen >= rank:
                return 2 * self._gamma**index / (self._gamma + 1)
        raise AssertionError("bucket counts do not add up to count")  # pragma: no cover

    def bucket_count(self) -> int:
        """How many buckets are in use (the memory bound's witness in tests)."""
        return len(self._counts) + (1 if self._zero_count else 0)
