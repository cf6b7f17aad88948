/* The wire codec: round trips, and malformed, truncated and random bodies rejected (never read
 * out of bounds: run under ASan to make that a hard failure). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "common/crc.h"
#include "proto/codec.h"

int check_failures;
const char *check_current = "";

static const struct loom_cred test_cred = { .uid = 1000, .gid = 100, .ngroups = 2, .groups = { 100, 27 } };

static void test_crc32c(void)
{
	CHECK_EQ(crc32c(0, "123456789", 9), 0xe3069283u);
	CHECK_EQ(crc32c(crc32c(0, "1234", 4), "56789", 5), 0xe3069283u);
	CHECK_EQ(crc32c(0, "", 0), 0);
}

static void test_header(void)
{
	uint8_t body[100];
	struct lw_hdr h;

	memset(body, 7, sizeof(body));
	lw_hdr_fill(&h, LW_OP_MDS_GETATTR, 0, 0, 42, body, sizeof(body), 0, 0);
	CHECK_RC(lw_hdr_check(&h), 0);
	CHECK_RC(lw_hdr_crc_check(&h, body), 0);
	body[50] ^= 1;
	CHECK_RC(lw_hdr_crc_check(&h, body), -EBADMSG);
	body[50] ^= 1;
	h.req_id ^= 1;
	CHECK_RC(lw_hdr_crc_check(&h, body), -EBADMSG);
	h.req_id ^= 1;

	struct lw_hdr bad = h;
	bad.magic = 0x12345678;
	CHECK_RC(lw_hdr_check(&bad), -EPROTO);
	bad = h;
	bad.version = LW_VERSION + 1;
	CHECK_RC(lw_hdr_check(&bad), -EPROTO);
	bad = h;
	bad.body_len = LW_MAX_BODY + 1;
	CHECK_RC(lw_hdr_check(&bad), -EPROTO);
	bad = h;
	bad.bulk_len = LW_MAX_BULK + 1;
	CHECK_RC(lw_hdr_check(&bad), -EPROTO);
	bad = h;
	bad.flags = 0x80;
	CHECK_RC(lw_hdr_check(&bad), -EPROTO);
	bad = h;
	bad.status = -5; /* a request never carries a status */
	CHECK_RC(lw_hdr_check(&bad), -EPROTO);
	bad.flags = LW_F_REPLY;
	CHECK_RC(lw_hdr_check(&bad), 0);
}

static void test_errno(void)
{
	CHECK_EQ(lw_errno_to_wire(-ENOENT), -ENOENT);
	CHECK_EQ(lw_errno_to_wire(0), 0);
	CHECK_EQ(lw_errno_to_wire(-100000), -EIO);
	CHECK_EQ(lw_errno_from_wire(-ENOSPC), -ENOSPC);
	CHECK_EQ(lw_errno_from_wire(5), -EIO);       /* positive: not a success */
	CHECK_EQ(lw_errno_from_wire(-9999), -EIO);
}

/* Builds cred + fixed + tails. */
static size_t build(uint8_t *buf, size_t cap, bool cred, const void *fixed, size_t flen, const void *t1,
		    size_t l1, const void *t2, size_t l2)
{
	struct lw_wr w;

	lw_wr_init(&w, buf, cap);
	if (cred)
		lw_put_cred(&w, &test_cred);
	lw_wr_put(&w, fixed, flen);
	if (l1)
		lw_wr_put(&w, t1, l1);
	if (l2)
		lw_wr_put(&w, t2, l2);
	REQUIRE(w.err == 0);
	return w.len;
}

/* Every strict prefix of a valid body must be rejected, and so must a trailing extra byte. */
static void check_truncations(uint16_t op, const uint8_t *body, size_t len)
{
	struct lw_mds_req q;
	uint8_t *copy = malloc(len + 1);

	REQUIRE(copy);
	for (size_t n = 0; n < len; n++) {
		memcpy(copy, body, n);
		if (lw_mds_req_decode(op, n ? copy : NULL, (uint32_t)n, &q) == 0) {
			CHECK_FAIL_("%s: a %zu-byte prefix of a %zu-byte body decoded", lw_op_name(op), n, len);
			break;
		}
	}
	memcpy(copy, body, len);
	copy[len] = 0;
	CHECK_RC(lw_mds_req_decode(op, copy, (uint32_t)len + 1, &q), -EPROTO);
	free(copy);
}

static void test_mds_name_requests(void)
{
	uint8_t buf[1024];
	struct lw_name_req f = { .parent = 5, .namelen = 5 };
	struct lw_mds_req q;
	size_t len;

	len = build(buf, sizeof(buf), true, &f, sizeof(f), "hello", 5, NULL, 0);
	CHECK_RC(lw_mds_req_decode(LW_OP_MDS_LOOKUP, buf, (uint32_t)len, &q), 0);
	CHECK_EQ(q.cred.uid, 1000);
	CHECK_EQ(q.cred.ngroups, 2);
	CHECK_EQ(q.cred.groups[1], 27);
	CHECK_EQ(q.u.name.f.parent, 5);
	CHECK(q.u.name.name.len == 5 && !memcmp(q.u.name.name.s, "hello", 5));
	check_truncations(LW_OP_MDS_LOOKUP, buf, len);

	len = build(buf, sizeof(buf), true, &f, sizeof(f), "he/lo", 5, NULL, 0);
	CHECK_RC(lw_mds_req_decode(LW_OP_MDS_LOOKUP, buf, (uint32_t)len, &q), -EINVAL);
	len = build(buf, sizeof(buf), true, &f, sizeof(f), "he\0lo", 5, NULL, 0);
	CHECK_RC(lw_mds_req_decode(LW_OP_MDS_UNLINK, buf, (uint32_t)len, &q), -EINVAL);
	{
		char longname[256];
		memset(longname, 'a', sizeof(longname));
		f.namelen = 256;
		len = build(buf, sizeof(buf), true, &f, sizeof(f), longname, 256, NULL, 0);
		CHECK_RC(lw_mds_req_decode(LW_OP_MDS_LOOKUP, buf, (uint32_t)len, &q), -ENAMETOOLONG);
		f.namelen = 255;
		len = build(buf, sizeof(buf), true, &f, sizeof(f), longname, 255, NULL, 0);
		CHECK_RC(lw_mds_req_decode(LW_OP_MDS_LOOKUP, buf, (uint32_t)len, &q), 0);
	}
	f.namelen = 0;
	len = build(buf, sizeof(buf), true, &f, sizeof(f), NULL, 0, NULL, 0);
	CHECK_RC(lw_mds_req_decode(LW_OP_MDS_RMDIR, buf, (uint32_t)len, &q), -ENOENT);

	/* A cred claiming more groups than the wire allows. */
	{
		struct lw_cred c = { .uid = 1, .gid = 1, .ngroups = LOOM_MAX_GROUPS + 1 };
		struct lw_ino_req ino = { .ino = 1 };
		struct lw_wr w;
		lw_wr_init(&w, buf, sizeof(buf));
		lw_wr_put(&w, &c, sizeof(c));
		lw_wr_reserve(&w, (LOOM_MAX_GROUPS + 1) * 4);
		lw_wr_put(&w, &ino, sizeof(ino));
		CHECK_RC(lw_mds_req_decode(LW_OP_MDS_GETATTR, buf, (uint32_t)w.len, &q), -EPROTO);
	}
}

