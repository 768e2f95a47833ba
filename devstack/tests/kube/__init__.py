"""Tests of the devstack's Kubernetes API server (devstack/kube), through the official client and
a real kubectl."""
