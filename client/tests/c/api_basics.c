/* The C API without an initialized library: argument checks, the calls
 * that need no initialization, and hipObjNotInitialized from the rest. */
#include "check.h"

/* An RC token whose GID is ::ffff:192.168.1.42. */
static const char kMappedToken[] =
    "010000000000000000000000000000ffffc0a8012a0000000000000000000000"
    "000000000000000000000000";
/* An RC token whose GID is fe80::1 (not IPv4-mapped). */
static const char kLinkLocalToken[] =
    "0100000000fe8000000000000000000000000000010000000000000000000000"
    "000000000000000000000000";

static int unexpected_calls;

static int send_request(void* ctx, const char* token, size_t len) {
    (void)ctx;
    (void)token;
    (void)len;
    unexpected_calls++;
    return -1;
}

static int recv_reply(void* ctx, char* reply, size_t* len) {
    (void)ctx;
    (void)reply;
    (void)len;
    unexpected_calls++;
    return -1;
}

static void check_parse(const char* reply, size_t len, hipObjOpError_t want,
                        int want_code) {
    int code = -1;
    hipObjError_t e = hipObjParseRdmaReply(reply, len, &code);
    if (e.opError != want || (want == hipObjSuccess && code != want_code)) {
        fprintf(stderr, "parse of \"%.*s\": op %d code %d, expected op %d code %d\n",
                (int)len, reply, (int)e.opError, code, (int)want, want_code);
        check_failures++;
    }
}

static void check_errors_and_version(void) {
    int major = -1, minor = -1, patch = -1;
    int sentinel = 42;

    CHECK(strcmp(hipObjGetErrorString(hipObjSuccess), "Success") == 0);
    CHECK(strcmp(hipObjGetErrorString(hipObjInvalidValue), "Invalid value") == 0);
    CHECK(strcmp(hipObjGetErrorString(hipObjNotInitialized), "hipObject not initialized") == 0);
    CHECK(strcmp(hipObjGetErrorString(hipObjAlreadyInitialized), "hipObject already initialized") == 0);
    CHECK(strcmp(hipObjGetErrorString(hipObjRdmaError), "RDMA error") == 0);
    CHECK(strcmp(hipObjGetErrorString(hipObjS3Error), "S3 error") == 0);
    CHECK(strcmp(hipObjGetErrorString(hipObjBufNotRegistered), "Buffer not registered") == 0);
    CHECK(strcmp(hipObjGetErrorString(hipObjBufAlreadyRegistered), "Buffer already registered") == 0);
    CHECK(strcmp(hipObjGetErrorString(hipObjNicNotFound), "No RDMA NIC found") == 0);
    CHECK(strcmp(hipObjGetErrorString(hipObjDmabufNotSupported), "dmabuf not supported") == 0);
    CHECK(strcmp(hipObjGetErrorString(hipObjSizeTooLarge), "Size too large") == 0);
    CHECK(strcmp(hipObjGetErrorString(hipObjInternalError), "Internal error") == 0);
    CHECK(strcmp(hipObjGetErrorString(hipObjNotSupported), "Operation not supported") == 0);
    CHECK(strcmp(hipObjGetErrorString(hipObjBusy), "Resource busy") == 0);
    CHECK(strcmp(hipObjGetErrorString((hipObjOpError_t)14), "Unknown error") == 0);
    CHECK(strcmp(hipObjGetErrorString((hipObjOpError_t)-1), "Unknown error") == 0);
    CHECK(strcmp(hipObjGetErrorString((hipObjOpError_t)HIPOBJ_BASE_ERR), "Unknown error") == 0);

    CHECK(strcmp(hipObjGetVersionString(), "0.1.0") == 0);
    CHECK_OP(hipObjGetVersion(&major, &minor, &patch), hipObjSuccess);
    CHECK(major == HIPOBJ_VERSION_MAJOR && minor == HIPOBJ_VERSION_MINOR &&
          patch == HIPOBJ_VERSION_PATCH);
    CHECK(major == 0 && minor == 1 && patch == 0);
    CHECK_OP(hipObjGetVersion(NULL, &minor, &patch), hipObjInvalidValue);
    CHECK_OP(hipObjGetVersion(&sentinel, NULL, &patch), hipObjInvalidValue);
    CHECK_OP(hipObjGetVersion(&sentinel, &minor, NULL), hipObjInvalidValue);
    CHECK(sentinel == 42);
}