/* MDS_LOCK's flags: the replay bits alone or as they combine (LW_LK_REPLAY takes a lock, with
 * LW_LK_FLOCK at most; LW_LK_REPLAY_DONE stands alone), and no unknown bit. */
static void test_lock_flags(void)
{
	static const struct { uint32_t flags, type; int rc; } cases[] = {
		{ 0, F_WRLCK, 0 },
		{ LW_LK_WAIT | LW_LK_FLOCK, F_RDLCK, 0 },
		{ LW_LK_CANCEL, F_UNLCK, 0 },
		{ LW_LK_REPLAY, F_WRLCK, 0 },
		{ LW_LK_REPLAY | LW_LK_FLOCK, F_RDLCK, 0 },
		{ LW_LK_REPLAY, F_UNLCK, -EINVAL },
		{ LW_LK_REPLAY | LW_LK_WAIT, F_WRLCK, -EINVAL },
		{ LW_LK_REPLAY | LW_LK_TEST, F_WRLCK, -EINVAL },
		{ LW_LK_REPLAY | LW_LK_CANCEL, F_WRLCK, -EINVAL },
		{ LW_LK_REPLAY | LW_LK_REPLAY_DONE, F_WRLCK, -EINVAL },
		{ LW_LK_REPLAY_DONE, F_UNLCK, 0 },
		{ LW_LK_REPLAY_DONE | LW_LK_FLOCK, F_UNLCK, -EINVAL },
		{ LW_LK_REPLAY_DONE | LW_LK_CANCEL, F_UNLCK, -EINVAL },
		{ 0x40, F_WRLCK, -EINVAL },
		{ 0, 3, -EINVAL },
	};
	uint8_t buf[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct lw_lock_req l = { .ino = 5, .owner = 9, .start = 0, .end = UINT64_MAX,
					 .type = cases[i].type, .flags = cases[i].flags, .pid = 42 };
		size_t len = build(buf, sizeof(buf), true, &l, sizeof(l), NULL, 0, NULL, 0);
		struct lw_mds_req q;

		CHECK_RC(lw_mds_req_decode(LW_OP_MDS_LOCK, buf, (uint32_t)len, &q), cases[i].rc);
	}
}

static void test_mds_rename_symlink_xattr(void)
{
	uint8_t buf[8192];
	struct lw_mds_req q;
	size_t len;

	struct lw_rename_req rn = { .src_parent = 1, .dst_parent = 2, .src_namelen = 3, .dst_namelen = 4 };
	len = build(buf, sizeof(buf), true, &rn, sizeof(rn), "abc", 3, "defg", 4);
	CHECK_RC(lw_mds_req_decode(LW_OP_MDS_RENAME, buf, (uint32_t)len, &q), 0);
	CHECK(q.u.rename.dst.len == 4 && !memcmp(q.u.rename.dst.s, "defg", 4));
	check_truncations(LW_OP_MDS_RENAME, buf, len);
	rn.flags = LW_RENAME_EXCHANGE | LW_RENAME_NOREPLACE;
	len = build(buf, sizeof(buf), true, &rn, sizeof(rn), "abc", 3, "defg", 4);
	CHECK_RC(lw_mds_req_decode(LW_OP_MDS_RENAME, buf, (uint32_t)len, &q), -EINVAL);

	struct lw_symlink_req sl = { .parent = 1, .namelen = 4, .targetlen = 9 };
	len = build(buf, sizeof(buf), true, &sl, sizeof(sl), "link", 4, "../target", 9);
	CHECK_RC(lw_mds_req_decode(LW_OP_MDS_SYMLINK, buf, (uint32_t)len, &q), 0);
	CHECK(!memcmp(q.u.symlink.target, "../target", 9));
	check_truncations(LW_OP_MDS_SYMLINK, buf, len);
	sl.targetlen = LOOM_SYMLINK_MAX + 1;
	{
		char *t = calloc(1, LOOM_SYMLINK_MAX + 1);
		memset(t, 'x', LOOM_SYMLINK_MAX + 1);
		len = build(buf, sizeof(buf), true, &sl, sizeof(sl), "link", 4, t, LOOM_SYMLINK_MAX + 1);
		CHECK_RC(lw_mds_req_decode(LW_OP_MDS_SYMLINK, buf, (uint32_t)len, &q), -ENAMETOOLONG);
		free(t);
	}

	struct lw_xattr_req xr = { .ino = 3, .size = 5, .namelen = 8 };
	len = build(buf, sizeof(buf), true, &xr, sizeof(xr), "user.a/b", 8, "value", 5);
	CHECK_RC(lw_mds_req_decode(LW_OP_MDS_SETXATTR, buf, (uint32_t)len, &q), 0);
	CHECK(!memcmp(q.u.xattr.value, "value", 5));
	check_truncations(LW_OP_MDS_SETXATTR, buf, len);
	xr.namelen = 0;
	xr.size = 0;
	len = build(buf, sizeof(buf), true, &xr, sizeof(xr), NULL, 0, NULL, 0);
	CHECK_RC(lw_mds_req_decode(LW_OP_MDS_LISTXATTR, buf, (uint32_t)len, &q), 0);
	CHECK_RC(lw_mds_req_decode(LW_OP_MDS_GETXATTR, buf, (uint32_t)len, &q), -EINVAL);
}

