# hipobj: the command-line client (cp, ls, mb, rm, bench, demo), for the
# example client in compose.yaml and for quick checks against a gateway.
# Build from the repository root:
#
#   docker build -f docker/cli.Dockerfile -t hipobj-cli .
#   docker run --rm --network host -e AWS_ENDPOINT_URL=http://127.0.0.1:9100 \
#       -e AWS_ACCESS_KEY_ID=hipobj-test-key -e AWS_SECRET_ACCESS_KEY=hipobj-test-secret \
#       hipobj-cli ls

ARG RUST_VERSION=1.95
ARG DEBIAN_RELEASE=bookworm
# Where the binary comes from: `source` builds it in the rust image (below);
# `prebuilt` copies prebuilt/hipobj from the build context, for machines
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
    cargo build --release --locked -p hipobj-cli --bin hipobj \
    && install -D -m 0755 target/release/hipobj /out/hipobj

# ---- or: the binary built outside (HIPOBJ_BINARIES=prebuilt) --------------
FROM scratch AS builder-prebuilt
COPY prebuilt/hipobj /out/hipobj

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
COPY --from=builder /out/hipobj /usr/local/bin/hipobj
USER hipobj:hipobj
WORKDIR /var/lib/hipobj
# A command, not a service.
HEALTHCHECK NONE
ENTRYPOINT ["hipobj"]
