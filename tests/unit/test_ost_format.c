/*
 * src/oss/ost_format.c, an OST on disk as the OSS and `loom fsck` both read it: ost.conf byte
 * for byte (the bytes expected here are those every OST made so far holds), what its parser
 * refuses, a new OST's directory, the user.loom.fid tag, and objects' names both ways.
 */
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "oss/ost_format.h"

int check_failures;
const char *check_current = "";

#define CHECK_STR(a, b)                                                                    \
	do {                                                                                \
		const char *sa_ = (a), *sb_ = (b);                                          \
		if (strcmp(sa_, sb_) != 0)                                                  \
			CHECK_FAIL_("%s == %s: \"%s\" != \"%s\"", #a, #b, sa_, sb_);       \
	} while (0)

static const char uuid36[] = "0123abcd-4567-89ef-0123-456789abcdef";

/* ---- scratch directories ---- */

static void tmpdir(char *buf, size_t cap)
{
	snprintf(buf, cap, "/tmp/loom-test-ostfmt-XXXXXX");
	REQUIRE(mkdtemp(buf) != NULL);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void rmtree(const char *dir)
{
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void put_file(const char *dir, const char *name, const void *buf, size_t len)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	REQUIRE(f != NULL);
	REQUIRE(fwrite(buf, 1, len, f) == len);
	REQUIRE(fclose(f) == 0);
}

/* The whole file (NUL-terminated), or NULL when missing. */
static char *get_file(const char *dir, const char *name, size_t *len)
{
	char path[PATH_MAX], *buf = malloc(OST_CONF_MAX + 2);
	FILE *f;

	REQUIRE(buf != NULL);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "rb");
	if (!f) {
		free(buf);
		return NULL;
	}
	*len = fread(buf, 1, OST_CONF_MAX + 1, f);
	buf[*len] = '\0';
	fclose(f);
	return buf;
}

static struct ost_conf conf_of(const char *fsname, const char *uuid, uint32_t idx)
{
	struct ost_conf c = { .idx = idx };

	snprintf(c.fsname, sizeof(c.fsname), "%s", fsname);
	snprintf(c.uuid, sizeof(c.uuid), "%s", uuid);
	return c;
}

static bool conf_eq(const struct ost_conf *a, const struct ost_conf *b)
{
	return !strcmp(a->fsname, b->fsname) && !strcmp(a->uuid, b->uuid) && a->idx == b->idx;
}

/* ---- ost.conf ---- */

/* What ost_conf_format writes, and that it parses back to what was written. */
static void check_conf_bytes(const struct ost_conf *c, const char *want)
{
	char buf[OST_CONF_MAX];
	struct ost_conf back;
	size_t len = 0;

	CHECK_RC(ost_conf_format(c, buf, sizeof(buf), &len), 0);
	CHECK_EQ(len, strlen(want));
	CHECK(len == strlen(want) && memcmp(buf, want, len) == 0);
	memset(&back, 0xa5, sizeof(back));
	CHECK_RC(ost_conf_parse(want, strlen(want), &back, NULL, 0), 0);
	CHECK(conf_eq(&back, c));
}

static void test_conf_bytes(void)
{
	struct ost_conf c = conf_of("t", uuid36, OST_IDX_NONE);
	char small[16];
	size_t len;

	/* As ost_format writes it (no index yet), and as the OSS rewrites it once registered. */
	check_conf_bytes(&c, "fsname=t\nuuid=0123abcd-4567-89ef-0123-456789abcdef\n");
	c = conf_of("lustre", uuid36, 0);
	check_conf_bytes(&c, "fsname=lustre\nuuid=0123abcd-4567-89ef-0123-456789abcdef\nindex=0\n");
	c = conf_of("abcdefgh", uuid36, 7);
	check_conf_bytes(&c, "fsname=abcdefgh\nuuid=0123abcd-4567-89ef-0123-456789abcdef\nindex=7\n");
	c = conf_of("fs", "u", 4294967294u);
	check_conf_bytes(&c, "fsname=fs\nuuid=u\nindex=4294967294\n");
	c = conf_of("fs", "012345678901234567890123456789012345678", 12);
	check_conf_bytes(&c, "fsname=fs\nuuid=012345678901234567890123456789012345678\nindex=12\n");

	/* No room: nothing claimed. */
	c = conf_of("t", uuid36, 1);
	CHECK_RC(ost_conf_format(&c, small, sizeof(small), &len), -ERANGE);
}

static void test_conf_format_refuses(void)
{
	struct ost_conf c;
	char buf[OST_CONF_MAX];
	size_t len;

	c = conf_of("", uuid36, 1);
	CHECK_RC(ost_conf_format(&c, buf, sizeof(buf), &len), -EINVAL);
	c = conf_of("t", "", 1);
	CHECK_RC(ost_conf_format(&c, buf, sizeof(buf), &len), -EINVAL);
	c = conf_of("a\nindex", uuid36, 1); /* would add a line */
	CHECK_RC(ost_conf_format(&c, buf, sizeof(buf), &len), -EINVAL);
	c = conf_of("t", "u\tv", 1);
	CHECK_RC(ost_conf_format(&c, buf, sizeof(buf), &len), -EINVAL);
	/* Not terminated: too long. */
	c = conf_of("t", uuid36, 1);
	memset(c.fsname, 'x', sizeof(c.fsname));
	CHECK_RC(ost_conf_format(&c, buf, sizeof(buf), &len), -EINVAL);
	c = conf_of("t", uuid36, 1);
	memset(c.uuid, 'x', sizeof(c.uuid));
	CHECK_RC(ost_conf_format(&c, buf, sizeof(buf), &len), -EINVAL);
}

static void test_conf_parse_accepts(void)
{
	static const struct {
		const char *text;
		const char *fsname, *uuid;
		uint32_t idx;
	} cases[] = {
		{ "fsname=t\nuuid=u", "t", "u", OST_IDX_NONE },             /* no last newline */
		{ "uuid=u\nindex=3\nfsname=t\n", "t", "u", 3 },             /* any order */
		{ "\nfsname=t\n\n\nuuid=u\n\n", "t", "u", OST_IDX_NONE },   /* empty lines */
		{ "fsname=t\nlater=what\nuuid=u\nx=\n", "t", "u", OST_IDX_NONE }, /* unknown keys */
		{ "fsname=a=b\nuuid==\n", "a=b", "=", OST_IDX_NONE },       /* the first '=' splits */
		{ "fsname=t\nuuid=u\nindex=0\n", "t", "u", 0 },
		{ "fsname=t\nuuid=u\nindex=4294967294\n", "t", "u", 4294967294u },
		{ "fsname=t\nuuid=u\nnot an index=1\n", "t", "u", OST_IDX_NONE },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct ost_conf c, want = conf_of(cases[i].fsname, cases[i].uuid, cases[i].idx);
		char why[128] = "";
		int rc = ost_conf_parse(cases[i].text, strlen(cases[i].text), &c, why, sizeof(why));

		CHECK_RC(rc, 0);
		if (rc == 0 && !conf_eq(&c, &want))
			CHECK_FAIL_("case %zu: got %s/%s/%u", i, c.fsname, c.uuid, c.idx);
	}
}

static void test_conf_parse_refuses(void)
{
	static const char *const cases[] = {
		"",                                         /* nothing */
		"\n\n",
		"fsname=t\n",                               /* missing key */
		"uuid=u\n",
		"index=1\n",
		"fsname=t\nuuid=u\ngarbage\n",              /* not key=value */
		"garbage",
		"fsname=t\nuuid=u\n=1\n",                   /* no key */
		"fsname=t\r\nuuid=u\r\n",                   /* a control character */
		"fsname=a\tb\nuuid=u\n",
		"fsname=t\nuuid=u\x7f\n",
		"fsname=\nuuid=u\n",                        /* empty */
		"fsname=t\nuuid=\n",
		"fsname=abcdefghi\nuuid=u\n",               /* overlong: 9 characters */
		"fsname=t\nuuid=0123456789012345678901234567890123456789\n", /* 40 */
		"fsname=t\nfsname=t\nuuid=u\n",             /* twice */
		"fsname=t\nuuid=u\nuuid=v\n",
		"fsname=t\nuuid=u\nindex=1\nindex=1\n",
		"fsname=t\nuuid=u\nindex=\n",               /* not an index */
		"fsname=t\nuuid=u\nindex=x\n",
		"fsname=t\nuuid=u\nindex=1x\n",
		"fsname=t\nuuid=u\nindex=-1\n",
		"fsname=t\nuuid=u\nindex=+1\n",
		"fsname=t\nuuid=u\nindex= 1\n",
		"fsname=t\nuuid=u\nindex=1 \n",
		"fsname=t\nuuid=u\nindex=01\n",
		"fsname=t\nuuid=u\nindex=0x10\n",
		"fsname=t\nuuid=u\nindex=4294967295\n",     /* OST_IDX_NONE is no index */
		"fsname=t\nuuid=u\nindex=4294967296\n",
		"fsname=t\nuuid=u\nindex=18446744073709551617\n",
		"fsname=t\nuuid=u\nindex=99999999999999999999999999\n",
	};
	struct ost_conf c, untouched = conf_of("keep", "me", 5);
	char big[OST_CONF_MAX + 64];
	size_t n;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char why[128] = "";

		c = untouched;
		CHECK_RC(ost_conf_parse(cases[i], strlen(cases[i]), &c, why, sizeof(why)), -EINVAL);
		if (!why[0])
			CHECK_FAIL_("case %zu: no reason given", i);
		if (!conf_eq(&c, &untouched))
			CHECK_FAIL_("case %zu: the conf was changed", i);
	}
	/* A NUL inside, even where the text would be fine. */
	CHECK_RC(ost_conf_parse("fsname=t\nuuid=u\0\n", 17, &c, NULL, 0), -EINVAL);
	CHECK_RC(ost_conf_parse("fsname=t\0\nuuid=u\n", 17, &c, NULL, 0), -EINVAL);
	/* Longer than OST_CONF_MAX, though made of acceptable lines. */
	n = (size_t)snprintf(big, sizeof(big), "fsname=t\nuuid=u\nx=");
	memset(big + n, 'y', OST_CONF_MAX - n);
	CHECK_RC(ost_conf_parse(big, OST_CONF_MAX, &c, NULL, 0), 0);
	big[OST_CONF_MAX] = '\n';
	CHECK_RC(ost_conf_parse(big, OST_CONF_MAX + 1, &c, NULL, 0), -EINVAL);
	/* The reason names the line. */
	{
		char why[128] = "";
		const char *t = "fsname=t\nuuid=u\nindex=x\n";
		CHECK_RC(ost_conf_parse(t, strlen(t), &c, why, sizeof(why)), -EINVAL);
		CHECK(strstr(why, "line 3") != NULL);
	}
}