static void test_layouts(void)
{
	uint8_t buf[4096];
	struct loom_layout *in = calloc(1, sizeof(*in) + 3 * sizeof(struct loom_ostobj)), *out = NULL;
	struct lw_wr w;
	struct lw_rd r;

	REQUIRE(in);
	in->pattern = LOOM_PATTERN_RAID0;
	in->stripe_size = 1 << 20;
	in->stripe_count = 3;
	in->stripe_offset = 2;
	in->layout_gen = 7;
	strcpy(in->pool, "fast");
	in->nobjs = 3;
	for (uint32_t i = 0; i < 3; i++) {
		in->objs[i].ost_idx = (2 + i) % 4;
		in->objs[i].objid = 1000 + i;
	}
	lw_wr_init(&w, buf, sizeof(buf));
	lw_layout_encode(&w, in);
	CHECK_EQ(w.len, lw_layout_size(3));
	lw_rd_init(&r, buf, w.len);
	CHECK_RC(lw_layout_decode(&r, &out), 0);
	CHECK_RC(lw_rd_done(&r), 0);
	REQUIRE(out);
	CHECK_EQ(out->stripe_size, 1 << 20);
	CHECK_EQ(out->stripe_offset, 2);
	CHECK_EQ(out->layout_gen, 7);
	CHECK(!strcmp(out->pool, "fast"));
	CHECK_EQ(out->objs[2].objid, 1002);
	CHECK_EQ(out->objs[2].ost_idx, 0);
	free(out);

	/* Truncated object list, bad magic, absurd nobjs, stripe size not a 64 KiB multiple. */
	lw_rd_init(&r, buf, w.len - 1);
	CHECK(lw_layout_decode(&r, &out) < 0);
	{
		struct lw_layout l;
		memcpy(&l, buf, sizeof(l));
		l.magic ^= 1;
		lw_rd_init(&r, &l, sizeof(l));
		CHECK(lw_layout_decode(&r, &out) < 0);
		memcpy(&l, buf, sizeof(l));
		l.nobjs = 0xFFFFFFFF;
		lw_rd_init(&r, &l, sizeof(l));
		CHECK(lw_layout_decode(&r, &out) < 0);
		memcpy(&l, buf, sizeof(l));
		l.stripe_size = 65537;
		CHECK_RC(lw_layout_req_check(&l), -EINVAL);
		l.stripe_size = 0;
		l.stripe_count = -2;
		CHECK_RC(lw_layout_req_check(&l), -EINVAL);
		l.stripe_count = -1;
		memset(l.pool, 'p', sizeof(l.pool)); /* no terminating NUL */
		CHECK_RC(lw_layout_req_check(&l), -EINVAL);
		memset(l.pool, 0, sizeof(l.pool));
		/* Data-on-MDT sizes: 64 KiB multiples up to 1 MiB, or "none". */
		l.dom_size = LOOM_DOM_MAX;
		CHECK_RC(lw_layout_req_check(&l), 0);
		l.dom_size = LOOM_DOM_NONE;
		CHECK_RC(lw_layout_req_check(&l), 0);
		l.dom_size = 4096;
		CHECK_RC(lw_layout_req_check(&l), -EINVAL);
		l.dom_size = LOOM_DOM_MAX + LOOM_STRIPE_UNIT;
		CHECK_RC(lw_layout_req_check(&l), -EINVAL);
	}

	/* A plain layout stays version 2's image; a stale flag in it is refused. */
	{
		struct lw_layout l;
		struct lw_ostobj o;

		memcpy(&l, buf, sizeof(l));
		CHECK_EQ(l.version, LW_LAYOUT_V2);
		CHECK_EQ(l.mirror_count, 0);
		memcpy(&o, buf + sizeof(l), sizeof(o));
		o.flags = LW_OBJ_STALE;
		memcpy(buf + sizeof(l), &o, sizeof(o));
		lw_rd_init(&r, buf, w.len);
		CHECK_RC(lw_layout_decode(&r, &out), -EPROTO);
	}
	/* Mirrors: version 3, copies x stripes objects, stale flags kept. */
	{
		struct loom_layout *m = calloc(1, sizeof(*m) + 4 * sizeof(struct loom_ostobj));
		struct lw_layout l;

		REQUIRE(m);
		m->pattern = LOOM_PATTERN_RAID0;
		m->stripe_size = 1 << 20;
		m->stripe_count = 2;
		m->mirror_count = 2;
		m->nobjs = 4;
		for (uint32_t i = 0; i < 4; i++) {
			m->objs[i].ost_idx = i;
			m->objs[i].objid = 50 + i;
		}
		m->objs[3].flags = LOOM_OBJ_STALE;
		lw_wr_init(&w, buf, sizeof(buf));
		lw_layout_encode(&w, m);
		memcpy(&l, buf, sizeof(l));
		CHECK_EQ(l.version, LW_LAYOUT_V3);
		CHECK_EQ(l.mirror_count, 2);
		lw_rd_init(&r, buf, w.len);
		CHECK_RC(lw_layout_decode(&r, &out), 0);
		REQUIRE(out);
		CHECK_EQ(out->mirror_count, 2);
		CHECK_EQ(out->objs[3].flags, LOOM_OBJ_STALE);
		CHECK_EQ(out->objs[2].flags, 0);
		free(out);
		/* Copies x stripes must be the objects there are; copies at most 16. */
		l.nobjs = 3;
		memcpy(buf, &l, sizeof(l));
		lw_rd_init(&r, buf, w.len);
		CHECK(lw_layout_decode(&r, &out) < 0);
		memcpy(&l, buf, sizeof(l));
		l.nobjs = 4;
		l.mirror_count = LOOM_MAX_MIRRORS + 1;
		CHECK_RC(lw_layout_req_check(&l), -EINVAL);
		l.mirror_count = 2;
		l.ec_parity = 1; /* copies and parity: not both */
		CHECK_RC(lw_layout_req_check(&l), -EINVAL);
		/* A version 2 image with copies: malformed. */
		l.ec_parity = 0;
		l.version = LW_LAYOUT_V2;
		CHECK_RC(lw_layout_req_check(&l), -EPROTO);
		/* 16 copies of 126 stripes pass the 2000 objects. */
		l.version = LW_LAYOUT_V3;
		l.mirror_count = 16;
		l.stripe_count = 126;
		CHECK_RC(lw_layout_req_check(&l), -EINVAL);
		free(m);
	}

	/* A create request carrying a layout request (nobjs must be 0). */
	{
		struct lw_create_req cr = { .parent = 1, .mode = 0100644, .flags = LW_CR_LAYOUT, .namelen = 1 };
		struct lw_layout l = { .magic = LW_LAYOUT_MAGIC, .version = LW_LAYOUT_V1, .stripe_count = 2,
				       .stripe_offset = -1 };
		struct lw_mds_req q;
		uint8_t body[512];
		/* Version 1: 48 bytes, no dom_size. */
		size_t len = build(body, sizeof(body), true, &cr, sizeof(cr), "f", 1, &l, LW_LAYOUT_V1_SIZE);

		CHECK_RC(lw_mds_req_decode(LW_OP_MDS_CREATE, body, (uint32_t)len, &q), 0);
		CHECK(q.u.create.has_layout);
		CHECK_EQ(q.u.create.layout.stripe_count, 2);
		CHECK_EQ(q.u.create.layout.dom_size, 0);
		check_truncations(LW_OP_MDS_CREATE, body, len);
		/* Version 2 carries dom_size. */
		l.version = LW_LAYOUT_V2;
		l.dom_size = 128u << 10;
		len = build(body, sizeof(body), true, &cr, sizeof(cr), "f", 1, &l, sizeof(l));
		CHECK_RC(lw_mds_req_decode(LW_OP_MDS_CREATE, body, (uint32_t)len, &q), 0);
		CHECK_EQ(q.u.create.layout.dom_size, 128u << 10);
		check_truncations(LW_OP_MDS_CREATE, body, len);
		l.nobjs = 1;
		len = build(body, sizeof(body), true, &cr, sizeof(cr), "f", 1, &l, sizeof(l));
		CHECK(lw_mds_req_decode(LW_OP_MDS_CREATE, body, (uint32_t)len, &q) < 0);
	}

	/* A nameless create (O_TMPFILE): namelen 0, and it must open. */
	{
		struct lw_create_req cr = { .parent = 1, .mode = 0100600, .open_flags = O_RDWR,
					    .flags = LW_CR_TMPFILE | LW_CR_OPEN | LW_CR_LAYOUT };
		struct lw_layout l = { .magic = LW_LAYOUT_MAGIC, .version = LW_LAYOUT_V2, .stripe_count = 4,
				       .stripe_offset = -1 };
		struct lw_mds_req q;
		uint8_t body[512];
		size_t len = build(body, sizeof(body), true, &cr, sizeof(cr), NULL, 0, &l, sizeof(l));

		CHECK_RC(lw_mds_req_decode(LW_OP_MDS_CREATE, body, (uint32_t)len, &q), 0);
		CHECK_EQ(q.u.create.name.len, 0);
		CHECK(q.u.create.has_layout);
		CHECK_EQ(q.u.create.layout.stripe_count, 4);
		check_truncations(LW_OP_MDS_CREATE, body, len);
		cr.flags = LW_CR_TMPFILE | LW_CR_OPEN;
		len = build(body, sizeof(body), true, &cr, sizeof(cr), NULL, 0, NULL, 0);
		CHECK_RC(lw_mds_req_decode(LW_OP_MDS_CREATE, body, (uint32_t)len, &q), 0);
		CHECK(!q.u.create.has_layout);
		cr.flags = LW_CR_TMPFILE; /* nothing could ever reach it */
		len = build(body, sizeof(body), true, &cr, sizeof(cr), NULL, 0, NULL, 0);
		CHECK_RC(lw_mds_req_decode(LW_OP_MDS_CREATE, body, (uint32_t)len, &q), -EINVAL);
		cr.flags = LW_CR_TMPFILE | LW_CR_OPEN; /* a name with it */
		cr.namelen = 1;
		len = build(body, sizeof(body), true, &cr, sizeof(cr), "f", 1, NULL, 0);
		CHECK_RC(lw_mds_req_decode(LW_OP_MDS_CREATE, body, (uint32_t)len, &q), -EINVAL);
		cr.flags = LW_CR_OPEN | 0x20; /* a bit still unknown */
		len = build(body, sizeof(body), true, &cr, sizeof(cr), "f", 1, NULL, 0);
		CHECK_RC(lw_mds_req_decode(LW_OP_MDS_CREATE, body, (uint32_t)len, &q), -EINVAL);
		/* LW_CR_INO: the number after the name; with O_EXCL only, never the root's, never
		 * nameless, and there. */
		uint64_t ino = 77;
		cr.flags = LW_CR_OPEN | LW_CR_EXCL | LW_CR_INO;
		len = build(body, sizeof(body), true, &cr, sizeof(cr), "f", 1, &ino, sizeof(ino));
		CHECK_RC(lw_mds_req_decode(LW_OP_MDS_CREATE, body, (uint32_t)len, &q), 0);
		CHECK_EQ(q.u.create.ino, 77);
		CHECK_EQ(q.u.create.name.len, 1);
		len = build(body, sizeof(body), true, &cr, sizeof(cr), "f", 1, NULL, 0);
		CHECK_RC(lw_mds_req_decode(LW_OP_MDS_CREATE, body, (uint32_t)len, &q), -EPROTO);
		cr.flags = LW_CR_OPEN | LW_CR_INO;
		len = build(body, sizeof(body), true, &cr, sizeof(cr), "f", 1, &ino, sizeof(ino));
		CHECK_RC(lw_mds_req_decode(LW_OP_MDS_CREATE, body, (uint32_t)len, &q), -EINVAL);
		ino = LOOM_ROOT_INO;
		cr.flags = LW_CR_OPEN | LW_CR_EXCL | LW_CR_INO;
		len = build(body, sizeof(body), true, &cr, sizeof(cr), "f", 1, &ino, sizeof(ino));
		CHECK_RC(lw_mds_req_decode(LW_OP_MDS_CREATE, body, (uint32_t)len, &q), -EINVAL);
		ino = 77;
		cr.flags = LW_CR_OPEN | LW_CR_EXCL | LW_CR_INO | LW_CR_TMPFILE;
		cr.namelen = 0;
		len = build(body, sizeof(body), true, &cr, sizeof(cr), NULL, 0, &ino, sizeof(ino));
		CHECK_RC(lw_mds_req_decode(LW_OP_MDS_CREATE, body, (uint32_t)len, &q), -EINVAL);
		cr.flags = LW_CR_OPEN | LW_CR_EXCL;
		cr.namelen = 1;
		len = build(body, sizeof(body), true, &cr, sizeof(cr), "f", 1, NULL, 0);
		CHECK_RC(lw_mds_req_decode(LW_OP_MDS_CREATE, body, (uint32_t)len, &q), 0);
		CHECK_EQ(q.u.create.ino, 0);
		cr.flags = LW_CR_OPEN; /* and without the flag, a name is still needed */
		cr.namelen = 0;
		len = build(body, sizeof(body), true, &cr, sizeof(cr), NULL, 0, NULL, 0);
		CHECK_RC(lw_mds_req_decode(LW_OP_MDS_CREATE, body, (uint32_t)len, &q), -ENOENT);
	}

	/* A size report carrying Data-on-MDT bytes: parts, each followed by its bytes. */
	{
		struct lw_close_req c = { .ino = 5, .handle = 7, .size = 9,
					  .flags = LW_CL_SIZE | LW_CL_DOM | LW_CL_DATA, .dom_parts = 2 };
		struct lw_dom_part p1 = { .offset = 3, .len = 6 }, p2 = { .offset = 100, .len = 2 }, got;
		uint8_t tail[64], body[256];
		struct lw_mds_req q;
		const void *data;
		size_t tlen = 0, len, pos = 0;

		memcpy(tail, &p1, sizeof(p1));
		memcpy(tail + sizeof(p1), "abcdef", 6);
		memcpy(tail + sizeof(p1) + 6, &p2, sizeof(p2));
		memcpy(tail + 2 * sizeof(p1) + 6, "xy", 2);
		tlen = 2 * sizeof(p1) + 8;
		len = build(body, sizeof(body), true, &c, sizeof(c), tail, tlen, NULL, 0);
		CHECK_RC(lw_mds_req_decode(LW_OP_MDS_SIZE_UPDATE, body, (uint32_t)len, &q), 0);
		CHECK_EQ(q.u.close.dom_parts, 2);
		lw_dom_part_at(&q, &pos, &got, &data);
		CHECK(got.offset == 3 && got.len == 6 && !memcmp(data, "abcdef", 6));
		lw_dom_part_at(&q, &pos, &got, &data);
		CHECK(got.offset == 100 && got.len == 2 && !memcmp(data, "xy", 2));
		check_truncations(LW_OP_MDS_CLOSE, body, len);

		/* Parts out of order, overlapping, empty, or past the largest Data-on-MDT part. */
		p2.offset = 8;
		memcpy(tail + sizeof(p1) + 6, &p2, sizeof(p2));
		len = build(body, sizeof(body), true, &c, sizeof(c), tail, tlen, NULL, 0);
		CHECK_RC(lw_mds_req_decode(LW_OP_MDS_CLOSE, body, (uint32_t)len, &q), -EINVAL);
		p2.offset = 9; /* adjacent is fine */
		memcpy(tail + sizeof(p1) + 6, &p2, sizeof(p2));
		len = build(body, sizeof(body), true, &c, sizeof(c), tail, tlen, NULL, 0);
		CHECK_RC(lw_mds_req_decode(LW_OP_MDS_CLOSE, body, (uint32_t)len, &q), 0);
		c.dom_parts = 1;
		p1.offset = LOOM_DOM_MAX - 2;
		len = build(body, sizeof(body), true, &c, sizeof(c), &p1, sizeof(p1), "abcdef", 6);
		CHECK_RC(lw_mds_req_decode(LW_OP_MDS_CLOSE, body, (uint32_t)len, &q), -EINVAL);
		p1.offset = 0;
		p1.len = 0;
		len = build(body, sizeof(body), true, &c, sizeof(c), &p1, sizeof(p1), NULL, 0);
		CHECK_RC(lw_mds_req_decode(LW_OP_MDS_CLOSE, body, (uint32_t)len, &q), -EINVAL);
		/* The flag and the count go together. */
		c.dom_parts = 0;
		len = build(body, sizeof(body), true, &c, sizeof(c), NULL, 0, NULL, 0);
		CHECK_RC(lw_mds_req_decode(LW_OP_MDS_CLOSE, body, (uint32_t)len, &q), -EINVAL);
		c.flags = LW_CL_SIZE;
		c.dom_parts = 1;
		len = build(body, sizeof(body), true, &c, sizeof(c), NULL, 0, NULL, 0);
		CHECK_RC(lw_mds_req_decode(LW_OP_MDS_CLOSE, body, (uint32_t)len, &q), -EINVAL);
	}
	free(in);
}

