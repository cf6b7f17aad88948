/*
 * Writes the seed corpora: a few valid inputs per fuzz target, made with the codec's own
 * encoders so that they stay valid when the protocol changes (re-run it then).
 *
 *   build-fuzz/tests/fuzz/gen_corpus tests/fuzz/corpus
 *
 * It also writes the inputs of the bugs found so far (corpus/TARGET/regress-BUG, README.md),
 * so that every run tries them again.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/crc.h"
#include "proto/codec.h"

static const char *root;

static void put_file(const char *target, const char *name, const void *buf, size_t len)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, target);
	if (mkdir(path, 0755) < 0 && errno != EEXIST) {
		perror(path);
		exit(1);
	}
	snprintf(path, sizeof(path), "%s/%s/%s", root, target, name);
	f = fopen(path, "wb");
	if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
}

static uint8_t big[1u << 20];

/* ---- pieces ---- */

static void put_u8(struct lw_wr *w, uint8_t v)
{
	lw_wr_put(w, &v, 1);
}

static void put_u16(struct lw_wr *w, uint16_t v)
{
	lw_wr_put(w, &v, 2);
}

static const struct loom_cred cred = { .uid = 1000, .gid = 1000, .ngroups = 2, .groups = { 10, 20 } };

static struct lw_layout layout_req(int32_t count, const char *pool)
{
	struct lw_layout l = { .magic = LW_LAYOUT_MAGIC, .version = LW_LAYOUT_V1,
			       .pattern = LW_PATTERN_RAID0, .stripe_size = 1u << 20,
			       .stripe_count = count, .stripe_offset = -1 };

	strncpy(l.pool, pool, sizeof(l.pool) - 1);
	return l;
}

/* A whole frame: header (checksums right), body, bulk. */
static void put_frame(struct lw_wr *w, uint16_t op, uint32_t flags, int32_t status, uint64_t id,
		      const void *body, uint32_t body_len, const void *bulk, uint32_t bulk_len)
{
	struct lw_hdr h;

	lw_hdr_fill(&h, op, flags, status, id, body, body_len, bulk_len,
		    bulk_len ? crc32c(0, bulk, bulk_len) : 0);
	lw_wr_put(w, &h, sizeof(h));
	lw_wr_put(w, body, body_len);
	lw_wr_put(w, bulk, bulk_len);
}

/* ---- fuzz_hdr ---- */

static void gen_hdr(void)
{
	struct lw_wr w;
	static const char hello[] = "hello";
	uint8_t body[48] = { 1, 2, 3 };

	lw_wr_init(&w, big, sizeof(big));
	put_frame(&w, LW_OP_PING, 0, 0, 1, hello, 5, NULL, 0);
	put_file("fuzz_hdr", "ping", big, w.len);
	lw_wr_init(&w, big, sizeof(big));
	put_frame(&w, LW_OP_MDS_LOOKUP, LW_F_REPLY, -ENOENT, 77, NULL, 0, NULL, 0);
	put_file("fuzz_hdr", "reply-enoent", big, w.len);
	lw_wr_init(&w, big, sizeof(big));
	{
		struct lw_hdr h;

		lw_hdr_fill(&h, LW_OP_OST_WRITE, LW_F_RESENT, 0, 1ull << 40, body, sizeof(body), 4096,
			    0x12345678u);
		lw_wr_put(&w, &h, sizeof(h));
		lw_wr_put(&w, body, sizeof(body));
	}
	put_file("fuzz_hdr", "write-resent", big, w.len);
}

/* ---- fuzz_mds_req: opcode, then body ---- */

static struct lw_wr mds_begin(uint16_t op)
{
	struct lw_wr w;

	lw_wr_init(&w, big, sizeof(big));
	put_u16(&w, op);
	if (lw_op_flags(op) & LW_OPF_CRED)
		lw_put_cred(&w, &cred);
	return w;
}

#define FIXED(w, ...) do { __typeof__(__VA_ARGS__) v_ = __VA_ARGS__; lw_wr_put(w, &v_, sizeof(v_)); } while (0)

