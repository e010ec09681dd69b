#!/bin/bash
# hipobj-healthcheck: the images' HEALTHCHECK. Sends `GET $HIPOBJ_HEALTH_PATH`
# (default /health) to the address the server listens on and exits 0 when it
# answers 200. Needs nothing but bash (no curl in the slim image).
#
# The address: HIPOBJ_HEALTH_ADDR, else HIPOBJ_LISTEN (the gateway's), else
# HIPOBJ_LISTEN_ADDR:HIPOBJ_TEST_SERVER_PORT (the test server's); a wildcard
# host (0.0.0.0, ::) is asked on 127.0.0.1. A server started with --listen
# (a flag, not the environment) needs HIPOBJ_HEALTH_ADDR set to match.
set -u
addr=${HIPOBJ_HEALTH_ADDR:-${HIPOBJ_LISTEN:-${HIPOBJ_LISTEN_ADDR:-127.0.0.1}:${HIPOBJ_TEST_SERVER_PORT:-9000}}}
path=${HIPOBJ_HEALTH_PATH:-/health}
host=${addr%:*}
port=${addr##*:}
host=${host#[}
host=${host%]}
case $host in
    "" | 0.0.0.0 | :: ) host=127.0.0.1 ;;
esac
if ! { exec 3<>"/dev/tcp/$host/$port"; } 2>/dev/null; then
    echo "unhealthy: nothing accepts connections on $host:$port" >&2
    exit 1
fi
printf 'GET %s HTTP/1.0\r\nHost: %s:%s\r\nConnection: close\r\n\r\n' "$path" "$host" "$port" >&3
if ! IFS= read -r -t 5 status <&3; then
    echo "unhealthy: no answer to GET $path from $host:$port" >&2
    exit 1
fi
status=${status%$'\r'}
case $status in
    "HTTP/"*" 200"*) exit 0 ;;
esac
echo "unhealthy: GET $path on $host:$port answered: $status" >&2
exit 1
