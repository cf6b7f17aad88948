/*
 * MDS request bodies: lw_mds_req_decode for every opcode. Input: the opcode (2 bytes, little
 * endian), then the body.
 *
 * Properties, beyond "does not crash":
 *  - the result is 0 or one of the errnos codec.h lists; -EOPNOTSUPP exactly for opcodes the
 *    MDS does not serve; a body too short for its fixed part (or with a bad cred) is -EPROTO;
 *  - a decoded request holds only valid contents, checked here from wire.h alone: names of
 *    1..255 bytes without '/' or NUL, xattr names of 1..255 bytes without NUL, symlink targets
 *    of 1..4095 bytes without NUL, known flag bits only, request layouts within their limits;
 *  - every pointer it returns lies inside the body, and the decoded request encodes back to
 *    exactly the body's bytes: every byte was read once, none was skipped or invented.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
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

static bool is_mds_op(uint16_t op)
{
	const struct lw_op_info *i = lw_op_info(op);

	return i && i->server == LW_SRV_MDS;
}

/* Opcodes that the decoder must turn away: the OSS's, AUTH_* (a server answers them before any
 * decoder), and those no table names. */
static bool is_foreign_op(uint16_t op)
{
	return op != LW_OP_PING && op != LW_OP_GET_PARAM && op != LW_OP_SET_PARAM && !is_mds_op(op);
}

/* GET_PARAM, SET_PARAM (both servers'): one fixed struct, its strings terminated. */
static bool is_param_op(uint16_t op)
{
	return op == LW_OP_GET_PARAM || op == LW_OP_SET_PARAM;
}

static bool has_cred(uint16_t op)
{
	return lw_op_flags(op) & LW_OPF_CRED;
}

/* The fixed struct after the cred prefix. */
static size_t fixed_size(uint16_t op)
{
	switch (op) {
	case LW_OP_MDS_CONNECT: return sizeof(struct lw_connect_req);
	case LW_OP_MDS_GETATTR:
	case LW_OP_MDS_READLINK:
	case LW_OP_MDS_GETLAYOUT: return sizeof(struct lw_ino_req);
	case LW_OP_MDS_LOOKUP:
	case LW_OP_MDS_UNLINK:
	case LW_OP_MDS_RMDIR: return sizeof(struct lw_name_req);
	case LW_OP_MDS_SETATTR: return sizeof(struct lw_setattr);
	case LW_OP_MDS_CREATE: return sizeof(struct lw_create_req);
	case LW_OP_MDS_MKDIR: return sizeof(struct lw_mkdir_req);
	case LW_OP_MDS_RENAME: return sizeof(struct lw_rename_req);
	case LW_OP_MDS_LINK: return sizeof(struct lw_link_req);
	case LW_OP_MDS_SYMLINK: return sizeof(struct lw_symlink_req);
	case LW_OP_MDS_READDIR: return sizeof(struct lw_readdir_req);
	case LW_OP_MDS_GETXATTR:
	case LW_OP_MDS_SETXATTR:
	case LW_OP_MDS_LISTXATTR:
	case LW_OP_MDS_REMOVEXATTR: return sizeof(struct lw_xattr_req);
	case LW_OP_MDS_OPEN: return sizeof(struct lw_open_req);
	case LW_OP_MDS_ACCESS: return sizeof(struct lw_access_req);
	case LW_OP_MDS_LOCK: return sizeof(struct lw_lock_req);
	case LW_OP_MDS_CLOSE:
	case LW_OP_MDS_SIZE_UPDATE: return sizeof(struct lw_close_req);
	case LW_OP_MDS_SETLAYOUT: return sizeof(struct lw_setlayout_req);
	case LW_OP_MDS_DOM_READ: return sizeof(struct lw_ino_req);
	case LW_OP_MDS_OST_REGISTER:
	case LW_OP_MDS_OST_REPLACE: return sizeof(struct lw_ost_register_req);
	case LW_OP_MDS_OST_REMOVE: return sizeof(struct lw_ost_remove_req);
	case LW_OP_MDS_OST_ADMIN: return sizeof(struct lw_ost_admin_req);
	case LW_OP_MDS_POOL: return sizeof(struct lw_pool_req);
	case LW_OP_MDS_SWAP_LAYOUTS: return sizeof(struct lw_swap_req);
	case LW_OP_MDS_WALK: return sizeof(struct lw_walk_req);
	case LW_OP_MDS_OST_HEARTBEAT: return sizeof(struct lw_ost_heartbeat_req);
	case LW_OP_MDS_SYNC: return sizeof(struct lw_sync_req);
	case LW_OP_MDS_INOS: return sizeof(struct lw_inos_req);
	case LW_OP_MDS_REPLAY: return sizeof(struct lw_replay_req);
	case LW_OP_MDS_LEASE: return sizeof(struct lw_lease_req);
	case LW_OP_MDS_MIRROR: return sizeof(struct lw_mirror_req);
	default: return 0;
	}
}