static void gen_mds(void)
{
	struct lw_wr w;

	w = mds_begin(LW_OP_PING);
	put_file("fuzz_mds_req", "ping", big, w.len);
	w = mds_begin(LW_OP_MDS_STATFS);
	put_file("fuzz_mds_req", "statfs", big, w.len);
	w = mds_begin(LW_OP_MDS_CONNECT);
	FIXED(&w, (struct lw_connect_req){ .proto_version = LW_VERSION, .client_kind = LW_CLIENT_CLIENT,
					   .fsname = "loom", .client_uuid = { 1, 2 } });
	put_file("fuzz_mds_req", "connect", big, w.len);
	w = mds_begin(LW_OP_MDS_GETATTR);
	FIXED(&w, (struct lw_ino_req){ .ino = 1 });
	put_file("fuzz_mds_req", "getattr", big, w.len);
	w = mds_begin(LW_OP_MDS_LOOKUP);
	FIXED(&w, (struct lw_name_req){ .parent = 1, .namelen = 4 });
	lw_wr_put(&w, "file", 4);
	put_file("fuzz_mds_req", "lookup", big, w.len);
	w = mds_begin(LW_OP_MDS_UNLINK);
	FIXED(&w, (struct lw_name_req){ .parent = 1, .namelen = 4, .flags = LW_NM_UNLEASED });
	lw_wr_put(&w, "file", 4);
	put_file("fuzz_mds_req", "unlink-unleased", big, w.len);
	w = mds_begin(LW_OP_MDS_SETATTR);
	FIXED(&w, (struct lw_setattr){ .ino = 5, .valid = LW_SA_MODE | LW_SA_SIZE, .mode = 0644, .size = 10 });
	put_file("fuzz_mds_req", "setattr", big, w.len);
	w = mds_begin(LW_OP_MDS_CREATE);
	FIXED(&w, (struct lw_create_req){ .parent = 1, .mode = 0100644, .flags = LW_CR_OPEN | LW_CR_LAYOUT,
					  .open_flags = 2, .namelen = 5 });
	lw_wr_put(&w, "a.dat", 5);
	FIXED(&w, layout_req(4, "fast"));
	put_file("fuzz_mds_req", "create-layout", big, w.len);
	w = mds_begin(LW_OP_MDS_CREATE);
	FIXED(&w, (struct lw_create_req){ .parent = 1, .mode = 0100644, .flags = LW_CR_OPEN | LW_CR_EXCL | LW_CR_INO,
					  .open_flags = 1, .namelen = 5 });
	lw_wr_put(&w, "b.npy", 5);
	FIXED(&w, (uint64_t){ 1000 });
	put_file("fuzz_mds_req", "create-behind", big, w.len);
	w = mds_begin(LW_OP_MDS_INOS);
	FIXED(&w, (struct lw_inos_req){ .count = 1024 });
	put_file("fuzz_mds_req", "inos", big, w.len);
	w = mds_begin(LW_OP_MDS_MKDIR);
	FIXED(&w, (struct lw_mkdir_req){ .parent = 1, .mode = 0755, .namelen = 3 });
	lw_wr_put(&w, "dir", 3);
	put_file("fuzz_mds_req", "mkdir", big, w.len);
	w = mds_begin(LW_OP_MDS_MKDIR);
	FIXED(&w, (struct lw_mkdir_req){ .parent = 1, .mode = 0755, .namelen = 3, .flags = LW_MK_LEASE | LW_MK_EXCL });
	lw_wr_put(&w, "exc", 3);
	put_file("fuzz_mds_req", "mkdir-excl", big, w.len);
	w = mds_begin(LW_OP_MDS_RENAME);
	FIXED(&w, (struct lw_rename_req){ .src_parent = 1, .dst_parent = 2, .flags = LW_RENAME_NOREPLACE,
					  .src_namelen = 1, .dst_namelen = 2 });
	lw_wr_put(&w, "ab.", 3);
	put_file("fuzz_mds_req", "rename", big, w.len);
	w = mds_begin(LW_OP_MDS_LINK);
	FIXED(&w, (struct lw_link_req){ .ino = 9, .new_parent = 1, .namelen = 4 });
	lw_wr_put(&w, "link", 4);
	put_file("fuzz_mds_req", "link", big, w.len);
	w = mds_begin(LW_OP_MDS_SYMLINK);
	FIXED(&w, (struct lw_symlink_req){ .parent = 1, .namelen = 2, .targetlen = 9 });
	lw_wr_put(&w, "sl/etc/passwd", 11);
	put_file("fuzz_mds_req", "symlink", big, w.len);
	w = mds_begin(LW_OP_MDS_READDIR);
	FIXED(&w, (struct lw_readdir_req){ .ino = 1, .max_bytes = 4096, .flags = LW_RD_PLUS });
	put_file("fuzz_mds_req", "readdir", big, w.len);
	w = mds_begin(LW_OP_MDS_SETXATTR);
	FIXED(&w, (struct lw_xattr_req){ .ino = 3, .size = 5, .flags = LW_XATTR_CREATE, .namelen = 8 });
	lw_wr_put(&w, "user.a/bvalue", 13);
	put_file("fuzz_mds_req", "setxattr", big, w.len);
	w = mds_begin(LW_OP_MDS_GETXATTR);
	FIXED(&w, (struct lw_xattr_req){ .ino = 3, .size = 100, .namelen = 6 });
	lw_wr_put(&w, "user.a", 6);
	put_file("fuzz_mds_req", "getxattr", big, w.len);
	w = mds_begin(LW_OP_MDS_LISTXATTR);
	FIXED(&w, (struct lw_xattr_req){ .ino = 3, .size = 100 });
	put_file("fuzz_mds_req", "listxattr", big, w.len);
	w = mds_begin(LW_OP_MDS_REMOVEXATTR);
	FIXED(&w, (struct lw_xattr_req){ .ino = 3, .namelen = 6 });
	lw_wr_put(&w, "user.a", 6);
	put_file("fuzz_mds_req", "removexattr", big, w.len);
	w = mds_begin(LW_OP_MDS_OPEN);
	FIXED(&w, (struct lw_open_req){ .ino = 3, .open_flags = 0 });
	put_file("fuzz_mds_req", "open", big, w.len);
	w = mds_begin(LW_OP_MDS_OPEN);
	FIXED(&w, (struct lw_open_req){ .ino = 3, .open_flags = 01001, .flags = LW_OPQ_NAMES | LW_OPQ_DIR_MOVES,
					.names = 2, .dir_moves = 77 });
	put_file("fuzz_mds_req", "open-if", big, w.len);
	w = mds_begin(LW_OP_MDS_OPEN);
	FIXED(&w, (struct lw_open_req){ .ino = 3, .open_flags = 0, .flags = LW_OPQ_LEASE | LW_OPQ_NAMES,
					.names = 2 });
	put_file("fuzz_mds_req", "open-lease", big, w.len);
	w = mds_begin(LW_OP_MDS_CLOSE);
	FIXED(&w, (struct lw_close_req){ .ino = 3, .handle = 7, .size = 100, .flags = LW_CL_SIZE | LW_CL_MTIME });
	put_file("fuzz_mds_req", "close", big, w.len);
	/* Data-on-MDT bytes: two parts, each followed by its bytes. */
	w = mds_begin(LW_OP_MDS_SIZE_UPDATE);
	FIXED(&w, (struct lw_close_req){ .ino = 3, .handle = 7, .size = 300,
					 .flags = LW_CL_SIZE | LW_CL_DOM | LW_CL_DATA, .dom_parts = 2 });
	FIXED(&w, (struct lw_dom_part){ .offset = 0, .len = 4 });
	lw_wr_put(&w, "abcd", 4);
	FIXED(&w, (struct lw_dom_part){ .offset = 200, .len = 3 });
	lw_wr_put(&w, "xyz", 3);
	put_file("fuzz_mds_req", "close-dom-parts", big, w.len);
	w = mds_begin(LW_OP_MDS_ACCESS);
	FIXED(&w, (struct lw_access_req){ .ino = 3, .mask = 4 });
	put_file("fuzz_mds_req", "access", big, w.len);
	w = mds_begin(LW_OP_MDS_LOCK);
	FIXED(&w, (struct lw_lock_req){ .ino = 3, .owner = 1, .start = 0, .end = UINT64_MAX, .type = 1,
					.flags = LW_LK_WAIT, .pid = 42 });
	put_file("fuzz_mds_req", "lock", big, w.len);
	w = mds_begin(LW_OP_MDS_SETLAYOUT);
	FIXED(&w, (struct lw_setlayout_req){ .ino = 3 });
	FIXED(&w, layout_req(-1, ""));
	put_file("fuzz_mds_req", "setlayout", big, w.len);
	w = mds_begin(LW_OP_MDS_OST_REGISTER);
	FIXED(&w, (struct lw_ost_register_req){ .want_idx = UINT32_MAX, .port = 9901, .host = "10.0.0.1",
						.uuid = "ost-uuid", .fsname = "loom" });
	put_file("fuzz_mds_req", "ost-register", big, w.len);
	w = mds_begin(LW_OP_MDS_WALK);
	FIXED(&w, (struct lw_walk_req){ .flags = LW_WALK_OPEN, .pathlen = 19 });
	lw_wr_put(&w, "/tok/example_12.npy", 19);
	put_file("fuzz_mds_req", "walk-open", big, w.len);
	w = mds_begin(LW_OP_MDS_SWAP_LAYOUTS);
	FIXED(&w, (struct lw_swap_req){ .ino = 3, .tmp = 4, .size = 4096, .mtime = 1700000000 });
	put_file("fuzz_mds_req", "swap-layouts", big, w.len);
	w = mds_begin(LW_OP_MDS_POOL);
	FIXED(&w, (struct lw_pool_req){ .cmd = LW_POOL_ADD, .idx = 2, .name = "fast" });
	put_file("fuzz_mds_req", "pool-add", big, w.len);
	w = mds_begin(LW_OP_MDS_OST_ADMIN);
	FIXED(&w, (struct lw_ost_admin_req){ .idx = 1, .set = LW_TGT_DEACTIVATED });
	put_file("fuzz_mds_req", "ost-admin", big, w.len);
	w = mds_begin(LW_OP_MDS_OST_REPLACE);
	FIXED(&w, (struct lw_ost_register_req){ .want_idx = 2, .port = 9901, .host = "10.0.0.1",
						.uuid = "new-ost-uuid", .fsname = "loom" });
	put_file("fuzz_mds_req", "ost-replace", big, w.len);
	w = mds_begin(LW_OP_MDS_OST_REMOVE);
	FIXED(&w, (struct lw_ost_remove_req){ .idx = 3, .flags = LW_OSTRM_DRYRUN });
	put_file("fuzz_mds_req", "ost-remove", big, w.len);
	w = mds_begin(LW_OP_MDS_OST_HEARTBEAT);
	FIXED(&w, (struct lw_ost_heartbeat_req){ .count = 2 });
	FIXED(&w, (struct lw_ost_heartbeat_ent){ .idx = 0 });
	FIXED(&w, (struct lw_ost_heartbeat_ent){ .idx = 1 });
	put_file("fuzz_mds_req", "ost-heartbeat", big, w.len);
	w = mds_begin(LW_OP_MDS_LEASE);
	FIXED(&w, (struct lw_lease_req){ .count = 2 });
	FIXED(&w, (struct lw_lease){ .ino = 2, .gen = 7 });
	FIXED(&w, (struct lw_lease){ .ino = 9, .gen = 8 });
	put_file("fuzz_mds_req", "lease", big, w.len);
	w = mds_begin(LW_OP_MDS_LEASE);
	FIXED(&w, (struct lw_lease_req){ .flags = LW_LEASE_ALL });
	put_file("fuzz_mds_req", "lease-all", big, w.len);
	w = mds_begin(LW_OP_MDS_READDIR);
	FIXED(&w, (struct lw_readdir_req){ .ino = 1, .max_bytes = 4096, .flags = LW_RD_PLUS | LW_RD_LEASE });
	put_file("fuzz_mds_req", "readdir-lease", big, w.len);
}