/* Erasure-coded layouts: version 3 carries ec_parity, nobjs is stripe_count + ec_parity, stale
 * flags kept; copies and parity not both; a plain layout's image stays version 2's. */
static void test_ec_layouts(void)
{
	uint8_t buf[4096], again[4096];
	struct loom_layout *ec = calloc(1, sizeof(*ec) + 6 * sizeof(struct loom_ostobj)), *out = NULL;
	struct lw_layout l, hdr;
	struct lw_ostobj o;
	struct lw_wr w, w2;
	struct lw_rd r;

	REQUIRE(ec);
	ec->pattern = LOOM_PATTERN_RAID0;
	ec->stripe_size = 1 << 20;
	ec->stripe_count = 4;
	ec->stripe_offset = 3;
	ec->mirror_count = 1;
	ec->ec_parity = 2;
	ec->layout_gen = 9;
	ec->nobjs = 6;
	for (uint32_t i = 0; i < 6; i++) {
		ec->objs[i].ost_idx = (3 + i) % 6;
		ec->objs[i].objid = 70 + i;
	}
	ec->objs[1].flags = LOOM_OBJ_STALE; /* a data object */
	ec->objs[5].flags = LOOM_OBJ_STALE; /* a parity object */
	lw_wr_init(&w, buf, sizeof(buf));
	lw_layout_encode(&w, ec);
	REQUIRE(w.err == 0);
	CHECK_EQ(w.len, lw_layout_size(6));
	memcpy(&hdr, buf, sizeof(hdr));
	CHECK_EQ(hdr.version, LW_LAYOUT_V3);
	CHECK_EQ(hdr.mirror_count, 1);
	CHECK_EQ(hdr.ec_parity, 2);
	CHECK_EQ(hdr.stripe_count, 4);
	CHECK_EQ(hdr.nobjs, 6);
	lw_rd_init(&r, buf, w.len);
	CHECK_RC(lw_layout_decode(&r, &out), 0);
	CHECK_RC(lw_rd_done(&r), 0);
	REQUIRE(out);
	CHECK_EQ(out->ec_parity, 2);
	CHECK_EQ(out->mirror_count, 1);
	CHECK_EQ(out->stripe_count, 4);
	CHECK_EQ(out->stripe_offset, 3);
	CHECK_EQ(out->layout_gen, 9);
	CHECK_EQ(out->nobjs, 6);
	for (uint32_t i = 0; i < 6; i++) {
		CHECK_EQ(out->objs[i].ost_idx, (3 + i) % 6);
		CHECK_EQ(out->objs[i].objid, 70 + i);
		CHECK_EQ(out->objs[i].flags, i == 1 || i == 5 ? LOOM_OBJ_STALE : 0);
	}
	/* One layout, one byte image: the decoded layout encodes to the same bytes. */
	lw_wr_init(&w2, again, sizeof(again));
	lw_layout_encode(&w2, out);
	CHECK_EQ(w2.len, w.len);
	CHECK(memcmp(buf, again, w.len) == 0);
	free(out);

	/* The header's checks: at most 16 parity objects, 255 objects in all; not with copies;
	 * only in a version 3 image. */
	memcpy(&l, buf, sizeof(l));
	CHECK_RC(lw_layout_req_check(&l), 0);
	l.ec_parity = LOOM_EC_MAX_PARITY + 1;
	CHECK_RC(lw_layout_req_check(&l), -EINVAL);
	l.ec_parity = LOOM_EC_MAX_PARITY;
	CHECK_RC(lw_layout_req_check(&l), 0);
	l.stripe_count = LOOM_EC_MAX_WIDTH - LOOM_EC_MAX_PARITY + 1; /* 240 + 16 */
	CHECK_RC(lw_layout_req_check(&l), -EINVAL);
	l.stripe_count = LOOM_EC_MAX_WIDTH - LOOM_EC_MAX_PARITY; /* 239 + 16 = 255 */
	CHECK_RC(lw_layout_req_check(&l), 0);
	memcpy(&l, buf, sizeof(l));
	l.mirror_count = 2; /* copies and parity: not both */
	CHECK_RC(lw_layout_req_check(&l), -EINVAL);
	l.mirror_count = LOOM_MAX_MIRRORS;
	CHECK_RC(lw_layout_req_check(&l), -EINVAL);
	l.mirror_count = 0; /* a file's image names its one copy (one layout, one image) */
	CHECK_RC(lw_layout_req_check(&l), -EPROTO);
	l.nobjs = 0; /* a request's 0 inherits: one copy */
	CHECK_RC(lw_layout_req_check(&l), 0);
	l.version = LW_LAYOUT_V2;
	CHECK_RC(lw_layout_req_check(&l), -EPROTO);
	l.version = LW_LAYOUT_V1;
	CHECK_RC(lw_layout_req_check(&l), -EPROTO);

	/* Decoded images: the header's refusals are malformed images; a file's objects are its
	 * stripe_count data objects and ec_parity parity objects, at least one data object. */
	{
		static const struct {
			uint16_t version, mirror_count, ec_parity;
			int32_t stripe_count;
		} bad[] = {
			{ LW_LAYOUT_V3, 2, 2, 4 },                      /* with copies */
			{ LW_LAYOUT_V3, 1, LOOM_EC_MAX_PARITY + 1, 4 }, /* too much parity */
			{ LW_LAYOUT_V2, 0, 2, 4 },                      /* parity in version 2 */
			{ LW_LAYOUT_V3, 1, 2, 5 },                      /* 5 + 2 != 6 */
			{ LW_LAYOUT_V3, 1, 2, 3 },                      /* 3 + 2 != 6 */
			{ LW_LAYOUT_V3, 1, 3, 4 },                      /* 4 + 3 != 6 */
			{ LW_LAYOUT_V3, 1, 6, 0 },                      /* no data object */
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			memcpy(again, buf, w.len);
			memcpy(&l, buf, sizeof(l));
			l.version = bad[i].version;
			l.mirror_count = bad[i].mirror_count;
			l.ec_parity = bad[i].ec_parity;
			l.stripe_count = bad[i].stripe_count;
			memcpy(again, &l, sizeof(l));
			out = NULL;
			lw_rd_init(&r, again, w.len);
			CHECK_RC(lw_layout_decode(&r, &out), -EPROTO);
			CHECK(out == NULL);
		}
	}
	/* A flag other than stale on an erasure-coded object: malformed. */
	memcpy(again, buf, w.len);
	memcpy(&o, again + sizeof(l) + 2 * sizeof(o), sizeof(o));
	o.flags = LW_OBJ_STALE << 1;
	memcpy(again + sizeof(l) + 2 * sizeof(o), &o, sizeof(o));
	lw_rd_init(&r, again, w.len);
	CHECK_RC(lw_layout_decode(&r, &out), -EPROTO);

	/* A default (no objects) with parity and copies left to inherit: version 3, kept. */
	{
		struct loom_layout def = { .pattern = LOOM_PATTERN_RAID0, .stripe_size = 1 << 20,
					   .stripe_count = 4, .stripe_offset = -1, .ec_parity = 2,
					   .flags = LOOM_LAYOUT_DEFAULT };

		lw_wr_init(&w, buf, sizeof(buf));
		lw_layout_encode(&w, &def);
		CHECK_EQ(w.len, lw_layout_size(0));
		memcpy(&hdr, buf, sizeof(hdr));
		CHECK_EQ(hdr.version, LW_LAYOUT_V3);
		CHECK_EQ(hdr.mirror_count, 0);
		CHECK_EQ(hdr.ec_parity, 2);
		lw_rd_init(&r, buf, w.len);
		CHECK_RC(lw_layout_decode(&r, &out), 0);
		REQUIRE(out);
		CHECK_EQ(out->ec_parity, 2);
		CHECK_EQ(out->mirror_count, 0);
		CHECK_EQ(out->stripe_count, 4);
		CHECK_EQ(out->nobjs, 0);
		free(out);
	}

	/* A plain file (one copy, no parity) stays version 2's image: no copies, no parity, no
	 * stale flags on the wire. */
	ec->ec_parity = 0;
	ec->stripe_count = 6;
	lw_wr_init(&w, buf, sizeof(buf));
	lw_layout_encode(&w, ec);
	memcpy(&hdr, buf, sizeof(hdr));
	CHECK_EQ(hdr.version, LW_LAYOUT_V2);
	CHECK_EQ(hdr.mirror_count, 0);
	CHECK_EQ(hdr.ec_parity, 0);
	memcpy(&o, buf + sizeof(hdr) + sizeof(o), sizeof(o));
	CHECK_EQ(o.flags, 0);
	lw_rd_init(&r, buf, w.len);
	CHECK_RC(lw_layout_decode(&r, &out), 0);
	REQUIRE(out);
	CHECK_EQ(out->ec_parity, 0);
	CHECK_EQ(out->mirror_count, 1);
	CHECK_EQ(out->objs[1].flags, 0);
	free(out);
	free(ec);
}