struct body {
	const uint8_t *p;
	uint32_t len;
};

static bool inside(const struct body *b, const void *p, size_t n)
{
	const uint8_t *q = p;

	return q && q >= b->p && n <= b->len && q - b->p <= (ptrdiff_t)(b->len - n);
}

static void check_name(const struct body *b, const struct lw_name *n, uint16_t wire_len)
{
	FUZZ_CHECK(n->len == wire_len);
	FUZZ_CHECK(n->len >= 1 && n->len <= LOOM_NAME_MAX);
	FUZZ_CHECK(inside(b, n->s, n->len));
	FUZZ_CHECK(!memchr(n->s, '/', n->len) && !memchr(n->s, '\0', n->len));
	FUZZ_CHECK(lw_name_check(n->s, n->len) == 0);
}

static void check_layout_req(const struct lw_layout *l)
{
	size_t pn = strnlen(l->pool, sizeof(l->pool));

	FUZZ_CHECK(l->magic == LW_LAYOUT_MAGIC && l->version >= LW_LAYOUT_V1 && l->version <= LW_LAYOUT_V3);
	/* Version 1 has no dom_size: read as 0. Else 0, none, or 64 KiB multiples to 1 MiB. */
	FUZZ_CHECK(l->version >= LW_LAYOUT_V2 || (l->dom_size == 0 && l->mirror_count == 0));
	/* Copies or parity: version 3 only; copies 1 to 16 (or 0 with parity), parity up to 16 and
	 * never with copies; at most 2000 objects in all, 255 with parity. */
	FUZZ_CHECK(l->version == LW_LAYOUT_V3 || (l->mirror_count == 0 && l->ec_parity == 0));
	FUZZ_CHECK(l->version != LW_LAYOUT_V3 || l->ec_parity ||
		   (l->mirror_count >= 1 && l->mirror_count <= LOOM_MAX_MIRRORS));
	FUZZ_CHECK(l->ec_parity <= LOOM_EC_MAX_PARITY && (l->ec_parity == 0 || l->mirror_count <= 1));
	FUZZ_CHECK(l->ec_parity == 0 || l->stripe_count <= 0 ||
		   (uint64_t)l->stripe_count + l->ec_parity <= LOOM_EC_MAX_WIDTH);
	FUZZ_CHECK(l->mirror_count <= 1 || l->stripe_count <= 0 ||
		   (uint64_t)l->stripe_count * l->mirror_count <= LOOM_MAX_STRIPES);
	FUZZ_CHECK(l->dom_size == LOOM_DOM_NONE ||
		   (l->dom_size % LOOM_STRIPE_UNIT == 0 && l->dom_size <= LOOM_DOM_MAX));
	FUZZ_CHECK(l->pattern == 0 || l->pattern == LW_PATTERN_RAID0);
	FUZZ_CHECK(l->stripe_size % LOOM_STRIPE_UNIT == 0);
	FUZZ_CHECK(l->stripe_count >= -1 && l->stripe_count <= LOOM_MAX_STRIPES);
	FUZZ_CHECK(l->stripe_offset >= -1);
	FUZZ_CHECK(l->nobjs == 0);
	FUZZ_CHECK(pn <= LOOM_POOL_NAME_MAX);
	for (size_t i = pn; i < sizeof(l->pool); i++)
		FUZZ_CHECK(l->pool[i] == '\0');
	FUZZ_CHECK(lw_layout_req_check(l) == 0);
}

