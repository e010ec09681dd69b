/*
 * hipobj.h - the C API of the hipObject client library (Rust
 * implementation, libhipobj.so / libhipobj.a).
 *
 * ABI-compatible with AMD hipObject's header: the same types, values and
 * functions, plus a few additions marked "extension" below. Nothing here
 * is copied from hipObject's header; the facts it shares are its ABI.
 *
 * What the library does: it registers GPU or host buffers with an RDMA
 * NIC, mints the x-amz-rdma-token values an S3 request carries, and reads
 * the x-amz-rdma-reply values the server answers with. It never speaks
 * HTTP: the application's own S3 client sends the requests, either from
 * the two hipObjOps_t callbacks that hipObjGet()/hipObjPut() call, or in
 * a transfer the application drives itself (hipObjGetRdmaToken(),
 * hipObjBufSync(), hipObjParseRdmaReply()).
 *
 * Errors: every function but the two that return strings returns a
 * hipObjError_t, the operation error and the HIP error (or, for a CUDA
 * buffer, the CUresult) behind it (0 when there is none). No C++
 * exception or Rust panic leaves the library: an
 * internal failure is reported as hipObjInternalError.
 *
 * Thread safety:
 *  - Every function may be called from any thread at any time, including
 *    concurrently with init and shutdown; a call keeps the library
 *    instance it started with until it returns.
 *  - The hipObjOps_t callbacks run on the thread that called hipObjGet()
 *    or hipObjPut(), and no library lock is held while they run, so they
 *    may call any function of this header. A transfer started from a
 *    callback while every connection is leased fails with hipObjBusy
 *    rather than deadlocking.
 *  - Transfers the application drives itself (tokens from
 *    hipObjGetRdmaToken() and hipObjGetRdmaTokenAt()) all name the one
 *    token connection, so they must not overlap each other: finish one
 *    (its reply has arrived) before the next one's request is sent.
 *    hipObjGet()/hipObjPut() lease connections of their own and may run
 *    concurrently, up to HIPOBJ_MAX_TRANSFERS (default 16) at once.
 *  - A buffer must not be deregistered, or the library shut down, while
 *    a transfer into or out of it runs; deregistration of a buffer a call
 *    is using reports hipObjBusy.
 */
#ifndef HIPOBJ_H
#define HIPOBJ_H

#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>

#define HIPOBJ_VERSION_MAJOR 0
#define HIPOBJ_VERSION_MINOR 1
#define HIPOBJ_VERSION_PATCH 0

/* Where hipObject's error codes start when mapped into a wider space. */
#define HIPOBJ_BASE_ERR 6000

#if defined(_WIN32)
#define HIPOBJ_API
#elif defined(__GNUC__) || defined(__clang__)
#define HIPOBJ_API __attribute__((visibility("default")))
#else
#define HIPOBJ_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* What went wrong. */
typedef enum {
    hipObjSuccess = 0,              /* no error */
    hipObjInvalidValue = 1,         /* an argument is invalid */
    hipObjNotInitialized = 2,       /* hipObjInit() has not run, or shut down */
    hipObjAlreadyInitialized = 3,   /* hipObjInit() ran already */
    hipObjRdmaError = 4,            /* an RDMA resource or operation failed */
    hipObjS3Error = 5,              /* the server did not report success
                                       (including 501: RDMA declined), or
                                       a callback failed */
    hipObjBufNotRegistered = 6,     /* the address is not registered */
    hipObjBufAlreadyRegistered = 7, /* already registered, or the map
                                       (256 buffers) is full */
    hipObjNicNotFound = 8,          /* no usable RDMA NIC */
    hipObjDmabufNotSupported = 9,   /* dma-buf registration unsupported */
    hipObjSizeTooLarge = 10,        /* over a limit (4 GiB per buffer) */
    hipObjInternalError = 11,       /* a bug; nothing the caller did */
    hipObjNotSupported = 12,        /* not supported here */
    hipObjBusy = 13                 /* a resource is in use */
} hipObjOpError_t;

/* A result: the operation error and the hipError_t behind it, or 0. */
typedef struct {
    hipObjOpError_t opError;
    int hipError;
} hipObjError_t;

/* The hipError of a v2 transfer that failed hipObjBusy because its
   deadline expired ("TIME"), as against a busy server. */