static void test_readdir_pages(void)
{
	uint8_t buf[512];
	struct lw_wr w;
	struct lw_rd r;
	struct lw_dirent de = { .ino = 9, .cookie = 3, .type = 8, .namelen = 5 }, got;
	struct lw_attr a = { .ino = 9, .mode = 0100644 }, ga;
	const char *name;

	lw_wr_init(&w, buf, sizeof(buf));
	CHECK_RC(lw_readdir_put(&w, &de, "hello", &a), 0);
	de.namelen = 1;
	de.cookie = 4;
	CHECK_RC(lw_readdir_put(&w, &de, "x", &a), 0);
	CHECK_EQ(w.len % 8, 0);
	lw_rd_init(&r, buf, w.len);
	CHECK_RC(lw_readdir_next(&r, buf, true, &got, &name, &ga), 0);
	CHECK(got.namelen == 5 && !memcmp(name, "hello", 5));
	CHECK_EQ(ga.mode, 0100644);
	CHECK_RC(lw_readdir_next(&r, buf, true, &got, &name, &ga), 0);
	CHECK_EQ(got.cookie, 4);
	CHECK_RC(lw_rd_done(&r), 0);

	/* Non-zero padding, a name with '/', and a page that does not fit. */
	buf[sizeof(de) + 5] = 1;
	lw_rd_init(&r, buf, w.len);
	CHECK(lw_readdir_next(&r, buf, true, &got, &name, &ga) < 0);
	buf[sizeof(de) + 5] = 0;
	buf[sizeof(de) + 2] = '/';
	lw_rd_init(&r, buf, w.len);
	CHECK(lw_readdir_next(&r, buf, true, &got, &name, &ga) < 0);
	lw_wr_init(&w, buf, 30);
	CHECK_RC(lw_readdir_put(&w, &de, "x", NULL), -EMSGSIZE);
}

