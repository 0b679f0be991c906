"""A tiny layer for the contract machinery's own tests."""

from dataclasses import dataclass


def step(n):
    return 1


@dataclass
class Counter:
    value: int = 0

    def bump(self, n):
        if n < 0:
            raise ValueError("n must be >= 0")
        for _ in range(n):
            self.value += step(n)
        return self


def bumped(n):
    return Counter().bump(n).value
