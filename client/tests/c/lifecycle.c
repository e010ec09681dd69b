/* The library's lifecycle over the software RDMA provider
 * (HIPOBJ_PROVIDER=soft, NIC soft0, no GPU): init, registration, tokens,
 * argument checks, deregistration, shutdown and a second init. Meant to
 * run under valgrind too, so everything it gets it releases. */
#include "check.h"

#define BUF_SIZE 4096

static int callback_calls;

static int send_request(void* ctx, const char* token, size_t len) {
    (void)ctx;
    (void)token;
    (void)len;
    callback_calls++;
    return -1;
}

static int recv_reply(void* ctx, char* reply, size_t* len) {
    (void)ctx;
    (void)reply;
    (void)len;
    callback_calls++;
    return -1;
}

static hipObjConfig_t soft_config(void) {
    hipObjConfig_t config;
    memset(&config, 0, sizeof config);
    config.endpoint = "http://127.0.0.1:9000";
    config.region = "us-east-1";
    config.accessKey = "test-access";
    config.secretKey = "test-secret";
    config.flags = 0;
    config.gpuDevice = -1;
    config.nicHint = "soft0";
    return config;
}

static void check_tokens(char* buf) {
    char* token = NULL;
    char ip[16];

    CHECK_OP(hipObjGetRdmaToken(buf, BUF_SIZE, HIPOBJ_RDMA_OP_GET, &token), hipObjSuccess);
    REQUIRE(token != NULL);
    CHECK(is_lower_hex(token, 88));
    CHECK_OP(hipObjTokenClientNic(token, ip, sizeof ip), hipObjSuccess);
    CHECK(strcmp(ip, "127.0.0.1") == 0);
    CHECK_OP(hipObjPutRdmaToken(token), hipObjSuccess);

    token = NULL;
    CHECK_OP(hipObjGetRdmaToken(buf, BUF_SIZE, HIPOBJ_RDMA_OP_PUT, &token), hipObjSuccess);
    REQUIRE(token != NULL);
    CHECK(is_lower_hex(token, 88));
    CHECK_OP(hipObjPutRdmaToken(token), hipObjSuccess);

    token = NULL;
    CHECK_OP(hipObjGetRdmaTokenAt(buf, 1024, 1024, HIPOBJ_RDMA_OP_GET, &token), hipObjSuccess);
    REQUIRE(token != NULL);
    CHECK(is_lower_hex(token, 88));
    CHECK_OP(hipObjPutRdmaToken(token), hipObjSuccess);

    token = NULL;
    CHECK_OP(hipObjGetRdmaHandshakeToken(&token), hipObjSuccess);
    REQUIRE(token != NULL);
    CHECK(is_lower_hex(token, 88));
    CHECK_OP(hipObjTokenClientNic(token, ip, sizeof ip), hipObjSuccess);
    CHECK(strcmp(ip, "127.0.0.1") == 0);
    CHECK_OP(hipObjPutRdmaToken(token), hipObjSuccess);

    /* Invalid ops leave *outToken NULL. */
    token = buf;
    CHECK_OP(hipObjGetRdmaToken(buf, BUF_SIZE, 2, &token), hipObjInvalidValue);
    CHECK(token == NULL);
    token = buf;
    CHECK_OP(hipObjGetRdmaToken(buf, BUF_SIZE, -1, &token), hipObjInvalidValue);
    CHECK(token == NULL);
    CHECK_OP(hipObjGetRdmaToken(buf, BUF_SIZE, HIPOBJ_RDMA_OP_GET, NULL), hipObjInvalidValue);

    /* Ranges. */
    token = buf;
    CHECK_OP(hipObjGetRdmaToken(buf, BUF_SIZE + 1, HIPOBJ_RDMA_OP_GET, &token), hipObjInvalidValue);
    CHECK(token == NULL);
    CHECK_OP(hipObjGetRdmaToken(buf, 0, HIPOBJ_RDMA_OP_GET, &token), hipObjInvalidValue);
    CHECK_OP(hipObjGetRdmaTokenAt(buf, BUF_SIZE, 1, HIPOBJ_RDMA_OP_GET, &token), hipObjInvalidValue);
    CHECK_OP(hipObjGetRdmaTokenAt(buf, 4000, 97, HIPOBJ_RDMA_OP_GET, &token), hipObjInvalidValue);
    CHECK_OP(hipObjGetRdmaTokenAt(buf, -1, 16, HIPOBJ_RDMA_OP_GET, &token), hipObjInvalidValue);
    CHECK(token == NULL);
    CHECK_OP(hipObjGetRdmaToken(buf + 1, 16, HIPOBJ_RDMA_OP_GET, &token), hipObjBufNotRegistered);
    CHECK(token == NULL);
}

