"""`KubeApi` lives in `devstack.kubeclient`; this name stays for the in-process API server."""

from devstack.kubeclient import KubeApi, Obj

__all__ = ["KubeApi", "Obj"]
