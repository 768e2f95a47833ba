"""The VaultDynamicSecret generator of the ESO stand-in: log in to OpenBao and read one path.

Owns what ESO's Vault generator does for one invocation: resolve the provider's CA (`caProvider`
Secret or ConfigMap, or `caBundle`) and client certificate (`tls.certSecretRef`/`keySecretRef`),
issue a token for `auth.kubernetes.serviceAccountRef` through the TokenRequest API, log in on
`auth/<mountPath>/login` with the spec's role, call the path with the spec's method, and return
the result (`Data`, `Auth` or `Raw`) as string values. The PEMs live in a private temporary
directory for the duration of the call only.

It must never revoke the login token or a lease (the credential it returns is delivered; the
token's end would revoke it), and never put a token, a key or a returned value in an error
message. Deliberately left out: every auth method but Kubernetes (`tokenSecretRef` included),
`namespace` headers, retry settings and Vault namespaces.
"""

from __future__ import annotations

import base64
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import hvac
import hvac.exceptions
import requests

from devstack.kubeclient import ApiError, KubeApi
from devstack.reconciler import Obj, get_or_none

TOKEN_SECONDS = 600
_TIMEOUT = 15


class GeneratorError(Exception):
    """The generator could not produce a value; the message is safe to show."""


def _decoded(value: Any) -> bytes:
    try:
        return base64.b64decode(str(value or ""), validate=True)
    except ValueError:
        return b""


def _secret_key(cluster: KubeApi, namespace: str, ref: Obj, default_key: str, what: str) -> bytes:
    name = str(ref.get("name") or "")
    key = str(ref.get("key") or default_key)
    secret = get_or_none(cluster, "secrets", name, str(ref.get("namespace") or namespace))
    value = _decoded(((secret or {}).get("data") or {}).get(key))
    if not value:
        raise GeneratorError(f'{what}: key "{key}" of Secret "{name}" is missing or empty')
    return value


def _ca_bundle(cluster: KubeApi, namespace: str, provider: Obj) -> bytes | None:
    ca = provider.get("caProvider") or {}
    if ca:
        ns = str(ca.get("namespace") or namespace)
        if ca.get("type") == "ConfigMap":
            cm = get_or_none(cluster, "configmaps", str(ca.get("name", "")), ns)
            text = ((cm or {}).get("data") or {}).get(str(ca.get("key") or "ca.crt"))
            if not text:
                raise GeneratorError(f'caProvider: ConfigMap "{ca.get("name", "")}" has no CA')
            return str(text).encode()
        return _secret_key(cluster, ns, {**ca, "namespace": ns}, "ca.crt", "caProvider")
    if provider.get("caBundle"):
        return _decoded(provider["caBundle"])
    return None


def _jwt(cluster: KubeApi, namespace: str, kube: Obj) -> str:
    ref = kube.get("serviceAccountRef") or {}
    if not ref.get("name"):
        raise GeneratorError("auth.kubernetes: only serviceAccountRef logins are supported")
    audiences = [str(a) for a in ref.get("audiences") or []]
    try:
        return cluster.issue_token(namespace, str(ref["name"]), audiences, TOKEN_SECONDS)
    except ApiError as exc:
        raise GeneratorError(f"could not issue a ServiceAccount token: {exc.message}") from exc


@contextmanager
def _pem_files(ca: bytes | None, cert: bytes | None, key: bytes | None) -> Iterator[Obj]:
    with tempfile.TemporaryDirectory(prefix="devstack-eso-") as directory:
        kwargs: Obj = {}
        base = Path(directory)
        if ca is not None:
            (base / "ca.crt").write_bytes(ca)
            kwargs["verify"] = str(base / "ca.crt")
        if cert is not None and key is not None:
            for name, data in (("tls.crt", cert), ("tls.key", key)):
                fd = os.open(base / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
            kwargs["cert"] = (str(base / "tls.crt"), str(base / "tls.key"))
        yield kwargs


def _stringify(values: Any) -> dict[str, str]:
    if not isinstance(values, dict):
        raise GeneratorError("the response holds no object to read keys from")
    return {
        str(k): v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))
        for k, v in values.items()
    }


def _call(client: hvac.Client, spec: Obj) -> Any:
    path = "/v1/" + str(spec.get("path", "")).lstrip("/")
    method = str(spec.get("method") or "GET").upper()
    if method == "GET":
        params = {k: list(v) for k, v in (spec.get("getParameters") or {}).items()}
        return client.adapter.get(path, params=params or None)
    if method == "LIST":
        return client.adapter.list(path)
    if method == "DELETE":
        return client.adapter.delete(path)
    return client.adapter.post(path, json=spec.get("parameters") or {})


def generate(cluster: KubeApi, namespace: str, spec: Obj) -> dict[str, str]:
    """Run a VaultDynamicSecret spec once and return its values.

    Args:
        cluster: The cluster holding the generator's Secrets and ServiceAccount.
        namespace: The generator's (and the ExternalSecret's) namespace.
        spec: The generator's spec.

    Raises:
        GeneratorError: Any step failed.
    """
    provider = spec.get("provider") or {}
    kube = (provider.get("auth") or {}).get("kubernetes") or {}
    if not provider.get("server") or not kube.get("role"):
        raise GeneratorError("provider.server and auth.kubernetes.role are required")
    tls = provider.get("tls") or {}
    cert = key = None
    if tls.get("certSecretRef") or tls.get("keySecretRef"):
        cert = _secret_key(cluster, namespace, tls.get("certSecretRef") or {}, "tls.crt", "tls")
        key = _secret_key(cluster, namespace, tls.get("keySecretRef") or {}, "tls.key", "tls")
    ca = _ca_bundle(cluster, namespace, provider)
    jwt = _jwt(cluster, namespace, kube)
    mount = str(kube.get("mountPath") or "kubernetes")
    with _pem_files(ca, cert, key) as kwargs:
        client = hvac.Client(url=str(provider["server"]), timeout=_TIMEOUT, **kwargs)
        try:
            client.auth.kubernetes.login(str(kube["role"]), jwt, mount_point=mount)
            response = _call(client, spec)
        except hvac.exceptions.VaultError as exc:
            errors = "; ".join(str(e) for e in (exc.errors or [])) or type(exc).__name__
            raise GeneratorError(f"vault request failed: {errors}") from exc
        except requests.RequestException as exc:
            raise GeneratorError(
                f"cannot reach {provider['server']}: {type(exc).__name__}"
            ) from exc
        finally:
            client.adapter.close()
    return _result(spec, response)


def _result(spec: Obj, response: Any) -> dict[str, str]:
    body = response if isinstance(response, dict) else {}
    kind = str(spec.get("resultType") or "Data")
    if kind == "Raw":
        values: Any = body
    elif kind == "Auth":
        values = body.get("auth")
    else:
        values = body.get("data")
    if not values:
        if spec.get("allowEmptyResponse"):
            return {}
        raise GeneratorError("empty response from Vault")
    return _stringify(values)
