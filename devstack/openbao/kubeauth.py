"""Kubernetes auth for the OpenBao stand-in: roles, login and the TokenReview call.

Owns one mount of the Kubernetes auth method (its config and its roles, bound to ServiceAccount
names and namespaces), the login decision (a JWT reviewed by the cluster, then matched against the
role's bindings), and the `TokenReviewer` protocol with its production implementation that asks a
Kubernetes API server. Must never log, store or echo a JWT, and never let a login through that the
cluster did not authenticate.

A role's `audience` is asked of the cluster as OpenBao asks it: the TokenReview carries it as
its only audience, so a token minted for another audience (the API server's own included) is
refused.

Deliberately left out compared with OpenBao: local JWT signature checks (the TokenReview is the
only authority), namespace label selectors, token bound CIDRs, periodic and
batch tokens, and `disable_iss_validation`-style config knobs (accepted, ignored).
"""

from __future__ import annotations

import http.client
import json
import ssl
import threading
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from devstack.openbao.api import JSON, ApiError, Reply, bad_request, not_found
from devstack.openbao.clock import parse_duration

_SA_PREFIX = "system:serviceaccount:"
DEFAULT_TOKEN_TTL = 32 * 24 * 3600


@dataclass(frozen=True)
class ReviewResult:
    """The answer of a TokenReview.

    Attributes:
        authenticated: Whether the cluster accepted the token.
        username: `system:serviceaccount:<namespace>:<name>` for a ServiceAccount token.
        uid: The ServiceAccount's uid.
    """

    authenticated: bool
    username: str = ""
    uid: str = ""
    audiences: tuple[str, ...] = ()


class TokenReviewError(Exception):
    """The TokenReview could not be performed (not: the token was rejected)."""


class TokenReviewer(Protocol):
    """Validates a ServiceAccount JWT with the cluster that issued it."""

    def review(self, jwt: str, audiences: Sequence[str] = ()) -> ReviewResult:
        """Review a JWT.

        Args:
            jwt: The token the client presented.
            audiences: The audiences the token must carry one of; empty means the cluster's own.

        Returns:
            The cluster's verdict.

        Raises:
            TokenReviewError: The cluster could not be asked.
        """
        ...


