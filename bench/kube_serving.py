"""Serving speed of the devstack Kubernetes API server, measured from one plain HTTP client process.

Starts `python -m devstack up` in a child process, then over HTTPS keep-alive connections measures
GETs per second, writes (merge patches) per second, and a watch fanned out to 10 watchers, checking
that every watcher sees every event in order. Prints the median of several runs. Not a test: run it
by hand with `.venv/bin/python bench/kube_serving.py [--runs 3]`.
"""

from __future__ import annotations

import argparse
import http.client
import json
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from base64 import b64decode
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

WATCHERS = 10


class Client:
    """One keep-alive HTTPS connection with the admin token."""

    def __init__(self, url: str, token: str, ca_file: str) -> None:
        parts = urlsplit(url)
        context = ssl.create_default_context(cafile=ca_file)
        self.conn = http.client.HTTPSConnection(
            str(parts.hostname), parts.port, context=context, timeout=30
        )
        self.headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}

    def request(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> tuple[int, Any]:
        """Send one request and decode the JSON answer."""
        data = json.dumps(body).encode() if body is not None else None
        headers = {**self.headers, "Content-Type": content_type} if data else self.headers
        self.conn.request(method, path, body=data, headers=headers)
        response = self.conn.getresponse()
        return response.status, json.loads(response.read())

    def stream(self, path: str) -> http.client.HTTPResponse:
        """Open a watch stream."""
        self.conn.request("GET", path, headers=self.headers)
        return self.conn.getresponse()


def _gets_per_second(api: Client, ns: str, count: int) -> float:
    path = f"/api/v1/namespaces/{ns}/configmaps/target"
    start = time.perf_counter()
    for _ in range(count):
        status, _ = api.request("GET", path)
        assert status == 200
    return count / (time.perf_counter() - start)


def _writes_per_second(api: Client, ns: str, count: int) -> float:
    path = f"/api/v1/namespaces/{ns}/configmaps/target"
    start = time.perf_counter()
    for i in range(count):
        status, _ = api.request(
            "PATCH", path, {"data": {"n": str(i)}}, "application/merge-patch+json"
        )
        assert status == 200
    return count / (time.perf_counter() - start)


def _watch(
    url: str,
    token: str,
    ca: str,
    path: str,
    expected: int,
    ready: threading.Barrier,
    out: list[list[str]],
) -> None:
    api = Client(url, token, ca)
    response = api.stream(path)
    ready.wait()
    names: list[str] = []
    while len(names) < expected:
        line = response.readline()
        if not line:
            break
        event = json.loads(line)
        if event["type"] == "ADDED":
            names.append(event["object"]["metadata"]["name"])
    out.append(names)
    api.conn.close()


def _fan_out(url: str, token: str, ca: str, api: Client, ns: str, count: int) -> tuple[float, bool]:
    _, listed = api.request("GET", f"/api/v1/namespaces/{ns}/secrets")
    rv = listed["metadata"]["resourceVersion"]
    path = f"/api/v1/namespaces/{ns}/secrets?watch=true&resourceVersion={rv}&timeoutSeconds=60"
    ready = threading.Barrier(WATCHERS + 1)
    results: list[list[str]] = []
    threads = [
        threading.Thread(target=_watch, args=(url, token, ca, path, count, ready, results))
        for _ in range(WATCHERS)
    ]
    for thread in threads:
        thread.start()
    ready.wait()
    start = time.perf_counter()
    names = [f"s-{i:05d}" for i in range(count)]
    for name in names:
        status, _ = api.request(
            "POST",
            f"/api/v1/namespaces/{ns}/secrets",
            {"metadata": {"name": name}, "stringData": {"k": "v"}},
        )
        assert status == 201
    for thread in threads:
        thread.join(timeout=60)
    elapsed = time.perf_counter() - start
    lossless = len(results) == WATCHERS and all(r == names for r in results)
    return count * WATCHERS / elapsed, lossless


def _one_run(url: str, token: str, ca: str) -> dict[str, float]:
    api = Client(url, token, ca)
    ns = f"bench-{uuid.uuid4().hex[:6]}"
    api.request("POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
    api.request(
        "POST",
        f"/api/v1/namespaces/{ns}/configmaps",
        {"metadata": {"name": "target"}, "data": {"n": "0"}},
    )
    gets = _gets_per_second(api, ns, 3000)
    writes = _writes_per_second(api, ns, 1000)
    delivered, lossless = _fan_out(url, token, ca, api, ns, 300)
    api.request("DELETE", f"/api/v1/namespaces/{ns}")
    api.conn.close()
    return {
        "gets_per_s": gets,
        "writes_per_s": writes,
        "watch_events_per_s": delivered,
        "lossless": float(lossless),
    }


def main() -> int:
    """Run the benchmark and print medians."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as state:
        command = [sys.executable, "-m", "devstack", "up", "--state-dir", state]
        with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as server:
            try:
                assert server.stdout is not None
                assert server.stdout.readline().startswith("devstack ready")
                config = yaml.safe_load((Path(state) / "kubeconfig").read_text())
                url = config["clusters"][0]["cluster"]["server"]
                ca = Path(state) / "ca.pem"
                ca.write_bytes(
                    b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"])
                )
                token = config["users"][0]["user"]["token"]
                runs = [_one_run(url, token, str(ca)) for _ in range(args.runs)]
            finally:
                server.terminate()
                server.wait(timeout=10)
    for key in ("gets_per_s", "writes_per_s", "watch_events_per_s"):
        values = [r[key] for r in runs]
        print(
            f"{key:20s} median {statistics.median(values):8.0f}   "
            f"runs: {', '.join(f'{v:.0f}' for v in values)}"
        )
    lossless = all(r["lossless"] for r in runs)
    print(f"watch fan-out to {WATCHERS} watchers without loss: {'yes' if lossless else 'NO'}")
    return 0 if lossless else 1


if __name__ == "__main__":
    sys.exit(main())
