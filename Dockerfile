# syntax=docker/dockerfile:1
# One image for every tenantdb role; the role is the command:
#   docker run IMAGE watcher | worker -- <celery worker options> | beat | flower
# The final stage (`runtime`, the default target) holds the tenantdb package and its runtime
# dependencies only: no dev extra and no devstack. The `dev` stage adds both (the devstack is a
# distribution of its own, devstack/pyproject.toml) and the platform's binaries, which the
# `kube` stage builds from their Go modules as `make kube` does (kube-apiserver, etcd, ESO,
# cert-manager; minutes the first time), for the local docker-compose stack.

# The base image, one build argument: a release pins it by digest, e.g.
#   --build-arg BASE_IMAGE=python:3.11-slim@sha256:<digest of the index `docker buildx
#   imagetools inspect python:3.11-slim` prints>
ARG BASE_IMAGE=python:3.11-slim
# The Go toolchain the `kube` stage builds the platform's binaries with (Go 1.26 or newer).
ARG GO_IMAGE=golang:1.26-bookworm

FROM ${BASE_IMAGE} AS base
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

FROM ${GO_IMAGE} AS kube
WORKDIR /src
COPY tools/kube tools/kube
RUN bash tools/kube/build.sh

FROM base AS dev
WORKDIR /src
COPY . .
COPY --from=kube /src/tools/kube/bin tools/kube/bin
RUN pip install -c constraints.txt ./devstack ".[dev]" \
    && install -d -o 10001 -g 10001 /state
USER 10001:10001
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["python", "-m", "devstack", "up", "--state-dir", "/state"]

FROM base AS runtime
ARG BASE_IMAGE
ARG VERSION=0.1.0
ARG REVISION=""
ARG CREATED=""
# https://github.com/opencontainers/image-spec/blob/main/annotations.md
LABEL org.opencontainers.image.title="tenantdb" \
      org.opencontainers.image.description="Tenant databases on Kubernetes: MariaDBDatabase and MysqlDatabase orders served by a watcher, Celery workers and beat" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.base.name="${BASE_IMAGE}"
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
