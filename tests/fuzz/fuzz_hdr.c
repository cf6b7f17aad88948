/*
 * Frame headers: lw_hdr_check and lw_hdr_crc_check on an arbitrary 40-byte header and the body
 * after it, against the rules of wire.h restated in fuzz.c; crc32c (ISA-L) against a reference
 * crc32c; lw_hdr_fill's headers always pass the receiving checks; and the errno mapping.
 *
 * Input: 40 header bytes, then the body (and a few bytes the driver reads for its choices).
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/uio.h>

#include "common/crc.h"
#include "fuzz.h"
#include "proto/codec.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_quiet();
	return 0;
}

static void check_crc_impl(const uint8_t *data, size_t size)
{
	uint32_t whole = crc32c(0, data, size);
	size_t cut = size ? data[0] % (size + 1) : 0;
	struct iovec iov[3];

	FUZZ_CHECK(whole == ref_crc32c(0, data, size));
	/* zlib-style chaining, as crc.h promises */
	FUZZ_CHECK(crc32c(crc32c(0, data, cut), data + cut, size - cut) == whole);
	/* crc32c_iov over three pieces, limited to a prefix */
	iov[0] = (struct iovec){ (void *)data, cut / 2 };
	iov[1] = (struct iovec){ (void *)(data + cut / 2), cut - cut / 2 };
	iov[2] = (struct iovec){ (void *)(data + cut), size - cut };
	FUZZ_CHECK(crc32c_iov(0, iov, 3, size) == whole);
	FUZZ_CHECK(crc32c_iov(0, iov, 3, cut) == crc32c(0, data, cut));
}

static void check_errno_map(int32_t v)
{
	int back = lw_errno_from_wire(v);

	FUZZ_CHECK(back == ref_errno_from_wire(v));
	FUZZ_CHECK(back == 0 || (back < 0 && back >= -133));
	FUZZ_CHECK((back == 0) == (v == 0)); /* a corrupt status never becomes a success */
	FUZZ_CHECK(lw_errno_to_wire(v) == ref_errno_to_wire(v));
	FUZZ_CHECK(lw_errno_from_wire(lw_errno_to_wire(v)) == lw_errno_to_wire(v));
}

/* Headers that lw_hdr_fill makes pass both receiving checks; any one flipped bit fails the crc. */
static void check_fill(const uint8_t *raw, const uint8_t *body, size_t avail, struct fuzz_in *in)
{
	struct ref_hdr r;
	struct lw_hdr h, flipped;
	uint8_t bodycopy[256];
	uint32_t body_len = (uint32_t)(avail < sizeof(bodycopy) ? avail : sizeof(bodycopy));
	uint32_t flags, bulk_len, bit;
	int32_t status;

	ref_hdr_parse(raw, &r);
	flags = r.flags & (LW_F_REPLY | LW_F_RESENT | LW_F_ENCRYPT);
	status = (flags & LW_F_REPLY) ? ref_errno_to_wire(r.status) : 0;
	bulk_len = r.bulk_len % (LW_MAX_BULK + 1);
	memcpy(bodycopy, body, body_len);
	lw_hdr_fill(&h, r.opcode, flags, status, r.req_id, bodycopy, body_len, bulk_len, r.bulk_crc);
	FUZZ_CHECK(lw_hdr_check(&h) == 0);
	FUZZ_CHECK(lw_hdr_crc_check(&h, bodycopy) == 0);
	FUZZ_CHECK(h.bulk_crc == (bulk_len ? r.bulk_crc : 0));
	{
		struct ref_hdr back;

		ref_hdr_parse((const uint8_t *)&h, &back);
		FUZZ_CHECK(ref_hdr_check(&back) == 0);
		FUZZ_CHECK(back.hdr_crc == ref_hdr_crc((const uint8_t *)&h, bodycopy, body_len));
		FUZZ_CHECK(back.opcode == r.opcode && back.req_id == r.req_id && back.flags == flags &&
			   back.status == status && back.body_len == body_len && back.bulk_len == bulk_len);
	}
	/* One flipped bit anywhere in header or body (crc32c catches every single-bit error). */
	bit = fin_u32(in) % ((uint32_t)(sizeof(h) + body_len) * 8);
	flipped = h;
	if (bit < sizeof(h) * 8) {
		/* (not in body_len, which would make the body another length) */
		if (bit / 8 < offsetof(struct lw_hdr, body_len) ||
		    bit / 8 >= offsetof(struct lw_hdr, bulk_len)) {
			((uint8_t *)&flipped)[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			FUZZ_CHECK(lw_hdr_crc_check(&flipped, bodycopy) != 0);
		}
	} else {
		bit -= (uint32_t)sizeof(h) * 8;
		bodycopy[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		FUZZ_CHECK(lw_hdr_crc_check(&h, bodycopy) != 0);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lw_hdr h;
	struct ref_hdr r;
	const uint8_t *body;
	size_t avail;
	struct fuzz_in in;
	const char *name;

	check_crc_impl(data, size);
	if (size < sizeof(h))
		return 0;
	memcpy(&h, data, sizeof(h));
	ref_hdr_parse(data, &r);
	body = data + sizeof(h);
	avail = size - sizeof(h);

	FUZZ_CHECK(lw_hdr_check(&h) == ref_hdr_check(&r));
	FUZZ_CHECK(lw_hdr_check(&h) == 0 || lw_hdr_check(&h) == -EPROTO);
	if (r.body_len <= avail) {
		int rc = lw_hdr_crc_check(&h, body);

		FUZZ_CHECK(rc == 0 || rc == -EBADMSG);
		FUZZ_CHECK((rc == 0) == (ref_hdr_crc(data, body, r.body_len) == r.hdr_crc));
	}
	name = lw_op_name(r.opcode);
	FUZZ_CHECK(name != NULL && name[0] != '\0');
	check_errno_map(r.status);
	check_errno_map((int32_t)r.bulk_crc);

	in.p = body;
	in.n = avail;
	check_fill(data, body, avail, &in);
	return 0;
}
