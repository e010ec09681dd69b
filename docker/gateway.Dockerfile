# hipobj-gateway: the RDMA S3 front, in front of MinIO or any S3 endpoint.
# Build from the repository root (the context is the whole workspace):
#
#   docker build -f docker/gateway.Dockerfile -t hipobj-gateway .
#
# Run (software RDMA provider; docs/deploy.md has real NICs, MinIO and load
# balancers):
#
#   docker run --rm --network host -e HIPOBJ_LISTEN=0.0.0.0:9100 hipobj-gateway \
#       --upstream http://127.0.0.1:9000 --upstream-access-key K --upstream-secret-key S
#
# Set the listen address with HIPOBJ_LISTEN rather than --listen: the
# HEALTHCHECK reads it (or set HIPOBJ_HEALTH_ADDR to match).

ARG RUST_VERSION=1.95
ARG DEBIAN_RELEASE=bookworm
# Where the binary comes from: `source` builds it in the rust image (below);
# `prebuilt` copies prebuilt/hipobj-gateway from the build context, for machines
# without a registry (scripts/container-images; docker/README.md).
ARG HIPOBJ_BINARIES=source

# ---- build: the release binary, with the lock file as committed ----------
FROM rust:${RUST_VERSION}-${DEBIAN_RELEASE} AS builder-source
WORKDIR /src
COPY . .
# Symbols stay (for backtraces); the debug info of the release profile goes.
ENV CARGO_PROFILE_RELEASE_STRIP=debuginfo
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/usr/local/cargo/git,sharing=locked \
    --mount=type=cache,target=/src/target,sharing=locked \
    cargo build --release --locked -p hipobj-gateway --bin hipobj-gateway \
    && install -D -m 0755 target/release/hipobj-gateway /out/hipobj-gateway

# ---- or: the binary built outside (HIPOBJ_BINARIES=prebuilt) --------------
FROM scratch AS builder-prebuilt
COPY prebuilt/hipobj-gateway /out/hipobj-gateway

FROM builder-${HIPOBJ_BINARIES} AS builder

# ---- run: Debian slim with libibverbs (dlopen()ed at run time) ------------
FROM debian:${DEBIAN_RELEASE}-slim
# libibverbs1 is the verbs library the gateway loads with dlopen(); the
# providers are the NIC drivers' user-space halves (mlx5, bnxt_re, ionic,
# rxe, ...). Without a device the gateway runs on the software provider.
# ca-certificates: the system roots an https:// upstream is checked against
# (a private CA: --upstream-ca-file).
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        libibverbs1 ibverbs-providers ca-certificates \
    && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 hipobj \
    && useradd --system --uid 10001 --gid hipobj --home-dir /var/lib/hipobj \
        --create-home --shell /usr/sbin/nologin hipobj
COPY --from=builder /out/hipobj-gateway /usr/local/bin/hipobj-gateway
COPY --chmod=0755 docker/healthcheck.sh /usr/local/bin/hipobj-healthcheck
ENV HIPOBJ_LISTEN=0.0.0.0:9000 \
    HIPOBJ_HEALTH_PATH=/health/live \
    RUST_LOG=info
USER hipobj:hipobj
WORKDIR /var/lib/hipobj
EXPOSE 9000
HEALTHCHECK --interval=10s --timeout=5s --start-period=15s --retries=3 \
    CMD ["hipobj-healthcheck"]
ENTRYPOINT ["hipobj-gateway"]