static bool nul_terminated(const char *s, size_t cap)
{
	return memchr(s, '\0', cap) != NULL;
}

/* The contents of a request that decoded. */
static void check_contents(const struct lw_mds_req *q, const struct body *b)
{
	FUZZ_CHECK(q->cred.ngroups <= LOOM_MAX_GROUPS);
	if (!has_cred(q->op))
		FUZZ_CHECK(q->cred.uid == 0 && q->cred.gid == 0 && q->cred.ngroups == 0);

	switch (q->op) {
	case LW_OP_MDS_LOOKUP:
	case LW_OP_MDS_UNLINK:
	case LW_OP_MDS_RMDIR:
		check_name(b, &q->u.name.name, q->u.name.f.namelen);
		/* Only an unlink may say it opened nothing under a lease. */
		FUZZ_CHECK(!(q->u.name.f.flags & ~(q->op == LW_OP_MDS_UNLINK ? LW_NM_UNLEASED : 0)));
		break;
	case LW_OP_MDS_SETATTR:
		FUZZ_CHECK(!(q->u.setattr.valid & ~LW_SA_ALL));
		break;
	case LW_OP_MDS_CREATE:
		if (q->u.create.f.flags & LW_CR_TMPFILE) /* nameless, and opened */
			FUZZ_CHECK(q->u.create.f.namelen == 0 && q->u.create.name.len == 0 &&
				   (q->u.create.f.flags & LW_CR_OPEN));
		else
			check_name(b, &q->u.create.name, q->u.create.f.namelen);
		FUZZ_CHECK(!(q->u.create.f.flags & ~(LW_CR_EXCL | LW_CR_OPEN | LW_CR_LAYOUT | LW_CR_TMPFILE |
						     LW_CR_INO)));
		/* A number handed ahead: with O_EXCL, a name, and never the root's. */
		FUZZ_CHECK(!(q->u.create.f.flags & LW_CR_INO) ||
			   ((q->u.create.f.flags & LW_CR_EXCL) && !(q->u.create.f.flags & LW_CR_TMPFILE) &&
			    q->u.create.ino > LOOM_ROOT_INO));
		FUZZ_CHECK((q->u.create.f.flags & LW_CR_INO) || q->u.create.ino == 0);
		FUZZ_CHECK(q->u.create.has_layout == !!(q->u.create.f.flags & LW_CR_LAYOUT));
		if (q->u.create.has_layout)
			check_layout_req(&q->u.create.layout);
		break;
	case LW_OP_MDS_MKDIR:
		check_name(b, &q->u.mkdir.name, q->u.mkdir.f.namelen);
		FUZZ_CHECK(!(q->u.mkdir.f.flags & ~(LW_MK_LEASE | LW_MK_EXCL)));
		FUZZ_CHECK(!(q->u.mkdir.f.flags & LW_MK_EXCL) || (q->u.mkdir.f.flags & LW_MK_LEASE));
		break;
	case LW_OP_MDS_RENAME:
		check_name(b, &q->u.rename.src, q->u.rename.f.src_namelen);
		check_name(b, &q->u.rename.dst, q->u.rename.f.dst_namelen);
		FUZZ_CHECK(!(q->u.rename.f.flags & ~(LW_RENAME_NOREPLACE | LW_RENAME_EXCHANGE)));
		FUZZ_CHECK(q->u.rename.f.flags != (LW_RENAME_NOREPLACE | LW_RENAME_EXCHANGE));
		break;
	case LW_OP_MDS_LINK:
		check_name(b, &q->u.link.name, q->u.link.f.namelen);
		break;
	case LW_OP_MDS_SYMLINK: {
		uint32_t tl = q->u.symlink.f.targetlen;

		check_name(b, &q->u.symlink.name, q->u.symlink.f.namelen);
		FUZZ_CHECK(tl >= 1 && tl <= LOOM_SYMLINK_MAX);
		FUZZ_CHECK(inside(b, q->u.symlink.target, tl));
		FUZZ_CHECK(!memchr(q->u.symlink.target, '\0', tl));
		break;
	}
	case LW_OP_MDS_READDIR:
		FUZZ_CHECK(!(q->u.readdir.flags & ~(LW_RD_PLUS | LW_RD_LEASE | LW_RD_EXCL)));
		FUZZ_CHECK(!(q->u.readdir.flags & LW_RD_EXCL) || (q->u.readdir.flags & LW_RD_LEASE));
		break;
	case LW_OP_MDS_LISTXATTR:
		FUZZ_CHECK(q->u.xattr.f.namelen == 0 && q->u.xattr.name.len == 0);
		break;
	case LW_OP_MDS_GETXATTR:
	case LW_OP_MDS_REMOVEXATTR:
	case LW_OP_MDS_SETXATTR: {
		const struct lw_name *n = &q->u.xattr.name;

		FUZZ_CHECK(n->len == q->u.xattr.f.namelen);
		FUZZ_CHECK(n->len >= 1 && n->len <= LOOM_XATTR_NAME_MAX);
		FUZZ_CHECK(inside(b, n->s, n->len) && !memchr(n->s, '\0', n->len));
		if (q->op == LW_OP_MDS_SETXATTR) {
			FUZZ_CHECK(q->u.xattr.f.size <= LOOM_XATTR_SIZE_MAX);
			FUZZ_CHECK(!(q->u.xattr.f.flags & ~(LW_XATTR_CREATE | LW_XATTR_REPLACE)));
			FUZZ_CHECK(q->u.xattr.f.size == 0 || inside(b, q->u.xattr.value, q->u.xattr.f.size));
		}
		break;
	}
	case LW_OP_MDS_LOCK:
		FUZZ_CHECK(!(q->u.lock.flags & ~(LW_LK_WAIT | LW_LK_TEST | LW_LK_FLOCK | LW_LK_CANCEL |
						 LW_LK_REPLAY | LW_LK_REPLAY_DONE)));
		FUZZ_CHECK(q->u.lock.type <= 2 && q->u.lock.start <= q->u.lock.end);
		/* A replay takes a read or write lock, flock or fcntl, with nothing else; its end is
		 * alone. */
		FUZZ_CHECK(!(q->u.lock.flags & LW_LK_REPLAY) ||
			   (!(q->u.lock.flags & ~(LW_LK_REPLAY | LW_LK_FLOCK)) && q->u.lock.type != 2));
		FUZZ_CHECK(!(q->u.lock.flags & LW_LK_REPLAY_DONE) || q->u.lock.flags == LW_LK_REPLAY_DONE);
		break;
	case LW_OP_MDS_ACCESS:
		FUZZ_CHECK(q->u.access.mask <= 7);
		break;
	case LW_OP_MDS_CLOSE:
	case LW_OP_MDS_SIZE_UPDATE:
		FUZZ_CHECK(!(q->u.close.flags & ~LW_CL_ALL));
		FUZZ_CHECK(!!(q->u.close.flags & LW_CL_DOM) == (q->u.close.dom_parts != 0));
		if (q->u.close.flags & LW_CL_DOM) {
			/* Every part inside the body, ascending, disjoint, none empty, within the cap. */
			size_t pos = 0;
			uint64_t end = 0;

			for (uint32_t i = 0; i < q->u.close.dom_parts; i++) {
				struct lw_dom_part part;
				const void *data;

				FUZZ_CHECK(inside(b, q->dom + pos, sizeof(part)));
				lw_dom_part_at(q, &pos, &part, &data);
				FUZZ_CHECK(part.pad == 0 && part.len > 0 && part.len <= LOOM_DOM_MAX &&
					   part.offset + part.len <= LOOM_DOM_MAX && part.offset >= end);
				FUZZ_CHECK(inside(b, data, part.len));
				end = part.offset + part.len;
			}
		} else {
			FUZZ_CHECK(q->dom == NULL);
		}
		break;
	case LW_OP_MDS_OPEN:
		FUZZ_CHECK(!(q->u.open.flags & ~(LW_OPQ_NAMES | LW_OPQ_DIR_MOVES | LW_OPQ_LEASE)));
		/* A lease is asked with a read-only open only. */
		FUZZ_CHECK(!(q->u.open.flags & LW_OPQ_LEASE) ||
			   ((q->u.open.open_flags & O_ACCMODE) == O_RDONLY && !(q->u.open.open_flags & O_TRUNC)));
		break;
	case LW_OP_MDS_SETLAYOUT:
		check_layout_req(&q->u.setlayout.layout);
		break;
	case LW_OP_MDS_SWAP_LAYOUTS:
		FUZZ_CHECK(q->u.swap.pad == 0 && q->u.swap.mtime_ns < 1000000000u);
		break;
	case LW_OP_MDS_WALK: {
		uint16_t n = q->u.walk.f.pathlen;

		FUZZ_CHECK(!(q->u.walk.f.flags & ~(LW_WALK_PARENT | LW_WALK_OPEN)));
		FUZZ_CHECK(n <= LW_WALK_PATH_MAX);
		FUZZ_CHECK(!q->u.walk.f.pad[0] && !q->u.walk.f.pad[1] && !q->u.walk.f.pad[2]);
		FUZZ_CHECK(n == 0 || (inside(b, q->u.walk.path, n) && !memchr(q->u.walk.path, '\0', n)));
		break;
	}
	case LW_OP_MDS_POOL: {
		size_t n = strnlen(q->u.pool.name, sizeof(q->u.pool.name));

		FUZZ_CHECK(q->u.pool.cmd >= LW_POOL_NEW && q->u.pool.cmd <= LW_POOL_LIST);
		FUZZ_CHECK(n < sizeof(q->u.pool.name) && (n > 0 || q->u.pool.cmd == LW_POOL_LIST));
		for (size_t i = n; i < sizeof(q->u.pool.name); i++)
			FUZZ_CHECK(q->u.pool.name[i] == '\0');
		break;
	}
	case LW_OP_MDS_OST_ADMIN:
		FUZZ_CHECK(!((q->u.ost_admin.set | q->u.ost_admin.clear) & ~LW_TGT_ADMIN_STATE));
		FUZZ_CHECK(q->u.ost_admin.pad == 0);
		break;
	case LW_OP_MDS_OST_REMOVE:
		FUZZ_CHECK(!(q->u.ost_remove.flags & ~(LW_OSTRM_DRYRUN | LW_OSTRM_FORCE)));
		break;
	case LW_OP_MDS_OST_REGISTER:
	case LW_OP_MDS_OST_REPLACE: {
		const struct lw_ost_register_req *r = &q->u.ost_register;

		FUZZ_CHECK(nul_terminated(r->host, sizeof(r->host)) && r->host[0] != '\0');
		FUZZ_CHECK(nul_terminated(r->uuid, sizeof(r->uuid)) && r->uuid[0] != '\0');
		FUZZ_CHECK(nul_terminated(r->fsname, sizeof(r->fsname)));
		break;
	}
	case LW_OP_MDS_OST_HEARTBEAT: {
		uint32_t n = q->u.heartbeat.f.count;

		FUZZ_CHECK(n <= 65536);
		FUZZ_CHECK(n == 0 || inside(b, q->u.heartbeat.ents, (size_t)n * sizeof(struct lw_ost_heartbeat_ent)));
		for (uint32_t i = 0; i < n; i++) {
			struct lw_ost_heartbeat_ent e;

			lw_heartbeat_ent(q, i, &e);
			FUZZ_CHECK(!memcmp(&e, q->u.heartbeat.ents + (size_t)i * sizeof(e), sizeof(e)));
		}
		break;
	}
	case LW_OP_MDS_SYNC:
		FUZZ_CHECK((q->u.sync.flags & ~LW_SYNC_BYE) == 0 && q->u.sync.pad == 0);
		break;
	case LW_OP_MDS_INOS:
		FUZZ_CHECK(q->u.inos.count >= 1 && q->u.inos.count <= LW_INOS_MAX && q->u.inos.pad == 0);
		break;
	case LW_OP_MDS_MIRROR: {
		uint32_t cmd = q->u.mirror.f.cmd, n = q->u.mirror.f.count;

		FUZZ_CHECK(cmd >= LW_MIRROR_STALE && cmd <= LW_MIRROR_SPLIT);
		FUZZ_CHECK(cmd == LW_MIRROR_RESYNC || cmd == LW_MIRROR_EXTEND ? n == 0 :
			   cmd == LW_MIRROR_SPLIT ? n == 1 : n >= 1 && n <= LW_MIRROR_MAX_OBJS);
		FUZZ_CHECK(!n || inside(b, q->u.mirror.objs, (size_t)n * sizeof(struct lw_ostobj)));
		for (uint32_t i = 0; i < n; i++) {
			struct lw_ostobj o;

			memcpy(&o, q->u.mirror.objs + (size_t)i * sizeof(o), sizeof(o));
			FUZZ_CHECK(o.flags == 0);
		}
		break;
	}
	case LW_OP_MDS_LEASE:
		FUZZ_CHECK(q->u.lease.f.flags == LW_LEASE_ALL ? q->u.lease.f.count == 0 :
			   q->u.lease.f.flags == 0 && q->u.lease.f.count >= 1 &&
			   q->u.lease.f.count <= LW_LEASES_MAX &&
			   inside(b, q->u.lease.leases, (size_t)q->u.lease.f.count * sizeof(struct lw_lease)));
		break;
	case LW_OP_MDS_REPLAY: {
		const struct lw_replay_req *f = &q->u.replay.f;

		FUZZ_CHECK((f->flags & ~LW_RP_DONE) == 0);
		if (f->flags & LW_RP_DONE) {
			FUZZ_CHECK(!f->transno && !f->req_id && !f->opcode && !f->nvers && !f->body_len &&
				   !f->reply_len);
			break;
		}
		FUZZ_CHECK(f->transno && f->nvers <= LW_MAX_VERS && (lw_op_flags(f->opcode) & LW_OPF_REPLAY));
		FUZZ_CHECK(f->nvers == 0 || inside(b, q->u.replay.vers, f->nvers * sizeof(struct lw_obj_version)));
		FUZZ_CHECK(f->body_len == 0 || inside(b, q->u.replay.body, f->body_len));
		FUZZ_CHECK(f->reply_len == 0 || inside(b, q->u.replay.reply, f->reply_len));
		break;
	}
	default:
		break;
	}
}

