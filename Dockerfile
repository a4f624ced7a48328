# Tether's container image (docs/deploy.md). Build it with `docker build -t tether .` (or
# `podman build`); run the keyless demo with
#   docker run -p 127.0.0.1:8484:8484 -e TETHER_AUTH_TOKEN="$(openssl rand -hex 32)" -v tether-data:/data tether
# tests/test_container.py runs this file's ENTRYPOINT + CMD with its ENV from an installed
# wheel (no container engine runs on CI's machine): keep them in the exec (JSON) form.
ARG PYTHON_IMAGE=python:3.12-slim

# Stage 1: the wheel, built from the checkout as CI builds it (`python -m build`).
FROM ${PYTHON_IMAGE} AS wheel
WORKDIR /src
RUN pip install --no-cache-dir --disable-pip-version-check "build>=1.2"
COPY . .
RUN python -m build --wheel --outdir /dist

# Stage 2: the runtime: the wheel and its postgres extra, nothing else of the checkout.
FROM ${PYTHON_IMAGE}
COPY --from=wheel /dist /tmp/dist
RUN pip install --no-cache-dir --disable-pip-version-check "$(ls /tmp/dist/tether-*.whl)[postgres]" \
    && rm -rf /tmp/dist \
    && useradd --system --uid 10001 --user-group --home-dir /data --no-create-home \
        --shell /usr/sbin/nologin tether \
    && mkdir /data && chown tether:tether /data
# The SQLite store lives on the volume (the default store, ./tether-data, is relative to the
# working directory: both name /data/tether-data). On all interfaces, as a container must
# listen: `tether serve` then refuses to start without TETHER_AUTH_TOKEN (or --auth, or
# --allow-unauthenticated behind something that authenticates).
ENV PYTHONUNBUFFERED=1 \
    TETHER_STORE=sqlite:////data/tether-data \
    TETHER_HOST=0.0.0.0 \
    TETHER_PORT=8484
USER tether
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8484
# Liveness only (/readyz also writes to the store). A `tether worker` container serves no
# HTTP: compose.yaml turns this off for its workers.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('TETHER_PORT', '8484'), timeout=4)"]
ENTRYPOINT ["tether", "serve"]
# The keyless demo agents; give your application instead: --app module:factory (on
# PYTHONPATH, or installed in an image built FROM this one).
CMD ["--demo"]