static void check_replies(void) {
    char reply[300];
    int code = -1;

    check_parse("ok", 2, hipObjSuccess, 200);
    check_parse("200", 3, hipObjSuccess, 200);
    check_parse("206\r\n", 5, hipObjSuccess, 206);
    check_parse("204", 3, hipObjSuccess, 204);
    check_parse("501", 3, hipObjSuccess, HIPOBJ_RDMA_REPLY_NOT_IMPLEMENTED);
    check_parse("421", 3, hipObjSuccess, HIPOBJ_RDMA_REPLY_RECONNECT);
    check_parse("ok\0", 3, hipObjSuccess, 200);
    snprintf(reply, sizeof reply, "200:%s", kMappedToken);
    check_parse(reply, strlen(reply), hipObjSuccess, 200);

    check_parse("0200", 4, hipObjInvalidValue, 0);
    check_parse("abc", 3, hipObjInvalidValue, 0);
    check_parse("", 0, hipObjInvalidValue, 0);
    check_parse("099", 3, hipObjInvalidValue, 0);
    /* As hipObject's library: 204 and 206 may carry a token, 501 followed
       by anything is a decline, err is -1. */
    snprintf(reply, sizeof reply, "206:%s", kMappedToken);
    check_parse(reply, strlen(reply), hipObjSuccess, 206);
    snprintf(reply, sizeof reply, "204:%s", kMappedToken);
    check_parse(reply, strlen(reply), hipObjSuccess, 204);
    check_parse("501:not implemented", 19, hipObjSuccess, 501);
    check_parse("501x", 4, hipObjSuccess, 501);
    check_parse("err", 3, hipObjSuccess, -1);
    snprintf(reply, sizeof reply, "201:%s", kMappedToken);
    check_parse(reply, strlen(reply), hipObjInvalidValue, 0);
    check_parse("200x", 4, hipObjInvalidValue, 0);
    /* The length counts, not the NUL: "200" cut to "20". */
    check_parse("200", 2, hipObjInvalidValue, 0);

    CHECK_OP(hipObjParseRdmaReply(NULL, 2, &code), hipObjInvalidValue);
    CHECK_OP(hipObjParseRdmaReply("ok", 2, NULL), hipObjInvalidValue);
}

static void check_client_nic(void) {
    char ip[16];
    char fits[13]; /* "192.168.1.42" and its NUL, as hipObject's library */
    char small[12];
    char one[1];

    memset(ip, 'x', sizeof ip);
    CHECK_OP(hipObjTokenClientNic(kMappedToken, ip, sizeof ip), hipObjSuccess);
    CHECK(strcmp(ip, "192.168.1.42") == 0);

    memset(ip, 'x', sizeof ip);
    CHECK_OP(hipObjTokenClientNic(kLinkLocalToken, ip, sizeof ip), hipObjSuccess);
    CHECK(ip[0] == '\0');

    CHECK_OP(hipObjTokenClientNic("zz", ip, sizeof ip), hipObjInvalidValue);
    CHECK_OP(hipObjTokenClientNic("", ip, sizeof ip), hipObjInvalidValue);
    CHECK_OP(hipObjTokenClientNic(NULL, ip, sizeof ip), hipObjInvalidValue);
    CHECK_OP(hipObjTokenClientNic(kMappedToken, NULL, sizeof ip), hipObjInvalidValue);
    CHECK_OP(hipObjTokenClientNic(kMappedToken, small, sizeof small), hipObjInvalidValue);
    CHECK_OP(hipObjTokenClientNic(kMappedToken, fits, sizeof fits), hipObjSuccess);
    CHECK(strcmp(fits, "192.168.1.42") == 0);
    /* No IPv4 address: the empty string needs one byte. */
    CHECK_OP(hipObjTokenClientNic(kLinkLocalToken, one, sizeof one), hipObjSuccess);
    CHECK(one[0] == '\0');
}

static void check_not_initialized(void) {
    char buf[64];
    char* token = (char*)buf; /* a sentinel the calls must overwrite */
    hipObjOps_t ops = {send_request, recv_reply};
    char reply[300];

    CHECK_OP(hipObjShutdown(), hipObjNotInitialized);
    CHECK_OP(hipObjBufRegister(buf, sizeof buf), hipObjNotInitialized);
    CHECK_OP(hipObjBufRegisterHost(buf, sizeof buf), hipObjNotInitialized);
    CHECK_OP(hipObjBufDeregister(buf), hipObjNotInitialized);
    CHECK_OP(hipObjGet(NULL, buf, sizeof buf, 0, &ops, NULL), hipObjNotInitialized);
    CHECK_OP(hipObjPut(NULL, buf, sizeof buf, 0, &ops, NULL), hipObjNotInitialized);
    CHECK_OP(hipObjBufSync(buf, sizeof buf, 0, HIPOBJ_SYNC_TO_HOST), hipObjNotInitialized);
    CHECK_OP(hipObjBufSync(buf, sizeof buf, 0, HIPOBJ_SYNC_TO_DEVICE), hipObjNotInitialized);

    CHECK_OP(hipObjGetRdmaToken(buf, sizeof buf, HIPOBJ_RDMA_OP_GET, &token), hipObjNotInitialized);
    CHECK(token == NULL);
    token = (char*)buf;
    CHECK_OP(hipObjGetRdmaTokenAt(buf, 0, sizeof buf, HIPOBJ_RDMA_OP_PUT, &token), hipObjNotInitialized);
    CHECK(token == NULL);
    token = (char*)buf;
    CHECK_OP(hipObjGetRdmaHandshakeToken(&token), hipObjNotInitialized);
    CHECK(token == NULL);
    snprintf(reply, sizeof reply, "200:%s", kMappedToken);
    CHECK_OP(hipObjCompleteRdmaHandshake(reply, strlen(reply)), hipObjNotInitialized);

    /* Releasing needs no library; NULL is accepted. */
    CHECK_OP(hipObjPutRdmaToken(NULL), hipObjSuccess);

    /* Required out-pointers. */
    CHECK_OP(hipObjGetRdmaToken(buf, sizeof buf, HIPOBJ_RDMA_OP_GET, NULL), hipObjInvalidValue);
    CHECK_OP(hipObjGetRdmaHandshakeToken(NULL), hipObjInvalidValue);
    CHECK(unexpected_calls == 0);
}