/* ---- fuzz_ost_req ---- */

static void gen_ost(void)
{
	static const struct {
		const char *name;
		uint16_t op;
		uint64_t length;
		uint32_t flags;
	} ops[] = {
		{ "read", LW_OP_OST_READ, 1u << 20, 0 },
		{ "write", LW_OP_OST_WRITE, 4096, 0 },
		{ "punch", LW_OP_OST_PUNCH, 0, 0 },
		{ "statfs", LW_OP_OST_STATFS, 0, 0 },
		{ "scrub", LW_OP_OST_SCRUB, 1, 0 },
		{ "fallocate", LW_OP_OST_FALLOCATE, 1u << 20, 0 },
		{ "fallocate-punch", LW_OP_OST_FALLOCATE, 4096, LW_FALLOC_PUNCH_HOLE | LW_FALLOC_KEEP_SIZE },
		{ "fallocate-zero", LW_OP_OST_FALLOCATE, 100000, LW_FALLOC_ZERO_RANGE },
		{ "seek-data", LW_OP_OST_SEEK, 0, LW_SEEK_DATA },
		{ "seek-hole", LW_OP_OST_SEEK, 0, LW_SEEK_HOLE },
	};

	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		struct lw_ost_io io = { .ost_idx = 1, .flags = ops[i].flags, .objid = 0x1000 + i,
					.offset = 65536, .length = ops[i].length, .ino = 12, .stripe_idx = 1 };
		struct lw_wr w;

		lw_wr_init(&w, big, sizeof(big));
		put_u16(&w, ops[i].op);
		lw_wr_put(&w, &io, sizeof(io));
		put_file("fuzz_ost_req", ops[i].name, big, w.len);
	}
}

