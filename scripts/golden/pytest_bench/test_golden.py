"""Benchmarks run only to produce pytest-benchmark golden JSON (see ../regenerate.sh)."""

import time

import pytest


def work(n):
    # Sleeping keeps each round long, so that a short --benchmark-max-time gives few rounds.
    time.sleep(0.001)
    return sum(i * i for i in range(n))


@pytest.mark.parametrize("n", [10, 1000])
def test_squares(benchmark, n):
    assert benchmark(work, n) > 0


def test_pedantic(benchmark):
    benchmark.pedantic(work, args=(100,), rounds=4, iterations=2)