#define HIPOBJ_DIAG_DEADLINE_EXPIRED 0x54494D45

/* A success value, for comparisons and for code that returns one. */
#ifdef __cplusplus
#define HIPOBJ_SUCCESS (hipObjError_t{hipObjSuccess, 0})
#else
#define HIPOBJ_SUCCESS ((hipObjError_t){hipObjSuccess, 0})
#endif

/* Passed to hipObjGet()/hipObjPut(); not used by the library. */
typedef void* hipObjHandle_t;

/*
 * The application's S3 side of hipObjGet()/hipObjPut(). Both run on the
 * calling thread, with ctx as given to the transfer; a negative return
 * fails the transfer with hipObjS3Error.
 *
 * sendRequest: send the S3 request with x-amz-rdma-token set to token
 *   (tokenLen characters, also NUL-terminated; 88 for a hipObject token).
 *   The token is only valid during the call. With the connect-first flow
 *   (see below) one hipObjGet()/hipObjPut() may call the pair twice: the
 *   first time with a handshake token, which the request may carry on the
 *   real request or on a HEAD.
 * recvReply: copy the response's x-amz-rdma-reply value into reply. On
 *   entry *replyLen is the room (512 bytes); on return it must hold the
 *   length written (a trailing NUL, CR or LF is ignored). A length over
 *   the room fails the transfer. A response without the header means the
 *   server does not do RDMA: return a negative value.
 */
typedef struct {
    int (*sendRequest)(void* ctx, const char* token, size_t tokenLen);
    int (*recvReply)(void* ctx, char* reply, size_t* replyLen);
} hipObjOps_t;

/* hipObjInit()'s configuration. Strings may be NULL and must be UTF-8. */
typedef struct {
    const char* endpoint;  /* S3 endpoint (informational) */
    const char* region;    /* region (informational) */
    const char* accessKey; /* access key (informational) */
    const char* secretKey; /* secret key (informational; never logged) */
    uint32_t flags;        /* reserved: must be 0 */
    int gpuDevice;         /* GPU index (HIP's GPUs, then CUDA's), or -1 for the current one */
    const char* nicHint;   /* comma-separated allow-list of NIC names; on a
                              host without a GPU, the NIC to open */
} hipObjConfig_t;

/* hipObjGetRdmaToken()'s op: the server reads the buffer (S3 PUT) ... */
#define HIPOBJ_RDMA_OP_PUT 0
/* ... or writes it (S3 GET). */
#define HIPOBJ_RDMA_OP_GET 1

/* The x-amz-rdma-reply status of a server that declined RDMA: fall back
   to a plain HTTP transfer. */
#define HIPOBJ_RDMA_REPLY_NOT_IMPLEMENTED 501
/* Extension: the status of a server that does not know the client QP a
   token names (it restarted, or the request reached another server). The
   client resets the connection, repeats the handshake and retries once;
   an application-driven transfer repeats the handshake itself. */
#define HIPOBJ_RDMA_REPLY_RECONNECT 421

/* hipObjBufSync()'s direction: device to staging memory, before a PUT ... */
#define HIPOBJ_SYNC_TO_HOST 0
/* ... or staging memory to device, after a GET. */
#define HIPOBJ_SYNC_TO_DEVICE 1

/* ---- Errors and version (no initialization needed) ------------------ */

/* A static description of err; "Unknown error" for a value outside the
   enum. Never NULL. */
HIPOBJ_API const char* hipObjGetErrorString(hipObjOpError_t err);

/* "0.1.0". Never NULL. */
HIPOBJ_API const char* hipObjGetVersionString(void);

/* Writes the version's parts. All three pointers are required
   (hipObjInvalidValue, nothing written, if any is NULL). */
HIPOBJ_API hipObjError_t hipObjGetVersion(int* major, int* minor, int* patch);

/* ---- Lifecycle ------------------------------------------------------- */

/*
 * Initializes the process-wide library: resolves the GPU, chooses and
 * opens the NIC, creates the connections. config is required and its
 * flags must be 0 (hipObjInvalidValue otherwise). Settings also come from
 * the environment, read here once (HIPOBJ_MAX_TRANSFERS,
 * HIPOBJ_STAGE_TIMEOUT_MS, HIPOBJ_DMABUF, HIPOBJ_REQUIRE_GPU_DIRECT,
 * HIPOBJ_RDMA_DEBUG, and HIPOBJ_PROVIDER: auto, verbs, or soft for the
 * software RDMA provider). hipObjAlreadyInitialized if it ran already.
 */
