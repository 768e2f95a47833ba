"""Settings of every tenantdb process, read from ``TENANTDB_*`` environment variables.

One model holds every setting so that ``tenantdb devstack up`` can write them all to one env file
and the README can list them with their defaults. Settings never carry a secret: credentials are
read from files or Secrets at the moment they are used.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Literal, Self

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Everything a watcher, worker, beat or CLI process is configured with."""

    model_config = SettingsConfigDict(env_prefix="TENANTDB_", frozen=True, extra="ignore")

    redis_url: str = Field(
        default="redis://127.0.0.1:6379/0",
        description="Redis for the work queue primitives (pending marks, locks, due-set).",
    )
    redis_sentinels: str = Field(
        default="",
        description=(
            "Comma-separated Sentinel host:port pairs; when set, Redis and the broker follow the"
            " master named by redis_sentinel_master (redis_url then gives credentials, db and,"
            " with rediss://, TLS to the Sentinels and the master only)."
        ),
    )
    redis_sentinel_master: str = Field(
        default="mymaster", description="The Sentinel master name of tenantdb's Redis."
    )
    redis_username: str = Field(
        default="",
        description=(
            "The Redis ACL user tenantdb logs in as, when redis_url names none (the broker's too,"
            " unless broker_url is set)."
        ),
    )
    redis_password_file: str = Field(
        default="",
        description=(
            "A file holding the Redis password, e.g. a mounted Secret, used when redis_url carries"
            " none (the broker's too, unless broker_url is set); read at start."
        ),
    )
    redis_tls_ca_file: str = Field(
        default="",
        description=(
            "PEM bundle of the CAs a rediss:// Redis (and, with Sentinel, each Sentinel) is"
            " verified against; empty uses the system's. The server's name is always checked."
        ),
    )
    redis_socket_timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        description=(
            "How long a Redis command or connect (the work queue's and the broker's) may wait for"
            " an answer before it fails, so a Redis that died without a reset cannot hang a"
            " process; connections also keep TCP keepalive and are checked with a PING after"
            " 30 s idle."
        ),
    )
    broker_url: str = Field(
        default="",
        description="Celery broker; empty means the same Redis as redis_url.",
    )
    kind_modules: str = Field(
        default="",
        description=(
            "Comma-separated Python modules that declare more order kinds; the workers, the watcher"
            " and the CLI import them beside tenantdb's own kinds."
        ),
    )
    key_prefix: str = Field(
        default="tenantdb:",
        description="Prefix of every Redis key tenantdb writes, broker queues included.",
    )
    lock_ttl_seconds: float = Field(
        default=30.0,
        gt=0,
        description="Lease of an order's lock; a heartbeat extends it while a step runs.",
    )
    pending_ttl_seconds: int = Field(
        default=300,
        gt=0,
        description=(
            "Life of a pending mark. A lost message blocks its key at most this long; a queue"
            " slower than this costs a duplicate pass, never a lost one."
        ),
    )
    task_time_limit_seconds: int = Field(
        default=120, gt=0, description="Hard time limit of one task."
    )
    retry_backoff_max_seconds: int = Field(
        default=300, gt=0, description="Cap of the exponential retry backoff of a failing step."
    )
    busy_pass_spacing_seconds: float = Field(
        default=1.0,
        ge=0,
        le=60,
        description=(
            "Once an order's passes have ended four times in a row with events that arrived"
            " during them (an order edited without pause), each further pass waits this long"
            " before it starts, and the events meanwhile join it; 0 runs them back to back."
        ),
    )
    visibility_timeout_seconds: int = Field(
        default=900,
        gt=0,
        description=(
            "Redis broker visibility timeout: an unacknowledged task is delivered again after it."
            " Must exceed the retry backoff cap plus the task time limit."
        ),
    )
    resync_seconds: float = Field(
        default=3600.0,
        ge=0,
        description=(
            "Period of the jittered resync of every known order, for drift no event reports;"
            " 0 disables it."
        ),
    )
    full_refresh_seconds: float = Field(
        default=43200.0,
        ge=0,
        description=(
            "How long after an order's last full, converged pass its refreshes may trust the"
            " watches for what they see (a quiet refresh); each order is read in full at least"
            " this often. 0 makes every refresh read in full."
        ),
    )
    refresh_cycle_seconds: float = Field(
        default=600.0,
        gt=0,
        description="The cycle refreshes are spread over; beat caps the refresh rate from it.",
    )
    beat_interval_seconds: float = Field(
        default=1.0, gt=0, description="How often beat sweeps the timetables."
    )
    watcher_liveness_seconds: float = Field(
        default=600.0,
        gt=0,
        description=(
            "The watcher's liveness probe (/livez on the metrics port) fails once one of its"
            " watches has heard nothing (no event, bookmark or relist) for this long, a watch"
            " loop or its lease campaign stopped, or its supervisor hung. API servers send a"
            " bookmark about every minute on a quiet watch."
        ),
    )
    beat_liveness_seconds: float = Field(
        default=120.0,
        gt=0,
        description=(
            "Beat's liveness probe (/livez on the metrics port) fails once the active beat has"
            " completed no sweep for this long: a sweep hung on a dead connection, or failing"
            " throughout. Keep it well above 30 s, the longest wait between failed sweeps."
        ),
    )
    worker_liveness_seconds: float = Field(
        default=300.0,
        gt=0,
        description=(
            "A worker's liveness probe (/livez on the metrics port) fails once its consumer has"
            " not gone round its event loop for this long: the broker connection is lost and"
            " not back, or the loop is blocked. Busy task processes do not hold the loop up."
        ),
    )
    kubeconfig: str = Field(
        default="",
        description=(
            "Kubeconfig with the management cluster and the target clusters; empty means the"
            " first existing file of $KUBECONFIG, else ~/.kube/config when it exists, else the"
            " cluster the pod runs in (its ServiceAccount)."
        ),
    )
    management_context: str = Field(
        default="", description="The management cluster's context; empty means current-context."
    )
    target_contexts: str = Field(
        default="",
        description=(
            "Comma-separated contexts served as target clusters (named like the context);"
            " empty means every other context of the kubeconfig."
        ),
    )
    kubeconfig_dir: str = Field(
        default="",
        description=(
            "A directory with one kubeconfig per target cluster (file name = cluster name, its"
            " current context used), as a mounted Secret gives it; re-read while running."
        ),
    )
    cluster_poll_seconds: float = Field(
        default=5.0, gt=0, description="How often the cluster configuration is checked for changes."
    )
    watch_timeout_seconds: int = Field(
        default=300, gt=0, description="Server-side timeout of one watch request."
    )
    watch_inactivity_seconds: float = Field(
        default=90.0,
        gt=0,
        description="A watch that stays silent this long (no event, no bookmark) is reconnected.",
    )
    watch_backoff_max_seconds: float = Field(
        default=30.0, gt=0, description="Cap of the reconnect backoff of a failing watch."
    )
    management_namespaces: str = Field(
        default="",
        description=(
            "Comma-separated namespaces tenantdb serves on the management cluster (its orders'"
            " namespaces, the ControlPlanes' and the failover groups'): every namespaced kind is"
            " watched and listed in these only, as the chart's per-namespace bindings"
            " (`namespaces`) allow. Empty: the whole cluster."
        ),
    )
    target_watch_scope: Literal["namespaces", "cluster"] = Field(
        default="namespaces",
        description=(
            "How the order kinds, delivered Secrets and Database CRs are watched on a target"
            " cluster: in each namespace the ControlPlanes assign or place Keystone on it, as the"
            " chart's per-namespace grants allow, or cluster-wide where the cluster grants that."
        ),
    )
    watch_unserved_retry_seconds: float = Field(
        default=60.0, gt=0, description="How often a kind a cluster does not serve is tried again."
    )
    service_account_token_file: str = Field(
        default="/var/run/secrets/kubernetes.io/serviceaccount/token",
        description="The token tenantdb logs in to OpenBao with; read afresh at every login.",
    )
    openbao_role: str = Field(
        default="c5c3-operator", description="The Kubernetes-auth role tenantdb logs in as."
    )
    openbao_timeout_seconds: float = Field(
        default=30.0, gt=0, description="Timeout of one OpenBao request."
    )
    openbao_token_reuse_seconds: float = Field(
        default=60.0,
        ge=0,
        description=(
            "How long a worker process uses the OpenBao token of one login for the passes that"
            " follow (at most half the token's TTL) before it revokes it and logs in again;"
            " 0 logs in and revokes once per pass."
        ),
    )
    note_keys_file: str = Field(
        default="",
        description=(
            "A file of note keys, one a line, e.g. a mounted Secret (workers only): the first"
            " seals the notes a pass leaves its chain steps in Redis, every one opens them. A"
            " worker does not start without it. Rotate by adding the new key second, then moving"
            " it first, then dropping the old one, a rollout each."
        ),
    )
    address_map_file: str = Field(
        default="",
        description=(
            "A JSON object mapping in-cluster host:port addresses to reachable ones, for a"
            " tenantdb running outside the cluster; re-read when it changes."
        ),
    )
    mysql_require_tls: bool = Field(
        default=True,
        description=(
            "Refuse to connect to a MySQL failover group that sets no spec.tls, unless"
            " mysql_plaintext_groups names it; false reaches every such group in plaintext."
        ),
    )
    mysql_plaintext_groups: str = Field(
        default="",
        description=(
            "Comma-separated MySQL failover groups (namespace/name, or namespace/* for every group"
            " of a namespace) that may be reached in plaintext when they set no spec.tls; each"
            " worker logs them at start."
        ),
    )
    mysql_connect_timeout_seconds: float = Field(
        default=5.0, gt=0, description="Connect timeout of a MySQL admin connection."
    )
    mysql_read_timeout_seconds: float = Field(
        default=10.0, gt=0, description="Read and write timeout of a MySQL admin connection."
    )
    mysql_lock_wait_seconds: int = Field(
        default=5,
        gt=0,
        description=(
            "How long a statement of a MySQL admin connection may wait for a lock (a DROP behind"
            " a tenant's open transaction) before the server gives it up; the order then waits"
            " Pending and the statement is tried again. On MariaDB a statement also ends after"
            " this plus 2 s of running (max_statement_time). Below the read timeout, so the"
            " server, not the client, ends a statement that waits."
        ),
    )
    mysql_group_concurrency: int = Field(
        default=2,
        gt=0,
        description=(
            "How many passes may work on one MySQL failover group at once, across every worker;"
            " one more comes back shortly instead of waiting."
        ),
    )
    mysql_pass_budget_seconds: float = Field(
        default=30.0,
        gt=0,
        description=(
            "The MySQL time of one pass: once spent, its next query or statement is not sent and"
            " the order waits Pending PrimaryUnavailable."
        ),
    )
    mysql_circuit_seconds: float = Field(
        default=60.0,
        gt=0,
        description=(
            "How long every worker skips a MySQL site after a connect to it failed; doubles with"
            " each failure in a row."
        ),
    )
    mysql_circuit_max_seconds: float = Field(
        default=300.0, gt=0, description="The longest a MySQL site's circuit stays open."
    )
    mysql_verify_seconds: float = Field(
        default=600.0,
        gt=0,
        description=(
            "How often a Ready MysqlDatabase is checked against its server (one read-only"
            " query) and what drifted out of band is re-applied."
        ),
    )
    flower_basic_auth: str = Field(
        default="",
        description="Flower's basic-auth credentials, user:password (comma-separated pairs).",
        repr=False,
    )
    flower_basic_auth_file: str = Field(
        default="", description="A file holding Flower's user:password, e.g. a mounted Secret."
    )
    metrics_port: int = Field(
        default=0, ge=0, le=65535, description="Port of /metrics; 0 serves no metrics."
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        default="INFO",
        description=(
            "Log level of every tenantdb process (a worker's --loglevel wins). Even at DEBUG no"
            " credential, token or key is logged."
        ),
    )

    @model_validator(mode="after")
    def _lock_wait_below_read_timeout(self) -> Self:
        # The server must give up a waiting statement (it then did not run) before the client
        # gives up the connection (and cannot tell whether it ran).
        if self.mysql_lock_wait_seconds + 2 >= self.mysql_read_timeout_seconds:
            raise ValueError(
                "TENANTDB_MYSQL_LOCK_WAIT_SECONDS plus 2 must stay below"
                " TENANTDB_MYSQL_READ_TIMEOUT_SECONDS, or a statement that waits for a lock is"
                " cut by the client and may still run"
            )
        return self

    @model_validator(mode="after")
    def _visibility_covers_steps(self) -> Self:
        # A retried step waits out its countdown in a worker, unacknowledged, and then runs: the
        # broker must not deliver it again meanwhile.
        longest = self.retry_backoff_max_seconds + self.task_time_limit_seconds
        if self.visibility_timeout_seconds <= longest:
            raise ValueError(
                "TENANTDB_VISIBILITY_TIMEOUT_SECONDS must exceed the retry backoff cap plus the"
                f" task time limit ({longest} s), or a retried task is delivered twice"
            )
        return self

    @property
    def management_namespace_list(self) -> tuple[str, ...]:
        """The namespaces of ``management_namespaces``, sorted; empty for the whole cluster."""
        return tuple(
            sorted({n.strip() for n in self.management_namespaces.split(",") if n.strip()})
        )

    @property
    def kind_module_names(self) -> tuple[str, ...]:
        """The modules of ``kind_modules``, in order."""
        return tuple(m.strip() for m in self.kind_modules.split(",") if m.strip())

    @property
    def effective_broker_url(self) -> str:
        """The broker URL, defaulting to the work-queue Redis."""
        return self.broker_url or self.redis_url


def discover_kubeconfig(environ: Mapping[str, str], home: Path) -> str:
    """The kubeconfig kubectl would read when ``TENANTDB_KUBECONFIG`` names none: the first
    file of ``$KUBECONFIG`` that exists, else ``~/.kube/config`` when it exists; empty (the
    cluster the pod runs in) otherwise. Unlike kubectl, several files are not merged."""
    for path in environ.get("KUBECONFIG", "").split(os.pathsep):
        if path and Path(path).expanduser().is_file():
            return str(Path(path).expanduser())
    default = home / ".kube" / "config"
    return str(default) if default.is_file() else ""


@lru_cache(maxsize=1)
def load_settings() -> Settings:
    """Read the settings from the environment once per process; the kubeconfig is found as
    kubectl finds it when no setting names one (``discover_kubeconfig``)."""
    settings = Settings()
    if settings.kubeconfig:
        return settings
    found = discover_kubeconfig(os.environ, Path.home())
    return settings.model_copy(update={"kubeconfig": found}) if found else settings
