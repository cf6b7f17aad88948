#include "fuzz.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc.h"
#include "common/log.h"

void fuzz_fail(const char *file, int line, const char *what)
{
	fprintf(stderr, "\n%s:%d: property broken: %s\n", file, line, what);
	abort();
}

void fuzz_quiet(void)
{
	log_set_level(LOG_ERR);
}

uint8_t fin_u8(struct fuzz_in *in)
{
	uint8_t v = 0;

	if (in->n) {
		v = in->p[0];
		in->p++;
		in->n--;
	}
	return v;
}

uint16_t fin_u16(struct fuzz_in *in)
{
	uint16_t lo = fin_u8(in);

	return (uint16_t)(lo | (uint16_t)fin_u8(in) << 8);
}

uint32_t fin_u32(struct fuzz_in *in)
{
	uint32_t lo = fin_u16(in);

	return lo | (uint32_t)fin_u16(in) << 16;
}

uint64_t fuzz_rand(uint64_t *state)
{
	uint64_t z = (*state += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

uint32_t ref_crc32c(uint32_t crc, const void *buf, size_t len)
{
	/* The table is the bit-by-bit computation, done once for each byte value. */
	static uint32_t table[256];
	const uint8_t *p = buf;

	if (!table[1]) {
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t c = i;

			for (int k = 0; k < 8; k++)
				c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
			table[i] = c;
		}
	}
	crc = ~crc;
	for (size_t i = 0; i < len; i++)
		crc = (crc >> 8) ^ table[(crc ^ p[i]) & 0xFF];
	return ~crc;
}

static uint64_t le(const uint8_t *p, int n)
{
	uint64_t v = 0;

	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

void ref_hdr_parse(const uint8_t *raw, struct ref_hdr *h)
{
	h->magic = (uint32_t)le(raw + 0, 4);
	h->version = (uint16_t)le(raw + 4, 2);
	h->opcode = (uint16_t)le(raw + 6, 2);
	h->flags = (uint32_t)le(raw + 8, 4);
	h->status = (int32_t)(uint32_t)le(raw + 12, 4);
	h->req_id = le(raw + 16, 8);
	h->body_len = (uint32_t)le(raw + 24, 4);
	h->bulk_len = (uint32_t)le(raw + 28, 4);
	h->bulk_crc = (uint32_t)le(raw + 32, 4);
	h->hdr_crc = (uint32_t)le(raw + 36, 4);
}

int ref_hdr_check(const struct ref_hdr *h)
{
	if (h->magic != 0x4D4F4F4Cu) /* "LOOM" */
		return -EPROTO;
	if (h->version < 9 || h->version > 10) /* LW_VERSION_MIN, LW_VERSION */
		return -EPROTO;
	if (h->body_len > (1u << 20) + (64u << 10) || h->bulk_len > (16u << 20))
		return -EPROTO;
	if (h->flags & ~31u) /* LW_F_REPLY, LW_F_RESENT, LW_F_ENCRYPT, LW_F_NOTIFY, LW_F_JOBID */
		return -EPROTO;
	if (!(h->flags & 1u) && h->status != 0)
		return -EPROTO;
	if ((h->flags & 8u) && (h->flags & 7u)) /* a notification is nothing else */
		return -EPROTO;
	/* A job id (protocol 10) starts a request's body: never a reply's or a notification's. */
	if ((h->flags & 16u) && ((h->flags & 9u) || h->version < 10 || h->body_len < 32))
		return -EPROTO;
	return 0;
}

uint32_t ref_hdr_crc(const uint8_t *raw, const void *body, size_t body_len)
{
	uint8_t tmp[REF_HDR_LEN];

	memcpy(tmp, raw, sizeof(tmp));
	memset(tmp + 36, 0, 4);
	return ref_crc32c(ref_crc32c(0, tmp, sizeof(tmp)), body, body_len);
}

uint32_t fast_crc32c(uint32_t crc, const void *buf, size_t len)
{
	return crc32c(crc, buf, len);
}

uint32_t fast_hdr_crc(const uint8_t *raw, const void *body, size_t body_len)
{
	uint8_t tmp[REF_HDR_LEN];

	memcpy(tmp, raw, sizeof(tmp));
	memset(tmp + 36, 0, 4);
	return crc32c(crc32c(0, tmp, sizeof(tmp)), body, body_len);
}

int32_t ref_errno_to_wire(int err)
{
	if (err >= 0)
		return 0;
	return err < -133 ? -EIO : err;
}

int ref_errno_from_wire(int32_t status)
{
	if (status > 0 || status < -133)
		return -EIO;
	return status;
}

void fbuf_put(struct fbuf *b, const void *p, size_t n)
{
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;

		while (cap < b->len + n)
			cap *= 2;
		b->p = realloc(b->p, cap);
		if (!b->p)
			abort();
		b->cap = cap;
	}
	if (n)
		memcpy(b->p + b->len, p, n);
	b->len += n;
}

void fbuf_free(struct fbuf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

void fuzz_frames(const uint8_t *in, size_t n, unsigned mode, size_t synth_cap, struct fbuf *out)
{
	size_t synth_left = synth_cap;
	uint32_t seq = 0;

	while (n > 0) {
		uint8_t hdr[REF_HDR_LEN];
		struct ref_hdr h;
		size_t body, bulk, start;
		bool whole;

		if (n < REF_HDR_LEN) {
			fbuf_put(out, in, n);
			return;
		}
		memcpy(hdr, in, REF_HDR_LEN);
		in += REF_HDR_LEN;
		n -= REF_HDR_LEN;
		ref_hdr_parse(hdr, &h);
		start = out->len;
		fbuf_put(out, hdr, REF_HDR_LEN);
		body = h.body_len < n ? h.body_len : n;
		fbuf_put(out, in, body);
		in += body;
		n -= body;
		whole = body == h.body_len;
		if (whole && (mode & FUZZ_FIX_CRC) && h.hdr_crc != 0xFFFFFFFFu)
			put_le32(out->p + start + 36, fast_hdr_crc(out->p + start, out->p + start + REF_HDR_LEN, body));
		if (!whole)
			return;
		if (mode & FUZZ_SYNTH_BULK) {
			bulk = h.bulk_len < synth_left ? h.bulk_len : synth_left;
			synth_left -= bulk;
			for (size_t i = 0; i < bulk;) {
				uint8_t chunk[4096];
				size_t k = bulk - i < sizeof(chunk) ? bulk - i : sizeof(chunk);

				for (size_t j = 0; j < k; j++, i++)
					chunk[j] = (uint8_t)(i * 131u + seq * 7u + (i >> 12));
				fbuf_put(out, chunk, k);
			}
		} else {
			bulk = h.bulk_len < n ? h.bulk_len : n;
			fbuf_put(out, in, bulk);
			in += bulk;
			n -= bulk;
		}
		seq++;
		if (bulk != h.bulk_len)
			return;
		if ((mode & FUZZ_FIX_CRC) && h.bulk_len && h.bulk_crc != 0xFFFFFFFFu) {
			uint32_t crc = fast_crc32c(0, out->p + out->len - bulk, bulk);
			uint8_t *hp = out->p + start;

			/* The bulk checksum is inside the header, which the header checksum covers. */
			put_le32(hp + 32, crc);
			if (h.hdr_crc != 0xFFFFFFFFu)
				put_le32(hp + 36, fast_hdr_crc(hp, hp + REF_HDR_LEN, h.body_len));
		}
	}
}

