/* A stand-in for libcuda.so.1 with the driver API calls the library makes,
 * for testing the loader and every registration path without a GPU.
 * "Device memory" is host memory the stub hands out with stubAllocDevice()
 * and reports as device memory. Every call is logged (stubLog()); settings
 * (stubSet()) make calls fail or copies wait. With HIPOBJ_CUDA_STUB_LOG set, each
 * line is also appended to that file. Calls that need a context
 * fail with CUDA_ERROR_INVALID_CONTEXT unless one is pushed, as the driver
 * does. Built with -DNO_DMABUF_EXPORT it lacks cuMemGetHandleForAddressRange
 * (a driver older than 11.7).
 *
 * Safe to call from several threads (hipobj cp registers and copies parts
 * concurrently): the tables and the log are under one lock, and the
 * current context is per thread, as the driver's is.
 *
 * Values are CUDA's public cuda.h values, as client/src/platform/cuda/abi.rs
 * states them; stubConst() reports them by name for the constants test. */
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_NOT_SUPPORTED = 801,
};
enum {
    CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
    CU_POINTER_ATTRIBUTE_IS_MANAGED = 8,
    CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,
    CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11,
    CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12,
};
enum { CU_MEMORYTYPE_HOST = 1, CU_MEMORYTYPE_DEVICE = 2 };
#define CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD 1
#define CU_MEMHOSTALLOC_PORTABLE 0x01
#define CU_EVENT_DISABLE_TIMING 0x2
#define CU_STREAM_PER_THREAD ((void *)0x2)

typedef unsigned long long CUdeviceptr;
/* Device handles differ from ordinals, so a mix-up shows. */
#define HANDLE(ordinal) ((ordinal) + 100)

