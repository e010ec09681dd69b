/* A stand-in for libamdhip64.so with the calls hipObject makes, for testing
 * the loader and the runtime's use without a GPU. "Device memory" is host
 * memory the stub hands out with stubAllocDevice() and reports as device
 * memory. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ALLOCS 64
static struct { char *base; size_t size; } allocs[MAX_ALLOCS];
static int nallocs;
static int syncs;
static int copies;
static int version = 60000000;

void *stubAllocDevice(size_t size) {
    if (nallocs == MAX_ALLOCS) return NULL;
    char *p = calloc(1, size);
    allocs[nallocs].base = p;
    allocs[nallocs].size = size;
    nallocs++;
    return p;
}
int stubSyncCount(void) { return syncs; }
int stubCopyCount(void) { return copies; }
void stubSetVersion(int v) { version = v; }

typedef struct {
    int type;
    int device;
    void *devicePointer;
    void *hostPointer;
    int isManaged;
    unsigned allocationFlags;
} hipPointerAttribute_t;

int hipGetDeviceCount(int *n) { *n = 2; return 0; }
static int current = 1;
int hipGetDevice(int *d) { *d = current; return 0; }
int hipRuntimeGetVersion(int *v) { *v = version; return 0; }
int hipDeviceGetPCIBusId(char *buf, int len, int dev) {
    const char *id = dev == 0 ? "0000:41:00.0" : dev == 1 ? "0000:c1:00.0" : NULL;
    if (!id) return 101;
    if ((size_t)len <= strlen(id)) return 1;
    strcpy(buf, id);
    return 0;
}
static int find(const void *p) {
    for (int i = 0; i < nallocs; i++)
        if ((const char *)p >= allocs[i].base && (const char *)p < allocs[i].base + allocs[i].size) return i;
    return -1;
}
int hipPointerGetAttributes(hipPointerAttribute_t *a, const void *p) {
    int i = find(p);
    if (i < 0) return 1; /* hipErrorInvalidValue, as ROCm 5 for malloc memory */
    memset(a, 0, sizeof *a);
    a->type = version >= 60000000 ? 2 : 1; /* hipMemoryTypeDevice */
    a->device = 1;
    a->devicePointer = (void *)p;
    return 0;
}
int hipMemGetAddressRange(void **base, size_t *size, void *p) {
    int i = find(p);
    if (i < 0) return 1;
    *base = allocs[i].base;
    *size = allocs[i].size;
    return 0;
}
int hipHostMalloc(void **p, size_t size, unsigned flags) { (void)flags; *p = calloc(1, size); return *p ? 0 : 2; }
int hipHostFree(void *p) { free(p); return 0; }
int hipMemcpyAsync(void *dst, const void *src, size_t n, int kind, void *stream) {
    (void)kind;
    if (stream != (void *)2) return 1; /* hipObject copies on hipStreamPerThread */
    memmove(dst, src, n);
    copies++;
    return 0;
}
int hipEventCreateWithFlags(void **e, unsigned flags) { (void)flags; *e = malloc(1); return 0; }
int hipEventRecord(void *e, void *stream) { (void)e; return stream == (void *)2 ? 0 : 1; }
int hipEventQuery(void *e) { (void)e; return 0; }
int hipEventDestroy(void *e) { free(e); return 0; }
int hipDeviceSynchronize(void) { syncs++; return 0; }
int hipSetDevice(int d) { if (d < 0 || d > 1) return 101; current = d; return 0; }
int hipMalloc(void **p, size_t size) { *p = stubAllocDevice(size); return *p ? 0 : 2; }
int hipFree(void *p) { (void)p; return 0; } /* the stub keeps its allocations */
int hipMemcpy(void *dst, const void *src, size_t n, int kind) { (void)kind; memmove(dst, src, n); return 0; }