HIPOBJ_API hipObjError_t hipObjInit(hipObjConfig_t* config);

/*
 * Shuts the library down; hipObjNotInitialized if it was not initialized.
 * It does not wait for calls in progress: they finish on the instance they
 * started with, which is released when the last returns. Registrations
 * end with it. hipObjInit() may run again afterwards.
 */
HIPOBJ_API hipObjError_t hipObjShutdown(void);

/* ---- Buffers --------------------------------------------------------- */

/*
 * Registers [devPtr, devPtr + size) of GPU memory, HIP's or CUDA's (host
 * memory neither runtime knows is registered as host memory). GPU memory is registered as a
 * dma-buf where possible, else directly, else through a pinned host
 * staging buffer. The memory must stay allocated until it is deregistered
 * or the library shut down. Transfers name the buffer by this same
 * devPtr, and select part of it with their offset.
 * hipObjInvalidValue for NULL or size 0; hipObjSizeTooLarge over 4 GiB;
 * hipObjBufAlreadyRegistered for an address registered already.
 */
HIPOBJ_API hipObjError_t hipObjBufRegister(void* devPtr, size_t size);

/* Registers host memory as it is, with the same rules. */
HIPOBJ_API hipObjError_t hipObjBufRegisterHost(void* hostPtr, size_t size);

/* Ends a registration; hipObjBufNotRegistered if devPtr is not one,
   hipObjBusy while a call or a timed-out staging copy uses it. */
HIPOBJ_API hipObjError_t hipObjBufDeregister(void* devPtr);

/* ---- Transfers through the callbacks --------------------------------- */

/*
 * An S3 GET of size bytes into [devPtr + offset, devPtr + offset + size)
 * of a registered buffer (devPtr is the registered address). The library
 * leases a connection, and calls ops with ctx: on a connection that is not
 * connected yet, first the handshake (see below), then the request whose
 * token names the range. It returns once the reply reports success (ok,
 * 200, 204, 206); anything else, 501 included, is hipObjS3Error.
 * ops and both callbacks are required (hipObjInvalidValue). handle is not
 * used. A range outside the buffer, or a negative offset, is
 * hipObjInvalidValue.
 */
HIPOBJ_API hipObjError_t hipObjGet(hipObjHandle_t handle, void* devPtr,
                                   size_t size, off_t offset,
                                   hipObjOps_t* ops, void* ctx);

/* An S3 PUT from [devPtr + offset, devPtr + offset + size), as
   hipObjGet(). */
HIPOBJ_API hipObjError_t hipObjPut(hipObjHandle_t handle, const void* devPtr,
                                   size_t size, off_t offset,
                                   hipObjOps_t* ops, void* ctx);

/* ---- Transfers the application drives -------------------------------- */

/*
 * The staging copy hipObjGet()/hipObjPut() would make for a buffer
 * registered through staging memory: HIPOBJ_SYNC_TO_HOST before a PUT,
 * HIPOBJ_SYNC_TO_DEVICE after a GET. Success, doing nothing, for other
 * buffers. Another direction is hipObjInvalidValue.
 */
HIPOBJ_API hipObjError_t hipObjBufSync(void* devPtr, size_t size,
                                       off_t offset, int direction);

/*
 * A token for the first size bytes of a registered buffer, naming the
 * token connection. op is HIPOBJ_RDMA_OP_PUT or HIPOBJ_RDMA_OP_GET
 * (anything else is hipObjInvalidValue); it selects the access the server
 * gets (read for a PUT, write for a GET). *outToken receives a malloc()ed,
 * NUL-terminated string of 88 lowercase hex digits, to release with
 * hipObjPutRdmaToken(), or NULL on failure. outToken is required.
 */
HIPOBJ_API hipObjError_t hipObjGetRdmaToken(const void* devPtr, size_t size,
                                            int op, char** outToken);

/* Releases a token from hipObjGetRdmaToken(), hipObjGetRdmaTokenAt() or
   hipObjGetRdmaHandshakeToken(). NULL is accepted. Needs no
   initialization, so tokens can be released after shutdown. */
HIPOBJ_API hipObjError_t hipObjPutRdmaToken(char* token);

