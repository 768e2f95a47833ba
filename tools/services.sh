#!/usr/bin/env bash
# Install (from Debian's packages) and start the services the tests, the bench and the demo use:
# Redis on 127.0.0.1:6379, MariaDB on 127.0.0.1:3306 with `root` logging in over TCP with an empty
# password, promtool, and Chromium (the demo test looks at Flower in a headless browser). Each part is skipped when it is already there, so a second run costs
# nothing. Installing needs root and apt-get; without them the script says what is missing.
#
# Debian's MariaDB lets root in over the Unix socket only (unix_socket authentication). The tests
# log in over TCP, so root@localhost also gets mysql_native_password with an empty password. That
# is a development machine's set-up: never run this against a MariaDB that holds anything.
set -euo pipefail

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
  local seconds=$1 what=$2; shift 2
  for _ in $(seq "$seconds"); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 1
  done
  echo "services: $what did not come up within ${seconds}s" >&2
  return 1
}

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
[ -x /usr/sbin/mariadbd ] && [ -x /usr/bin/mariadb-install-db ] || missing+=(mariadb-server)
command -v mariadb >/dev/null 2>&1 || missing+=(mariadb-client)
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
command -v setpriv >/dev/null 2>&1 || missing+=(util-linux)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "services: missing ${missing[*]}; install them (Debian: apt-get install ${missing[*]})" >&2
    exit 1
  fi
  echo "services: installing ${missing[*]} from Debian's packages"
  apt-get update -qq
  # policy-rc.d keeps the packages' own start scripts from starting anything: this script starts
  # each service itself, with the options the tests need.
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
  chmod +x /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" \
    >/tmp/tenantdb-services-apt.log 2>&1 || {
    tail -n 30 /tmp/tenantdb-services-apt.log >&2
    echo "services: apt-get install ${missing[*]} failed" >&2
    exit 1
  }
  rm -f /usr/sbin/policy-rc.d
  trap - EXIT
fi

if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  echo "services: starting Redis on 127.0.0.1:6379"
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --maxmemory-policy noeviction --dir /var/lib/redis --logfile /var/log/redis/tenantdb.log
  wait_for 30 "Redis" redis-cli -h 127.0.0.1 -p 6379 ping
fi

# `mariadb-admin ping` answers 0 whenever the server runs, even when the login is refused, so the
# login itself is what is checked.
tcp_login() { mariadb -h 127.0.0.1 -P 3306 -uroot -e 'SELECT 1'; }
if ! tcp_login >/dev/null 2>&1; then
  if ! mariadb-admin --protocol=socket -uroot ping >/dev/null 2>&1; then
    echo "services: starting MariaDB on 127.0.0.1:3306"
    if [ ! -d /var/lib/mysql/mysql ]; then
      mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null
    fi
    mkdir -p /run/mysqld
    chown mysql:mysql /run/mysqld 2>/dev/null || true
    # mariadbd-safe restarts the server if it dies; it reads Debian's option files, which bind
    # 127.0.0.1:3306 and name the socket root logs in over. A tmpdir of its own: a MariaDB
    # server starting removes every `#sql*` file in its tmpdir, so the test servers starting
    # beside it would otherwise remove its temporary tables from /tmp.
    mkdir -p /var/lib/mysql-tmp
    chown mysql:mysql /var/lib/mysql-tmp 2>/dev/null || true
    (cd / && setsid mariadbd-safe --user=mysql --tmpdir=/var/lib/mysql-tmp >/dev/null 2>&1 &)
    wait_for 60 "MariaDB" mariadb-admin --protocol=socket -uroot ping
  fi
  if ! tcp_login >/dev/null 2>&1; then
    echo "services: letting MariaDB's root log in over TCP with an empty password"
    mariadb --protocol=socket -uroot -e \
      "ALTER USER 'root'@'localhost' IDENTIFIED VIA mysql_native_password USING PASSWORD('') OR unix_socket;
       FLUSH PRIVILEGES;"
    wait_for 10 "MariaDB's root login over TCP" tcp_login
  fi
fi