/* ---- fuzz_layout ---- */

static struct loom_layout *file_layout(uint32_t n)
{
	struct loom_layout *l = calloc(1, sizeof(*l) + n * sizeof(l->objs[0]));

	l->pattern = LOOM_PATTERN_RAID0;
	l->stripe_size = 4u << 20;
	l->stripe_count = (int32_t)n;
	l->stripe_offset = 1;
	l->layout_gen = 3;
	strcpy(l->pool, "fast");
	l->nobjs = n;
	for (uint32_t i = 0; i < n; i++) {
		l->objs[i].ost_idx = i;
		l->objs[i].objid = 0x100 + i;
	}
	return l;
}

static void gen_layout(void)
{
	struct loom_layout *l = file_layout(3), *d = file_layout(0);
	struct lw_wr w;

	lw_wr_init(&w, big, sizeof(big));
	lw_layout_encode(&w, l);
	put_file("fuzz_layout", "file-3-stripes", big, w.len);
	d->stripe_count = -1;
	d->stripe_offset = -1;
	d->pool[0] = '\0';
	d->flags = LOOM_LAYOUT_DEFAULT;
	lw_wr_init(&w, big, sizeof(big));
	lw_layout_encode(&w, d);
	put_file("fuzz_layout", "dir-default", big, w.len);
	free(l);
	/* erasure-coded 2+1 with its parity object stale, and a mirrored 2 x 2 with one copy stale */
	l = file_layout(3);
	l->stripe_count = 2;
	l->mirror_count = 1;
	l->ec_parity = 1;
	l->objs[2].flags = LOOM_OBJ_STALE;
	lw_wr_init(&w, big, sizeof(big));
	lw_layout_encode(&w, l);
	put_file("fuzz_layout", "file-ec-2-1-stale-parity", big, w.len);
	free(l);
	l = file_layout(4);
	l->stripe_count = 2;
	l->mirror_count = 2;
	l->objs[3].flags = LOOM_OBJ_STALE;
	lw_wr_init(&w, big, sizeof(big));
	lw_layout_encode(&w, l);
	put_file("fuzz_layout", "file-mirror-2x2-stale", big, w.len);
	free(l);
	free(d);
}

