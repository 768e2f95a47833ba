"""An External Secrets Operator stand-in: VaultDynamicSecret generators behind ExternalSecrets.

Owns running the ExternalSecret controller as threads in the devstack process (see `controller`
for the sync rules and what is left out) and the Vault generator it calls (`vault`). Production
code never imports it.
"""

from devstack.eso.controller import ExternalSecrets, synced_resource_version
from devstack.eso.vault import GeneratorError, generate

__all__ = ["ExternalSecrets", "GeneratorError", "generate", "synced_resource_version"]
