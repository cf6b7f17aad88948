/*
 * Encoding and bounds-checked decoding of Loom frames and bodies.
 *
 * Readers (struct lw_rd) never read past the end of their buffer: every call checks the length
 * first, and the first failure sticks (later calls return NULL/0), so a decoder can read a whole
 * message and test once, with lw_rd_done(), that it was well formed and fully consumed.
 */
#ifndef LOOM_PROTO_CODEC_H
#define LOOM_PROTO_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/wire.h"

/* ---- the opcode table (ops.def), as data ---- */

/* The servers of an opcode. */
/* CLI: a server sends it to a client, unasked (LW_F_NOTIFY), and no server serves it. */
enum lw_op_server { LW_SRV_ANY, LW_SRV_MDS, LW_SRV_OSS, LW_SRV_CLI };

/* What a resend gets (see ops.def). */
enum lw_op_resend { LW_RESEND_READ, LW_RESEND_CACHED, LW_RESEND_HANDLE, LW_RESEND_REPEATS };

#define LW_OPF_CRED     0x01u /* the body starts with a loom_cred */
#define LW_OPF_MDT      0x02u /* it changes the MDT (a write transaction) */
#define LW_OPF_BULK_IN  0x04u /* the request carries bulk */
#define LW_OPF_BULK_OUT 0x08u /* the reply carries bulk */
#define LW_OPF_OBJ      0x10u /* (OSS) it names one object: objid 0 is -EINVAL */
#define LW_OPF_ADMIN    0x20u /* only the file system key may send it (a node key: -EPERM) */
#define LW_OPF_WRITES   0x40u /* it changes the file system (a read-only node: -EROFS) */
#define LW_OPF_REPLAY   0x80u /* answered before its commit: the client keeps it for a replay */
#define LW_OPF_NS       0x100u /* it reads or changes inodes: it waits while the MDS awaits replays */
#define LW_OPF_LEASE    0x200u /* its reply may grant a lease on the directory it names */
#define LW_OPF_ENTRIES  0x400u /* it changes the entries of the directories it names: their
				* leases held by other clients are recalled first */

struct lw_op_info {
	const char *name;     /* "MDS_LOOKUP" */
	uint16_t opcode;
	uint8_t server;       /* enum lw_op_server */
	uint8_t resend;       /* enum lw_op_resend */
	uint32_t flags;       /* LW_OPF_* */
	const char *request;  /* the body's form, as ops.def names it */
	const char *reply;    /* the reply's fixed struct without "lw_", or "none" */
};

/* The number of rows of ops.def: LW_OP_ROWS. */
enum lw_op_rows {
#define LW_OP(name, value, server, resend, flags, req, rep, handler, net) LW_OP_ROW_##name,
#include "proto/ops.def"
#undef LW_OP
	LW_OP_ROWS
};

/* GET_PARAM/SET_PARAM's body: its strings terminated, the name not empty, no flags, cap within
 * LW_MAX_BULK: 0 or -EPROTO. _decode also checks the length and copies it out. */
int lw_param_req_check(const struct lw_param_req *p);
int lw_param_req_decode(const void *body, uint32_t len, struct lw_param_req *out);

/* The row of an opcode, or NULL for one that no server knows. */
const struct lw_op_info *lw_op_info(uint16_t opcode);
/* Its index in the table (0 .. LW_OP_ROWS - 1; counters per opcode), or -1. */
int lw_op_row(uint16_t opcode);
/* Its name for statistics, as Lustre's stats files name operations: "lookup" for MDS_LOOKUP,
 * "read" for OST_READ ("" for an unknown opcode). */
const char *lw_op_stat_name(uint16_t opcode);
/* Every row, in the table's order; *n gets their number. */
const struct lw_op_info *lw_op_table(size_t *n);
/* The row's flags (LW_OPF_*), 0 for an unknown opcode. */
uint32_t lw_op_flags(uint16_t opcode);
/* Whether a request with this opcode may carry bulk to `server` (LW_SRV_MDS or LW_SRV_OSS): its
 * row is that server's (or both's) and has LW_OPF_BULK_IN. */