static void check_init_arguments(void) {
    hipObjConfig_t config;

    CHECK_OP(hipObjInit(NULL), hipObjInvalidValue);
    memset(&config, 0, sizeof config);
    config.flags = 1;
    config.gpuDevice = -1;
    config.nicHint = "soft0";
    CHECK_OP(hipObjInit(&config), hipObjInvalidValue);
    config.flags = 0x80000000u;
    CHECK_OP(hipObjInit(&config), hipObjInvalidValue);
    config.flags = 0;
    config.nicHint = "\xff\xfe";
    CHECK_OP(hipObjInit(&config), hipObjInvalidValue);
    /* None of these initialized the library. */
    CHECK_OP(hipObjShutdown(), hipObjNotInitialized);
}

static int v2_prepare(void* ctx, const hipObjTransferReqV2_t* req,
                      hipObjPrepareReplyV2_t* out) {
    (void)ctx;
    (void)req;
    (void)out;
    unexpected_calls++;
    return -1;
}

static int v2_ready_request(void* ctx, const hipObjTransferReqV2_t* req) {
    (void)ctx;
    (void)req;
    unexpected_calls++;
    return -1;
}

static int v2_finish(void* ctx, const hipObjTransferReqV2_t* req,
                     hipObjFinalReplyV2_t* out) {
    (void)ctx;
    (void)req;
    (void)out;
    unexpected_calls++;
    return -1;
}

static int v2_cancel(void* ctx, const hipObjTransferReqV2_t* req) {
    (void)ctx;
    (void)req;
    unexpected_calls++;
    return -1;
}

/* hipobj-rc-v2's arguments, checked before anything else; no callback
   runs. */
static void check_v2_arguments(void) {
    char buf[64];
    hipObjOpsV2_t ops;
    hipObjConfigV2_t config;

    memset(&ops, 0, sizeof ops);
    ops.sendPrepare = v2_prepare;
    ops.sendReadyRequest = v2_ready_request;
    ops.finishReady = v2_finish;
    ops.sendCancel = v2_cancel;
    CHECK_OP(hipObjGetV2("bkt", "key", buf, sizeof buf, 0, NULL, &ops, NULL),
             hipObjNotInitialized);
    CHECK_OP(hipObjPutV2("bkt", "key", buf, sizeof buf, 0, NULL, &ops, NULL),
             hipObjNotInitialized);
    CHECK_OP(hipObjGetV2(NULL, "key", buf, sizeof buf, 0, NULL, &ops, NULL), hipObjInvalidValue);
    CHECK_OP(hipObjGetV2("bkt", NULL, buf, sizeof buf, 0, NULL, &ops, NULL), hipObjInvalidValue);
    CHECK_OP(hipObjGetV2("bkt", "key", buf, sizeof buf, 0, "acl", &ops, NULL), hipObjInvalidValue);
    CHECK_OP(hipObjPutV2("bkt", "key", buf, sizeof buf, 0, "partNumber=1", &ops, NULL),
             hipObjInvalidValue);

    CHECK_OP(hipObjInitV2(NULL), hipObjInvalidValue);
    memset(&config, 0, sizeof config);
    config.v1.gpuDevice = -1;
    config.v1.nicHint = "soft0";
    /* The control endpoint is required. */
    CHECK_OP(hipObjInitV2(&config), hipObjInvalidValue);
    config.control.controlEndpoint = "";
    CHECK_OP(hipObjInitV2(&config), hipObjInvalidValue);
    CHECK_OP(hipObjShutdown(), hipObjNotInitialized);
    CHECK(unexpected_calls == 0);
}

int main(void) {
    hipObjError_t ok = HIPOBJ_SUCCESS;
    CHECK(ok.opError == hipObjSuccess && ok.hipError == 0);
    check_errors_and_version();
    check_replies();
    check_client_nic();
    check_not_initialized();
    check_init_arguments();
    check_v2_arguments();
    return finish("api_basics");
}
