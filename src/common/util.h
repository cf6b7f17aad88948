/* Small helpers shared by every program: addresses, sizes, clocks, whole-file I/O. */
#ifndef LOOM_COMMON_UTIL_H
#define LOOM_COMMON_UTIL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* Says what is wrong into why (when there is room) and returns -EINVAL: for parsers that explain
 * their refusals. */
int refuse_why(char *why, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* "HOST:PORT", "HOST" (port = default_port) or ":PORT". host is written NUL-terminated.
 * Returns 0, or -EINVAL for a malformed address or a host longer than host_cap - 1. */
int addr_parse(const char *addr, char *host, size_t host_cap, uint16_t *port, uint16_t default_port);

/* Parses "123", "64k", "4M", "1G", "2T" (base 2, case-insensitive, optional trailing 'B' or 'iB').
 * Returns 0 or -EINVAL. */
int size_parse(const char *s, uint64_t *out);
/* A decimal number of digits only, within [lo, hi]: 0, or -EINVAL. */
int u32_parse(const char *s, uint32_t lo, uint32_t hi, uint32_t *out);

/* "4.0M"-style base-2 rendering as `lfs df -h` does; buf should hold 16 bytes. */
const char *size_human(uint64_t bytes, char *buf, size_t cap);

uint64_t clock_mono_ns(void);
/* A condition variable whose timed waits run by CLOCK_MONOTONIC (clock changes do not move
 * them), and the deadline for such a wait ms from now. */
void cond_init_monotonic(pthread_cond_t *cond);
struct timespec deadline_after_ms(long ms);
struct timespec clock_real(void);

/* write(2)/read(2) until everything moved; 0 or -errno (-EPIPE-like short reads give -EIO). */
int write_full(int fd, const void *buf, size_t len);
int read_full(int fd, void *buf, size_t len);

/* mkdir -p with the given mode; 0 or -errno. */
int mkdir_p(const char *path, mode_t mode);

/* Reads a whole small file into a NUL-terminated malloc'd buffer (caller frees). */
int file_read_all(const char *path, char **out, size_t *len);
/* Writes a file atomically (temp file, fsync, rename, fsync of the directory). */
int file_write_atomic(const char *path, const void *buf, size_t len);

/* Random bytes from getrandom(2). */
int random_bytes(void *buf, size_t len);

/* Sleeps ms milliseconds (a signal may cut it short). */
void sleep_ms(long ms);

/* Raises RLIMIT_NOFILE's soft limit to the hard limit (servers with thousands of clients). */
void raise_nofile_limit(void);

#endif