bool lw_op_takes_bulk(uint16_t opcode, int server);

/* ---- cursors ---- */

struct lw_rd {
	const uint8_t *p;
	const uint8_t *end;
	int err; /* 0, or the first negative errno met */
};

void lw_rd_init(struct lw_rd *r, const void *buf, size_t len);
/* Copies n bytes to dst (which may be any alignment); on a short buffer zeroes dst, sets -EPROTO. */
void lw_rd_fixed(struct lw_rd *r, void *dst, size_t n);
/* Returns a pointer to the next n bytes (byte-aligned; copy before reading multi-byte fields). */
const uint8_t *lw_rd_bytes(struct lw_rd *r, size_t n);
/* Skips zero padding up to the next multiple of 8 from the start `base`. */
void lw_rd_align8(struct lw_rd *r, const void *base);
size_t lw_rd_left(const struct lw_rd *r);
/* 0 if no error and every byte was consumed; the sticking error, or -EPROTO for trailing bytes. */
int lw_rd_done(const struct lw_rd *r);

/* A path component: 1..LOOM_NAME_MAX bytes, no '/', no NUL.
 * Errors: -ENAMETOOLONG (too long), -EINVAL ('/' or NUL inside), -ENOENT (empty). */
int lw_name_check(const char *s, size_t len);
/* An xattr name: 1..LOOM_XATTR_NAME_MAX bytes without NUL. -ERANGE if too long, -EINVAL else. */
int lw_xattr_name_check(const char *s, size_t len);

struct lw_wr {
	uint8_t *buf;
	size_t len;
	size_t cap;
	int err; /* -EMSGSIZE once something did not fit */
};

void lw_wr_init(struct lw_wr *w, void *buf, size_t cap);
void lw_wr_put(struct lw_wr *w, const void *p, size_t n);
/* Reserves n zeroed bytes and returns them, or NULL (and err set) when they do not fit. */
void *lw_wr_reserve(struct lw_wr *w, size_t n);
void lw_wr_pad8(struct lw_wr *w);

/* ---- frames ---- */

/* Fills a header and computes hdr_crc over it and the body. */
void lw_hdr_fill(struct lw_hdr *h, uint16_t opcode, uint32_t flags, int32_t status, uint64_t req_id,
		 const void *body, uint32_t body_len, uint32_t bulk_len, uint32_t bulk_crc);
/* Checks a received header: magic, version within [LW_VERSION_MIN, LW_VERSION], length limits,
 * no unknown flag, no status on a request. 0 or -EPROTO. */
int lw_hdr_check(const struct lw_hdr *h);
/* A header of Loom's magic whose version is not in [LW_VERSION_MIN, LW_VERSION]: a peer of an
 * incompatible build (its other fields are not to be trusted). */
bool lw_hdr_version_foreign(const struct lw_hdr *h);
/* The refusal a server sends to such a peer (struct lw_version_refusal): the header for `to` and
 * the body, ready to send. */
void lw_version_refusal_fill(const struct lw_hdr *to, struct lw_hdr *h, struct lw_version_refusal *body);
/* Whether h (with its body, body_len bytes, read after it) is a server's version refusal; if so,
 * *out is its body with release NUL-terminated. */
bool lw_version_refusal_read(const struct lw_hdr *h, const void *body, struct lw_version_refusal *out);
/* Checks hdr_crc against the header and its body: 0 or -EBADMSG. */
int lw_hdr_crc_check(const struct lw_hdr *h, const void *body);

/* ---- the MDS's reply prefix (wire.h, struct lw_mds_rep_prefix) ---- */

/* Whether replies to this opcode start with the prefix: the MDS rows of ops.def. */
bool lw_op_mds_prefixed(uint16_t opcode);
/* Takes the prefix off a reply body of *len bytes: *pre and vers[0 .. pre->nvers) get it, the
 * rest moves to the front and *len shrinks. An empty body (an error the frame layer answered)
 * has none: all zeros. -EPROTO for a malformed one. */
