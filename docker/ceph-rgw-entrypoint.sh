#!/bin/bash
# The ceph-rgw image's entrypoint: a fresh one-node cluster under
# $CEPH_RGW_DIR (scripts/ceph-rgw start, with the address, port and keys of
# the environment), "$CEPH_RGW_DIR/ready" once S3 answers and the user
# exists, then it waits: SIGTERM (docker stop) stops radosgw, the OSD and
# the monitor in that order; if a daemon dies, the container exits 1.
set -euo pipefail
dir=${CEPH_RGW_DIR:-/var/lib/ceph-rgw}
rm -rf "$dir"
mkdir -p "$dir"
stopping=0
stop() {
    stopping=1
    ceph-rgw stop "$dir/cluster" || true
}
trap 'stop; exit 0' TERM INT
if ! ceph-rgw start "$dir/cluster" "${CEPH_RGW_DAEMONS:-1}"; then
    echo "ceph-rgw-entrypoint: the cluster did not start; its logs:" >&2
    tail -n 20 "$dir"/cluster/log/* >&2 || true
    stop
    exit 1
fi
touch "$dir/ready"
echo "ceph-rgw-entrypoint: S3 on ${CEPH_RGW_BIND:-127.0.0.1}:${CEPH_RGW_PORT:-?}, ready"
while [ "$stopping" = 0 ]; do
    for f in "$dir"/cluster/*.pid; do
        if ! kill -0 "$(cat "$f")" 2>/dev/null; then
            echo "ceph-rgw-entrypoint: $(basename "$f" .pid) exited; its log:" >&2
            tail -n 20 "$dir/cluster/log/$(basename "$f" .pid).out" >&2 || true
            stop
            exit 1
        fi
    done
    sleep 1 &
    wait $! || true
done