class KubeTokenReviewer:
    """A TokenReviewer that POSTs a `TokenReview` to a Kubernetes API server."""

    def __init__(
        self,
        kube_url: str,
        bearer_token: str | None = None,
        ca_pem: str | None = None,
        timeout: float = 10.0,
    ) -> None:
        """Configure the reviewer.

        Args:
            kube_url: The API server's base URL, e.g. `https://127.0.0.1:6443`.
            bearer_token: The reviewer's own token; None presents the reviewed JWT itself, as
                OpenBao does when no `token_reviewer_jwt` is configured.
            ca_pem: PEM CA bundle for an https API server; None uses the system store.
            timeout: Per-request timeout in seconds.
        """
        parts = urllib.parse.urlsplit(kube_url)
        self._host, self._port = str(parts.hostname), parts.port
        self._https = parts.scheme == "https"
        self._path = parts.path.rstrip("/") + "/apis/authentication.k8s.io/v1/tokenreviews"
        self._bearer = bearer_token
        self._timeout = timeout
        self._context: ssl.SSLContext | None = None
        if self._https:
            self._context = ssl.create_default_context(cadata=ca_pem) if ca_pem else None
        # Keep-alive connections, as OpenBao's own HTTP client keeps them: a TLS handshake per
        # login would cost both sides more than the review itself.
        self._idle: list[http.client.HTTPConnection] = []
        self._idle_lock = threading.Lock()

    def _connection(self) -> http.client.HTTPConnection:
        with self._idle_lock:
            if self._idle:
                return self._idle.pop()
        if self._https:
            return http.client.HTTPSConnection(
                self._host, self._port, timeout=self._timeout, context=self._context
            )
        return http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)

    def _post(self, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        # A kept connection the server has closed fails at once; the retry dials afresh.
        for attempt in (1, 2):
            conn = self._connection()
            try:
                conn.request("POST", self._path, body=body, headers=headers)
                response = conn.getresponse()
                data = response.read()
            except (http.client.HTTPException, OSError):
                conn.close()
                if attempt == 2:
                    raise
                continue
            with self._idle_lock:
                self._idle.append(conn)
            return response.status, data
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Close the kept connections."""
        with self._idle_lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def review(self, jwt: str, audiences: Sequence[str] = ()) -> ReviewResult:
        """Ask the API server whether the JWT is valid (for ``audiences``) and whom it names."""
        spec: dict[str, Any] = {"token": jwt}
        if audiences:
            spec["audiences"] = list(audiences)
        body = json.dumps(
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec}
        ).encode()
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "Authorization": f"Bearer {self._bearer or jwt}",
        }
        try:
            code, data = self._post(body, headers)
        except (http.client.HTTPException, OSError) as exc:
            raise TokenReviewError(f"TokenReview failed: {type(exc).__name__}") from exc
        if code >= 300:
            raise TokenReviewError(f"TokenReview answered HTTP {code}")
        try:
            answer = json.loads(data)
        except ValueError as exc:
            raise TokenReviewError(f"TokenReview failed: {type(exc).__name__}") from exc
        status = answer.get("status") or {}
        user = status.get("user") or {}
        return ReviewResult(
            authenticated=bool(status.get("authenticated")),
            username=str(user.get("username", "")),
            uid=str(user.get("uid", "")),
            audiences=tuple(str(a) for a in status.get("audiences") or ()),
        )


@dataclass(frozen=True)
class KubernetesRole:
    """An `auth/<mount>/role/<name>` entry."""

    name: str
    bound_service_account_names: tuple[str, ...]
    bound_service_account_namespaces: tuple[str, ...]
    token_policies: tuple[str, ...]
    token_ttl: int
    token_max_ttl: int
    alias_name_source: str = "serviceaccount_uid"
    audience: str = ""

    def read_data(self) -> JSON:
        """Return what `GET role/<name>` shows."""
        return {
            "bound_service_account_names": list(self.bound_service_account_names),
            "bound_service_account_namespaces": list(self.bound_service_account_namespaces),
            "token_policies": list(self.token_policies),
            "policies": list(self.token_policies),
            "token_ttl": self.token_ttl,
            "ttl": self.token_ttl,
            "token_max_ttl": self.token_max_ttl,
            "max_ttl": self.token_max_ttl,
            "token_type": "default",
            "alias_name_source": self.alias_name_source,
            "audience": self.audience,
        }


@dataclass(frozen=True)
class LoginResult:
    """What a successful login hands to the token store."""

    role: str
    policies: tuple[str, ...]
    ttl: int
    max_ttl: int
    display_name: str
    alias_name: str
    metadata: Mapping[str, str]


def _names(value: object, field_name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(item.strip() for item in value if item.strip())
    raise bad_request(f"invalid value for {field_name}: expected a list of strings")


def _bound(patterns: tuple[str, ...], value: str) -> bool:
    for pattern in patterns:
        if pattern == "*" or pattern == value:
            return True
        if pattern.endswith("*") and value.startswith(pattern[:-1]):
            return True
    return False


class KubernetesAuthMount:
    """One mount of the Kubernetes auth method."""

    def __init__(self, path: str, accessor: str, reviewer: TokenReviewer | None) -> None:
        """Create an unconfigured mount.

        Args:
            path: The mount path under `auth/`, e.g. `kubernetes/management`.
            accessor: The mount's accessor (templated policies name it).
            reviewer: Reviews JWTs; None builds a `KubeTokenReviewer` from the mount's config.
        """
        self.path = path
        self.accessor = accessor
        self.injected_reviewer = reviewer
        self.config: JSON = {}
        self.roles: dict[str, KubernetesRole] = {}

    def write_config(self, data: Mapping[str, Any]) -> None:
        """Store `config` (kubernetes_host, kubernetes_ca_cert, token_reviewer_jwt, ...)."""
        self.config = {**self.config, **dict(data)}

    def read_config(self) -> Reply:
        """Answer `GET config` (without the reviewer JWT)."""
        if not self.config:
            raise not_found()
        shown = {k: v for k, v in self.config.items() if k != "token_reviewer_jwt"}
        shown["token_reviewer_jwt_set"] = bool(self.config.get("token_reviewer_jwt"))
        return Reply(data=shown)

    def build_role(self, name: str, data: Mapping[str, Any]) -> KubernetesRole:
        """Parse a role write; `policies`/`ttl`/`max_ttl` are the legacy spellings.

        Raises:
            ApiError: A binding is missing or a field is malformed.
        """
        old = self.roles.get(name)

        def pick(new: str, legacy: str, default: object) -> object:
            return data.get(new, data.get(legacy, default))

        try:
            role = KubernetesRole(
                name=name,
                bound_service_account_names=_names(
                    data.get(
                        "bound_service_account_names",
                        list(old.bound_service_account_names) if old else None,
                    ),
                    "bound_service_account_names",
                ),
                bound_service_account_namespaces=_names(
                    data.get(
                        "bound_service_account_namespaces",
                        list(old.bound_service_account_namespaces) if old else None,
                    ),
                    "bound_service_account_namespaces",
                ),
                token_policies=tuple(
                    p.lower()
                    for p in _names(
                        pick("token_policies", "policies", list(old.token_policies) if old else []),
                        "token_policies",
                    )
                ),
                token_ttl=parse_duration(
                    pick("token_ttl", "ttl", old.token_ttl if old else 0), "token_ttl"
                ),
                token_max_ttl=parse_duration(
                    pick("token_max_ttl", "max_ttl", old.token_max_ttl if old else 0),
                    "token_max_ttl",
                ),
                alias_name_source=str(
                    data.get(
                        "alias_name_source", old.alias_name_source if old else "serviceaccount_uid"
                    )
                ),
                audience=str(data.get("audience", old.audience if old else "")),
            )
        except ValueError as exc:
            raise bad_request(str(exc)) from exc
        if not role.bound_service_account_names:
            raise bad_request('"bound_service_account_names" can not be empty')
        if not role.bound_service_account_namespaces:
            raise bad_request('"bound_service_account_namespaces" can not be empty')
        if role.alias_name_source not in ("serviceaccount_uid", "serviceaccount_name"):
            raise bad_request(f'invalid alias_name_source "{role.alias_name_source}"')
        return role

    def _review(self, jwt: str, audiences: Sequence[str]) -> ReviewResult:
        if self.injected_reviewer is not None:
            return self.injected_reviewer.review(jwt, audiences)
        host = self.config.get("kubernetes_host")
        if not host:
            raise bad_request("could not load backend configuration")
        reviewer = KubeTokenReviewer(
            str(host),
            bearer_token=self.config.get("token_reviewer_jwt") or None,
            ca_pem=self.config.get("kubernetes_ca_cert") or None,
        )
        try:
            return reviewer.review(jwt, audiences)
        finally:
            reviewer.close()

    def login(self, data: Mapping[str, Any]) -> LoginResult:
        """Validate a login: the role, the JWT (through TokenReview) and the role's bindings.

        Raises:
            ApiError: 400 for a missing or unknown role or JWT, 403 when the cluster rejects the
                JWT or the ServiceAccount is not bound to the role, 500 when the cluster cannot
                be asked.
        """
        role_name = str(data.get("role") or "")
        jwt = str(data.get("jwt") or "")
        if not role_name:
            raise bad_request("missing role")
        if not jwt:
            raise bad_request("missing jwt")
        role = self.roles.get(role_name)
        if role is None:
            raise bad_request(f'invalid role name "{role_name}"')
        wanted = (role.audience,) if role.audience else ()
        try:
            review = self._review(jwt, wanted)
        except TokenReviewError as exc:
            raise ApiError(500, str(exc)) from exc
        if not review.authenticated or not review.username.startswith(_SA_PREFIX):
            raise ApiError(403, "permission denied")
        if wanted and not set(wanted) & set(review.audiences):
            raise ApiError(403, "invalid audience (aud) claim")
        namespace, _, name = review.username.removeprefix(_SA_PREFIX).partition(":")
        if not _bound(role.bound_service_account_names, name):
            raise ApiError(403, "service account name not authorized")
        if not _bound(role.bound_service_account_namespaces, namespace):
            raise ApiError(403, "namespace not authorized")
        alias_name = (
            f"{namespace}/{name}"
            if role.alias_name_source == "serviceaccount_name" or not review.uid
            else review.uid
        )
        return LoginResult(
            role=role_name,
            policies=role.token_policies,
            ttl=role.token_ttl,
            max_ttl=role.token_max_ttl,
            display_name=f"{namespace}-{name}",
            alias_name=alias_name,
            metadata={
                "role": role_name,
                "service_account_name": name,
                "service_account_namespace": namespace,
                "service_account_secret_name": "",
                "service_account_uid": review.uid,
            },
        )
