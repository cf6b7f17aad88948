/* crc32c (Castagnoli), the checksum over every frame and every byte of bulk data. */
#ifndef LOOM_COMMON_CRC_H
#define LOOM_COMMON_CRC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* zlib-style chaining: start with crc = 0; crc32c(crc32c(0, a), b) == crc32c(0, a||b).
 * The standard check value crc32c(0, "123456789", 9) is 0xe3069283. */
uint32_t crc32c(uint32_t crc, const void *buf, size_t len);

/* crc32c over `cnt` iovecs in order, limited to the first `len` bytes in total. */
uint32_t crc32c_iov(uint32_t crc, const struct iovec *iov, int cnt, size_t len);

#endif
