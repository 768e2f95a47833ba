"""The MysqlDatabase kind: a tenant database, its owner and grants on a failover group. Pure."""