/* Writes c into dir's ost.conf, checks the file's bytes, and reads it back. */
static void check_written(const char *dir, const struct ost_conf *c, const char *want)
{
	struct ost_conf back;
	char *raw;
	size_t len;

	CHECK_RC(ost_conf_write(dir, c), 0);
	raw = get_file(dir, OST_CONF_FILE, &len);
	REQUIRE(raw != NULL);
	CHECK_STR(raw, want);
	free(raw);
	CHECK_RC(ost_conf_read(dir, &back, NULL, 0), 0);
	CHECK(conf_eq(&back, c));
}

static void test_conf_files(void)
{
	struct ost_conf c = conf_of("fs1", uuid36, OST_IDX_NONE), back;
	char dir[64], why[128];

	tmpdir(dir, sizeof(dir));
	/* Missing: -ENOENT, said so. */
	why[0] = '\0';
	CHECK_RC(ost_conf_read(dir, &back, why, sizeof(why)), -ENOENT);
	CHECK(why[0] != '\0');

	check_written(dir, &c, "fsname=fs1\nuuid=0123abcd-4567-89ef-0123-456789abcdef\n");
	c.idx = 42;
	check_written(dir, &c, "fsname=fs1\nuuid=0123abcd-4567-89ef-0123-456789abcdef\nindex=42\n");

	/* A conf that cannot be written leaves the file as it was. */
	back = conf_of("", uuid36, 1);
	CHECK_RC(ost_conf_write(dir, &back), -EINVAL);
	CHECK_RC(ost_conf_read(dir, &back, NULL, 0), 0);
	CHECK(conf_eq(&back, &c));

	/* Garbage on disk: -EINVAL and why. */
	put_file(dir, OST_CONF_FILE, "hello\n", 6);
	why[0] = '\0';
	CHECK_RC(ost_conf_read(dir, &back, why, sizeof(why)), -EINVAL);
	CHECK(strstr(why, "line 1") != NULL);
	{
		char big[OST_CONF_MAX + 1];
		memset(big, '\n', sizeof(big));
		put_file(dir, OST_CONF_FILE, big, sizeof(big));
		CHECK_RC(ost_conf_read(dir, &back, NULL, 0), -EINVAL);
	}
	rmtree(dir);
}