/*
 * The HTTP status of an x-amz-rdma-reply value of replyLen bytes: ok and
 * 200:<token> are 200, 204:<token> and 206:<token> are 204 and 206, a
 * three-digit status (100 to 599) is itself, 501 followed by anything is
 * 501 (a decline), err is -1 (as hipObject's library). Trailing NUL, CR and
 * LF are ignored. hipObjInvalidValue for any other value, over 512 bytes,
 * or a NULL argument. Needs no initialization.
 */
HIPOBJ_API hipObjError_t hipObjParseRdmaReply(const char* reply,
                                              size_t replyLen, int* httpCode);

/*
 * Writes the IPv4 address of the NIC a token names (its GID, when
 * IPv4-mapped) as a dotted quad into nicIp, or an empty string for
 * another GID. nicIpLen must hold the address and its NUL (16 holds any).
 * hipObjInvalidValue for a malformed token, a NULL argument or a buffer
 * too small for this address. Needs no initialization.
 */
HIPOBJ_API hipObjError_t hipObjTokenClientNic(const char* token, char* nicIp,
                                              size_t nicIpLen);

/*
 * ---- Extension: the connect-first handshake ---------------------------
 *
 * An RC queue pair must be connected to the server's before the server
 * can move data, so transfers run connect-first:
 *
 *  1. Handshake. The client sends, in an ordinary signed S3 request (a
 *     HEAD of the object will do), a handshake token: an RC token of
 *     length 0 naming its queue pair. The server connects a queue pair of
 *     its own to it, moves no data, and answers
 *     x-amz-rdma-reply: 200:<server token>. The client connects its queue
 *     pair to the one that token names.
 *  2. Transfer. Requests carry tokens naming the connected queue pair and
 *     a buffer range. The server performs the RDMA and then replies; the
 *     client waits only for the reply.
 *  3. Reuse. The pair stays connected for later transfers.
 *  4. Reconnect. A server that does not know the pair answers
 *     HIPOBJ_RDMA_REPLY_RECONNECT (421) and moves nothing: repeat the
 *     handshake and retry once.
 *
 * hipObjGet()/hipObjPut() do all of this through the callbacks. A
 * transfer the application drives does the handshake with these two
 * functions, for the token connection, before the requests carrying
 * hipObjGetRdmaToken() tokens.
 */

/* A handshake token for the token connection (which is reset first if it
   was connected). Like hipObjGetRdmaToken()'s: 88 hex digits, malloc()ed,
   released with hipObjPutRdmaToken(), NULL on failure. */
HIPOBJ_API hipObjError_t hipObjGetRdmaHandshakeToken(char** outToken);

/* Connects the token connection to the server queue pair that the
   handshake's reply (replyLen bytes, 200:<server token>) names.
   hipObjInvalidValue for a reply that is not a valid x-amz-rdma-reply;
   hipObjS3Error for a valid one that does not complete a handshake
   (such as 501). */
HIPOBJ_API hipObjError_t hipObjCompleteRdmaHandshake(const char* reply,
                                                     size_t replyLen);

/* Extension: like hipObjGetRdmaToken(), for the size bytes at offset into
   the buffer registered at devPtr. Tokens for different ranges of one
   buffer may be in use at once. A range outside the buffer is
   hipObjInvalidValue. */
HIPOBJ_API hipObjError_t hipObjGetRdmaTokenAt(const void* devPtr,
                                              off_t offset, size_t size,
                                              int op, char** outToken);

