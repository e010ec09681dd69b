#
# ceph-rgw: a one-node Ceph cluster with radosgw (Debian's Ceph 16.2,
# pacific), the real S3 store the container test puts the gateway in front
# of: a monitor, one OSD on memstore (the data lives in the OSD's memory and
# is gone when the container stops) and one radosgw, started by
# scripts/ceph-rgw, the script CI uses on the host. Build from the
# repository root (scripts/container-images does, from a small context of
# its own):
#
#   docker build -f docker/ceph-rgw.Dockerfile -t hipobj-ceph-rgw .
#   docker run -d --init --name rgw -e CEPH_RGW_ACCESS_KEY=K -e CEPH_RGW_SECRET_KEY=S hipobj-ceph-rgw
#
# S3 on port 7480 (CEPH_RGW_PORT) of the container's address, path-style;
# the user's keys from CEPH_RGW_ACCESS_KEY and CEPH_RGW_SECRET_KEY (random
# ones, printed in the log, where they are not set). Healthy once the user
# exists. A test store, not a deployment: auth between the daemons is off.

ARG DEBIAN_RELEASE=bookworm

FROM debian:${DEBIAN_RELEASE}-slim
# The package scripts try to start systemd units and are refused: harmless.
# python3: scripts/ceph-rgw makes its fsid and OSD uuid with it.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        radosgw ceph-mon ceph-osd python3 \
    && rm -rf /var/lib/apt/lists/*
COPY --chmod=0755 scripts/ceph-rgw /usr/local/bin/ceph-rgw
COPY --chmod=0755 docker/ceph-rgw-entrypoint.sh /usr/local/bin/ceph-rgw-entrypoint
ENV CEPH_RGW_BIND=0.0.0.0 \
    CEPH_RGW_PORT=7480 \
    CEPH_RGW_DIR=/var/lib/ceph-rgw
EXPOSE 7480
HEALTHCHECK --interval=2s --timeout=5s --start-period=60s --retries=3 \
    CMD ["test", "-f", "/var/lib/ceph-rgw/ready"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["ceph-rgw-entrypoint"]
