/* Objects moved by RDMA between a C program, using hipobj.h only, and the
 * real hipobj-test-server. Compiled and run by tests/c_client.rs.
 *
 * A C program has no S3 SDK to sign requests with, so the test harness
 * plays that part: a relay on 127.0.0.1 that takes one line per request,
 *
 *     METHOD PATH TOKEN\n      (PATH: /bkt/key, or /bkt/key?query)
 *
 * sends it to the test server as a SigV4-signed S3 request carrying
 * x-amz-rdma-token: TOKEN, and answers one line: the response's
 * x-amz-rdma-reply value, or NONE when it has none.
 *
 * Usage: rdma_client RELAY_PORT SIZE[:UPLOAD_ID]...
 *
 * For each SIZE, with a host buffer of SIZE bytes registered:
 *  - hipObjPut of pattern(PUT_SEED_BASE + SIZE) to /bkt/c-obj-SIZE through
 *    the callbacks (the connect-first handshake happens inside them), the
 *    buffer cleared, hipObjGet of it back, and the bytes compared;
 *  - with an UPLOAD_ID, the same bytes by hipObjPut as part 1 of that
 *    multipart upload of /bkt/c-mp-SIZE (the harness completes it);
 *  - a transfer the application drives: hipObjGetRdmaHandshakeToken, a
 *    HEAD through the relay, hipObjCompleteRdmaHandshake with its reply;
 *    then a GET of /bkt/seed-SIZE (seeded by the harness with
 *    pattern(SEEDED_SEED_BASE + SIZE)) with a hipObjGetRdmaTokenAt token,
 *    its reply parsed and the bytes compared; and a PUT of them to
 *    /bkt/c-driven-SIZE with another token (the harness checks it).
 *
 * The pattern and the relay connection are relay.h's.
 *
 * Prints "rdma_client: ok" and exits 0 only if every check passed. */
#define _POSIX_C_SOURCE 200809L

#include "check.h"
#include "relay.h"

#define PUT_SEED_BASE (1ull << 32)
#define SEEDED_SEED_BASE (2ull << 32)
#define MAX_LINE 1024

/* Sends one request through the relay and reads the reply line into reply
   (room for MAX_LINE); -1 if the relay failed. */
static int relay(const char* method, const char* path, const char* token,
                 char* reply, size_t* len) {
    char line[MAX_LINE];
    int n = snprintf(line, sizeof line, "%s %s %s\n", method, path, token);
    if (n < 0 || (size_t)n >= sizeof line) {
        return -1;
    }
    if (write_all(line, (size_t)n) != 0) {
        return -1;
    }
    return read_line(reply, MAX_LINE, len);
}

/* ---- The callbacks ---------------------------------------------------- */

/* The S3 request a hipObjGet()/hipObjPut() stands for. */
typedef struct {
    const char* method;
    const char* path;
    int sends;        /* sendRequest calls */
    char reply[MAX_LINE]; /* the last request's reply line */
    size_t reply_len;
    int relayed;      /* whether reply holds an answer not yet taken */
} request_t;

static int send_request(void* ctx, const char* token, size_t len) {
    request_t* r = (request_t*)ctx;
    if (len != 88 || strlen(token) != len || !is_lower_hex(token, len)) {
        fprintf(stderr, "sendRequest: a malformed token of %zu bytes\n", len);
        return -1;
    }
    r->sends++;
    r->relayed = 0;
    /* A handshake token rides on the request the application is making,
       as a real client would send it. */
    if (relay(r->method, r->path, token, r->reply, &r->reply_len) != 0) {
        fprintf(stderr, "sendRequest: the relay failed for %s %s\n", r->method, r->path);
        return -2;
    }
    r->relayed = 1;
    return 0;
}

static int recv_reply(void* ctx, char* reply, size_t* len) {
    request_t* r = (request_t*)ctx;
    if (!r->relayed) {
        return -1;
    }
    r->relayed = 0;
    if (strcmp(r->reply, "NONE") == 0) {
        fprintf(stderr, "recvReply: %s %s had no x-amz-rdma-reply\n", r->method, r->path);
        return -3;
    }
    if (r->reply_len > *len) {
        return -4;
    }
    memcpy(reply, r->reply, r->reply_len);
    *len = r->reply_len;
    return 0;
}

/* ---- The transfers ---------------------------------------------------- */

static int first_transfer = 1;

static void callback_transfers(unsigned char* buf, size_t size, const char* upload_id) {
    hipObjOps_t ops = {send_request, recv_reply};
    char path[MAX_LINE];
    request_t put;
    request_t get;
    uint64_t seed = PUT_SEED_BASE + size;

    snprintf(path, sizeof path, "/bkt/c-obj-%zu", size);
    memset(&put, 0, sizeof put);
    put.method = "PUT";
    put.path = path;
    get = put;
    get.method = "GET";

    fill(seed, buf, size);
    CHECK_OP(hipObjPut(NULL, buf, size, 0, &ops, &put), hipObjSuccess);
    /* Every connection starts unconnected: the first transfer of the
       process makes the handshake, then the request; later ones may lease
       a connected one. */
    if (first_transfer) {
        CHECK(put.sends == 2);
        first_transfer = 0;
    } else {
        CHECK(put.sends == 1 || put.sends == 2);
    }

    memset(buf, 0, size);
    CHECK_OP(hipObjGet(NULL, buf, size, 0, &ops, &get), hipObjSuccess);
    CHECK(get.sends == 1 || get.sends == 2);
    check_pattern("hipObjGet of c-obj", seed, 0, buf, size);

    if (upload_id != NULL) {
        request_t part = put;
        char part_path[MAX_LINE];
        snprintf(part_path, sizeof part_path, "/bkt/c-mp-%zu?partNumber=1&uploadId=%s",
                 size, upload_id);
        part.path = part_path;
        part.sends = 0;
        CHECK_OP(hipObjPut(NULL, buf, size, 0, &ops, &part), hipObjSuccess);
        CHECK(part.sends == 1 || part.sends == 2);
    }
}

