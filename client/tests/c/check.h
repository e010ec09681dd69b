/* Assertion helpers shared by the C ABI test programs. */
#ifndef HIPOBJ_TEST_CHECK_H
#define HIPOBJ_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hipobj.h"

static int check_failures;

/* Records a failed condition without stopping, so one run reports all. */
#define CHECK(cond)                                                         \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__,          \
                    __LINE__, #cond);                                       \
            check_failures++;                                               \
        }                                                                   \
    } while (0)

/* Checks that a call returned the operation error want. */
#define CHECK_OP(call, want)                                                \
    do {                                                                    \
        hipObjError_t check_e_ = (call);                                    \
        if (check_e_.opError != (want)) {                                   \
            fprintf(stderr, "%s:%d: %s returned %d (%s), expected %d (%s)\n", \
                    __FILE__, __LINE__, #call, (int)check_e_.opError,       \
                    hipObjGetErrorString(check_e_.opError), (int)(want),    \
                    hipObjGetErrorString(want));                            \
            check_failures++;                                               \
        }                                                                   \
    } while (0)

/* Stops the program if a condition the rest depends on does not hold. */
#define REQUIRE(cond)                                                       \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "%s:%d: REQUIRE failed: %s\n", __FILE__,        \
                    __LINE__, #cond);                                       \
            exit(1);                                                        \
        }                                                                   \
    } while (0)

/* Whether s is exactly n lowercase hex digits. */
static inline int is_lower_hex(const char* s, size_t n) {
    size_t i;
    if (strlen(s) != n) {
        return 0;
    }
    for (i = 0; i < n; i++) {
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) {
            return 0;
        }
    }
    return 1;
}

/* Prints the verdict and returns the exit status. */
static inline int finish(const char* name) {
    if (check_failures != 0) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, check_failures);
        return 1;
    }
    printf("%s: ok\n", name);
    return 0;
}

#endif
