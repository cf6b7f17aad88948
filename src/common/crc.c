#include "common/crc.h"

#include <isa-l/crc.h>
#include <limits.h>

/* ISA-L's crc32_iscsi works on the raw (non-inverted) register; the standard crc32c inverts the
 * register before and after, which is what makes chaining with a plain 0 start value work. */
uint32_t crc32c(uint32_t crc, const void *buf, size_t len)
{
	uint32_t reg = ~crc;
	const unsigned char *p = buf;

	while (len > 0) {
		int chunk = len > (size_t)INT_MAX ? INT_MAX : (int)len;
		reg = crc32_iscsi((unsigned char *)p, chunk, reg);
		p += chunk;
		len -= (size_t)chunk;
	}
	return ~reg;
}

uint32_t crc32c_iov(uint32_t crc, const struct iovec *iov, int cnt, size_t len)
{
	for (int i = 0; i < cnt && len > 0; i++) {
		size_t n = iov[i].iov_len < len ? iov[i].iov_len : len;
		crc = crc32c(crc, iov[i].iov_base, n);
		len -= n;
	}
	return crc;
}
