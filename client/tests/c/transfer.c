/* Transfers through the C API against the line server (a server peer
 * over the software provider, driven by a line protocol on TCP in place
 * of S3; see hipobj::testing::line_server for the protocol). The test
 * harness starts the server and passes its port in HIPOBJ_TEST_PEER_PORT.
 *
 * Covered: GET and PUT through the callbacks (connect-first handshake,
 * then the transfer), a ranged GET, a server that forgot the pair (421,
 * reconnect and retry), a server that declines RDMA (501), failing
 * callbacks, an oversized reply length, and a transfer the application
 * drives itself with the handshake extension. */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"

#define OBJ_SIZE (256 * 1024)
#define SEED 7

/* One connection to the peer server. */
static int peer_fd = -1;

static int write_all(const char* s, size_t n) {
    while (n > 0) {
        ssize_t w = write(peer_fd, s, n);
        if (w <= 0) {
            return -1;
        }
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Reads one line (without its newline) into out; -1 on failure. */
static int read_line(char* out, size_t cap, size_t* len) {
    size_t n = 0;
    for (;;) {
        char c;
        if (read(peer_fd, &c, 1) != 1) {
            return -1;
        }
        if (c == '\n') {
            break;
        }
        if (n + 1 < cap) {
            out[n++] = c;
        }
    }
    out[n] = '\0';
    *len = n;
    return 0;
}

/* Sends a control command and checks the answer. */
static void command(const char* line, const char* want) {
    char answer[256];
    size_t len;
    REQUIRE(write_all(line, strlen(line)) == 0 && write_all("\n", 1) == 0);
    REQUIRE(read_line(answer, sizeof answer, &len) == 0);
    if (strcmp(answer, want) != 0) {
        fprintf(stderr, "command \"%s\": answer \"%s\", expected \"%s\"\n", line, answer, want);
        check_failures++;
    }
}

/* The callbacks' context: the S3 request they stand for. */
typedef struct {
    const char* method; /* GET or PUT */
    const char* key;
    int sends;          /* requests sent */
    int handshakes;     /* of which handshakes (HEAD) */
    int fail_send;      /* make sendRequest fail */
    int fail_recv;      /* make recvReply fail */
    int overlong;       /* make recvReply report more than the room */
} request_t;

/* A handshake token has length 0: bytes 29..36 of the token (hex 58..73). */
static int is_handshake(const char* token) {
    size_t i;
    for (i = 58; i < 74; i++) {
        if (token[i] != '0') {
            return 0;
        }
    }
    return 1;
}

static int send_request(void* ctx, const char* token, size_t len) {
    request_t* r = (request_t*)ctx;
    char line[256];
    if (r->fail_send) {
        return -5;
    }
    if (len != 88 || strlen(token) != len) {
        return -1;
    }
    r->sends++;
    /* The handshake rides on the request the application was making. */
    if (is_handshake(token)) {
        r->handshakes++;
    }
    snprintf(line, sizeof line, "%s %s %s\n", r->method, r->key, token);
    return write_all(line, strlen(line));
}

static int recv_reply(void* ctx, char* reply, size_t* len) {
    request_t* r = (request_t*)ctx;
    char line[600];
    size_t n;
    if (r->fail_recv) {
        return -7;
    }
    if (*len != 512 || read_line(line, sizeof line, &n) != 0 || n > *len) {
        return -1;
    }
    memcpy(reply, line, n);
    *len = r->overlong ? 513 : n;
    return 0;
}

static int connect_peer(void) {
    const char* port = getenv("HIPOBJ_TEST_PEER_PORT");
    struct sockaddr_in addr;
    REQUIRE(port != NULL);
    peer_fd = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(peer_fd >= 0);
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)atoi(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return connect(peer_fd, (struct sockaddr*)&addr, sizeof addr);
}

static void callback_transfers(char* buf) {
    hipObjOps_t ops = {send_request, recv_reply};
    request_t get = {"GET", "seeded", 0, 0, 0, 0, 0};
    request_t put = {"PUT", "copy", 0, 0, 0, 0, 0};
    request_t ranged = {"GET", "seeded", 0, 0, 0, 0, 0};
    char line[128];

    snprintf(line, sizeof line, "SEED seeded %d %d", SEED, OBJ_SIZE);
    command(line, "ok");

    /* GET: a handshake on the fresh connection, then the transfer. */
    memset(buf, 0, OBJ_SIZE);
    CHECK_OP(hipObjGet(NULL, buf, OBJ_SIZE, 0, &ops, &get), hipObjSuccess);
    CHECK(get.sends == 2 && get.handshakes == 1);

    /* PUT the bytes back under another key; the server compares them with
       the pattern it seeded, so this checks the GET too. */
    CHECK_OP(hipObjPut(NULL, buf, OBJ_SIZE, 0, &ops, &put), hipObjSuccess);
    CHECK(put.sends >= 1);
    snprintf(line, sizeof line, "CHECK copy %d %d", SEED, OBJ_SIZE);
    command(line, "match");

    /* A ranged GET into the second half leaves the first half alone. */
    memset(buf, 0xab, OBJ_SIZE);
    CHECK_OP(hipObjGet(NULL, buf, OBJ_SIZE / 2, OBJ_SIZE / 2, &ops, &ranged), hipObjSuccess);
    CHECK((unsigned char)buf[0] == 0xab && (unsigned char)buf[OBJ_SIZE / 2 - 1] == 0xab);

    /* The server forgets every pair: 421, handshake again, retry once. */
    command("FORGET", "ok");
    get.sends = get.handshakes = 0;
    CHECK_OP(hipObjGet(NULL, buf, OBJ_SIZE, 0, &ops, &get), hipObjSuccess);
    CHECK(get.handshakes >= 1);

    /* The server declines RDMA. */
    command("DECLINE 1", "ok");
    CHECK_OP(hipObjGet(NULL, buf, OBJ_SIZE, 0, &ops, &get), hipObjS3Error);
    CHECK_OP(hipObjPut(NULL, buf, OBJ_SIZE, 0, &ops, &put), hipObjS3Error);
    command("DECLINE 0", "ok");

    /* Failing callbacks, and a reply length over the room. */
    get.fail_send = 1;
    CHECK_OP(hipObjGet(NULL, buf, OBJ_SIZE, 0, &ops, &get), hipObjS3Error);
    get.fail_send = 0;
    get.fail_recv = 1;
    CHECK_OP(hipObjGet(NULL, buf, OBJ_SIZE, 0, &ops, &get), hipObjS3Error);
    /* The request reached the server: take its answer off the line. */
    REQUIRE(read_line(line, sizeof line, &(size_t){0}) == 0);
    get.fail_recv = 0;
    get.overlong = 1;
    CHECK_OP(hipObjGet(NULL, buf, OBJ_SIZE, 0, &ops, &get), hipObjS3Error);
    get.overlong = 0;

    /* And the library still works afterwards. */
    CHECK_OP(hipObjGet(NULL, buf, OBJ_SIZE, 0, &ops, &get), hipObjSuccess);
}

/* Sends one request and reads its reply, as an application's own S3
   client would. */
static void request(const char* method, const char* key, const char* token,
                    char* reply, size_t* len) {
    char line[256];
    snprintf(line, sizeof line, "%s %s %s\n", method, key, token);
    REQUIRE(write_all(line, strlen(line)) == 0);
    REQUIRE(read_line(reply, 600, len) == 0);
}

static void application_driven(char* buf) {
    char* token = NULL;
    char reply[600];
    size_t len = 0;
    int code = 0;
    char line[128];

    /* Handshake with a HEAD, then connect the token connection. */
    CHECK_OP(hipObjGetRdmaHandshakeToken(&token), hipObjSuccess);
    REQUIRE(token != NULL);
    request("HEAD", "seeded", token, reply, &len);
    CHECK_OP(hipObjPutRdmaToken(token), hipObjSuccess);
    CHECK(strncmp(reply, "200:", 4) == 0);
    CHECK_OP(hipObjCompleteRdmaHandshake(reply, len), hipObjSuccess);

    /* GET into the buffer. */
    memset(buf, 0, OBJ_SIZE);
    token = NULL;
    CHECK_OP(hipObjGetRdmaToken(buf, OBJ_SIZE, HIPOBJ_RDMA_OP_GET, &token), hipObjSuccess);
    REQUIRE(token != NULL);
    request("GET", "seeded", token, reply, &len);
    CHECK_OP(hipObjPutRdmaToken(token), hipObjSuccess);
    CHECK_OP(hipObjParseRdmaReply(reply, len, &code), hipObjSuccess);
    CHECK(code == 200 || code == 206);
    CHECK_OP(hipObjBufSync(buf, OBJ_SIZE, 0, HIPOBJ_SYNC_TO_DEVICE), hipObjSuccess);

    /* PUT it back under another key, with a ranged token for the whole. */
    CHECK_OP(hipObjBufSync(buf, OBJ_SIZE, 0, HIPOBJ_SYNC_TO_HOST), hipObjSuccess);
    token = NULL;
    CHECK_OP(hipObjGetRdmaTokenAt(buf, 0, OBJ_SIZE, HIPOBJ_RDMA_OP_PUT, &token), hipObjSuccess);
    REQUIRE(token != NULL);
    request("PUT", "driven", token, reply, &len);
    CHECK_OP(hipObjPutRdmaToken(token), hipObjSuccess);
    CHECK_OP(hipObjParseRdmaReply(reply, len, &code), hipObjSuccess);
    CHECK(code == 200);
    snprintf(line, sizeof line, "CHECK driven %d %d", SEED, OBJ_SIZE);
    command(line, "match");

    /* A server that forgot the pair answers 421; handshake again. */
    command("FORGET", "ok");
    token = NULL;
    CHECK_OP(hipObjGetRdmaToken(buf, OBJ_SIZE, HIPOBJ_RDMA_OP_GET, &token), hipObjSuccess);
    REQUIRE(token != NULL);
    request("GET", "seeded", token, reply, &len);
    CHECK_OP(hipObjPutRdmaToken(token), hipObjSuccess);
    CHECK_OP(hipObjParseRdmaReply(reply, len, &code), hipObjSuccess);
    CHECK(code == HIPOBJ_RDMA_REPLY_RECONNECT);
    token = NULL;
    CHECK_OP(hipObjGetRdmaHandshakeToken(&token), hipObjSuccess);
    REQUIRE(token != NULL);
    request("HEAD", "seeded", token, reply, &len);
    CHECK_OP(hipObjPutRdmaToken(token), hipObjSuccess);
    CHECK_OP(hipObjCompleteRdmaHandshake(reply, len), hipObjSuccess);
}

int main(void) {
    hipObjConfig_t config;
    char* buf;

    REQUIRE(connect_peer() == 0);
    memset(&config, 0, sizeof config);
    config.gpuDevice = -1;
    config.nicHint = "soft0";
    CHECK_OP(hipObjInit(&config), hipObjSuccess);

    buf = (char*)malloc(OBJ_SIZE);
    REQUIRE(buf != NULL);
    CHECK_OP(hipObjBufRegisterHost(buf, OBJ_SIZE), hipObjSuccess);

    callback_transfers(buf);
    application_driven(buf);

    CHECK_OP(hipObjBufDeregister(buf), hipObjSuccess);
    CHECK_OP(hipObjShutdown(), hipObjSuccess);
    free(buf);
    close(peer_fd);
    return finish("transfer");
}
