/*
 * Readdir pages, as a client walks an MDS_READDIR reply (loom_ll_readdir in ll.c, loom_readdir
 * in api.c): lw_readdir_rep, then entries read with lw_readdir_next. Input: the reply body. The
 * page is walked twice, without and with LW_RD_PLUS.
 *
 * Properties of every entry returned:
 *  - its name passes lw_name_check and, checked here again, has 1..255 bytes without '/' or
 *    NUL, lies inside the page right after its lw_dirent, and fits a struct loom_dirent;
 *  - the entry took exactly 24 + its name padded to 8 [+ 96] bytes, so the next one starts
 *    8-aligned; its padding was zero;
 *  - lw_readdir_put writes the same entry back to the same bytes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "loom/loom.h"
#include "proto/codec.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_quiet();
	return 0;
}

static void walk(const uint8_t *page, size_t len, bool plus)
{
	const uint8_t *base = page + sizeof(struct lw_readdir_rep), *end = page + len;
	struct lw_readdir_rep rep;
	struct lw_rd rd;

	memcpy(&rep, page, sizeof(rep));
	lw_rd_init(&rd, base, len - sizeof(rep));
	for (uint32_t i = 0; i < rep.count; i++) {
		const uint8_t *start = rd.p;
		struct lw_dirent de;
		struct lw_attr attr;
		const char *name = NULL;
		struct loom_dirent ent;
		size_t used, want;
		int rc;

		rc = lw_readdir_next(&rd, base, plus, &de, &name, &attr);
		FUZZ_CHECK(rc == 0 || rc == -EPROTO);
		if (rc)
			return;
		FUZZ_CHECK(lw_name_check(name, de.namelen) == 0);
		FUZZ_CHECK(de.namelen >= 1 && de.namelen <= LOOM_NAME_MAX);
		FUZZ_CHECK(!memchr(name, '/', de.namelen) && !memchr(name, '\0', de.namelen));
		FUZZ_CHECK((const uint8_t *)name == start + sizeof(de));
		FUZZ_CHECK((const uint8_t *)name + de.namelen <= end);
		FUZZ_CHECK(de.pad == 0);
		used = (size_t)(rd.p - start);
		want = sizeof(de) + ((de.namelen + 7u) & ~7u) + (plus ? sizeof(attr) : 0);
		FUZZ_CHECK(used == want && rd.p <= end);
		FUZZ_CHECK((rd.p - base) % 8 == 0);
		for (size_t k = sizeof(de) + de.namelen; k < sizeof(de) + ((de.namelen + 7u) & ~7u); k++)
			FUZZ_CHECK(start[k] == 0);
		if (plus)
			FUZZ_CHECK(!memcmp(&attr, start + used - sizeof(attr), sizeof(attr)));
		{
			uint8_t buf[sizeof(de) + LOOM_NAME_MAX + 7 + sizeof(attr)];
			struct lw_wr w;

			lw_wr_init(&w, buf, sizeof(buf));
			FUZZ_CHECK(lw_readdir_put(&w, &de, name, plus ? &attr : NULL) == 0);
			FUZZ_CHECK(w.len == used && !memcmp(buf, start, used));
		}
		/* What the client makes of it. */
		memcpy(ent.name, name, de.namelen);
		ent.name[de.namelen] = '\0';
		FUZZ_CHECK(strlen(ent.name) == de.namelen);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *page;

	/* mdc_readdir refuses a body shorter than lw_readdir_rep. */
	if (size < sizeof(struct lw_readdir_rep) || size > LW_MAX_BODY)
		return 0;
	/* An exact-size copy, so that AddressSanitizer sees any read past the reply body. */
	page = malloc(size);
	FUZZ_CHECK(page != NULL);
	memcpy(page, data, size);
	walk(page, size, false);
	walk(page, size, true);
	free(page);
	return 0;
}
