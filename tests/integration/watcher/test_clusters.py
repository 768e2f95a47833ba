"""Target clusters come and go with the kubeconfig, without restarting the watcher."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from tenantdb.settings import Settings
from tests.integration.watcher.conftest import (
    ORDERS,
    Published,
    StartWatcher,
    key,
    order,
    settings_for,
    write_kubeconfig,
)
from tests.realclusters import ApiServer
from tests.support import wait_for


def _last_heard(cluster: str) -> float | None:
    return REGISTRY.get_sample_value(
        "tenantdb_watch_last_event_timestamp_seconds",
        {"cluster": cluster, "kind": "MariaDBDatabase"},
    )


def test_a_target_cluster_added_to_the_kubeconfig_is_engaged_and_a_removed_one_dropped(
    servers: dict[str, ApiServer],
    kubeconfig_file: Path,
    start_watcher: StartWatcher,
    published: Published,
) -> None:
    write_kubeconfig(kubeconfig_file, {"management": servers["management"]})
    watcher = start_watcher()
    assert watcher.engaged() == [""]

    write_kubeconfig(kubeconfig_file, servers)
    wait_for(lambda: watcher.engaged() == ["", "edge-1"], 10.0, "edge-1 was not engaged")
    servers["edge-1"].cluster.create(ORDERS, order("far"), "tenant-a")
    published.take(key("far", "edge-1"))

    assert _last_heard("edge-1") is not None, "an engaged cluster's watches report their events"

    write_kubeconfig(kubeconfig_file, {"management": servers["management"]})
    wait_for(lambda: watcher.engaged() == [""], 10.0, "edge-1 was not dropped")
    assert _last_heard("edge-1") is None, "a dropped cluster leaves no watch to age and alert on"
    assert _last_heard("management") is not None
    # The management cluster's watches were left alone.
    servers["management"].cluster.create(ORDERS, order("near"), "tenant-a")
    published.take(key("near"))


def test_a_half_written_kubeconfig_keeps_the_clusters_engaged(
    servers: dict[str, ApiServer],
    kubeconfig_file: Path,
    start_watcher: StartWatcher,
    published: Published,
) -> None:
    watcher = start_watcher()
    kubeconfig_file.write_text("clusters: [unterminated")
    servers["edge-1"].cluster.create(ORDERS, order("far"), "tenant-a")
    published.take(key("far", "edge-1"))
    assert watcher.engaged() == ["", "edge-1"]


def _with_targets_dir(
    servers: dict[str, ApiServer], kubeconfig_file: Path, tmp_path: Path, key_prefix: str
) -> tuple[Path, Settings]:
    """The kubeconfig with the management cluster only, and settings naming an empty directory
    of target kubeconfigs beside it."""
    write_kubeconfig(kubeconfig_file, {"management": servers["management"]})
    directory = tmp_path / "targets"
    directory.mkdir()
    settings = settings_for(kubeconfig_file, key_prefix).model_copy(
        update={"kubeconfig_dir": str(directory)}
    )
    return directory, settings


def test_a_directory_of_kubeconfigs_names_target_clusters_by_file_name(
    servers: dict[str, ApiServer],
    kubeconfig_file: Path,
    tmp_path: Path,
    start_watcher: StartWatcher,
    published: Published,
    key_prefix: str,
) -> None:
    directory, settings = _with_targets_dir(servers, kubeconfig_file, tmp_path, key_prefix)
    watcher = start_watcher(settings=settings)
    assert watcher.engaged() == [""]

    write_kubeconfig(directory / "edge-1", {"edge-1": servers["edge-1"]})
    wait_for(lambda: watcher.engaged() == ["", "edge-1"], 10.0, "edge-1 was not engaged")
    servers["edge-1"].cluster.create(ORDERS, order("far"), "tenant-a")
    published.take(key("far", "edge-1"))

    (directory / "edge-1").unlink()
    wait_for(lambda: watcher.engaged() == [""], 10.0, "edge-1 was not dropped")


def test_a_cluster_name_no_order_key_can_carry_is_skipped_said_and_counted(
    servers: dict[str, ApiServer],
    kubeconfig_file: Path,
    tmp_path: Path,
    start_watcher: StartWatcher,
    key_prefix: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    directory, settings = _with_targets_dir(servers, kubeconfig_file, tmp_path, key_prefix)
    caplog.set_level(logging.WARNING, logger="watcher.process")
    watcher = start_watcher(settings=settings)

    write_kubeconfig(directory / "gke_project_zone_edge", {"edge-1": servers["edge-1"]})
    wait_for(lambda: _skipped() == 1, 10.0, "the context was not counted as skipped")
    assert watcher.engaged() == [""], "no orders are served under a name keys cannot carry"
    said = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert said, "the watcher says which context it skipped"
    assert "'gke_project_zone_edge'" in said[-1]
    assert "order keys" in said[-1]

    (directory / "gke_project_zone_edge").replace(directory / "edge-1")
    wait_for(lambda: watcher.engaged() == ["", "edge-1"], 10.0, "the renamed file was not engaged")
    assert _skipped() == 0


def _skipped() -> float | None:
    return REGISTRY.get_sample_value("tenantdb_cluster_contexts_skipped")
