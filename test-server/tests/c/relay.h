/* What the C programs of test-server/tests/ (rdma_client.c, v2_client.c)
 * share: the test pattern and the line connection to the test's relay
 * (test-server/tests/c_relay/), which plays the application's S3 client.
 *
 * The pattern is hipobj_fabric::pattern's: byte i is byte i % 8
 * (little-endian) of splitmix64 of the word index i / 8 under the seed.
 *
 * Include after check.h (REQUIRE, check_failures) and the system headers
 * below, with _POSIX_C_SOURCE defined first. */
#ifndef HIPOBJ_TEST_RELAY_H
#define HIPOBJ_TEST_RELAY_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"

/* ---- The pattern ------------------------------------------------------ */

static uint64_t word_at(uint64_t seed, uint64_t w) {
    uint64_t z = seed ^ (w * 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static unsigned char byte_at(uint64_t seed, uint64_t i) {
    return (unsigned char)(word_at(seed, i / 8) >> (8 * (i % 8)));
}

static void fill(uint64_t seed, unsigned char* buf, size_t len) {
    size_t i;
    for (i = 0; i < len; i++) {
        buf[i] = byte_at(seed, i);
    }
}

/* Checks that buf holds bytes [from, from + len) of the pattern for seed;
   reports the first difference. */
static void check_pattern(const char* what, uint64_t seed, uint64_t from,
                          const unsigned char* buf, size_t len) {
    size_t i;
    for (i = 0; i < len; i++) {
        unsigned char want = byte_at(seed, from + i);
        if (buf[i] != want) {
            fprintf(stderr, "%s (%zu bytes): byte %zu is 0x%02x, expected 0x%02x\n",
                    what, len, i, buf[i], want);
            check_failures++;
            return;
        }
    }
}

/* ---- The relay -------------------------------------------------------- */

static int relay_fd = -1;

static int write_all(const char* s, size_t n) {
    while (n > 0) {
        ssize_t w = write(relay_fd, s, n);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return -1;
        }
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Reads one line (without its newline) into out, its length into *len
   when len is not NULL; -1 on failure or a line that does not fit. */
static int read_line(char* out, size_t cap, size_t* len) {
    size_t n = 0;
    int fits = 1;
    for (;;) {
        char c;
        ssize_t r = read(relay_fd, &c, 1);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r != 1) {
            return -1;
        }
        if (c == '\n') {
            break;
        }
        if (n + 1 < cap) {
            out[n++] = c;
        } else {
            fits = 0;
        }
    }
    out[n] = '\0';
    if (len != NULL) {
        *len = n;
    }
    return fits ? 0 : -1;
}

/* Connects relay_fd to the relay on 127.0.0.1:port. */
static int connect_relay(const char* port) {
    struct sockaddr_in addr;
    long p = strtol(port, NULL, 10);
    REQUIRE(p > 0 && p < 65536);
    relay_fd = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(relay_fd >= 0);
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)p);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return connect(relay_fd, (struct sockaddr*)&addr, sizeof addr);
}

#endif