static void check_transfer_arguments(char* buf) {
    hipObjOps_t ops = {send_request, recv_reply};
    hipObjOps_t no_send = {NULL, recv_reply};
    hipObjOps_t no_recv = {send_request, NULL};
    char other[64];

    CHECK_OP(hipObjGet(NULL, buf, BUF_SIZE, 0, NULL, NULL), hipObjInvalidValue);
    CHECK_OP(hipObjPut(NULL, buf, BUF_SIZE, 0, NULL, NULL), hipObjInvalidValue);
    CHECK_OP(hipObjGet(NULL, buf, BUF_SIZE, 0, &no_send, NULL), hipObjInvalidValue);
    CHECK_OP(hipObjPut(NULL, buf, BUF_SIZE, 0, &no_recv, NULL), hipObjInvalidValue);
    CHECK_OP(hipObjGet(NULL, other, sizeof other, 0, &ops, NULL), hipObjBufNotRegistered);
    CHECK_OP(hipObjPut(NULL, other, sizeof other, 0, &ops, NULL), hipObjBufNotRegistered);
    CHECK_OP(hipObjGet(NULL, NULL, BUF_SIZE, 0, &ops, NULL), hipObjInvalidValue);
    CHECK_OP(hipObjGet(NULL, buf, 0, 0, &ops, NULL), hipObjInvalidValue);
    CHECK_OP(hipObjGet(NULL, buf, BUF_SIZE, 1, &ops, NULL), hipObjInvalidValue);
    CHECK_OP(hipObjGet(NULL, buf, 1, BUF_SIZE, &ops, NULL), hipObjInvalidValue);
    CHECK_OP(hipObjPut(NULL, buf, 16, -16, &ops, NULL), hipObjInvalidValue);
    CHECK_OP(hipObjPut(NULL, buf, (size_t)-1, 1, &ops, NULL), hipObjInvalidValue);
    CHECK(callback_calls == 0);

    /* A callback failing fails the transfer with an S3 error. */
    CHECK_OP(hipObjGet(NULL, buf, BUF_SIZE, 0, &ops, NULL), hipObjS3Error);
    CHECK(callback_calls == 1);

    /* Syncs: nothing to do for host memory, but the arguments count. */
    CHECK_OP(hipObjBufSync(buf, BUF_SIZE, 0, HIPOBJ_SYNC_TO_HOST), hipObjSuccess);
    CHECK_OP(hipObjBufSync(buf, 16, BUF_SIZE - 16, HIPOBJ_SYNC_TO_DEVICE), hipObjSuccess);
    CHECK_OP(hipObjBufSync(buf, BUF_SIZE, 0, 2), hipObjInvalidValue);
    CHECK_OP(hipObjBufSync(buf, BUF_SIZE, 1, HIPOBJ_SYNC_TO_HOST), hipObjInvalidValue);
    CHECK_OP(hipObjBufSync(buf, 16, -1, HIPOBJ_SYNC_TO_HOST), hipObjInvalidValue);
    CHECK_OP(hipObjBufSync(other, 16, 0, HIPOBJ_SYNC_TO_HOST), hipObjBufNotRegistered);

    /* Handshake replies. */
    CHECK_OP(hipObjCompleteRdmaHandshake("zz", 2), hipObjInvalidValue);
    CHECK_OP(hipObjCompleteRdmaHandshake(NULL, 3), hipObjInvalidValue);
    CHECK_OP(hipObjCompleteRdmaHandshake("501", 3), hipObjS3Error);
    CHECK_OP(hipObjCompleteRdmaHandshake("200", 3), hipObjS3Error);
}

static void run_once(int round) {
    hipObjConfig_t config = soft_config();
    char* buf = (char*)malloc(BUF_SIZE);
    char* late_token = NULL;

    REQUIRE(buf != NULL);
    memset(buf, 0, BUF_SIZE);
    CHECK_OP(hipObjInit(&config), hipObjSuccess);
    CHECK_OP(hipObjInit(&config), hipObjAlreadyInitialized);

    CHECK_OP(hipObjBufRegisterHost(buf, BUF_SIZE), hipObjSuccess);
    CHECK_OP(hipObjBufRegisterHost(buf, BUF_SIZE), hipObjBufAlreadyRegistered);
    CHECK_OP(hipObjBufRegister(buf, BUF_SIZE), hipObjBufAlreadyRegistered);
    CHECK_OP(hipObjBufRegisterHost(NULL, BUF_SIZE), hipObjInvalidValue);
    CHECK_OP(hipObjBufRegisterHost(buf + 64, 0), hipObjInvalidValue);
    CHECK_OP(hipObjBufRegister(NULL, BUF_SIZE), hipObjInvalidValue);
    CHECK_OP(hipObjBufRegister(buf + 64, 0), hipObjInvalidValue);
    CHECK_OP(hipObjBufRegisterHost(buf + 64, ((size_t)4 << 30) + 1), hipObjSizeTooLarge);

    if (round == 0) {
        check_tokens(buf);
        check_transfer_arguments(buf);
    }

    CHECK_OP(hipObjGetRdmaToken(buf, BUF_SIZE, HIPOBJ_RDMA_OP_GET, &late_token), hipObjSuccess);

    CHECK_OP(hipObjBufDeregister(buf), hipObjSuccess);
    CHECK_OP(hipObjBufDeregister(buf), hipObjBufNotRegistered);
    CHECK_OP(hipObjBufDeregister(NULL), hipObjInvalidValue);
    CHECK_OP(hipObjShutdown(), hipObjSuccess);
    CHECK_OP(hipObjShutdown(), hipObjNotInitialized);
    CHECK_OP(hipObjBufRegisterHost(buf, BUF_SIZE), hipObjNotInitialized);

    /* A token outlives the library that minted it. */
    CHECK(late_token != NULL);
    CHECK_OP(hipObjPutRdmaToken(late_token), hipObjSuccess);
    free(buf);
}

int main(void) {
    run_once(0);
    /* Re-initialization works, and starts with an empty buffer map. */
    run_once(1);
    return finish("lifecycle");
}