/*
 * ---- hipobj-rc-v2: two control round trips -------------------------
 *
 * The types and functions below follow the newest public revision of AMD
 * hipObject's include/hipobj.h that has them (the one that split READY
 * into sendReadyRequest + finishReady and added the deadlines, the NIC
 * fields, clientQpn/clientMrAddr/clientMrRkey, the staging fields of
 * hipObjPrepareReplyV2_t and cookiePresent; later than a8fda08, which
 * had one sendReady callback): the same fields, in the same order, with
 * the same types. hipObject marks this API experimental.
 *
 * The protocol (docs/protocol.md, "hipobj-rc-v2"): three body-less,
 * SigV4-signed POSTs to the control endpoint, /.hipobj-rc/prepare,
 * /.hipobj-rc/ready and /.hipobj-rc/cancel, every x-amz-rdma-* header
 * signed. The library makes a QP of its own per transfer, draws the PSN
 * and the cookie from the OS, and:
 *
 *  1. sendPrepare: x-amz-rdma-protocol: hipobj-rc-v2, -token (req->token),
 *     -psn (req->clientPsn, 6 hex digits), -cookie (req->cookie, 8 hex
 *     digits), -op (req->method), -target (req->target), -size, and
 *     -offset when not 0. Fill out from the answer: httpStatus,
 *     protocolEcho, unsupportedMarker (x-amz-rdma-protocol-status:
 *     unsupported), serverToken (the token after "200:" in
 *     x-amz-rdma-reply), session, serverPsn, and for a PUT the staging
 *     region (x-amz-rdma-mr-addr/-rkey, stagingPresent = 1).
 *  2. The library connects its QP to the server's. A PUT writes the bytes
 *     into the staging region (one RDMA WRITE_WITH_IMM) and waits for
 *     its completion; a GET posts a receive.
 *  3. sendReadyRequest then finishReady: x-amz-rdma-protocol, -session
 *     (req->session), -cookie, -qpn (req->clientQpn, hex), and for a GET
 *     -mr-addr/-mr-rkey (req->clientMrAddr/clientMrRkey, hex; 0 for a
 *     PUT: send neither). The server moves a GET's bytes during READY.
 *     finishReady fills out from the answer (FINAL): httpStatus,
 *     protocolEcho, bytes (x-amz-rdma-bytes-transferred), cookieEcho and
 *     cookiePresent (x-amz-rdma-cookie), etag (x-amz-rdma-etag),
 *     versionId (x-amz-rdma-version-id), checksumB64 (the 12 characters
 *     after "CRC64NVME " in x-amz-rdma-checksum).
 *  4. After any failure once a session exists: one sendCancel
 *     (x-amz-rdma-protocol, -session, -cookie). Nothing is retried after
 *     READY.
 *
 * Outcomes: success needs PREPARE 200, FINAL 200 (or 204 for a PUT), the
 * cookie echoed, bytes == size and, when checksumB64 is given, the
 * CRC-64/NVME of the bytes (checked for host and staged buffers).
 * 501 with the unsupported marker is hipObjNotSupported (fall back);
 * 400 and 403 hipObjInvalidValue; 409, 429 and 503 hipObjBusy (retry
 * with a new transfer); 413 hipObjSizeTooLarge; 502 hipObjRdmaError;
 * any other status hipObjS3Error; a malformed answer, a wrong cookie
 * echo, a short transfer or a checksum mismatch hipObjRdmaError; a
 * negative callback return hipObjS3Error; the deadline expiring
 * hipObjBusy with hipError HIPOBJ_DIAG_DEADLINE_EXPIRED.
 *
 * Differences from hipObject's library: host buffers (hipObjBufRegisterHost)
 * and staged GPU buffers are accepted as well as GPU memory registered
 * directly; connectDeadlineMs and cancelCleanupBudgetMs are accepted and
 * not used (the connect is local and immediate; the CANCEL gets what is
 * left of the transfer's deadline, at least 1 s); the v1 functions keep
 * working after hipObjInitV2. hipObjNicV2 and its siblings are not
 * provided (req->nic, nicPort and nicGidIndex carry the same facts).
 */

/* The control endpoint. */
typedef struct {
    const char* controlEndpoint; /* "http(s)://host:port"; copied */
} hipObjControlEndpointV2_t;

/* hipObjInitV2()'s configuration. Zero what is not used. */
typedef struct {
    hipObjConfig_t v1;                 /* as hipObjInit() */
    hipObjControlEndpointV2_t control; /* required */
    uint32_t connectDeadlineMs;        /* 0: 10 s (accepted, not used) */
    uint32_t transferDeadlineMs;       /* 0: 60 s; bounds the whole transfer,
                                          callbacks included (also
                                          HIPOBJ_TRANSFER_TIMEOUT_MS) */
    uint32_t cancelCleanupBudgetMs;    /* 0: 1 s (accepted, not used) */
} hipObjConfigV2_t;

typedef struct hipObjOpsV2 hipObjOpsV2_t;

/* What a callback sends. Strings are the library's, valid during the
   call only. */
