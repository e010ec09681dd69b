/* hipobj-rc-v2 transfers between a C program, using hipobj.h only, and the
 * real hipobj-test-server. Compiled and run by tests/c_client_v2.rs.
 *
 * The harness plays the application's HTTP client: a relay on 127.0.0.1
 * that takes one line per control request and answers one line.
 *
 *   PREPARE METHOD TARGET TOKEN PSN COOKIE SIZE OFFSET
 *     -> STATUS ECHO UNSUPPORTED SERVER_TOKEN SESSION PSN STAGING_ADDR STAGING_RKEY
 *   READY SESSION COOKIE QPN MR_ADDR MR_RKEY
 *     -> STATUS ECHO BYTES COOKIE ETAG VERSION_ID CHECKSUM_B64
 *   CANCEL SESSION COOKIE
 *     -> STATUS
 *
 * PSN, COOKIE, QPN, MR_ADDR and MR_RKEY in hex as the headers carry them
 * (MR_ADDR and MR_RKEY "-" for a PUT's READY); ECHO and UNSUPPORTED 0 or 1;
 * any absent value "-". The relay sends each as a SigV4-signed, body-less
 * POST to /.hipobj-rc/prepare, /ready or /cancel.
 *
 * Usage: v2_client RELAY_PORT SIZE...
 *
 * For each SIZE, with a host buffer of SIZE bytes registered:
 *  - hipObjPutV2 of pattern(PUT_SEED_BASE + SIZE) to bkt/v2-obj-SIZE;
 *  - the buffer cleared, hipObjGetV2 of it back, the bytes compared;
 *  - for SIZE > 1, hipObjGetV2 of its second half (offset SIZE / 2) into
 *    the buffer, compared;
 *  - hipObjGetV2 of a key that does not exist: hipObjS3Error, with at
 *    most one CANCEL (when the server made a session first).
 *
 * Prints "v2_client: ok" and exits 0 only if every check passed. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>

#include "check.h"
#include "relay.h"

#define PUT_SEED_BASE (1ull << 32)
#define MAX_LINE 4096

/* Splits line at spaces into at most max fields; how many. */
static int split(char* line, char** fields, int max) {
    int n = 0;
    char* save = NULL;
    char* tok = strtok_r(line, " ", &save);
    while (tok != NULL && n < max) {
        fields[n++] = tok;
        tok = strtok_r(NULL, " ", &save);
    }
    return n;
}

/* Copies a field into a fixed array: "-" is empty; -1 if it does not fit. */
static int copy_field(char* dst, size_t cap, const char* f) {
    if (strcmp(f, "-") == 0) {
        dst[0] = '\0';
        return 0;
    }
    if (strlen(f) + 1 > cap) {
        return -1;
    }
    memcpy(dst, f, strlen(f) + 1);
    return 0;
}

/* ---- The callbacks ---------------------------------------------------- */

typedef struct {
    int prepares;
    int readies;
    int finishes;
    int cancels;
    int ready_pending; /* sendReadyRequest sent a line not yet answered */
    int saw_endpoint;  /* req->endpoint named the control endpoint */
} counts_t;