static void application_driven(unsigned char* buf, size_t size) {
    char* token = NULL;
    char reply[MAX_LINE];
    char path[MAX_LINE];
    size_t len = 0;
    int code = 0;

    snprintf(path, sizeof path, "/bkt/seed-%zu", size);

    /* The handshake: a token in a HEAD, the token connection connected to
       the server queue pair its reply names. */
    CHECK_OP(hipObjGetRdmaHandshakeToken(&token), hipObjSuccess);
    REQUIRE(token != NULL && is_lower_hex(token, 88));
    REQUIRE(relay("HEAD", path, token, reply, &len) == 0);
    CHECK_OP(hipObjPutRdmaToken(token), hipObjSuccess);
    if (strncmp(reply, "200:", 4) != 0) {
        fprintf(stderr, "HEAD %s: handshake reply \"%s\"\n", path, reply);
        check_failures++;
        return;
    }
    CHECK_OP(hipObjCompleteRdmaHandshake(reply, len), hipObjSuccess);

    /* A GET into the whole buffer. */
    memset(buf, 0, size);
    token = NULL;
    CHECK_OP(hipObjGetRdmaTokenAt(buf, 0, size, HIPOBJ_RDMA_OP_GET, &token), hipObjSuccess);
    REQUIRE(token != NULL && is_lower_hex(token, 88));
    REQUIRE(relay("GET", path, token, reply, &len) == 0);
    CHECK_OP(hipObjPutRdmaToken(token), hipObjSuccess);
    code = 0;
    CHECK_OP(hipObjParseRdmaReply(reply, len, &code), hipObjSuccess);
    if (code != 200) {
        fprintf(stderr, "GET %s: reply \"%s\" (%d)\n", path, reply, code);
        check_failures++;
        return;
    }
    CHECK_OP(hipObjBufSync(buf, size, 0, HIPOBJ_SYNC_TO_DEVICE), hipObjSuccess);
    check_pattern("application-driven GET of seed", SEEDED_SEED_BASE + size, 0, buf,
                  size);

    /* And a PUT of those bytes, on the same connection. */
    snprintf(path, sizeof path, "/bkt/c-driven-%zu", size);
    CHECK_OP(hipObjBufSync(buf, size, 0, HIPOBJ_SYNC_TO_HOST), hipObjSuccess);
    token = NULL;
    CHECK_OP(hipObjGetRdmaTokenAt(buf, 0, size, HIPOBJ_RDMA_OP_PUT, &token), hipObjSuccess);
    REQUIRE(token != NULL && is_lower_hex(token, 88));
    REQUIRE(relay("PUT", path, token, reply, &len) == 0);
    CHECK_OP(hipObjPutRdmaToken(token), hipObjSuccess);
    code = 0;
    CHECK_OP(hipObjParseRdmaReply(reply, len, &code), hipObjSuccess);
    if (code != 200) {
        fprintf(stderr, "PUT %s: reply \"%s\" (%d)\n", path, reply, code);
        check_failures++;
    }
}

/* Parses "SIZE[:UPLOAD_ID]"; the upload id points into arg. */
static size_t parse_size(char* arg, const char** upload_id) {
    char* end = NULL;
    unsigned long long size;
    errno = 0;
    size = strtoull(arg, &end, 10);
    REQUIRE(errno == 0 && end != arg && size > 0 && size <= (unsigned long long)SIZE_MAX);
    REQUIRE(*end == '\0' || (*end == ':' && end[1] != '\0'));
    *upload_id = *end == ':' ? end + 1 : NULL;
    return (size_t)size;
}

int main(int argc, char** argv) {
    hipObjConfig_t config;
    int i;

    if (argc < 3) {
        fprintf(stderr, "usage: %s RELAY_PORT SIZE[:UPLOAD_ID]...\n", argv[0]);
        return 2;
    }
    REQUIRE(connect_relay(argv[1]) == 0);

    memset(&config, 0, sizeof config);
    config.gpuDevice = -1;
    config.nicHint = "soft0";
    CHECK_OP(hipObjInit(&config), hipObjSuccess);

    for (i = 2; i < argc; i++) {
        const char* upload_id = NULL;
        size_t size = parse_size(argv[i], &upload_id);
        unsigned char* buf = (unsigned char*)malloc(size);
        REQUIRE(buf != NULL);
        CHECK_OP(hipObjBufRegisterHost(buf, size), hipObjSuccess);

        callback_transfers(buf, size, upload_id);
        application_driven(buf, size);

        CHECK_OP(hipObjBufDeregister(buf), hipObjSuccess);
        free(buf);
        printf("rdma_client: %zu bytes done\n", size);
        fflush(stdout);
    }

    CHECK_OP(hipObjShutdown(), hipObjSuccess);
    close(relay_fd);
    return finish("rdma_client");
}
