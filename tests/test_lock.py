"""requirements.lock is the lock of pyproject.toml's ranges (issue: reproducible installs)."""

from __future__ import annotations

from tests import lockcheck


def test_the_lock_is_made_from_pyprojects_ranges() -> None:
    found = lockcheck.problems(lockcheck.LOCK.read_text(), lockcheck.ranges())
    assert not found, f"requirements.lock is out of step with pyproject.toml: {found}; make lock"


def test_a_range_the_pins_do_not_fit_is_named() -> None:
    reqs = [r if not r.startswith("grpcio>=") else "grpcio>=99" for r in lockcheck.ranges()]
    assert lockcheck.problems(lockcheck.LOCK.read_text(), reqs) == [
        f"grpcio=={lockcheck.pins(lockcheck.LOCK.read_text())['grpcio']} is outside >=99"
    ]


def test_a_range_changed_while_the_pins_still_fit_is_caught() -> None:
    reqs = [*lockcheck.ranges(), "grpcio>=1"]
    assert lockcheck.problems(lockcheck.LOCK.read_text(), reqs) == [
        "pyproject.toml's ranges changed since the lock was made"
    ]
