/*
 * OSS request bodies: lw_ost_req_decode. Input: the opcode (2 bytes, little endian), then the
 * body. A body that decodes is exactly one lw_ost_io, copied unchanged, with an offset of at most
 * 2^62, a READ of at most LW_MAX_BULK, a SCRUB command the OSS knows, pad 0 and a truncation epoch
 * only on a WRITE or a PUNCH; flags 0, except a FALLOCATE's, one of the five modes the OSS does
 * (over a range that is not empty and ends by 2^62), and a SEEK's, SEEK_DATA or SEEK_HOLE.
 * -EOPNOTSUPP is an opcode the OSS does not serve, or a FALLOCATE mode it does not do.
 */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "proto/codec.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_quiet();
	return 0;
}

static bool is_ost_op(uint16_t op)
{
	const struct lw_op_info *i = lw_op_info(op);

	return i && i->server == LW_SRV_OSS;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lw_ost_io io, again;
	uint16_t op;
	uint32_t len;
	int rc;

	if (size < 2 || size - 2 > LW_MAX_BODY)
		return 0;
	op = (uint16_t)(data[0] | data[1] << 8);
	len = (uint32_t)(size - 2);

	rc = lw_ost_req_decode(op, data + 2, len, &io);
	FUZZ_CHECK(rc == 0 || rc == -EPROTO || rc == -EOPNOTSUPP || rc == -EFBIG || rc == -EINVAL);
	/* Both servers answer PING, whose body is empty. */
	if (op == LW_OP_PING) {
		FUZZ_CHECK(rc == (len ? -EPROTO : 0));
		return 0;
	}
	/* And GET_PARAM, SET_PARAM: one fixed struct, checked; the handler decodes it again. */
	if (op == LW_OP_GET_PARAM || op == LW_OP_SET_PARAM) {
		struct lw_param_req p;

		FUZZ_CHECK(rc == 0 || rc == -EPROTO);
		FUZZ_CHECK((rc == 0) == (lw_param_req_decode(data + 2, len, &p) == 0));
		return 0;
	}
	if (!is_ost_op(op))
		FUZZ_CHECK(rc == -EOPNOTSUPP);
	if (rc == -EOPNOTSUPP) {
		FUZZ_CHECK(!is_ost_op(op) || (op == LW_OP_OST_FALLOCATE && len >= sizeof(io)));
		return 0;
	}
	/* Too short is always -EPROTO; past the fixed part, a bad field may decide first. */
	if (len < sizeof(io))
		FUZZ_CHECK(rc == -EPROTO);
	if (len > sizeof(io))
		FUZZ_CHECK(rc != 0);
	FUZZ_CHECK(lw_ost_req_decode(op, data + 2, len, &again) == rc);
	if (rc)
		return 0;
	FUZZ_CHECK(!memcmp(&io, data + 2, sizeof(io)));
	if (op == LW_OP_OST_FALLOCATE) {
		FUZZ_CHECK(io.flags == 0 || io.flags == 0x01 || io.flags == 0x03 || io.flags == 0x10 ||
			   io.flags == 0x11);
		FUZZ_CHECK(io.length > 0 && io.length <= (1ull << 62) - io.offset);
	} else if (op == LW_OP_OST_SEEK) {
		FUZZ_CHECK(io.flags == 3 || io.flags == 4);
	} else if (op == LW_OP_OST_PUNCH) {
		FUZZ_CHECK(io.flags == 0 || (io.flags == LW_PUNCH_ANEW && io.length == 0));
	} else {
		FUZZ_CHECK(io.flags == 0);
	}
	FUZZ_CHECK(io.pad == 0);
	/* Only writes, punches and allocations are made in a truncation epoch. */
	FUZZ_CHECK(io.trunc_epoch == 0 || op == LW_OP_OST_WRITE || op == LW_OP_OST_PUNCH ||
		   op == LW_OP_OST_FALLOCATE);
	FUZZ_CHECK(io.offset <= (1ull << 62));
	if (op == LW_OP_OST_READ)
		FUZZ_CHECK(io.length <= LW_MAX_BULK);
#ifdef LW_SCRUB_START
	if (op == LW_OP_OST_SCRUB)
		FUZZ_CHECK(io.length == LW_SCRUB_START || io.length == LW_SCRUB_STATUS);
#endif
	return 0;
}
