/*
 * The wire image, pinned (Lustre's wiretest): the size of every struct of src/proto/wire.h and
 * the offset and size of each field, as scripts/wirecheck.py recorded them in wire_pinned.h. A
 * failure here is a change of the wire protocol: make it only on purpose, with a version bump.
 * (scripts/wirecheck.py check, the `wiredoc` test, fails when a struct or field is not pinned.)
 */
#include <stddef.h>

#include "check.h"
#include "proto/codec.h"

int check_failures;
const char *check_current = "";

static void test_pinned_layouts(void)
{
#define PIN_SIZE(s, size) CHECK_EQ(sizeof(struct s), size);
#define PIN_FIELD(s, f, offset, size)                          \
	do {                                                   \
		CHECK_EQ(offsetof(struct s, f), offset);      \
		CHECK_EQ(sizeof(((struct s *)0)->f), size);   \
	} while (0);
#include "wire_pinned.h"
#undef PIN_SIZE
#undef PIN_FIELD
}

/* The table as data agrees with the enum, and every row is found by its value. */
static void test_op_table(void)
{
	size_t n;
	const struct lw_op_info *t = lw_op_table(&n);

	CHECK(n > 40);
	for (size_t i = 0; i < n; i++) {
		CHECK(lw_op_info(t[i].opcode) == &t[i]);
		CHECK(strcmp(lw_op_name(t[i].opcode), t[i].name) == 0);
		for (size_t j = 0; j < i; j++)
			CHECK(t[j].opcode != t[i].opcode);
	}
	CHECK(lw_op_info(0) == NULL);
	CHECK(lw_op_info(0x01FF) == NULL);
	CHECK(strcmp(lw_op_name(0x7777), "UNKNOWN") == 0);
	CHECK_EQ(lw_op_info(LW_OP_MDS_SWAP_LAYOUTS)->resend, LW_RESEND_CACHED);
	CHECK_EQ(lw_op_info(LW_OP_MDS_OPEN)->resend, LW_RESEND_HANDLE);
	CHECK(lw_op_takes_bulk(LW_OP_OST_WRITE, LW_SRV_OSS));
	CHECK(!lw_op_takes_bulk(LW_OP_OST_WRITE, LW_SRV_MDS));
	CHECK(!lw_op_takes_bulk(LW_OP_OST_READ, LW_SRV_OSS));
}

int main(void)
{
	RUN(test_pinned_layouts);
	RUN(test_op_table);
	return check_report();
}
