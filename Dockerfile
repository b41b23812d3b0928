# syntax=docker/dockerfile:1
# gpubot: the Slack bot and CLI. Build: docker build -t gpubot:0.3.0 .
# Two stages: the builder turns the project and every dependency into wheels;
# the final image installs only those wheels (no compiler, no sources, no cache).

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# Only what the wheel is built from: the package metadata, then the three packages.
COPY pyproject.toml README.md ./
COPY layers/ layers/
COPY handlers/ handlers/
COPY bot/ bot/
# The project's wheel, then wheels of its pinned-by-pyproject dependencies, all in /wheels.
RUN pip wheel --wheel-dir /wheels .

FROM ${PYTHON_IMAGE}
ARG VERSION=0.3.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="gpubot" \
      org.opencontainers.image.description="Slack ChatOps bot that diagnoses GPU failures on Kubernetes clusters running the NVIDIA GPU Operator" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${PYTHON_IMAGE}"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    MPLCONFIGDIR=/tmp/matplotlib
# The wheels are bind-mounted from the builder, so none of them stays in a layer.
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-index --find-links=/wheels /wheels/gpubot-*.whl \
    && groupadd --system --gid 10001 gpubot \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin gpubot
WORKDIR /tmp
USER 10001:10001
# 3000: /healthz, /readyz and /metrics (and /slack/events with --http).
EXPOSE 3000
ENTRYPOINT ["gpubot"]
CMD ["serve"]
