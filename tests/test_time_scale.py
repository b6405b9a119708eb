"""ONEWELL_TEST_TIME_SCALE (fuzz/time_scale.py): the factor the tests and the server load harness stretch their
wall-time budgets by under emulation; anything but a number >= 1 is refused rather than silently shrinking them."""
import pytest

from fuzz import time_scale


@pytest.mark.parametrize("raw, expected", [("1", 1.0), ("20", 20.0), ("2.5", 2.5)])
def test_a_number_of_at_least_one_is_the_scale(monkeypatch, raw, expected):
    monkeypatch.setenv("ONEWELL_TEST_TIME_SCALE", raw)
    assert time_scale.time_scale() == expected


def test_unset_means_a_native_run(monkeypatch):
    monkeypatch.delenv("ONEWELL_TEST_TIME_SCALE", raising=False)
    assert time_scale.time_scale() == 1.0


@pytest.mark.parametrize("raw", ["0.5", "0", "-3", "nan", "fast", ""])
def test_anything_else_is_refused(monkeypatch, raw):
    monkeypatch.setenv("ONEWELL_TEST_TIME_SCALE", raw)
    with pytest.raises(ValueError, match="ONEWELL_TEST_TIME_SCALE"):
        time_scale.time_scale()


def test_budgets_scale_by_the_factor_in_force():
    assert time_scale.scaled(3.0) == 3.0 * time_scale.TIME_SCALE
