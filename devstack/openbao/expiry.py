"""What the OpenBao stand-in must end next, kept as tokens and leases change.

A fleet holds a token and a lease per order, and the expiry thread wakes on every login and
every credential. Scanning all of them on each wake made the stand-in's cost per request grow
with the fleet; here the expiry thread pops only what is due (`Deadlines`), and revoking a token
finds its leases and children through their indexes (`LeaseTable`, `Children`).

A deadline is recorded each time a token's or a lease's expiry (or a failed revocation's retry)
is set. An entry is a hint, not the truth: whoever pops it checks the object's current deadline,
so an entry left behind by a renewal or a revocation is skipped.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator
from typing import Generic, Protocol, TypeVar


class _Leased(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def token_id(self) -> str: ...


L = TypeVar("L", bound=_Leased)


class Deadlines:
    """A min-heap of (when, what); `due` pops every entry whose time has come."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, str, str]] = []
        self._order = itertools.count()

    def add(self, when: float, kind: str, ident: str) -> None:
        """Look at ``kind``/``ident`` again at ``when``."""
        heapq.heappush(self._heap, (when, next(self._order), kind, ident))

    def due(self, now: float) -> Iterator[tuple[str, str]]:
        """Pop and yield each entry due by ``now``; entries added meanwhile for ``now`` or
        earlier are yielded too."""
        while self._heap and self._heap[0][0] <= now:
            _, _, kind, ident = heapq.heappop(self._heap)
            yield kind, ident

    def next(self) -> float | None:
        """The earliest time recorded (perhaps of a stale entry), or None."""
        return self._heap[0][0] if self._heap else None

    def clear(self) -> None:
        self._heap.clear()


class LeaseTable(Generic[L]):
    """Leases by id, with the ids each token holds."""

    def __init__(self) -> None:
        self._by_id: dict[str, L] = {}
        self._of_token: dict[str, set[str]] = {}

    def __len__(self) -> int:
        return len(self._by_id)

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_id)

    def get(self, lease_id: str) -> L | None:
        return self._by_id.get(lease_id)

    def values(self) -> list[L]:
        return list(self._by_id.values())

    def put(self, lease: L) -> None:
        self._by_id[lease.id] = lease
        self._of_token.setdefault(lease.token_id, set()).add(lease.id)

    def pop(self, lease_id: str) -> L | None:
        lease = self._by_id.pop(lease_id, None)
        if lease is not None:
            held = self._of_token.get(lease.token_id)
            if held is not None:
                held.discard(lease_id)
                if not held:
                    del self._of_token[lease.token_id]
        return lease

    def of_token(self, token_id: str) -> list[L]:
        """The leases ``token_id`` holds."""
        return [self._by_id[i] for i in self._of_token.get(token_id, ())]

    def clear(self) -> list[L]:
        """Forget every lease; return them."""
        leases = list(self._by_id.values())
        self._by_id.clear()
        self._of_token.clear()
        return leases


class Children:
    """The child tokens of each parent token."""

    def __init__(self) -> None:
        self._of: dict[str, set[str]] = {}

    def add(self, parent: str | None, child: str) -> None:
        if parent is not None:
            self._of.setdefault(parent, set()).add(child)

    def remove(self, parent: str | None, child: str) -> None:
        if parent is None:
            return
        siblings = self._of.get(parent)
        if siblings is not None:
            siblings.discard(child)
            if not siblings:
                del self._of[parent]

    def take(self, parent: str) -> list[str]:
        """The children of ``parent``, forgotten as such."""
        return sorted(self._of.pop(parent, ()))