/* An MDS_RECALL's body: 0 with *count leases at *leases (unaligned lw_lease), or -EPROTO. */
int lw_recall_decode(const void *body, uint32_t len, const uint8_t **leases, uint32_t *count,
		     uint32_t *flags);
int lw_mds_prefix_take(void *body, uint32_t *len, struct lw_mds_rep_prefix *pre,
		       struct lw_obj_version vers[LW_MAX_VERS]);

/* Linux errno values are the wire errnos. These map anything a peer might send that Linux does
 * not define (or a positive value) to EIO, so a corrupt status cannot become a success. */
int32_t lw_errno_to_wire(int err);
int lw_errno_from_wire(int32_t status);

/* ---- MDS requests, decoded ---- */

struct lw_name {
	const char *s; /* points into the body; not NUL-terminated */
	uint16_t len;
};

/* A request body decoded and validated: every length checked, every name a valid component,
 * every layout well formed. Pointers point into the body, which must outlive this. */
struct lw_mds_req {
	uint16_t op;
	struct loom_cred cred; /* zero for the requests without a cred prefix */
	union {
		struct lw_connect_req connect;
		struct lw_ino_req ino; /* GETATTR, READLINK, GETLAYOUT, DOM_READ */
		struct lw_sync_req sync;
		struct lw_inos_req inos;
		struct {
			struct lw_lease_req f;
			const uint8_t *leases; /* f.count lw_lease (unaligned) */
		} lease;
		struct {
			struct lw_name_req f;
			struct lw_name name;
		} name; /* LOOKUP, UNLINK, RMDIR */
		struct lw_setattr setattr;
		struct {
			struct lw_create_req f;
			struct lw_name name;
			uint64_t ino;        /* LW_CR_INO's, else 0 */
			bool has_layout;
			struct lw_layout layout;
		} create;
		struct {
			struct lw_mkdir_req f;
			struct lw_name name;
		} mkdir;
		struct {
			struct lw_rename_req f;
			struct lw_name src;
			struct lw_name dst;
		} rename;
		struct {
			struct lw_link_req f;
			struct lw_name name;
		} link;
		struct {
			struct lw_symlink_req f;
			struct lw_name name;
			const char *target;
		} symlink;
		struct lw_readdir_req readdir;
		struct {
			struct lw_xattr_req f;
			struct lw_name name; /* an xattr name (may hold '/'); len 0 for LISTXATTR */
			const void *value;   /* SETXATTR: f.size bytes */
		} xattr;
		struct lw_open_req open;
		struct lw_access_req access;
		struct lw_lock_req lock;
		struct lw_close_req close; /* CLOSE, SIZE_UPDATE */
		struct {
			struct lw_setlayout_req f;
			struct lw_layout layout;
		} setlayout;
		struct lw_ost_register_req ost_register;
		struct lw_ost_addr ost_addr;
		struct lw_repl_pull_req repl_pull;
		struct lw_repl_copy_req repl_copy;
		struct lw_param_req param;
		struct lw_ost_admin_req ost_admin;
		struct lw_ost_remove_req ost_remove;
		struct lw_pool_req pool;
		struct lw_nodemap_req nodemap;
		struct lw_swap_req swap;
		struct {
			struct lw_mirror_req f;
			const uint8_t *objs; /* f.count struct lw_ostobj (unaligned) */
		} mirror;
		struct {
			struct lw_walk_req f;
			const char *path; /* f.pathlen bytes, not NUL-terminated, no NUL in them */
		} walk;
		struct {
			struct lw_replay_req f;
			const uint8_t *vers;   /* f.nvers struct lw_obj_version (unaligned) */
			const uint8_t *body;   /* f.body_len bytes */
			const uint8_t *reply;  /* f.reply_len bytes */
		} replay;
		struct {
			struct lw_ost_heartbeat_req f;
			const uint8_t *ents; /* f.count lw_ost_heartbeat_ent; read with lw_heartbeat_ent() */
		} heartbeat;
	} u;
	/* CLOSE and SIZE_UPDATE with LW_CL_DOM: u.close.dom_parts parts of Data-on-MDT bytes to
	 * write, checked (ascending, disjoint, none empty, each within LOOM_DOM_MAX); read them
	 * with lw_dom_part_at(). */
	const uint8_t *dom;
};