static int send_prepare(void* ctx, const hipObjTransferReqV2_t* req,
                        hipObjPrepareReplyV2_t* out) {
    counts_t* c = (counts_t*)ctx;
    char line[MAX_LINE];
    char answer[MAX_LINE];
    char* f[8];
    int n;
    c->prepares++;
    if (req->endpoint != NULL && req->endpoint->controlEndpoint != NULL &&
        strncmp(req->endpoint->controlEndpoint, "http://127.0.0.1:", 17) == 0) {
        c->saw_endpoint = 1;
    }
    if (req->session != NULL || req->clientQpn != 0 || !is_lower_hex(req->token, 88) ||
        req->clientPsn == 0 || req->clientPsn > 0xffffff || req->cookie == 0) {
        fprintf(stderr, "sendPrepare: an unexpected request\n");
        return -1;
    }
    n = snprintf(line, sizeof line, "PREPARE %s %s %s %06" PRIx32 " %08" PRIx32 " %" PRIu64
                 " %" PRIu64 "\n",
                 req->method, req->target, req->token, req->clientPsn, req->cookie, req->size,
                 req->offset);
    if (n < 0 || (size_t)n >= sizeof line || write_all(line, (size_t)n) != 0 ||
        read_line(answer, sizeof answer, NULL) != 0) {
        return -2;
    }
    if (split(answer, f, 8) != 8) {
        return -3;
    }
    out->httpStatus = atoi(f[0]);
    out->protocolEcho = atoi(f[1]);
    out->unsupportedMarker = atoi(f[2]);
    if (copy_field(out->serverToken, sizeof out->serverToken, f[3]) != 0 ||
        copy_field(out->session, sizeof out->session, f[4]) != 0) {
        return -4;
    }
    out->serverPsn = strcmp(f[5], "-") == 0 ? 0 : (uint32_t)strtoul(f[5], NULL, 16);
    if (strcmp(f[6], "-") != 0 && strcmp(f[7], "-") != 0) {
        out->stagingAddr = (uint64_t)strtoull(f[6], NULL, 16);
        out->stagingRkey = (uint32_t)strtoul(f[7], NULL, 16);
        out->stagingPresent = 1;
    }
    return 0;
}

static int send_ready_request(void* ctx, const hipObjTransferReqV2_t* req) {
    counts_t* c = (counts_t*)ctx;
    char line[MAX_LINE];
    char addr[32] = "-";
    char rkey[16] = "-";
    int n;
    c->readies++;
    if (req->session == NULL || !is_lower_hex(req->session, 32) || req->clientQpn == 0) {
        fprintf(stderr, "sendReadyRequest: an unexpected request\n");
        return -1;
    }
    if (req->clientMrAddr != 0) {
        snprintf(addr, sizeof addr, "%" PRIx64, req->clientMrAddr);
        snprintf(rkey, sizeof rkey, "%" PRIx32, req->clientMrRkey);
    }
    n = snprintf(line, sizeof line, "READY %s %08" PRIx32 " %" PRIx32 " %s %s\n", req->session,
                 req->cookie, req->clientQpn, addr, rkey);
    if (n < 0 || (size_t)n >= sizeof line || write_all(line, (size_t)n) != 0) {
        return -2;
    }
    c->ready_pending = 1;
    return 0;
}

static int finish_ready(void* ctx, const hipObjTransferReqV2_t* req,
                        hipObjFinalReplyV2_t* out) {
    counts_t* c = (counts_t*)ctx;
    char answer[MAX_LINE];
    char* f[7];
    (void)req;
    c->finishes++;
    if (!c->ready_pending) {
        return -1;
    }
    c->ready_pending = 0;
    if (read_line(answer, sizeof answer, NULL) != 0 || split(answer, f, 7) != 7) {
        return -2;
    }
    out->httpStatus = atoi(f[0]);
    out->protocolEcho = atoi(f[1]);
    out->bytes = (uint64_t)strtoull(f[2], NULL, 10);
    if (strcmp(f[3], "-") != 0) {
        out->cookieEcho = (uint32_t)strtoul(f[3], NULL, 16);
        out->cookiePresent = 1;
    }
    if (copy_field(out->etag, sizeof out->etag, f[4]) != 0 ||
        copy_field(out->versionId, sizeof out->versionId, f[5]) != 0 ||
        copy_field(out->checksumB64, sizeof out->checksumB64, f[6]) != 0) {
        return -3;
    }
    return 0;
}

static int send_cancel(void* ctx, const hipObjTransferReqV2_t* req) {
    counts_t* c = (counts_t*)ctx;
    char line[MAX_LINE];
    char answer[MAX_LINE];
    int n;
    c->cancels++;
    if (req->session == NULL) {
        return -1;
    }
    n = snprintf(line, sizeof line, "CANCEL %s %08" PRIx32 "\n", req->session, req->cookie);
    if (n < 0 || (size_t)n >= sizeof line || write_all(line, (size_t)n) != 0 ||
        read_line(answer, sizeof answer, NULL) != 0) {
        return -2;
    }
    return 0;
}