static void test_ost_requests(void)
{
	struct lw_ost_io io = { .ost_idx = 1, .objid = 5, .offset = 100, .length = 4096 }, out;

	CHECK_RC(lw_ost_req_decode(LW_OP_OST_READ, &io, sizeof(io), &out), 0);
	CHECK_EQ(out.offset, 100);
	CHECK_RC(lw_ost_req_decode(LW_OP_OST_READ, &io, sizeof(io) - 1, &out), -EPROTO);
	CHECK_RC(lw_ost_req_decode(LW_OP_MDS_LOOKUP, &io, sizeof(io), &out), -EOPNOTSUPP);
	io.length = LW_MAX_BULK + 1;
	CHECK_RC(lw_ost_req_decode(LW_OP_OST_READ, &io, sizeof(io), &out), -EPROTO);
	io.length = 1;
	io.flags = 1;
	CHECK_RC(lw_ost_req_decode(LW_OP_OST_WRITE, &io, sizeof(io), &out), -EPROTO);
}

/* lw_ost_io.flags is OST_FALLOCATE's mode and OST_SEEK's whence, and reserved elsewhere. */
static void test_ost_space_requests(void)
{
	static const uint32_t modes_ok[] = {
		0, LW_FALLOC_KEEP_SIZE, LW_FALLOC_PUNCH_HOLE | LW_FALLOC_KEEP_SIZE, LW_FALLOC_ZERO_RANGE,
		LW_FALLOC_ZERO_RANGE | LW_FALLOC_KEEP_SIZE,
	};
	struct lw_ost_io io = { .ost_idx = 1, .objid = 5, .offset = 100, .length = 4096 }, out;

	for (size_t i = 0; i < sizeof(modes_ok) / sizeof(modes_ok[0]); i++) {
		io.flags = modes_ok[i];
		CHECK_RC(lw_ost_req_decode(LW_OP_OST_FALLOCATE, &io, sizeof(io), &out), 0);
		CHECK_EQ(out.flags, modes_ok[i]);
	}
	/* Every other mode, as fallocate(2) answers them: punch without KEEP_SIZE, punch and zero,
	 * collapse, insert, unshare, anything unknown. */
	for (uint32_t mode = 0; mode < 0x200; mode++) {
		bool ok = false;

		for (size_t i = 0; i < sizeof(modes_ok) / sizeof(modes_ok[0]); i++)
			ok = ok || modes_ok[i] == mode;
		io.flags = mode;
		CHECK_RC(lw_ost_req_decode(LW_OP_OST_FALLOCATE, &io, sizeof(io), &out), ok ? 0 : -EOPNOTSUPP);
		CHECK_RC(lw_falloc_mode_check(mode), ok ? 0 : -EOPNOTSUPP);
	}
	io.flags = 0x80000000u;
	CHECK_RC(lw_ost_req_decode(LW_OP_OST_FALLOCATE, &io, sizeof(io), &out), -EOPNOTSUPP);
	/* The range: not empty, and within the largest file. */
	io.flags = LW_FALLOC_KEEP_SIZE;
	io.length = 0;
	CHECK_RC(lw_ost_req_decode(LW_OP_OST_FALLOCATE, &io, sizeof(io), &out), -EINVAL);
	io.offset = 1ull << 62;
	io.length = 1;
	CHECK_RC(lw_ost_req_decode(LW_OP_OST_FALLOCATE, &io, sizeof(io), &out), -EFBIG);
	io.offset = (1ull << 62) - 10;
	io.length = 10;
	CHECK_RC(lw_ost_req_decode(LW_OP_OST_FALLOCATE, &io, sizeof(io), &out), 0);
	io.length = UINT64_MAX; /* offset + length wraps */
	CHECK_RC(lw_ost_req_decode(LW_OP_OST_FALLOCATE, &io, sizeof(io), &out), -EFBIG);
	io.offset = 0;
	io.length = 4096;
	CHECK_RC(lw_ost_req_decode(LW_OP_OST_FALLOCATE, &io, sizeof(io) - 1, &out), -EPROTO);

	/* OST_SEEK: SEEK_DATA or SEEK_HOLE; its length is not looked at. */
	io.flags = LW_SEEK_DATA;
	io.length = 12345;
	CHECK_RC(lw_ost_req_decode(LW_OP_OST_SEEK, &io, sizeof(io), &out), 0);
	io.flags = LW_SEEK_HOLE;
	CHECK_RC(lw_ost_req_decode(LW_OP_OST_SEEK, &io, sizeof(io), &out), 0);
	for (uint32_t w = 0; w < 8; w++) {
		io.flags = w;
		if (w != LW_SEEK_DATA && w != LW_SEEK_HOLE)
			CHECK_RC(lw_ost_req_decode(LW_OP_OST_SEEK, &io, sizeof(io), &out), -EINVAL);
	}
	io.flags = LW_SEEK_DATA;
	io.offset = (1ull << 62) + 1;
	CHECK_RC(lw_ost_req_decode(LW_OP_OST_SEEK, &io, sizeof(io), &out), -EFBIG);
	/* The other opcodes keep flags reserved: a fallocate mode is no excuse. */
	io.offset = 0;
	io.flags = LW_FALLOC_PUNCH_HOLE;
	CHECK_RC(lw_ost_req_decode(LW_OP_OST_PUNCH, &io, sizeof(io), &out), -EPROTO);
	/* A punch's one flag: make an object anew, length 0 only. */
	io.flags = LW_PUNCH_ANEW;
	CHECK_RC(lw_ost_req_decode(LW_OP_OST_PUNCH, &io, sizeof(io), &out), io.length ? -EINVAL : 0);
	io.length = 0;
	CHECK_RC(lw_ost_req_decode(LW_OP_OST_PUNCH, &io, sizeof(io), &out), 0);
	io.flags = LW_SEEK_DATA;
	CHECK_RC(lw_ost_req_decode(LW_OP_OST_GETATTR, &io, sizeof(io), &out), -EPROTO);
}