/* ---- fuzz_readdir ---- */

static void gen_readdir(void)
{
	char longname[LOOM_NAME_MAX];
	const char *names[] = { ".", "..", "file.txt", longname };
	size_t lens[] = { 1, 2, 8, sizeof(longname) };

	memset(longname, 'n', sizeof(longname));
	for (int plus = 0; plus < 2; plus++) {
		struct lw_readdir_rep *rep;
		struct lw_wr w;

		lw_wr_init(&w, big, sizeof(big));
		rep = lw_wr_reserve(&w, sizeof(*rep));
		for (int i = 0; i < 4; i++) {
			struct lw_dirent de = { .ino = 1 + (uint64_t)i, .cookie = 10 + (uint64_t)i, .type = 4,
						.namelen = (uint16_t)lens[i] };
			struct lw_attr a = { .ino = de.ino, .mode = 040755, .nlink = 2 };

			lw_readdir_put(&w, &de, names[i], plus ? &a : NULL);
		}
		rep->count = 4;
		rep->eof = 1;
		put_file("fuzz_readdir", plus ? "page-plus" : "page", big, w.len);
	}
}

/* ---- fuzz_server_frames: 5 configuration bytes, then frames ---- */

static void gen_server(void)
{
	struct lw_wr w;
	uint8_t body[256], bulk[4096];
	struct lw_wr b;
	uint8_t wbody[sizeof(struct lw_ost_io)];

	for (size_t i = 0; i < sizeof(bulk); i++)
		bulk[i] = (uint8_t)(i * 7);
	{
		struct lw_ost_io io = { .ost_idx = 0, .objid = 5, .offset = 0, .length = 4096 };
		memcpy(wbody, &io, sizeof(io));
	}
	lw_wr_init(&b, body, sizeof(body));
	lw_put_cred(&b, &cred);
	lw_wr_put(&b, &(struct lw_name_req){ .parent = 1, .namelen = 4 }, sizeof(struct lw_name_req));
	lw_wr_put(&b, "file", 4);

	/* Every kind of frame, answered at once, one in flight. */
	lw_wr_init(&w, big, sizeof(big));
	lw_wr_put(&w, (uint8_t[5]){ 0x00, 0x00, 0x00, 0x00, 1 }, 5);
	put_frame(&w, LW_OP_PING, 0, 0, 1, "hi", 2, NULL, 0);
	put_frame(&w, LW_OP_MDS_LOOKUP, 0, 0, 2, body, (uint32_t)b.len, NULL, 0);
	put_frame(&w, LW_OP_OST_WRITE, 0, 0, 3, wbody, sizeof(wbody), bulk, sizeof(bulk));
	put_frame(&w, LW_OP_AUTH_CHALLENGE, 0, 0, 4, NULL, 0, NULL, 0);
	put_frame(&w, LW_OP_PING, LW_F_RESENT, 0, 5, NULL, 0, NULL, 0);
	put_file("fuzz_server_frames", "mixed", big, w.len);

	/* Held replies, small limits, bodies and bulk echoed, a bad bulk checksum. */
	lw_wr_init(&w, big, sizeof(big));
	lw_wr_put(&w, (uint8_t[5]){ 0x54, 0x12, 0xC1, 0x53, 7 }, 5);
	for (uint64_t id = 1; id <= 6; id++)
		put_frame(&w, LW_OP_PING, 0, 0, id, body, (uint32_t)b.len, bulk, 100 * (uint32_t)id);
	{
		struct lw_hdr h;

		lw_hdr_fill(&h, LW_OP_OST_WRITE, 0, 0, 9, wbody, sizeof(wbody), 16, 0xFFFFFFFFu);
		lw_wr_put(&w, &h, sizeof(h));
		lw_wr_put(&w, wbody, sizeof(wbody));
		lw_wr_put(&w, bulk, 16);
	}
	put_file("fuzz_server_frames", "held-echo", big, w.len);

	/* Made-up large bulks (headers and bodies only in the input), tight memory. */
	lw_wr_init(&w, big, sizeof(big));
	lw_wr_put(&w, (uint8_t[5]){ 0x46, 0x03, 0x51, 0x00, 3 }, 5);
	for (uint64_t id = 1; id <= 3; id++) {
		struct lw_hdr h;

		lw_hdr_fill(&h, LW_OP_OST_WRITE, 0, 0, id, wbody, sizeof(wbody), 150000, 0);
		lw_wr_put(&w, &h, sizeof(h));
		lw_wr_put(&w, wbody, sizeof(wbody));
	}
	put_file("fuzz_server_frames", "large-bulk", big, w.len);

	/* A frame the server must refuse after a good one. */
	lw_wr_init(&w, big, sizeof(big));
	lw_wr_put(&w, (uint8_t[5]){ 0x00, 0x00, 0x00, 0x00, 0 }, 5);
	put_frame(&w, LW_OP_PING, 0, 0, 1, NULL, 0, NULL, 0);
	put_frame(&w, LW_OP_PING, LW_F_REPLY, 0, 2, NULL, 0, NULL, 0);
	put_file("fuzz_server_frames", "reply-to-server", big, w.len);
}

