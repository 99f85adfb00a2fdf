"""Divisors of whole numbers up to 2^53 (chip counts, layers) without trial division up to n:
factors by trial division by small primes, a deterministic Miller-Rabin test and Pollard's
rho (Brent's variant), so 2^53 or a 16-digit prime take milliseconds. No I/O."""

from __future__ import annotations

import math
from functools import lru_cache

_SMALL = [p for p in range(2, 1000) if all(p % q for q in range(2, int(p ** 0.5) + 1))]
# Miller-Rabin with these bases is exact for n < 3.3e24 (Sorenson & Webster, 2015).
_BASES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41)


def _is_prime(n: int) -> bool:
    if n < 2:
        return False
    for p in _BASES:
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for a in _BASES:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def _rho(n: int) -> int:
    """A non-trivial factor of the odd composite n (Brent's cycle detection)."""
    for c in range(1, n):
        y, m, g, r, q = 2, 128, 1, 1, 1
        x = ys = y
        while g == 1:
            x = y
            for _ in range(r):
                y = (y * y + c) % n
            k = 0
            while k < r and g == 1:
                ys = y
                for _ in range(min(m, r - k)):
                    y = (y * y + c) % n
                    q = q * abs(x - y) % n
                g = math.gcd(q, n)
                k += m
            r *= 2
        if g == n:
            g = 1
            while g == 1:
                ys = (ys * ys + c) % n
                g = math.gcd(abs(x - ys), n)
        if g != n:
            return g
    raise ArithmeticError(f"no factor of {n}")  # pragma: no cover (n is composite)


def factorize(n: int) -> dict[int, int]:
    """The prime factorization of n >= 1: {prime: exponent}."""
    if n < 1:
        raise ValueError(f"factorize({n}): a positive whole number")
    out: dict[int, int] = {}
    for p in _SMALL:
        while n % p == 0:
            out[p] = out.get(p, 0) + 1
            n //= p
    stack = [n] if n > 1 else []
    while stack:
        m = stack.pop()
        if _is_prime(m):
            out[m] = out.get(m, 0) + 1
        else:
            f = _rho(m)
            stack += [f, m // f]
    return dict(sorted(out.items()))


@lru_cache(maxsize=256)
def divisors(n: int) -> tuple[int, ...]:
    """Every divisor of n >= 1, ascending."""
    ds = [1]
    for p, e in factorize(n).items():
        ds = [d * p ** k for d in ds for k in range(e + 1)]
    return tuple(sorted(ds))