static void put_name(struct lw_wr *w, const struct lw_name *n)
{
	lw_wr_put(w, n->s, n->len);
}

/* The body as a client would send it for this decoded request. */
/* A request layout as it came: 48 bytes for version 1, 56 for version 2. */
static void put_layout(struct lw_wr *w, const struct lw_layout *l)
{
	lw_wr_put(w, l, l->version == LW_LAYOUT_V1 ? LW_LAYOUT_V1_SIZE : sizeof(*l));
}

static void encode(const struct lw_mds_req *q, struct lw_wr *w)
{
	if (has_cred(q->op))
		lw_put_cred(w, &q->cred);
	switch (q->op) {
	case LW_OP_MDS_CONNECT: lw_wr_put(w, &q->u.connect, sizeof(q->u.connect)); break;
	case LW_OP_MDS_GETATTR:
	case LW_OP_MDS_READLINK:
	case LW_OP_MDS_GETLAYOUT:
	case LW_OP_MDS_DOM_READ: lw_wr_put(w, &q->u.ino, sizeof(q->u.ino)); break;
	case LW_OP_MDS_LOOKUP:
	case LW_OP_MDS_UNLINK:
	case LW_OP_MDS_RMDIR:
		lw_wr_put(w, &q->u.name.f, sizeof(q->u.name.f));
		put_name(w, &q->u.name.name);
		break;
	case LW_OP_MDS_SETATTR: lw_wr_put(w, &q->u.setattr, sizeof(q->u.setattr)); break;
	case LW_OP_MDS_CREATE:
		lw_wr_put(w, &q->u.create.f, sizeof(q->u.create.f));
		put_name(w, &q->u.create.name);
		if (q->u.create.f.flags & LW_CR_INO)
			lw_wr_put(w, &q->u.create.ino, sizeof(q->u.create.ino));
		if (q->u.create.has_layout)
			put_layout(w, &q->u.create.layout);
		break;
	case LW_OP_MDS_MKDIR:
		lw_wr_put(w, &q->u.mkdir.f, sizeof(q->u.mkdir.f));
		put_name(w, &q->u.mkdir.name);
		break;
	case LW_OP_MDS_RENAME:
		lw_wr_put(w, &q->u.rename.f, sizeof(q->u.rename.f));
		put_name(w, &q->u.rename.src);
		put_name(w, &q->u.rename.dst);
		break;
	case LW_OP_MDS_LINK:
		lw_wr_put(w, &q->u.link.f, sizeof(q->u.link.f));
		put_name(w, &q->u.link.name);
		break;
	case LW_OP_MDS_SYMLINK:
		lw_wr_put(w, &q->u.symlink.f, sizeof(q->u.symlink.f));
		put_name(w, &q->u.symlink.name);
		lw_wr_put(w, q->u.symlink.target, q->u.symlink.f.targetlen);
		break;
	case LW_OP_MDS_READDIR: lw_wr_put(w, &q->u.readdir, sizeof(q->u.readdir)); break;
	case LW_OP_MDS_GETXATTR:
	case LW_OP_MDS_REMOVEXATTR:
	case LW_OP_MDS_SETXATTR:
	case LW_OP_MDS_LISTXATTR:
		lw_wr_put(w, &q->u.xattr.f, sizeof(q->u.xattr.f));
		if (q->op != LW_OP_MDS_LISTXATTR)
			put_name(w, &q->u.xattr.name);
		if (q->op == LW_OP_MDS_SETXATTR)
			lw_wr_put(w, q->u.xattr.value, q->u.xattr.f.size);
		break;
	case LW_OP_MDS_OPEN: lw_wr_put(w, &q->u.open, sizeof(q->u.open)); break;
	case LW_OP_MDS_ACCESS: lw_wr_put(w, &q->u.access, sizeof(q->u.access)); break;
	case LW_OP_MDS_LOCK: lw_wr_put(w, &q->u.lock, sizeof(q->u.lock)); break;
	case LW_OP_MDS_CLOSE:
	case LW_OP_MDS_SIZE_UPDATE:
		lw_wr_put(w, &q->u.close, sizeof(q->u.close));
		if (q->u.close.flags & LW_CL_DOM) {
			size_t pos = 0;

			for (uint32_t i = 0; i < q->u.close.dom_parts; i++) {
				struct lw_dom_part part;
				const void *data;

				lw_dom_part_at(q, &pos, &part, &data);
				lw_wr_put(w, &part, sizeof(part));
				lw_wr_put(w, data, part.len);
			}
		}
		break;
	case LW_OP_MDS_SETLAYOUT:
		lw_wr_put(w, &q->u.setlayout.f, sizeof(q->u.setlayout.f));
		put_layout(w, &q->u.setlayout.layout);
		break;
	case LW_OP_MDS_OST_REGISTER:
	case LW_OP_MDS_OST_REPLACE: lw_wr_put(w, &q->u.ost_register, sizeof(q->u.ost_register)); break;
	case LW_OP_MDS_OST_REMOVE: lw_wr_put(w, &q->u.ost_remove, sizeof(q->u.ost_remove)); break;
	case LW_OP_MDS_OST_ADMIN: lw_wr_put(w, &q->u.ost_admin, sizeof(q->u.ost_admin)); break;
	case LW_OP_MDS_POOL: lw_wr_put(w, &q->u.pool, sizeof(q->u.pool)); break;
	case LW_OP_MDS_SWAP_LAYOUTS: lw_wr_put(w, &q->u.swap, sizeof(q->u.swap)); break;
	case LW_OP_MDS_WALK:
		lw_wr_put(w, &q->u.walk.f, sizeof(q->u.walk.f));
		lw_wr_put(w, q->u.walk.path, q->u.walk.f.pathlen);
		break;
	case LW_OP_MDS_OST_HEARTBEAT:
		lw_wr_put(w, &q->u.heartbeat.f, sizeof(q->u.heartbeat.f));
		lw_wr_put(w, q->u.heartbeat.ents,
			  (size_t)q->u.heartbeat.f.count * sizeof(struct lw_ost_heartbeat_ent));
		break;
	case LW_OP_MDS_SYNC: lw_wr_put(w, &q->u.sync, sizeof(q->u.sync)); break;
	case LW_OP_MDS_INOS: lw_wr_put(w, &q->u.inos, sizeof(q->u.inos)); break;
	case LW_OP_MDS_MIRROR:
		lw_wr_put(w, &q->u.mirror.f, sizeof(q->u.mirror.f));
		lw_wr_put(w, q->u.mirror.objs, (size_t)q->u.mirror.f.count * sizeof(struct lw_ostobj));
		break;
	case LW_OP_MDS_LEASE:
		lw_wr_put(w, &q->u.lease.f, sizeof(q->u.lease.f));
		lw_wr_put(w, q->u.lease.leases, (size_t)q->u.lease.f.count * sizeof(struct lw_lease));
		break;
	case LW_OP_MDS_REPLAY:
		lw_wr_put(w, &q->u.replay.f, sizeof(q->u.replay.f));
		if (q->u.replay.f.flags & LW_RP_DONE)
			break;
		lw_wr_put(w, q->u.replay.vers, (size_t)q->u.replay.f.nvers * sizeof(struct lw_obj_version));
		lw_wr_put(w, q->u.replay.body, q->u.replay.f.body_len);
		lw_wr_put(w, q->u.replay.reply, q->u.replay.f.reply_len);
		break;
	default:
		break;
	}
}