/* ---- fuzz_rpc_replies: 1 byte, 2 per call, then reply frames ---- */

static void gen_rpc(void)
{
	struct lw_wr w;
	struct lw_attr attr = { .ino = 5, .mode = 0100644, .nlink = 1 };
	struct lw_ost_io_rep io = { .length = 100, .obj_size = 100 };
	uint8_t bulk[300];

	for (size_t i = 0; i < sizeof(bulk); i++)
		bulk[i] = (uint8_t)i;
	/* 3 calls: PING with a 4096-byte buffer, GETATTR, OST_READ with 100 + 4096 bytes. */
	lw_wr_init(&w, big, sizeof(big));
	put_u8(&w, 0x02);
	put_u8(&w, 0x04);
	put_u8(&w, 0x03);
	put_u8(&w, 0x01);
	put_u8(&w, 0x00);
	put_u8(&w, 0x0A);
	put_u8(&w, 0x1A);
	put_frame(&w, LW_OP_MDS_GETATTR, LW_F_REPLY, 0, 2, &attr, sizeof(attr), NULL, 0);
	put_frame(&w, LW_OP_OST_READ, LW_F_REPLY, 0, 3, &io, sizeof(io), bulk, sizeof(bulk));
	put_frame(&w, LW_OP_PING, LW_F_REPLY, -ENOENT, 1, "pong", 4, bulk, 10);
	put_file("fuzz_rpc_replies", "three-calls", big, w.len);

	/* A recall (unasked), then the reply to one GETATTR: its prefix grants a lease. */
	{
		struct {
			struct lw_recall f;
			struct lw_lease l;
		} recall = { { .count = 1 }, { .ino = 2, .gen = 5 } };
		struct {
			struct lw_mds_rep_prefix pre;
			struct lw_attr attr;
		} rep = { { .last_committed = 3, .lease_ino = 2, .lease_gen = 6, .lease_trust_ms = 5000 },
			  attr };

		lw_wr_init(&w, big, sizeof(big));
		put_u8(&w, 0x00);
		put_u8(&w, 0x01);
		put_u8(&w, 0x00);
		put_frame(&w, LW_OP_MDS_RECALL, LW_F_NOTIFY, 0, 1, &recall, sizeof(recall), NULL, 0);
		put_frame(&w, LW_OP_MDS_GETATTR, LW_F_REPLY, 0, 1, &rep, sizeof(rep), NULL, 0);
		put_file("fuzz_rpc_replies", "recall-then-reply", big, w.len);
	}

	/* One OST_READ with a 200000-byte buffer and a made-up 150000-byte bulk. */
	lw_wr_init(&w, big, sizeof(big));
	put_u8(&w, 0x10);
	put_u8(&w, 0x06);
	put_u8(&w, 0x06);
	{
		struct lw_hdr h;

		lw_hdr_fill(&h, LW_OP_OST_READ, LW_F_REPLY, 0, 1, &io, sizeof(io), 150000, 0);
		lw_wr_put(&w, &h, sizeof(h));
		lw_wr_put(&w, &io, sizeof(io));
	}
	put_file("fuzz_rpc_replies", "large-read", big, w.len);
}

/* ---- fuzz_mdc_replies: [n][n steps], then per step its arguments and its reply ---- */

static void put_reply(struct lw_wr *w, uint8_t status, const void *body, uint16_t len)
{
	put_u8(w, status);
	put_u16(w, len);
	lw_wr_put(w, body, len);
}

