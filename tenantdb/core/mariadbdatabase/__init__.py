"""The MariaDBDatabase kind: its identity, model, gates, plans and status. Pure."""