int stubConst(const char *name) {
    static const struct { const char *n; int v; } k[] = {
        {"CUDA_SUCCESS", CUDA_SUCCESS},
        {"CUDA_ERROR_INVALID_VALUE", CUDA_ERROR_INVALID_VALUE},
        {"CUDA_ERROR_NO_DEVICE", CUDA_ERROR_NO_DEVICE},
        {"CUDA_ERROR_INVALID_DEVICE", CUDA_ERROR_INVALID_DEVICE},
        {"CUDA_ERROR_NOT_READY", CUDA_ERROR_NOT_READY},
        {"CUDA_ERROR_NOT_SUPPORTED", CUDA_ERROR_NOT_SUPPORTED},
        {"CU_POINTER_ATTRIBUTE_MEMORY_TYPE", CU_POINTER_ATTRIBUTE_MEMORY_TYPE},
        {"CU_POINTER_ATTRIBUTE_IS_MANAGED", CU_POINTER_ATTRIBUTE_IS_MANAGED},
        {"CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL", CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL},
        {"CU_POINTER_ATTRIBUTE_RANGE_START_ADDR", CU_POINTER_ATTRIBUTE_RANGE_START_ADDR},
        {"CU_POINTER_ATTRIBUTE_RANGE_SIZE", CU_POINTER_ATTRIBUTE_RANGE_SIZE},
        {"CU_MEMORYTYPE_HOST", CU_MEMORYTYPE_HOST},
        {"CU_MEMORYTYPE_DEVICE", CU_MEMORYTYPE_DEVICE},
        {"CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD", CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD},
        {"CU_MEMHOSTALLOC_PORTABLE", CU_MEMHOSTALLOC_PORTABLE},
        {"CU_EVENT_DISABLE_TIMING", CU_EVENT_DISABLE_TIMING},
        {"CU_STREAM_PER_THREAD", (int)(uintptr_t)CU_STREAM_PER_THREAD},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (!strcmp(k[i].n, name)) return k[i].v;
    return -1;
}

static pthread_mutex_t big = PTHREAD_MUTEX_INITIALIZER;
#define LOCK() pthread_mutex_lock(&big)
#define UNLOCK() pthread_mutex_unlock(&big)

/* ---- the log ---- */
static char log_buf[1 << 16];
static size_t log_len;
static void note(const char *fmt, ...) {
    LOCK();
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(log_buf + log_len, sizeof log_buf - log_len - 1, fmt, ap);
    va_end(ap);
    if (n > 0 && log_len + (size_t)n + 1 < sizeof log_buf) {
        /* A process the test cannot call into (hipobj cp) logs to a file. */
        const char *file = getenv("HIPOBJ_CUDA_STUB_LOG");
        FILE *f = file ? fopen(file, "a") : NULL;
        if (f) {
            fprintf(f, "%s\n", log_buf + log_len);
            fclose(f);
        }
        log_len += (size_t)n;
        log_buf[log_len++] = '\n';
        log_buf[log_len] = 0;
    }
    UNLOCK();
}
const char *stubLog(void) { return log_buf; }
void stubLogClear(void) { LOCK(); log_len = 0; log_buf[0] = 0; UNLOCK(); }

/* ---- settings ---- */
static int init_result, export_result, pending, current = -1, ndevices = 2;
void stubSet(const char *key, int value) {
    if (!strcmp(key, "init")) init_result = value;
    else if (!strcmp(key, "export")) export_result = value;
    else if (!strcmp(key, "pending")) pending = value;
    else if (!strcmp(key, "current")) current = value;
    else if (!strcmp(key, "devices")) ndevices = value;
}

/* ---- memory ---- */
#define MAX_ALLOCS 128
enum { DEVICE = 1, PINNED = 2, MANAGED = 3 };
static struct { char *base; size_t size; int kind, device; } allocs[MAX_ALLOCS];
static int nallocs;
static int find(CUdeviceptr p) {
    int found = -1;
    LOCK();
    for (int i = 0; i < nallocs; i++)
        if (allocs[i].base && (char *)(uintptr_t)p >= allocs[i].base &&
            (char *)(uintptr_t)p < allocs[i].base + allocs[i].size) {
            found = i;
            break;
        }
    UNLOCK();
    return found;
}
static char *alloc(size_t size, int kind, int device) {
    size_t rounded = (size + 65535) & ~(size_t)65535;
    char *p = aligned_alloc(65536, rounded); /* CUDA aligns allocations too */
    if (!p) return NULL;
    memset(p, 0, rounded);
    LOCK();
    if (nallocs == MAX_ALLOCS) {
        UNLOCK();
        free(p);
        return NULL;
    }
    allocs[nallocs].base = p;
    allocs[nallocs].size = size;
    allocs[nallocs].kind = kind;
    allocs[nallocs].device = device;
    nallocs++;
    UNLOCK();
    return p;
}
void *stubAllocDevice(size_t size, int device) { return alloc(size, DEVICE, device); }
void *stubAllocManaged(size_t size) { return alloc(size, MANAGED, 0); }
int stubIsDevice(uintptr_t p, size_t len) {
    int i = find(p);
    return i >= 0 && allocs[i].kind == DEVICE &&
           p + len <= (uintptr_t)allocs[i].base + allocs[i].size;
}
/* Offset of p in its allocation, for the log. */
static long off(CUdeviceptr p) {
    int i = find(p);
    return i < 0 ? -1 : (long)((char *)(uintptr_t)p - allocs[i].base);
}

/* ---- contexts ---- */
static __thread int stack[16], depth;
static int retained[8], active[8];
int stubCtxDepth(void) { return depth; }
int stubRetained(int ordinal) { return retained[ordinal]; }
void stubSetActive(int ordinal, int a) { active[ordinal] = a; }
#define NEED_CONTEXT() do { if (depth == 0) return CUDA_ERROR_INVALID_CONTEXT; } while (0)
#define CTX_DEVICE (stack[depth - 1])

int cuInit(unsigned flags) { note("cuInit flags=%u", flags); return init_result; }
int cuDriverGetVersion(int *v) { *v = 12040; return 0; }
int cuDeviceGetCount(int *n) { *n = ndevices; return 0; }
int cuDeviceGet(int *d, int ordinal) {
    if (ordinal < 0 || ordinal >= ndevices) return CUDA_ERROR_INVALID_DEVICE;
    *d = HANDLE(ordinal);
    return 0;
}
int cuDeviceGetPCIBusId(char *buf, int len, int dev) {
    const char *id = dev == HANDLE(0) ? "0000:41:00.0" : dev == HANDLE(1) ? "0000:C1:00.0" : NULL;
    if (!id) return CUDA_ERROR_INVALID_DEVICE;
    if ((size_t)len < 13) return CUDA_ERROR_INVALID_VALUE;
    strcpy(buf, id);
    return 0;
}
int cuCtxGetDevice(int *d) {
    if (depth > 0) { *d = HANDLE(CTX_DEVICE); return 0; }
    if (current < 0) return CUDA_ERROR_INVALID_CONTEXT;
    *d = HANDLE(current);
    return 0;
}
int cuDevicePrimaryCtxRetain(void **ctx, int dev) {
    int o = dev - 100;
    if (o < 0 || o >= ndevices) return CUDA_ERROR_INVALID_DEVICE;
    note("cuDevicePrimaryCtxRetain dev=%d", o);
    LOCK();
    retained[o]++;
    active[o] = 1;
    UNLOCK();
    *ctx = (void *)(uintptr_t)(0x1000 + o);
    return 0;
}
int cuDevicePrimaryCtxRelease_v2(int dev) {
    note("cuDevicePrimaryCtxRelease dev=%d", dev - 100);
    LOCK();
    retained[dev - 100]--;
    UNLOCK();
    return 0;
}
int cuDevicePrimaryCtxGetState(int dev, unsigned *flags, int *act) {
    *flags = 0;
    *act = active[dev - 100];
    return 0;
}
int cuCtxPushCurrent_v2(void *ctx) {
    int o = (int)((uintptr_t)ctx - 0x1000);
    if (o < 0 || o >= ndevices || depth == 16) return CUDA_ERROR_INVALID_CONTEXT;
    stack[depth++] = o;
    return 0;
}
int cuCtxPopCurrent_v2(void **ctx) {
    NEED_CONTEXT();
    depth--;
    if (ctx) *ctx = (void *)(uintptr_t)(0x1000 + stack[depth]);
    return 0;
}
int cuCtxSynchronize(void) { NEED_CONTEXT(); note("cuCtxSynchronize dev=%d", CTX_DEVICE); return 0; }

int cuPointerGetAttributes(unsigned n, int *attrs, void **data, CUdeviceptr p) {
    int i = find(p);
    for (unsigned a = 0; a < n; a++) {
        switch (attrs[a]) {
        case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
            *(unsigned *)data[a] = i < 0 ? 0 : allocs[i].kind == PINNED ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
            break;
        case CU_POINTER_ATTRIBUTE_IS_MANAGED:
            *(unsigned *)data[a] = i >= 0 && allocs[i].kind == MANAGED;
            break;
        case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
            *(int *)data[a] = i < 0 ? -2 : allocs[i].device;
            break;
        case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
            *(CUdeviceptr *)data[a] = i < 0 ? 0 : (CUdeviceptr)(uintptr_t)allocs[i].base;
            break;
        case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
            *(size_t *)data[a] = i < 0 ? 0 : allocs[i].size;
            break;
        default:
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    return 0;
}

int cuMemHostAlloc(void **p, size_t size, unsigned flags) {
    NEED_CONTEXT();
    note("cuMemHostAlloc size=%zu flags=%u dev=%d", size, flags, CTX_DEVICE);
    *p = alloc(size, PINNED, CTX_DEVICE);
    return *p ? 0 : CUDA_ERROR_OUT_OF_MEMORY;
}
int cuMemFreeHost(void *p) {
    NEED_CONTEXT();
    int i = find((CUdeviceptr)(uintptr_t)p);
    if (i < 0 || allocs[i].kind != PINNED) return CUDA_ERROR_INVALID_VALUE;
    note("cuMemFreeHost size=%zu", allocs[i].size);
    LOCK();
    char *base = allocs[i].base;
    allocs[i].base = NULL;
    UNLOCK();
    free(base);
    return 0;
}
int cuMemAlloc_v2(CUdeviceptr *p, size_t size) {
    NEED_CONTEXT();
    note("cuMemAlloc size=%zu dev=%d", size, CTX_DEVICE);
    *p = (CUdeviceptr)(uintptr_t)alloc(size, DEVICE, CTX_DEVICE);
    return *p ? 0 : CUDA_ERROR_OUT_OF_MEMORY;
}
int cuMemFree_v2(CUdeviceptr p) {
    NEED_CONTEXT();
    int i = find(p);
    if (i < 0 || allocs[i].kind != DEVICE) return CUDA_ERROR_INVALID_VALUE;
    note("cuMemFree size=%zu dev=%d", allocs[i].size, CTX_DEVICE);
    LOCK();
    allocs[i].base = NULL; /* kept allocated: the test may still read it */
    UNLOCK();
    return 0;
}

/* ---- copies and events ---- */
typedef struct { int done; } event;
static struct { void *dst; const void *src; size_t n; event *ev; } held[64];
static int nheld;
void stubCompleteCopies(void) {
    LOCK();
    for (int i = 0; i < nheld; i++) {
        memmove(held[i].dst, held[i].src, held[i].n);
        if (held[i].ev) held[i].ev->done = 1;
    }
    nheld = 0;
    UNLOCK();
}
static int copy_async(void *dst, const void *src, size_t n, void *stream) {
    if (stream != CU_STREAM_PER_THREAD) return CUDA_ERROR_INVALID_VALUE;
    if (pending) {
        LOCK();
        if (nheld == 64) {
            UNLOCK();
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        held[nheld].dst = dst;
        held[nheld].src = src;
        held[nheld].n = n;
        held[nheld].ev = NULL;
        nheld++;
        UNLOCK();
    } else {
        memmove(dst, src, n);
    }
    return 0;
}
int cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, void *stream) {
    NEED_CONTEXT();
    note("cuMemcpyHtoDAsync dst=+%ld n=%zu stream=%p dev=%d", off(dst), n, stream, CTX_DEVICE);
    if (!stubIsDevice((uintptr_t)dst, n)) return CUDA_ERROR_INVALID_VALUE;
    return copy_async((void *)(uintptr_t)dst, src, n, stream);
}
int cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, void *stream) {
    NEED_CONTEXT();
    note("cuMemcpyDtoHAsync src=+%ld n=%zu stream=%p dev=%d", off(src), n, stream, CTX_DEVICE);
    if (!stubIsDevice((uintptr_t)src, n)) return CUDA_ERROR_INVALID_VALUE;
    return copy_async(dst, (const void *)(uintptr_t)src, n, stream);
}
int cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
    NEED_CONTEXT();
    note("cuMemcpyHtoD dst=+%ld n=%zu", off(dst), n);
    if (!stubIsDevice((uintptr_t)dst, n)) return CUDA_ERROR_INVALID_VALUE;
    memmove((void *)(uintptr_t)dst, src, n);
    return 0;
}
int cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
    NEED_CONTEXT();
    note("cuMemcpyDtoH src=+%ld n=%zu", off(src), n);
    if (!stubIsDevice((uintptr_t)src, n)) return CUDA_ERROR_INVALID_VALUE;
    memmove(dst, (const void *)(uintptr_t)src, n);
    return 0;
}
int cuEventCreate(void **e, unsigned flags) {
    NEED_CONTEXT();
    note("cuEventCreate flags=%u", flags);
    event *ev = calloc(1, sizeof *ev);
    *e = ev;
    return 0;
}
int cuEventRecord(void *e, void *stream) {
    if (stream != CU_STREAM_PER_THREAD) return CUDA_ERROR_INVALID_VALUE;
    event *ev = e;
    LOCK();
    if (pending && nheld > 0) held[nheld - 1].ev = ev; /* done with its copy */
    else ev->done = 1;
    UNLOCK();
    return 0;
}
int cuEventQuery(void *e) {
    LOCK();
    int done = ((event *)e)->done;
    UNLOCK();
    return done ? 0 : CUDA_ERROR_NOT_READY;
}
int cuEventDestroy_v2(void *e) {
    NEED_CONTEXT();
    LOCK();
    for (int i = 0; i < nheld; i++)
        if (held[i].ev == e) held[i].ev = NULL;
    UNLOCK();
    free(e);
    return 0;
}

#ifndef NO_DMABUF_EXPORT
int cuMemGetHandleForAddressRange(void *handle, CUdeviceptr p, size_t size, int type,
                                  unsigned long long flags) {
    NEED_CONTEXT();
    note("cuMemGetHandleForAddressRange start=+%ld size=%zu type=%d flags=%llu dev=%d", off(p), size,
         type, flags, CTX_DEVICE);
    long page = sysconf(_SC_PAGESIZE);
    if (p % (unsigned long)page || size % (unsigned long)page) return CUDA_ERROR_INVALID_VALUE;
    if (type != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD) return CUDA_ERROR_INVALID_VALUE;
    int i = find(p);
    if (i < 0 || allocs[i].kind != DEVICE) return CUDA_ERROR_INVALID_VALUE;
    if (export_result) return export_result;
    /* A real fd stands in for the dma-buf. */
    *(int *)handle = open("/dev/null", O_RDONLY | O_CLOEXEC);
    return 0;
}
#endif