static void gen_mdc(void)
{
	struct lw_attr attr = { .ino = 5, .mode = 0100644, .nlink = 1, .size = 10 };
	struct loom_layout *l = file_layout(2);
	uint8_t buf[4096];
	struct lw_wr w, b;

	lw_wr_init(&w, big, sizeof(big));
	lw_wr_put(&w, (uint8_t[]){ 3, 0, 1, 5 }, 4);
	put_reply(&w, 0, &attr, sizeof(attr));
	put_reply(&w, 0, &attr, sizeof(attr));
	put_reply(&w, 0, &attr, sizeof(attr));
	put_file("fuzz_mdc_replies", "attrs", big, w.len);

	/* create with a layout in the reply, open without */
	lw_wr_init(&w, big, sizeof(big));
	lw_wr_put(&w, (uint8_t[]){ 2, 3, 4 }, 3);
	put_u8(&w, 1);
	lw_wr_init(&b, buf, sizeof(buf));
	lw_wr_put(&b, &(struct lw_create_rep){ .attr = attr, .handle = 9, .flags = LW_CRR_CREATED, .has_layout = 1 },
		  sizeof(struct lw_create_rep));
	lw_layout_encode(&b, l);
	put_reply(&w, 0, buf, (uint16_t)b.len);
	put_u8(&w, 0);
	put_reply(&w, 0, &(struct lw_open_rep){ .attr = attr, .handle = 10 }, sizeof(struct lw_open_rep));
	put_file("fuzz_mdc_replies", "create-open", big, w.len);

	/* readlink, getxattr (size only), listxattr */
	lw_wr_init(&w, big, sizeof(big));
	lw_wr_put(&w, (uint8_t[]){ 3, 9, 10, 11 }, 4);
	put_u16(&w, 100);
	lw_wr_init(&b, buf, sizeof(buf));
	lw_wr_put(&b, &(struct lw_blob_rep){ .len = 5 }, sizeof(struct lw_blob_rep));
	lw_wr_put(&b, "/tmp/", 5);
	put_reply(&w, 0, buf, (uint16_t)b.len);
	put_u16(&w, 0);
	put_reply(&w, 0, &(struct lw_blob_rep){ .len = 10 }, sizeof(struct lw_blob_rep));
	put_u16(&w, 64);
	lw_wr_init(&b, buf, sizeof(buf));
	lw_wr_put(&b, &(struct lw_blob_rep){ .len = 14 }, sizeof(struct lw_blob_rep));
	lw_wr_put(&b, "user.a\0user.b", 14);
	put_reply(&w, 0, buf, (uint16_t)b.len);
	put_file("fuzz_mdc_replies", "blobs", big, w.len);

	/* a readdir page */
	lw_wr_init(&w, big, sizeof(big));
	lw_wr_put(&w, (uint8_t[]){ 1, 12 }, 2);
	put_u8(&w, 0);
	lw_wr_init(&b, buf, sizeof(buf));
	{
		struct lw_readdir_rep *rep = lw_wr_reserve(&b, sizeof(*rep));
		struct lw_dirent de = { .ino = 1, .cookie = 1, .type = 4, .namelen = 1 };

		lw_readdir_put(&b, &de, ".", NULL);
		de.namelen = 5;
		lw_readdir_put(&b, &de, "entry", NULL);
		rep->count = 2;
		rep->eof = 1;
	}
	put_reply(&w, 0, buf, (uint16_t)b.len);
	put_file("fuzz_mdc_replies", "readdir", big, w.len);

	/* getlayout, setlayout */
	lw_wr_init(&w, big, sizeof(big));
	lw_wr_put(&w, (uint8_t[]){ 2, 17, 18 }, 3);
	lw_wr_init(&b, buf, sizeof(buf));
	lw_layout_encode(&b, l);
	put_u8(&w, 0);
	put_reply(&w, 0, buf, (uint16_t)b.len);
	put_u8(&w, 0);
	put_reply(&w, 0, buf, (uint16_t)b.len);
	put_file("fuzz_mdc_replies", "layouts", big, w.len);

	/* lock, OST table, statfs, close, then errors */
	lw_wr_init(&w, big, sizeof(big));
	lw_wr_put(&w, (uint8_t[]){ 6, 15, 19, 13, 16, 6, 7 }, 7);
	put_u8(&w, 0);
	put_reply(&w, 0, &(struct lw_lock_rep){ .end = 100, .type = 2 }, sizeof(struct lw_lock_rep));
	lw_wr_init(&b, buf, sizeof(buf));
	lw_wr_put(&b, &(struct lw_ost_table_rep){ .gen = 1, .count = 2 }, sizeof(struct lw_ost_table_rep));
	lw_wr_put(&b, &(struct lw_ost_entry){ .idx = 0, .port = 9901, .host = "10.0.0.1", .uuid = "a" },
		  sizeof(struct lw_ost_entry));
	lw_wr_put(&b, &(struct lw_ost_entry){ .idx = 1, .port = 9902, .host = "10.0.0.2", .uuid = "b" },
		  sizeof(struct lw_ost_entry));
	put_reply(&w, 0, buf, (uint16_t)b.len);
	put_reply(&w, 0, &(struct lw_statfs_rep){ .ost_count = 2 }, sizeof(struct lw_statfs_rep));
	put_reply(&w, 0, &attr, sizeof(attr));
	put_reply(&w, 5, NULL, 0);
	put_reply(&w, 6, "xx", 2);
	put_file("fuzz_mdc_replies", "misc", big, w.len);
	free(l);
}

