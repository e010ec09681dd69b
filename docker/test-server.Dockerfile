# hipobj-test-server: the reference RDMA S3 server (the gateway's engine with
# an embedded store in a temporary directory, test credentials, GET /health).
# Build from the repository root:
#
#   docker build -f docker/test-server.Dockerfile -t hipobj-test-server .
#   docker run --rm --network host hipobj-test-server                                # port 9000
#   docker run --rm --network host -e HIPOBJ_TEST_SERVER_PORT=9200 hipobj-test-server  # another port
#
# It listens on HIPOBJ_LISTEN_ADDR (0.0.0.0 here) and the port given as the
# argument or in HIPOBJ_TEST_SERVER_PORT; the HEALTHCHECK reads the latter,
# so change the port through the environment, not the argument.

ARG RUST_VERSION=1.95
ARG DEBIAN_RELEASE=bookworm
# Where the binary comes from: `source` builds it in the rust image (below);
# `prebuilt` copies prebuilt/hipobj-test-server from the build context, for machines
# without a registry (scripts/container-images; docker/README.md).
ARG HIPOBJ_BINARIES=source

# ---- build ----------------------------------------------------------------
FROM rust:${RUST_VERSION}-${DEBIAN_RELEASE} AS builder-source
WORKDIR /src
COPY . .
ENV CARGO_PROFILE_RELEASE_STRIP=debuginfo
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/usr/local/cargo/git,sharing=locked \
    --mount=type=cache,target=/src/target,sharing=locked \
    cargo build --release --locked -p hipobj-test-server --bin hipobj-test-server \
    && install -D -m 0755 target/release/hipobj-test-server /out/hipobj-test-server

# ---- or: the binary built outside (HIPOBJ_BINARIES=prebuilt) --------------
FROM scratch AS builder-prebuilt
COPY prebuilt/hipobj-test-server /out/hipobj-test-server

FROM builder-${HIPOBJ_BINARIES} AS builder

# ---- run ------------------------------------------------------------------
FROM debian:${DEBIAN_RELEASE}-slim
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        libibverbs1 ibverbs-providers \
    && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 hipobj \
    && useradd --system --uid 10001 --gid hipobj --home-dir /var/lib/hipobj \
        --create-home --shell /usr/sbin/nologin hipobj
COPY --from=builder /out/hipobj-test-server /usr/local/bin/hipobj-test-server
COPY --chmod=0755 docker/healthcheck.sh /usr/local/bin/hipobj-healthcheck
ENV HIPOBJ_LISTEN_ADDR=0.0.0.0 \
    HIPOBJ_TEST_SERVER_PORT=9000 \
    HIPOBJ_HEALTH_PATH=/health \
    RUST_LOG=info
USER hipobj:hipobj
WORKDIR /var/lib/hipobj
EXPOSE 9000
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
    CMD ["hipobj-healthcheck"]
ENTRYPOINT ["hipobj-test-server"]