/* ---- The transfers ---------------------------------------------------- */

static void transfers(unsigned char* buf, size_t size) {
    hipObjOpsV2_t ops;
    counts_t c;
    char key[64];
    uint64_t seed = PUT_SEED_BASE + size;

    memset(&ops, 0, sizeof ops);
    ops.sendPrepare = send_prepare;
    ops.sendReadyRequest = send_ready_request;
    ops.finishReady = finish_ready;
    ops.sendCancel = send_cancel;
    memset(&c, 0, sizeof c);
    snprintf(key, sizeof key, "v2-obj-%zu", size);

    fill(seed, buf, size);
    CHECK_OP(hipObjPutV2("bkt", key, buf, size, 0, NULL, &ops, &c), hipObjSuccess);
    CHECK(c.prepares == 1 && c.readies == 1 && c.finishes == 1 && c.cancels == 0);
    CHECK(c.saw_endpoint);

    memset(buf, 0, size);
    CHECK_OP(hipObjGetV2("bkt", key, buf, size, 0, NULL, &ops, &c), hipObjSuccess);
    check_pattern("hipObjGetV2 of v2-obj", seed, 0, buf, size);
    CHECK(c.prepares == 2 && c.readies == 2 && c.finishes == 2 && c.cancels == 0);

    if (size > 1) {
        size_t half = size / 2;
        memset(buf, 0, size);
        CHECK_OP(hipObjGetV2("bkt", key, buf, size - half, half, NULL, &ops, &c),
                 hipObjSuccess);
        check_pattern("hipObjGetV2 of the second half", seed, half, buf, size - half);
    }

    /* No such key: refused (at PREPARE, or at READY when the server looks
       the object up then), and at most one CANCEL (only once a session
       exists). */
    {
        int cancels = c.cancels;
        int prepares = c.prepares;
        CHECK_OP(hipObjGetV2("bkt", "v2-missing", buf, 1, 0, NULL, &ops, &c), hipObjS3Error);
        CHECK(c.prepares == prepares + 1);
        CHECK(c.cancels - cancels <= 1);
    }
}

int main(int argc, char** argv) {
    hipObjConfigV2_t config;
    char endpoint[64];
    int i;

    if (argc < 3) {
        fprintf(stderr, "usage: %s RELAY_PORT SIZE...\n", argv[0]);
        return 2;
    }
    REQUIRE(connect_relay(argv[1]) == 0);

    memset(&config, 0, sizeof config);
    config.v1.gpuDevice = -1;
    config.v1.nicHint = "soft0";
    snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%s", argv[1]);
    config.control.controlEndpoint = endpoint;
    config.transferDeadlineMs = 60000;
    CHECK_OP(hipObjInitV2(&config), hipObjSuccess);
    /* One instance: the v1 init is refused now. */
    {
        hipObjConfig_t v1;
        memset(&v1, 0, sizeof v1);
        v1.gpuDevice = -1;
        v1.nicHint = "soft0";
        CHECK_OP(hipObjInit(&v1), hipObjAlreadyInitialized);
    }

    for (i = 2; i < argc; i++) {
        char* end = NULL;
        unsigned long long size = strtoull(argv[i], &end, 10);
        unsigned char* buf;
        REQUIRE(end != argv[i] && *end == '\0' && size > 0 && size < (1ull << 31));
        buf = (unsigned char*)malloc((size_t)size);
        REQUIRE(buf != NULL);
        CHECK_OP(hipObjBufRegisterHost(buf, (size_t)size), hipObjSuccess);
        transfers(buf, (size_t)size);
        CHECK_OP(hipObjBufDeregister(buf), hipObjSuccess);
        free(buf);
        printf("v2_client: %llu bytes done\n", size);
        fflush(stdout);
    }

    CHECK_OP(hipObjShutdown(), hipObjSuccess);
    close(relay_fd);
    return finish("v2_client");
}