typedef struct {
    const char* method;   /* "GET" or "PUT" */
    const char* bucket;
    const char* key;
    const char* query;    /* as given, or NULL */
    const char* token;    /* the client's 88-hex token */
    const char* session;  /* READY and CANCEL; NULL for PREPARE */
    const char* target;   /* the x-amz-rdma-target value */
    uint64_t size;
    uint64_t offset;      /* into the object */
    uint32_t cookie;
    uint32_t clientPsn;   /* 1..0xffffff */
    uint32_t deadlineMs;  /* what is left of the transfer's budget */
    uint32_t remainingMs; /* this callback's budget */
    const hipObjControlEndpointV2_t* endpoint; /* from hipObjInitV2(), or NULL */
    const char* nic;       /* the RDMA device */
    int nicPort;
    int nicGidIndex;
    uint32_t clientQpn;    /* READY: the library's QP number; else 0 */
    uint64_t clientMrAddr; /* READY of a GET: where the bytes go; else 0 */
    uint32_t clientMrRkey; /* READY of a GET: its rkey; else 0 */
} hipObjTransferReqV2_t;

/* PREPARE's answer, filled by sendPrepare (zeroed before the call). */
typedef struct {
    int httpStatus;
    int protocolEcho;      /* 1: x-amz-rdma-protocol: hipobj-rc-v2 came */
    int unsupportedMarker; /* 1: x-amz-rdma-protocol-status: unsupported came */
    char serverToken[97];  /* 88 hex digits + NUL */
    char session[65];      /* 32 hex digits + NUL */
    uint32_t serverPsn;    /* 1..0xffffff; 0: absent */
    uint64_t stagingAddr;  /* PUT: the server's staging region */
    uint32_t stagingRkey;
    int stagingPresent;    /* 1 when both staging fields came */
} hipObjPrepareReplyV2_t;

/* READY's answer (FINAL), filled by finishReady (zeroed before the call). */
typedef struct {
    int httpStatus;
    int protocolEcho;
    uint64_t bytes;
    uint32_t cookieEcho;
    char etag[128];       /* or empty */
    char versionId[128];  /* or empty */
    char checksumB64[13]; /* 12 base64 characters + NUL, or empty */
    int cookiePresent;    /* 1 when the cookie echo came */
} hipObjFinalReplyV2_t;

/* The application's control requests. Each returns 0, or a negative value
   on failure (the transfer then fails hipObjS3Error). sendReadyRequest
   sends READY and finishReady reads its answer; the library calls them
   back to back (an application may as well do the whole round trip in
   either). v1 is not used. All four are required. They run on the
   calling thread with no library lock held. */
struct hipObjOpsV2 {
    hipObjOps_t v1;
    int (*sendPrepare)(void* ctx, const hipObjTransferReqV2_t* req,
                       hipObjPrepareReplyV2_t* out);
    int (*sendReadyRequest)(void* ctx, const hipObjTransferReqV2_t* req);
    int (*finishReady)(void* ctx, const hipObjTransferReqV2_t* req,
                       hipObjFinalReplyV2_t* out);
    int (*sendCancel)(void* ctx, const hipObjTransferReqV2_t* req);
};

/* hipObjInit() for v2 transfers: the same library, plus the control
   endpoint and the transfer deadline. hipObjAlreadyInitialized when either
   init ran already. control.controlEndpoint is required. */
HIPOBJ_API hipObjError_t hipObjInitV2(hipObjConfigV2_t* config);

/* A v2 GET: size bytes (1 to 2^31 - 1; more is hipObjSizeTooLarge) of the
   object from offset (offset + size at most 2^31 - 1) into the start of
   the buffer registered at devPtr. query: NULL, or "partNumber=N" for a
   part. */
HIPOBJ_API hipObjError_t hipObjGetV2(const char* bucket, const char* key,
                                     void* devPtr, uint64_t size,
                                     uint64_t offset, const char* query,
                                     hipObjOpsV2_t* ops, void* ctx);

/* A v2 PUT of the first size bytes of the buffer registered at devPtr;
   offset must be 0. query: NULL, or "uploadId=U&partNumber=N" for an
   UploadPart. */
HIPOBJ_API hipObjError_t hipObjPutV2(const char* bucket, const char* key,
                                     const void* devPtr, uint64_t size,
                                     uint64_t offset, const char* query,
                                     hipObjOpsV2_t* ops, void* ctx);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HIPOBJ_H */