/* Random bodies for every opcode: whatever they hold, decoding returns without reading past the
 * end (ASan/valgrind would flag it) and either fails or yields names that pass the checks. */
static void test_random_bodies(void)
{
	static const uint16_t ops[] = {
#define LW_OP(name, value, server, resend, flags, req, rep, handler, net) value,
#include "proto/ops.def"
#undef LW_OP
	};
	uint8_t *buf = malloc(4096);

	REQUIRE(buf);
	srand(7);
	for (int i = 0; i < 200000; i++) {
		uint16_t op = ops[(size_t)rand() % (sizeof(ops) / sizeof(ops[0]))];
		size_t len = (size_t)rand() % 300;
		struct lw_mds_req q;
		struct lw_ost_io io;
		uint8_t *body = malloc(len ? len : 1);

		for (size_t k = 0; k < len; k++)
			body[k] = (uint8_t)(rand() & ((i & 1) ? 0xff : 0x07)); /* small values reach deeper */
		if (lw_mds_req_decode(op, body, (uint32_t)len, &q) == 0 && op == LW_OP_MDS_LOOKUP)
			CHECK_RC(lw_name_check(q.u.name.name.s, q.u.name.name.len), 0);
		lw_ost_req_decode(op, body, (uint32_t)len, &io);
		free(body);
	}
	free(buf);
}

int main(void)
{
	RUN(test_crc32c);
	RUN(test_header);
	RUN(test_errno);
	RUN(test_mds_name_requests);
	RUN(test_mds_rename_symlink_xattr);
	RUN(test_layouts);
	RUN(test_ec_layouts);
	RUN(test_readdir_pages);
	RUN(test_ost_requests);
	RUN(test_ost_space_requests);
	RUN(test_random_bodies);
	RUN(test_lock_flags);
	return check_report();
}
