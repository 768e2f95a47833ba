# syntax=docker/dockerfile:1
# One image for every tenantdb role; the role is the command:
#   docker run IMAGE watcher | worker -- <celery worker options> | beat | flower
# The final stage (`runtime`, the default target) holds the tenantdb package and its runtime
# dependencies only: no dev extra and no devstack. The `dev` stage adds both, for the local
# docker-compose stack.

ARG PYTHON_VERSION=3.11

FROM python:${PYTHON_VERSION}-slim AS base
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# tini forwards SIGTERM to the role and reaps children: Python as PID 1 ignores SIGTERM
# unless it installs a handler itself.
RUN apt-get update \
    && apt-get install -y --no-install-recommends tini \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 tenantdb \
    && useradd --system --uid 10001 --gid 10001 --home-dir /nonexistent --no-create-home \
       --shell /usr/sbin/nologin tenantdb

FROM base AS build
WORKDIR /src
COPY . .
RUN pip wheel --no-deps --wheel-dir /wheels . \
    && cp constraints.txt /wheels/

FROM base AS dev
WORKDIR /src
COPY . .
RUN pip install -c constraints.txt ".[dev]" \
    && install -d -o 10001 -g 10001 /state
USER 10001:10001
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["python", "-m", "devstack", "up", "--state-dir", "/state"]

FROM base AS runtime
COPY --from=build /wheels /wheels
# The wheel, without extras: pip resolves only the runtime dependencies, at the versions of
# constraints.txt. The build fails if the devstack came along (it must not ship in this image).
RUN pip install -c /wheels/constraints.txt /wheels/tenantdb-*.whl \
    && rm -rf /wheels \
    && python -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('devstack') is not None)" \
    && tenantdb --help >/dev/null
USER 10001:10001
WORKDIR /tmp
ENTRYPOINT ["/usr/bin/tini", "--", "tenantdb"]
CMD ["--help"]