static void test_format(void)
{
	char dir[64], path[PATH_MAX + 32], *raw;
	struct ost_conf c;
	struct stat st;
	size_t len;

	tmpdir(dir, sizeof(dir));
	CHECK_RC(ost_format(dir, "abcdefghi", OST_IDX_NONE, false), -EINVAL); /* 9 characters */
	snprintf(path, sizeof(path), "%s/O", dir);
	CHECK(stat(path, &st) < 0); /* nothing made */

	CHECK_RC(ost_format(dir, "abcdefgh", 3, false), 0);
	for (unsigned d = 0; d < OST_NDIRS; d++) {
		snprintf(path, sizeof(path), "%s/" OST_ODIR_FMT, dir, d);
		if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode))
			CHECK_FAIL_("%s is missing", path);
	}
	snprintf(path, sizeof(path), "%s/O/ab", dir);
	CHECK(stat(path, &st) == 0);
	REQUIRE_RC(ost_conf_read(dir, &c, NULL, 0), 0);
	CHECK_STR(c.fsname, "abcdefgh");
	CHECK_EQ(c.idx, 3);
	/* The uuid: 8-4-4-4-12 lowercase hex. */
	CHECK_EQ(strlen(c.uuid), 36);
	for (size_t i = 0; i < 36; i++) {
		bool dash = i == 8 || i == 13 || i == 18 || i == 23;
		if (dash ? c.uuid[i] != '-' : !strchr("0123456789abcdef", c.uuid[i]))
			CHECK_FAIL_("uuid %s: byte %zu", c.uuid, i);
	}
	raw = get_file(dir, OST_CONF_FILE, &len);
	REQUIRE(raw != NULL);
	snprintf(path, sizeof(path), "fsname=abcdefgh\nuuid=%s\nindex=3\n", c.uuid);
	CHECK_STR(raw, path);
	free(raw);
	CHECK_RC(ost_format(dir, "t", OST_IDX_NONE, false), -EEXIST);
	rmtree(dir);

	tmpdir(dir, sizeof(dir));
	CHECK_RC(ost_format(dir, "t", OST_IDX_NONE, false), 0);
	REQUIRE_RC(ost_conf_read(dir, &c, NULL, 0), 0);
	CHECK_EQ(c.idx, OST_IDX_NONE);
	raw = get_file(dir, OST_CONF_FILE, &len);
	REQUIRE(raw != NULL);
	CHECK(strstr(raw, "index") == NULL);
	free(raw);
	rmtree(dir);

	/* A replacement: the index it takes, and replace=yes until the MDS said yes; then the ids
	 * below which a missing object is lost. */
	tmpdir(dir, sizeof(dir));
	CHECK_RC(ost_format(dir, "t", OST_IDX_NONE, true), -EINVAL);
	CHECK_RC(ost_format(dir, "t", 2, true), 0);
	REQUIRE_RC(ost_conf_read(dir, &c, NULL, 0), 0);
	CHECK(c.replace);
	CHECK_EQ(c.idx, 2);
	CHECK_EQ(c.lost_below, 0);
	raw = get_file(dir, OST_CONF_FILE, &len);
	REQUIRE(raw != NULL);
	snprintf(path, sizeof(path), "fsname=t\nuuid=%s\nindex=2\nreplace=yes\n", c.uuid);
	CHECK_STR(raw, path);
	free(raw);
	c.replace = false;
	c.lost_below = 77;
	CHECK_RC(ost_conf_write(dir, &c), 0);
	raw = get_file(dir, OST_CONF_FILE, &len);
	REQUIRE(raw != NULL);
	snprintf(path, sizeof(path), "fsname=t\nuuid=%s\nindex=2\nlost_below=77\n", c.uuid);
	CHECK_STR(raw, path);
	free(raw);
	REQUIRE_RC(ost_conf_read(dir, &c, NULL, 0), 0);
	CHECK(!c.replace);
	CHECK_EQ(c.lost_below, 77);
	CHECK_RC(ost_conf_parse("fsname=t\nuuid=u\nreplace=yes\n", 28, &c, NULL, 0), -EINVAL);
	CHECK_RC(ost_conf_parse("fsname=t\nuuid=u\nindex=1\nreplace=no\n", 35, &c, NULL, 0), -EINVAL);
	CHECK_RC(ost_conf_parse("fsname=t\nuuid=u\nlost_below=x\n", 29, &c, NULL, 0), -EINVAL);
	rmtree(dir);
}