/* ---- the inputs of the bugs found so far (README.md): corpus/TARGET/regress-BUG ---- */

/* What an OST directory holds, as the OSS writes it (src/oss/ost_format.h). */
static void gen_ost_format(void)
{
	static const char *const seeds[][2] = {
		{ "conf", "fsname=t\nuuid=0123abcd-4567-89ef-0123-456789abcdef\n" },
		{ "conf-index", "fsname=lustre\nuuid=0123abcd-4567-89ef-0123-456789abcdef\nindex=7\n" },
		{ "tag", "77:2" },
		{ "tag-max", "18446744073709551615:4294967295" },
		{ "name", "deadbeef0a" }, /* 10 bytes: found in O/0a, its own */
		{ "name-stray", "0ABC" },
		{ "name-crc", "abc.crc" },
	};

	for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++)
		put_file("fuzz_ost_format", seeds[i][0], seeds[i][1], strlen(seeds[i][1]));
}

static void gen_regressions(void)
{
	struct loom_layout *l = file_layout(2);
	uint8_t buf[4096];
	struct lw_wr w, b;
	struct lw_hdr h = { 0 };

	/* a valid layout and one byte more */
	lw_wr_init(&b, buf, sizeof(buf));
	lw_layout_encode(&b, l);
	put_u8(&b, 0);
	put_file("fuzz_layout", "regress-layout-from-xattr-double-free", buf, b.len);
	for (int set = 0; set < 2; set++) {
		lw_wr_init(&w, big, sizeof(big));
		lw_wr_put(&w, (uint8_t[]){ 1, set ? 18 : 17, 0 }, 3);
		put_reply(&w, 0, buf, (uint16_t)b.len);
		put_file("fuzz_mdc_replies", set ? "regress-mdc-setlayout-double-free" :
				    "regress-mdc-getlayout-double-free", big, w.len);
	}
	/* MDS_WALK: an open the client asked for, then one it did not ask for (a NULL walk_open was
	 * dereferenced), then a read-only close nobody waits for */
	{
		struct lw_attr attr = { .ino = 5, .mode = 0100644, .nlink = 1, .size = 10 };
		struct lw_walk_rep wrep = { .attr = attr, .consumed = 22, .flags = LW_WALKR_OPENED };

		lw_wr_init(&b, buf, sizeof(buf));
		lw_wr_put(&b, &wrep, sizeof(wrep));
		lw_wr_put(&b, &(struct lw_open_rep){ .attr = attr, .handle = 10, .has_layout = 1 },
			  sizeof(struct lw_open_rep));
		lw_layout_encode(&b, l);
		lw_wr_init(&w, big, sizeof(big));
		lw_wr_put(&w, (uint8_t[]){ 3, 21, 21, 22 }, 4);
		put_u8(&w, 1);
		put_reply(&w, 0, buf, (uint16_t)b.len);
		put_u8(&w, 0);
		put_reply(&w, 0, buf, (uint16_t)b.len);
		put_reply(&w, 0, &attr, sizeof(attr));
		put_file("fuzz_mdc_replies", "regress-mdc-walk-open-unasked", big, w.len);
	}
	/* a file's layout with objects and a stripe size of 0 */
	l->stripe_size = 0;
	lw_wr_init(&b, buf, sizeof(buf));
	lw_layout_encode(&b, l);
	put_file("fuzz_layout", "regress-layout-zero-stripe-size", buf, b.len);
	/* a plain layout whose first object has flags (stale is a mirrored layout's only) */
	l->stripe_size = 1u << 20;
	lw_wr_init(&b, buf, sizeof(buf));
	lw_layout_encode(&b, l);
	buf[sizeof(struct lw_layout) + offsetof(struct lw_ostobj, flags)] = 1;
	put_file("fuzz_layout", "regress-layout-ostobj-pad", buf, b.len);
	/* a header whose status is INT32_MIN */
	h.status = INT32_MIN;
	put_file("fuzz_hdr", "regress-errno-to-wire-int-min", &h, sizeof(h));
	free(l);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
		return 2;
	}
	root = argv[1];
	if (mkdir(root, 0755) < 0 && errno != EEXIST) {
		perror(root);
		return 1;
	}
	gen_hdr();
	gen_mds();
	gen_ost();
	gen_layout();
	gen_readdir();
	gen_server();
	gen_rpc();
	gen_mdc();
	gen_ost_format();
	gen_regressions();
	return 0;
}