/* The shortest body that holds the cred prefix and the fixed struct; SIZE_MAX for a bad cred. */
static size_t fixed_part(uint16_t op, const uint8_t *body, size_t len)
{
	size_t n = fixed_size(op);

	if (has_cred(op)) {
		struct lw_cred c;

		if (len < sizeof(c))
			return sizeof(c) + n;
		memcpy(&c, body, sizeof(c));
		if (c.ngroups > LOOM_MAX_GROUPS || c.pad != 0)
			return SIZE_MAX;
		n += sizeof(c) + c.ngroups * sizeof(uint32_t);
	}
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lw_mds_req q, again;
	struct body b;
	uint16_t op;
	size_t fixed;
	int rc;

	if (size < 2 || size - 2 > LW_MAX_BODY)
		return 0;
	op = (uint16_t)(data[0] | data[1] << 8);
	b.p = data + 2;
	b.len = (uint32_t)(size - 2);

	rc = lw_mds_req_decode(op, b.p, b.len, &q);
	FUZZ_CHECK(rc == 0 || rc == -EPROTO || rc == -EOPNOTSUPP || rc == -ENAMETOOLONG ||
		   rc == -EINVAL || rc == -ENOENT || rc == -ERANGE || rc == -E2BIG);
	FUZZ_CHECK(q.op == op);
	if (is_foreign_op(op))
		FUZZ_CHECK(rc == -EOPNOTSUPP);
	if (is_mds_op(op) || op == LW_OP_PING || is_param_op(op))
		FUZZ_CHECK(rc != -EOPNOTSUPP);
	if (rc == -EOPNOTSUPP)
		return 0;
	if (is_param_op(op)) {
		FUZZ_CHECK(rc == 0 || rc == -EPROTO);
		if (rc == 0)
			FUZZ_CHECK(b.len == sizeof(struct lw_param_req) && lw_param_req_check(&q.u.param) == 0 &&
				   memchr(q.u.param.name, '\0', sizeof(q.u.param.name)) && q.u.param.name[0]);
		return 0;
	}

	fixed = fixed_part(op, b.p, b.len);
	if (b.len < fixed)
		FUZZ_CHECK(rc == -EPROTO);

	/* The same bytes always decode the same way. */
	FUZZ_CHECK(lw_mds_req_decode(op, b.p, b.len, &again) == rc);
	if (rc)
		return 0;

	/* An opcode added to the table after this driver: add it to fixed_size() and encode(). */
	if (!fixed_size(op) && op != LW_OP_PING && op != LW_OP_MDS_STATFS && op != LW_OP_MDS_OST_TABLE)
		return 0;
	check_contents(&q, &b);
	{
		uint8_t *buf = malloc(b.len + 1);
		struct lw_wr w;

		FUZZ_CHECK(buf != NULL);
		lw_wr_init(&w, buf, b.len + 1);
		encode(&q, &w);
		FUZZ_CHECK(w.err == 0);
		FUZZ_CHECK(w.len == b.len);
		FUZZ_CHECK(!memcmp(buf, b.p, b.len));
		free(buf);
	}
	return 0;
}