/* ---- user.loom.fid ---- */

static void test_fid(void)
{
	static const struct {
		uint64_t ino;
		uint32_t stripe;
		const char *text;
	} good[] = {
		{ 0, 0, "0:0" },
		{ 77, 2, "77:2" },
		{ 1, 4294967295u, "1:4294967295" },
		{ 18446744073709551615ull, 4294967295u, "18446744073709551615:4294967295" },
	};
	static const char *const bad[] = {
		"", ":", "1", "1:", ":1", "1:2:3", "1::2", "a:1", "1:b", "0x1:2", "1:0x2",
		"-1:2", "+1:2", "1:-2", "1:+2", " 1:2", "1 :2", "1: 2", "1:2 ", "1:2\n",
		"01:2", "1:02", "00:0",
		"18446744073709551616:0",                   /* ino overflows */
		"99999999999999999999999:0",
		"0:4294967296",                             /* stripe overflows */
		"0:18446744073709551615",
		"123456789012345678901234567890:1",
	};
	char buf[OST_FID_TAG_MAX];
	uint64_t ino;
	uint32_t stripe;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		size_t n;

		memset(buf, 'x', sizeof(buf));
		n = ost_fid_format(good[i].ino, good[i].stripe, buf);
		CHECK_EQ(n, strlen(good[i].text));
		CHECK(n < OST_FID_TAG_MAX && memcmp(buf, good[i].text, n) == 0);
		ino = 1234;
		stripe = 5678;
		CHECK_RC(ost_fid_parse(good[i].text, strlen(good[i].text), &ino, &stripe), 0);
		CHECK(ino == good[i].ino);
		CHECK_EQ(stripe, good[i].stripe);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ino = 1234;
		stripe = 5678;
		if (ost_fid_parse(bad[i], strlen(bad[i]), &ino, &stripe) != -EINVAL)
			CHECK_FAIL_("tag \"%s\" taken", bad[i]);
		CHECK(ino == 1234 && stripe == 5678);
	}
	/* The length counts, not a NUL: an xattr's value has none. */
	CHECK_RC(ost_fid_parse("12:34xyz", 5, &ino, &stripe), 0);
	CHECK(ino == 12 && stripe == 34);
	CHECK_RC(ost_fid_parse("12:3\0", 5, &ino, &stripe), -EINVAL);
	CHECK_RC(ost_fid_parse(NULL, 0, &ino, &stripe), -EINVAL);
}

