/*
 * An OST on disk as the OSS and `loom fsck` read it (src/oss/ost_format.c): every input is tried
 * as an ost.conf, as a user.loom.fid tag, and (up to its first NUL) as a name found in object
 * directory size % 256.
 *
 * Properties:
 *  - ost_conf_parse says 0 or -EINVAL, the same with and without a reason, and gives a reason
 *    when it refuses; a conf it takes is written back by ost_conf_format to text that parses to
 *    the same conf, and that text is a fixed point (written again, the same bytes);
 *  - a tag ost_fid_parse takes is exactly what ost_fid_format writes for what it parsed (one
 *    spelling per tag);
 *  - a name ost_name_parse calls an object's is exactly ost_obj_name of its id, in this
 *    directory, and not id 0; one it calls a stray is hex digits only, and no object's name
 *    here; any other name holds something else than hex digits.
 */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "oss/ost_format.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_quiet();
	return 0;
}

static bool conf_eq(const struct ost_conf *a, const struct ost_conf *b)
{
	return !strcmp(a->fsname, b->fsname) && !strcmp(a->uuid, b->uuid) && a->idx == b->idx;
}

static void try_conf(const uint8_t *data, size_t size)
{
	struct ost_conf c, back, again;
	char why[128] = "", text[OST_CONF_MAX], text2[OST_CONF_MAX];
	size_t len, len2;
	int rc = ost_conf_parse((const char *)data, size, &c, why, sizeof(why));

	FUZZ_CHECK(rc == 0 || rc == -EINVAL);
	FUZZ_CHECK(ost_conf_parse((const char *)data, size, &again, NULL, 0) == rc);
	if (rc) {
		FUZZ_CHECK(why[0] != '\0');
		return;
	}
	FUZZ_CHECK(conf_eq(&c, &again));
	FUZZ_CHECK(ost_conf_format(&c, text, sizeof(text), &len) == 0);
	FUZZ_CHECK(ost_conf_parse(text, len, &back, NULL, 0) == 0);
	FUZZ_CHECK(conf_eq(&c, &back));
	FUZZ_CHECK(ost_conf_format(&back, text2, sizeof(text2), &len2) == 0);
	FUZZ_CHECK(len2 == len && memcmp(text, text2, len) == 0);
}

static void try_fid(const uint8_t *data, size_t size)
{
	char tag[OST_FID_TAG_MAX];
	uint64_t ino;
	uint32_t stripe;
	int rc = ost_fid_parse(data, size, &ino, &stripe);

	FUZZ_CHECK(rc == 0 || rc == -EINVAL);
	if (rc == 0)
		FUZZ_CHECK(ost_fid_format(ino, stripe, tag) == size && memcmp(tag, data, size) == 0);
}

static void try_name(const uint8_t *data, size_t size)
{
	char name[64], canon[OST_OBJ_NAME_MAX];
	size_t n = strnlen((const char *)data, size < sizeof(name) ? size : sizeof(name) - 1);
	unsigned dir = (unsigned)(size % OST_NDIRS);
	bool hex;
	uint64_t objid = 0;

	memcpy(name, data, n);
	name[n] = '\0';
	hex = n > 0 && strspn(name, "0123456789abcdefABCDEF") == n;
	switch (ost_name_parse(name, dir, &objid)) {
	case OST_NAME_OBJECT:
		ost_obj_name(objid, canon, sizeof(canon));
		FUZZ_CHECK(objid != 0 && strcmp(canon, name) == 0 && ost_obj_dir(objid) == dir);
		break;
	case OST_NAME_STRAY:
		FUZZ_CHECK(hex);
		/* The id the name would be, if it were spelled as one: not an object here. */
		if (n <= 16) {
			uint64_t v = 0;
			for (size_t i = 0; i < n; i++) {
				char ch = name[i] | 0x20;
				v = v << 4 | (uint64_t)(ch <= '9' ? ch - '0' : ch - 'a' + 10);
			}
			ost_obj_name(v, canon, sizeof(canon));
			FUZZ_CHECK(v == 0 || strcmp(canon, name) != 0 || ost_obj_dir(v) != dir);
		}
		break;
	case OST_NAME_OTHER:
		FUZZ_CHECK(!hex);
		break;
	default:
		FUZZ_CHECK(!"a kind ost_format.h does not name");
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	try_conf(data, size);
	try_fid(data, size);
	try_name(data, size);
	return 0;
}
