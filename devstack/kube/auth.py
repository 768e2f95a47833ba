"""Bearer-token authentication, ServiceAccount tokens (TokenRequest) and TokenReview.

Owns the cluster's admin token (written to the kubeconfig), issuing ServiceAccount tokens as JWTs
(three base64url segments, `sub: system:serviceaccount:<ns>:<name>`, the `kubernetes.io` claims,
`aud`, `exp`, `iat`, `nbf`, `jti`) signed with a per-cluster HMAC-SHA256 key, and validating them
for requests and for `POST /apis/authentication.k8s.io/v1/tokenreviews`. A token is valid only
while its ServiceAccount exists with the same uid. It must never log or echo a token.

What an identity may do is `devstack.kube.rbac`'s to decide; the admin is in `system:masters`.

Deliberately left out versus the real server: RS256/ES256 keys and the OIDC discovery endpoints,
legacy Secret-based ServiceAccount tokens, client certificates, and bound-object (Pod/Secret)
invalidation.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

ISSUER = "https://kubernetes.default.svc.cluster.local"
DEFAULT_AUDIENCES = (ISSUER,)
ADMIN_USER = "devstack-admin"
INVALID = "invalid bearer token"
"""What the real authenticator says of a token no authenticator accepts."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class User:
    """An authenticated identity."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: dict[str, list[str]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Render as TokenReview's `status.user`."""
        out: dict[str, Any] = {"username": self.name, "uid": self.uid, "groups": list(self.groups)}
        if self.extra:
            out["extra"] = self.extra
        return out


ADMIN = User(ADMIN_USER, "", ("system:masters", "system:authenticated"))


class TokenError(Exception):
    """A token that does not authenticate; the text is what TokenReview reports."""


class Tokens:
    """Issues and checks the tokens of one cluster."""

    def __init__(self) -> None:
        self.admin_token = secrets.token_urlsafe(32)
        self._key = secrets.token_bytes(32)
        self._kid = secrets.token_hex(8)

    def issue(
        self, ns: str, name: str, sa_uid: str, audiences: list[str], seconds: int
    ) -> tuple[str, int]:
        """Sign a ServiceAccount token; returns the token and its expiry (epoch seconds)."""
        now = int(time.time())
        expires = now + seconds
        claims = {
            "aud": audiences or list(DEFAULT_AUDIENCES),
            "exp": expires,
            "iat": now,
            "iss": ISSUER,
            "jti": str(uuid.uuid4()),
            "kubernetes.io": {"namespace": ns, "serviceaccount": {"name": name, "uid": sa_uid}},
            "nbf": now,
            "sub": f"system:serviceaccount:{ns}:{name}",
        }
        header = {"alg": "HS256", "kid": self._kid, "typ": "JWT"}
        signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
        signature = hmac.new(self._key, signing_input.encode(), hashlib.sha256).digest()
        return f"{signing_input}.{_b64(signature)}", expires

    def claims(self, token: str) -> dict[str, Any]:
        """Verify a token's signature and lifetime and return its claims.

        A token that is no JWT of this cluster's issuer is not even looked at, as the real
        ServiceAccount authenticator skips it: its error is the bare "invalid bearer token".

        Raises:
            TokenError: the token is malformed, forged or expired.
        """
        parts = token.split(".")
        try:
            claims = json.loads(_unb64(parts[1])) if len(parts) == 3 else None
        except ValueError:
            claims = None
        if not isinstance(claims, dict) or claims.get("iss") != ISSUER:
            raise TokenError(INVALID)
        expected = hmac.new(self._key, f"{parts[0]}.{parts[1]}".encode(), hashlib.sha256).digest()
        try:
            good = hmac.compare_digest(expected, _unb64(parts[2]))
        except ValueError:
            good = False
        if not good:
            raise TokenError(f"{INVALID}, go-jose/go-jose: error in cryptographic primitive")
        if int(claims.get("exp", 0)) < time.time():
            raise TokenError(f"{INVALID}, service account token has expired")
        return claims


def audience_match(claims: dict[str, Any], wanted: list[str]) -> list[str]:
    """The audiences both the token and the reviewer accept (empty means none)."""
    token_aud = claims.get("aud") or []
    if isinstance(token_aud, str):
        token_aud = [token_aud]
    targets = wanted or list(DEFAULT_AUDIENCES)
    return [a for a in targets if a in token_aud]


def service_account_user(
    ns: str, name: str, uid: str = "", extra: dict[str, list[str]] | None = None
) -> User:
    """The identity of a ServiceAccount: its user name and the groups every token of it has."""
    return User(
        f"system:serviceaccount:{ns}:{name}",
        uid,
        ("system:serviceaccounts", f"system:serviceaccounts:{ns}", "system:authenticated"),
        extra or {},
    )


def user_from_claims(claims: dict[str, Any]) -> User:
    """The ServiceAccount identity a verified token carries."""
    info = claims.get("kubernetes.io") or {}
    sa = info.get("serviceaccount") or {}
    return service_account_user(
        str(info.get("namespace", "")),
        str(sa.get("name", "")),
        str(sa.get("uid", "")),
        {"authentication.kubernetes.io/credential-id": [f"JTI={claims.get('jti', '')}"]},
    )
