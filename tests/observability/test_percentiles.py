"""Percentile definitions: the exact nearest rank, and the sketch's bounded relative error."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from service.observability.quantiles import LogSketch, nearest_rank

latencies = st.lists(
    st.floats(min_value=0.0, max_value=1000.0, allow_nan=False), min_size=1, max_size=300
)
percents = st.sampled_from([1, 25, 50, 90, 95, 99, 100])


@given(latencies, percents)
def test_nearest_rank_is_smallest_value_covering_the_percent(values: list[float], p: int) -> None:
    ordered = sorted(values)
    result = nearest_rank(ordered, p)
    assert result in ordered
    at_or_below = sum(1 for value in ordered if value <= result)
    assert at_or_below * 100 >= p * len(ordered)
    strictly_below = sum(1 for value in ordered if value < result)
    assert strictly_below * 100 < p * len(ordered)


def test_nearest_rank_of_one_to_a_hundred_is_the_percent_itself() -> None:
    ordered = [float(value) for value in range(1, 101)]
    assert [nearest_rank(ordered, p) for p in (50, 95, 99)] == [50.0, 95.0, 99.0]


def test_nearest_rank_of_nothing_is_zero() -> None:
    assert nearest_rank([], 99) == 0.0


@given(
    st.lists(st.floats(min_value=1e-5, max_value=1e3, allow_nan=False), min_size=1, max_size=300),
    percents,
)
def test_sketch_percentile_is_within_one_percent_of_the_exact_one(
    values: list[float], p: int
) -> None:
    sketch = LogSketch(relative_error=0.01)
    for value in values:
        sketch.add(value)
    exact = nearest_rank(sorted(values), p)
    assert math.isclose(sketch.percentile(p), exact, rel_tol=0.0101)


def test_sketch_memory_is_bounded_by_its_range_not_by_its_count() -> None:
    sketch = LogSketch(relative_error=0.01, floor=1e-6, ceiling=1e4)
    value = 1e-7
    while value < 1e5:
        for _ in range(3):
            sketch.add(value)
        value *= 1.001
    assert sketch.count > 30_000
    assert sketch.bucket_count() <= math.ceil(math.log(1e10) / math.log(1.01 / 0.99)) + 2