/* ---- objects' names ---- */

static void check_name(uint64_t objid, const char *want)
{
	char buf[OST_OBJ_NAME_MAX], crc[OST_OBJ_NAME_MAX + 8];
	uint64_t back = 0;

	ost_obj_name(objid, buf, sizeof(buf));
	CHECK_STR(buf, want);
	ost_csum_name(objid, buf, sizeof(buf));
	snprintf(crc, sizeof(crc), "%s.crc", want);
	CHECK_STR(buf, crc);
	CHECK_EQ(ost_name_parse(want, ost_obj_dir(objid), &back), OST_NAME_OBJECT);
	CHECK(back == objid);
	/* In any other directory it is not where the OSS looks. */
	CHECK_EQ(ost_name_parse(want, (ost_obj_dir(objid) + 1) % OST_NDIRS, &back), OST_NAME_STRAY);
	CHECK_EQ(ost_name_parse(crc, ost_obj_dir(objid), &back), OST_NAME_OTHER);
}

static void test_names(void)
{
	static const struct {
		const char *name;
		unsigned dir;
		enum ost_name_kind kind;
	} cases[] = {
		{ "", 0, OST_NAME_OTHER },
		{ ".", 0, OST_NAME_OTHER },
		{ "..", 0, OST_NAME_OTHER },
		{ "1.crc", 1, OST_NAME_OTHER },
		{ "1.tmp", 1, OST_NAME_OTHER },
		{ ".1", 1, OST_NAME_OTHER },
		{ "1 ", 1, OST_NAME_OTHER },
		{ "12g", 0x12, OST_NAME_OTHER },
		{ "x", 0, OST_NAME_OTHER },
		{ "0x1", 1, OST_NAME_OTHER },
		{ "0", 0, OST_NAME_STRAY },                  /* no object has id 0 */
		{ "00", 0, OST_NAME_STRAY },
		{ "01", 1, OST_NAME_STRAY },                 /* leading zero */
		{ "0abc", 0xbc, OST_NAME_STRAY },
		{ "ABC", 0xbc, OST_NAME_STRAY },             /* uppercase */
		{ "aBc", 0xbc, OST_NAME_STRAY },
		{ "abc", 0xbd, OST_NAME_STRAY },             /* another directory's */
		{ "abc", 0xbc, OST_NAME_OBJECT },
		{ "ffffffffffffffff", 0xff, OST_NAME_OBJECT },
		{ "1ffffffffffffffff", 0xff, OST_NAME_STRAY }, /* 17 digits */
		{ "10000000000000000", 0x00, OST_NAME_STRAY },
	};
	uint64_t objid;

	check_name(1, "1");
	check_name(0xab, "ab");
	check_name(0x1234, "1234");
	check_name(0x100, "100");
	check_name(0xdeadbeefcafe, "deadbeefcafe");
	check_name(UINT64_MAX, "ffffffffffffffff");
	CHECK_EQ(ost_obj_dir(0x1234), 0x34);
	CHECK_EQ(ost_obj_dir(UINT64_MAX), 0xff);
	CHECK_EQ(ost_obj_dir(0x100), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		enum ost_name_kind k = ost_name_parse(cases[i].name, cases[i].dir, &objid);
		if (k != cases[i].kind)
			CHECK_FAIL_("\"%s\" in %02x: kind %d, want %d", cases[i].name, cases[i].dir, k,
				    cases[i].kind);
	}
	/* Every directory, ids of every length: the name and the id are one. */
	srandom(7);
	for (unsigned d = 0; d < OST_NDIRS; d++) {
		for (int bits = 8; bits <= 64; bits += 4) {
			uint64_t r = (uint64_t)random() << 33 ^ (uint64_t)random() << 2 ^ (uint64_t)random();
			uint64_t hi = bits == 64 ? r : r & ((1ull << bits) - 1);
			uint64_t id = (hi & ~0xffull) | d, back = 0;
			char name[OST_OBJ_NAME_MAX];

			if (id == 0)
				continue;
			ost_obj_name(id, name, sizeof(name));
			if (ost_name_parse(name, d, &back) != OST_NAME_OBJECT || back != id)
				CHECK_FAIL_("id %llx: name %s", (unsigned long long)id, name);
		}
	}
	{
		char dname[16];
		snprintf(dname, sizeof(dname), OST_ODIR_FMT, 0xab);
		CHECK_STR(dname, "O/ab");
		snprintf(dname, sizeof(dname), OST_ODIR_FMT, 0x7);
		CHECK_STR(dname, "O/07");
	}
}

int main(void)
{
	RUN(test_conf_bytes);
	RUN(test_conf_format_refuses);
	RUN(test_conf_parse_accepts);
	RUN(test_conf_parse_refuses);
	RUN(test_conf_files);
	RUN(test_format);
	RUN(test_fid);
	RUN(test_names);
	return check_report();
}
