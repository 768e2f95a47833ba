"""`RemoteCluster` lives in `devstack.kubeclient`; this name stays for the in-process server."""

from devstack.kubeclient import RemoteCluster, Resource

__all__ = ["RemoteCluster", "Resource"]