/* The Data-on-MDT part that starts at *pos bytes into req->dom (0 for the first); *pos moves
 * to the next. Only for a decoded request, and at most u.close.dom_parts times. */
void lw_dom_part_at(const struct lw_mds_req *req, size_t *pos, struct lw_dom_part *part,
		    const void **data);

/* Decodes the body of an MDS request. 0, or a negative errno to answer with: -EPROTO for a
 * malformed body (too short for its fixed part, trailing bytes, bad cred), -EOPNOTSUPP for an
 * opcode the MDS does not serve, and for a well-formed body with bad contents the errno a kernel
 * gives: -ENAMETOOLONG, -EINVAL ('/' or NUL in a name, unknown flag bits, bad layout fields),
 * -ENOENT (empty name or symlink target), -ERANGE (xattr name too long), -E2BIG (xattr value
 * over LOOM_XATTR_SIZE_MAX). Contents are checked in order, so the first bad field decides. */
int lw_mds_req_decode(uint16_t op, const void *body, uint32_t len, struct lw_mds_req *out);
void lw_heartbeat_ent(const struct lw_mds_req *req, uint32_t i, struct lw_ost_heartbeat_ent *out);

/* Request layouts (nobjs 0): checks magic, version, pattern, stripe size (0 or a multiple of
 * LOOM_STRIPE_UNIT), count (-1..LOOM_MAX_STRIPES), offset (>= -1) and the pool name. */
int lw_layout_req_check(const struct lw_layout *l);

/* Writes the cred prefix of an MDS request. */
void lw_put_cred(struct lw_wr *w, const struct loom_cred *cred);

/* ---- replies and stored layouts, decoded ---- */

/* Reads lw_layout + objects from r into a malloc'd struct loom_layout (caller frees). Checks the
 * fixed part as lw_layout_req_check does and that nobjs <= LOOM_MAX_STRIPES and fits in r. */
int lw_layout_decode(struct lw_rd *r, struct loom_layout **out);
/* Appends a layout's wire image (fixed part + nobjs objects). */
void lw_layout_encode(struct lw_wr *w, const struct loom_layout *l);
/* The wire image's size for nobjs objects. */
static inline size_t lw_layout_size(uint32_t nobjs)
{
	return sizeof(struct lw_layout) + (size_t)nobjs * sizeof(struct lw_ostobj);
}

/* One readdir entry from r. Returns 0, or -EPROTO if the entry is malformed or its name is not a
 * valid component. `name` points into the buffer and is not NUL-terminated. */
int lw_readdir_next(struct lw_rd *r, const void *base, bool plus, struct lw_dirent *de,
		    const char **name, struct lw_attr *attr);
/* Appends an entry; returns 0 or -EMSGSIZE (nothing appended) when it does not fit. */
int lw_readdir_put(struct lw_wr *w, const struct lw_dirent *de, const char *name,
		   const struct lw_attr *attr);

/* The largest object (and file) offset a request may name: 2^62. */
#define LW_MAX_OFFSET (1ull << 62)

/* Decodes an OSS request body: exactly one lw_ost_io. -EOPNOTSUPP for an opcode the OSS does not
 * serve, -EPROTO for a malformed body (or flags set where they are reserved), -EFBIG for an
 * offset (or a fallocate range's end) past LW_MAX_OFFSET, -EINVAL for a bad OST_SCRUB command,
 * OST_SEEK whence or empty OST_FALLOCATE range, and -EOPNOTSUPP for a fallocate mode the OSS does
 * not do (lw_falloc_mode_check). */
int lw_ost_req_decode(uint16_t op, const void *body, uint32_t len, struct lw_ost_io *out);
/* The fallocate(2) modes OST_FALLOCATE does (0, KEEP_SIZE, PUNCH_HOLE|KEEP_SIZE, ZERO_RANGE with or
 * without KEEP_SIZE): 0, or -EOPNOTSUPP as fallocate(2) answers any other. */
int lw_falloc_mode_check(uint32_t mode);

#endif
