"""Request counters of the devstack's servers, read and reset over HTTP at `/devstack/counters`.

Owns one thread-safe tally per server of the requests it answered, by client, verb and resource
(the API servers) or by client, method and path (OpenBao). The client is the first product token
of the request's User-Agent (`tenantdb/0.1.0 (worker)` counts as `tenantdb`), so a benchmark can
tell tenantdb's requests from its own and from the stand-in operators'. The endpoint exists only
here: production servers have no such path, and nothing in tenantdb reads it.

Reading the counters never counts as a request, and they hold no request body, token or query.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

PATH = "/devstack/counters"
"""Where every devstack server serves its counters: GET reads them, DELETE resets them."""


def client_of(user_agent: str) -> str:
    """The product name a User-Agent header starts with, or `unknown`."""
    product = user_agent.strip().split(" ", 1)[0].split("/", 1)[0]
    return product or "unknown"


class RequestCounters:
    """Requests by (client, verb, resource), safe to count from many handler threads."""

    def __init__(self, *, verb: str = "verb", resource: str = "resource") -> None:
        """Name the two dimensions beside the client as the server's protocol names them."""
        self._names = (verb, resource)
        self._counts: Counter[tuple[str, str, str]] = Counter()
        self._lock = threading.Lock()

    def count(self, client: str, verb: str, resource: str) -> None:
        """Count one request."""
        with self._lock:
            self._counts[(client, verb, resource)] += 1

    def by_verb_and_resource(self) -> dict[tuple[str, str], int]:
        """Requests so far by (verb, resource), every client added up."""
        out: Counter[tuple[str, str]] = Counter()
        with self._lock:
            for (_, verb, resource), n in self._counts.items():
                out[(verb, resource)] += n
        return dict(out)

    def reset(self) -> None:
        """Forget every count."""
        with self._lock:
            self._counts.clear()

    def snapshot(self) -> dict[str, Any]:
        """The counts as the HTTP endpoint serves them, sorted, with their total."""
        verb, resource = self._names
        with self._lock:
            rows = sorted(self._counts.items())
        return {
            "total": sum(n for _, n in rows),
            "requests": [{"client": c, verb: v, resource: r, "count": n} for (c, v, r), n in rows],
        }
