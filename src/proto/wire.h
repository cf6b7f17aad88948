/*
 * The Loom wire protocol: every struct that crosses a socket, and the opcode table.
 *
 * Rules (see docs/protocol.md, which describes each message in prose):
 *  - Fixed-width little-endian fields, explicit padding, 64-bit fields 8-byte aligned, no pointers.
 *    Every struct's size is pinned by a _Static_assert below.
 *  - A released struct never changes. A new field means a new struct (or a new opcode) and a
 *    protocol version bump, recorded in the changelog of docs/protocol.md.
 *  - A frame is: struct lw_hdr, then body_len bytes of body, then bulk_len bytes of bulk data,
 *    then, on a connection that authenticated, a 16-byte tag (see "Sealed frames" below).
 *    The body of a request or reply is one fixed struct, possibly followed by a variable tail
 *    (names, layouts, entries) whose lengths the fixed struct gives.
 *  - Bodies are decoded only by src/proto/codec*.c, which check every length first; handlers
 *    never see unvalidated bytes.
 *
 * Loom runs on little-endian hosts only (x86_64, aarch64), so these structs are the wire image;
 * a big-endian port adds byte swapping in codec*.c and nowhere else.
 */
#ifndef LOOM_PROTO_WIRE_H
#define LOOM_PROTO_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "loom/types.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "Loom's wire image assumes a little-endian host");

#define LW_MAGIC         0x4D4F4F4Cu /* "LOOM" in memory order */
#define LW_VERSION       10u         /* the version this build speaks (10: job ids) */
#define LW_VERSION_MIN   9u          /* the oldest it still accepts (9: mirrored layouts, which a
                                      * peer of 8 cannot read; 8: creates sent behind with inode
                                      * numbers handed out ahead; 7: inode leases) */
#define LW_MAX_BODY      ((1u << 20) + (64u << 10)) /* largest body accepted: OST table,
                                     * readdir pages, a 1 MiB Data-on-MDT part with its layout */
#define LW_MAX_BULK      (16u << 20) /* largest bulk accepted in one frame */
#define LW_DESTROY_MANY_MAX 256u    /* objects in one OST_DESTROY_MANY */
#define LW_RPC_BULK      (4u << 20)  /* bulk size clients use, as Lustre's 4 MiB RPCs */
#define LW_DEFAULT_MDS_PORT 9900


/* ---------------------------------------------------------------------------------------------
 * Opcodes: src/proto/ops.def holds one row per opcode with everything about it (server, resend
 * policy, flags, body forms, handler). The enum, the names, the classifiers, the decoders and
 * the servers' dispatch are all generated from it.
 */
enum lw_opcode {
#define LW_OP(name, value, server, resend, flags, req, rep, handler, net) LW_OP_##name = value,
#include "proto/ops.def"
#undef LW_OP
};

/* `--version`'s line: "loom-mds 0.1.0 (protocol 4, accepts 4 to 4)". */
void lw_print_version(const char *prog);

/* "MDS_LOOKUP" for LW_OP_MDS_LOOKUP, "UNKNOWN" otherwise. */
const char *lw_op_name(uint16_t opcode);

/* ---------------------------------------------------------------------------------------------
 * Frame header.
 */
#define LW_F_REPLY  0x1u /* set on every reply */
#define LW_F_RESENT 0x2u /* a request sent again after a reconnection: it may have been applied */
#define LW_F_ENCRYPT 0x4u /* AUTH_* only (below): encryption required, asked for, granted */
#define LW_F_NOTIFY 0x8u  /* a server's frame a client did not ask for (ops.def's CLI rows):
			   * req_id is the server's own count, and nothing answers it; a server
			   * closes a connection that sends one */
#define LW_F_JOBID  0x10u /* (protocol 10) a request whose body starts with the job id of the
			   * process it is for (LW_JOBID_LEN bytes, NUL-padded, printable ASCII
			   * without spaces), as Lustre's jobstats: the server takes it off before
			   * the request is decoded, and counts the request to that job. Sent only
			   * to a peer that answered with version 10 or later. */
#define LW_JOBID_LEN 32u  /* with the NUL, as Lustre's LUSTRE_JOBID_SIZE */

struct lw_hdr {
	uint32_t magic;    /* LW_MAGIC */
	uint16_t version;  /* the sender's LW_VERSION; accepted within [LW_VERSION_MIN, LW_VERSION] */
	uint16_t opcode;   /* enum lw_opcode; a reply echoes the request's */
	uint32_t flags;    /* LW_F_* */
	int32_t  status;   /* replies: 0 or a negative wire errno (Linux values, see lw_errno_*) */
	uint64_t req_id;   /* chosen by the sender of the request, echoed in the reply */
	uint32_t body_len; /* <= LW_MAX_BODY */
	uint32_t bulk_len; /* <= LW_MAX_BULK */
	uint32_t bulk_crc; /* crc32c of the bulk bytes; 0 when bulk_len is 0 */
	uint32_t hdr_crc;  /* crc32c of the header with this field zero, then of the body */
};
_Static_assert(sizeof(struct lw_hdr) == 40, "lw_hdr");
_Static_assert(offsetof(struct lw_hdr, req_id) == 16, "lw_hdr.req_id");
_Static_assert(offsetof(struct lw_hdr, hdr_crc) == 36, "lw_hdr.hdr_crc");

/*
 * Transaction numbers (protocol 5). The body of every reply from the MDS to an MDS row of ops.def
 * starts with this prefix, then `nvers` struct lw_obj_version, then the reply ops.def names (an
 * error reply has the prefix alone). The MDS may answer a change before it is on its disk:
 * `transno` numbers the change, and `last_committed` says how far the MDT's disk has come. A
 * client keeps each request whose transno is above the last_committed it has seen, and replays
 * it after an MDS restart (MDS_REPLAY, below); docs/protocol.md, "Transactions and replay".
 */
#define LW_MAX_VERS 8u /* pre-versions one change reports at most */
struct lw_mds_rep_prefix {
	uint64_t transno;        /* this change's number; 0: it changed nothing (or failed) */
	uint64_t last_committed; /* every change numbered up to this one is on the MDT's disk */
	uint32_t nvers;          /* <= LW_MAX_VERS; 0 when transno is 0 */
	uint32_t flags;          /* LW_RPF_* */
	/* A lease granted with this reply (ino and gen both 0: none): until the client gives it
	 * back (MDS_LEASE) or an MDS_RECALL names it (ino, and a gen at least this one), no other
	 * client changes what it covers without the MDS recalling it first: a directory's entries,
	 * the names it has and those it has not. With LW_RPF_LEASES_LOST, ino is 0 and gen the
	 * newest grant the client lost: it holds none up to it. */
	uint64_t lease_ino;
	uint64_t lease_gen;
	/* How long after a reply arrived the client may go on trusting its leases without hearing
	 * from the MDS again (half the MDS's --lease-timeout): a recall sent since then may not
	 * have reached it, and the MDS takes a lease back that long after its recall. */
	uint32_t lease_trust_ms;
	/* Protocol 10: the MDS's epoch, its coordinator's fencing token (a replicated MDT, 0
	 * otherwise): an MDS that took over answers with a higher one than the MDS it deposed, and
	 * a client that heard a higher one takes no answer of a lower one (a deposed MDS's). */
	uint32_t epoch;
};
_Static_assert(sizeof(struct lw_mds_rep_prefix) == 48, "lw_mds_rep_prefix");

#define LW_RPF_RECOVERING  0x1u /* the MDS is replaying clients' changes after a restart */
#define LW_RPF_LEASES_LOST 0x2u /* this client's leases were taken back (it did not give them
				 * back in time, or its session is new): it holds none now */
#define LW_RPF_LEASE_EXCL  0x4u /* protocol 8: the lease granted is exclusive: nobody else holds
				 * one on the directory, and until it comes back others' lookups
				 * and listings of it wait for it too (the holder may make files
				 * there and tell the MDS behind: MDS_CREATE's LW_CR_INO) */

/* An inode the change altered, and its version before (the transno of the change before it; 0:
 * the inode did not exist). A replay runs only on inodes still at these versions (VBR). */
struct lw_obj_version {
	uint64_t ino;
	uint64_t version;
};
_Static_assert(sizeof(struct lw_obj_version) == 16, "lw_obj_version");

/*
 * Leases (protocol 5). MDS_LEASE: the client gives back count leases (lw_lease_req, then count
 * lw_lease); reply empty. MDS_RECALL, sent by the MDS to a client with LW_F_NOTIFY: give these
 * back (lw_recall, then count lw_lease); the client answers with MDS_LEASE once it has dropped
 * what it cached under them.
 */
struct lw_lease {
	uint64_t ino;
	uint64_t gen;       /* the grant's (a recall names the newest it takes back) */
};
_Static_assert(sizeof(struct lw_lease) == 16, "lw_lease");
#define LW_LEASES_MAX 4096u /* in one MDS_LEASE or MDS_RECALL */
struct lw_lease_req {
	uint32_t count;     /* 1..LW_LEASES_MAX; 0 with LW_LEASE_ALL */
	uint32_t flags;     /* LW_LEASE_ALL or 0 */
};
/* Protocol 8, LW_LEASE_ALL (count 0, no leases follow): the session gives back every lease it
 * holds, on directories and files, and trusts none from here (a client going away): the MDS
 * ends them without the fence it keeps after a session that just went. */
#define LW_LEASE_ALL 0x1u
_Static_assert(sizeof(struct lw_lease_req) == 8, "lw_lease_req");
/* Protocol 7, LW_RC_ENDED: the MDS ended these leases already (the holder's own change): the
 * client drops what it kept and gives nothing back. */
#define LW_RC_ENDED 0x1u
struct lw_recall {
	uint32_t count;     /* 1..LW_LEASES_MAX */
	uint32_t flags;     /* protocol 7 (was pad, 0): LW_RC_* */
};
_Static_assert(sizeof(struct lw_recall) == 8, "lw_recall");

/*
 * MDS_SYNC (protocol 5): commits every change the MDS answered so far, then answers (empty).
 * LW_SYNC_BYE: this client goes once answered (loom_disconnect): its session ends with its
 * connection, and the MDT stops listing it among the clients a restart waits for, in the same
 * commit. A client that later sends a change is listed again.
 */
#define LW_SYNC_BYE 0x1u
struct lw_sync_req {
	uint32_t flags; /* LW_SYNC_* */
	uint32_t pad;   /* 0 */
};
_Static_assert(sizeof(struct lw_sync_req) == 8, "lw_sync_req");

/*
 * MDS_REPLAY (protocol 5): a change the MDS answered and then lost in a restart, sent again by its
 * client in the connection's hello, in transno order. Body: lw_replay_req, nvers lw_obj_version
 * (what the first reply's prefix named), the request's own body (body_len bytes), then its first
 * reply's body without the prefix (reply_len bytes: the inode and objects it made, which the
 * replay makes again). With LW_RP_DONE alone (every other field 0): this client has no more.
 * Reply empty: 0 (redone; or it needs no redoing: committed before the crash, or made since),
 * or why it was refused: -EREMCHG (an inode it changes is not at the version it was: something it
 * depended on was lost), -ETIMEDOUT (its client came back after the recovery window: lost).
 */
struct lw_replay_req {
	uint64_t transno;   /* the first reply's */
	uint64_t req_id;    /* the request's own (its reply cache key) */
	uint16_t opcode;    /* a row with LW_OPF_REPLAY */
	uint16_t flags;     /* LW_RP_* */
	uint32_t nvers;     /* <= LW_MAX_VERS */
	uint32_t body_len;
	uint32_t reply_len;
};
_Static_assert(sizeof(struct lw_replay_req) == 32, "lw_replay_req");
#define LW_RP_DONE 0x1u

/*
 * What a server answers, in the clear, to a first frame whose magic is Loom's but whose version it
 * does not speak, before it closes the connection: a header with the server's LW_VERSION, the
 * request's opcode and req_id, LW_F_REPLY, status -EPROTONOSUPPORT, and this body. The header and
 * this body keep their layout in every version, so that peers of any two versions can tell each
 * other which versions they speak (docs/operations.md, "Upgrades").
 */
struct lw_version_refusal {
	uint16_t version_min;  /* the oldest version the server accepts */
	uint16_t version_max;  /* the version it speaks (its LW_VERSION) */
	uint32_t pad;          /* zero */
	char     release[24];  /* the server's release ("0.1.0"), NUL-padded */
};
_Static_assert(sizeof(struct lw_version_refusal) == 32, "lw_version_refusal");

#include "proto/wire_auth.h"

/* ---------------------------------------------------------------------------------------------
 * Shared parts.
 */

/* Caller identity: the prefix of every MDS request body except PING, MDS_CONNECT and the two an
 * OSS sends (MDS_OST_REGISTER, MDS_OST_HEARTBEAT). Followed by ngroups uint32_t supplementary
 * group ids (ngroups <= LOOM_MAX_GROUPS). */
struct lw_cred {
	uint32_t uid;
	uint32_t gid;
	uint32_t ngroups;
	uint32_t pad;
};
_Static_assert(sizeof(struct lw_cred) == 16, "lw_cred");

/* Inode attributes as the MDS reports them. */
struct lw_attr {
	uint64_t ino;
	uint64_t gen;
	uint64_t size;
	uint64_t blocks;   /* 512-byte units */
	int64_t  atime;
	int64_t  mtime;
	int64_t  ctime;
	uint32_t atime_ns;
	uint32_t mtime_ns;
	uint32_t ctime_ns;
	uint32_t mode;     /* type and permission bits, as st_mode */
	uint32_t uid;
	uint32_t gid;
	uint32_t nlink;
	uint32_t rdev;
	uint32_t blksize;
	uint32_t flags;    /* LW_ATTR_F_* */
	/* Protocol 3. Clients compare these with what they cached (close-to-open), never with
	 * times, which utimes can set back. */
	uint64_t data_version; /* regular files: advanced by exactly one by every request that may
	                        * change the bytes or the size (a report of writes, a truncation, an
	                        * O_TRUNC open, a migration); never set back */
	uint64_t name_version; /* advanced by exactly one whenever a name of the inode comes or goes
	                        * (link, unlink, rename of it or over it) */
	uint32_t trunc_epoch;  /* regular files: truncations that cut objects so far. Writes and size
	                        * reports carry the epoch they were made in: a write older than its
	                        * object's last truncation is refused, a report older than the file's
	                        * does not grow it back (lw_ost_io, lw_close_req) */
	uint32_t pad;
};
_Static_assert(sizeof(struct lw_attr) == 120, "lw_attr");
/* The inode has no extended attributes (clients may then answer getxattr themselves, which
 * `ls -l` asks of every file). Unset means "may have some". */
#define LW_ATTR_F_NO_XATTRS 0x1u
/* In the attributes MDS_OPEN and MDS_CREATE (with LW_CR_OPEN) return: the file's objects hold no
 * bytes (all of it was within its Data-on-MDT part before the open), so an O_TRUNC needs no
 * OST_PUNCH. */
#define LW_ATTR_F_OBJECTS_EMPTY 0x2u

struct lw_statfs {
	uint64_t blocks;  /* in bsize units */
	uint64_t bfree;
	uint64_t bavail;
	uint64_t files;
	uint64_t ffree;
	uint32_t bsize;
	uint32_t namemax;
	uint32_t state;   /* LW_TGT_* flags */
	uint32_t pad;
};
_Static_assert(sizeof(struct lw_statfs) == 56, "lw_statfs");

#define LW_TGT_READONLY  0x1u
#define LW_TGT_NOCREATE  0x2u /* administratively excluded from new stripes */
#define LW_TGT_INACTIVE  0x4u /* not heard from: unreachable */
#define LW_TGT_DEACTIVATED 0x8u /* by an administrator (MDS_OST_ADMIN): no new stripes; kept by
                                 * the MDT across restarts and registrations */

/*
 * A layout: this fixed part, then nobjs struct lw_ostobj. The same bytes are stored in the MDT,
 * so this struct is also an on-disk format; `version` says how to read it.
 *
 * As a request (create with a layout, setstripe) nobjs is 0 and the fields are wishes:
 * stripe_size 0 = inherit, stripe_count 0 = inherit, -1 = every OST, stripe_offset -1 = the MDS
 * chooses, pool "" = none/inherit. As a reply for a file, every field is concrete and
 * nobjs == stripe_count. As a directory's default, nobjs is 0.
 */
#define LW_LAYOUT_MAGIC    0x0BD10BD0u
#define LW_LAYOUT_V1       1u /* 48 bytes: no dom_size (read as 0) */
#define LW_LAYOUT_V2       2u /* 56 bytes: dom_size */
#define LW_LAYOUT_V3       3u /* 56 bytes: mirror_count; written only for more than one copy, so
                               * that a plain layout's image stays version 2's */
#define LW_LAYOUT_V1_SIZE  48u
#define LW_PATTERN_RAID0   1u

#define LW_LAYOUT_F_DEFAULT   0x1u /* a directory's default layout, not a file's */
#define LW_LAYOUT_F_INHERITED 0x2u /* the directory has none of its own; this is the fs default */
#define LW_LAYOUT_F_WRITE_PENDING 0x4u /* LOOM_LAYOUT_WRITE_PENDING: a mirrored file's writers */

struct lw_layout {
	uint32_t magic;         /* LW_LAYOUT_MAGIC */
	uint16_t version;       /* LW_LAYOUT_V1 */
	uint16_t pattern;       /* LW_PATTERN_RAID0 */
	uint32_t stripe_size;   /* bytes, a multiple of LOOM_STRIPE_UNIT */
	int32_t  stripe_count;
	int32_t  stripe_offset; /* OST index of stripe 0, or -1 */
	uint32_t layout_gen;    /* bumped on every change of a file's layout */
	char     pool[16];      /* NUL-padded */
	uint32_t nobjs;
	uint32_t flags;         /* LW_LAYOUT_F_* */
	/* Version 2 from here. Data-on-MDT: bytes [0, dom_size) live on the MDS (0: none; in a
	 * request or directory default 0 is "inherit" and LOOM_DOM_NONE is "none"). */
	uint32_t dom_size;
	/* Version 3: copies (0 or 1: one; in a request or default 0 inherits). nobjs is
	 * mirror_count * stripe_count for a file, mirror by mirror. */
	uint16_t mirror_count;
	/* Version 3: erasure coding's parity objects (0: none; in a request or default 0
	 * inherits). A file with parity has one copy and nobjs == stripe_count + ec_parity. */
	uint16_t ec_parity;
};
_Static_assert(sizeof(struct lw_layout) == 56, "lw_layout");
_Static_assert(offsetof(struct lw_layout, dom_size) == LW_LAYOUT_V1_SIZE, "lw_layout v1 prefix");

#define LW_OBJ_STALE 0x1u /* LOOM_OBJ_STALE */
struct lw_ostobj {
	uint32_t ost_idx;
	uint32_t flags;         /* LW_OBJ_*: only in a mirrored layout */
	uint64_t objid;
};
_Static_assert(sizeof(struct lw_ostobj) == 16, "lw_ostobj");
_Static_assert(sizeof(struct lw_ostobj) == sizeof(struct loom_ostobj), "lw_ostobj is loom_ostobj's image");
_Static_assert(sizeof(((struct lw_layout *)0)->pool) == LOOM_POOL_NAME_MAX + 1, "pool name size");

/* ---------------------------------------------------------------------------------------------
 * MDS messages. "Request: X" lists the body after the lw_cred prefix. Names are not
 * NUL-terminated on the wire; their length is in the fixed struct.
 */

/* MDS_CONNECT. Request (no cred prefix): lw_connect_req. Reply: lw_connect_rep. */
#define LW_CLIENT_CLIENT 1u
#define LW_CLIENT_OSS    2u
struct lw_connect_req {
	uint32_t proto_version; /* LW_VERSION */
	uint32_t client_kind;   /* LW_CLIENT_* */
	char     fsname[16];    /* empty: any; else must match the MDS's */
	uint64_t client_uuid[2];
};
_Static_assert(sizeof(struct lw_connect_req) == 40, "lw_connect_req");

struct lw_connect_rep {
	uint64_t root_ino;
	uint64_t session_id;
	char     fsname[16];
	uint32_t max_bulk;
	uint32_t ost_table_gen;
};
_Static_assert(sizeof(struct lw_connect_rep) == 40, "lw_connect_rep");

/* MDS_GETATTR, MDS_READLINK, MDS_GETLAYOUT: request lw_ino_req.
 * Reply: GETATTR lw_attr; READLINK lw_blob_rep + target; GETLAYOUT lw_layout + objects. */
struct lw_ino_req {
	uint64_t ino;
};
_Static_assert(sizeof(struct lw_ino_req) == 8, "lw_ino_req");

/* MDS_LOOKUP, MDS_UNLINK, MDS_RMDIR: request lw_name_req + name.
 * Reply: LOOKUP lw_attr; UNLINK/RMDIR empty.
 * Protocol 7, MDS_UNLINK's LW_NM_UNLEASED (other bits, and any bit on LOOKUP and RMDIR: -EINVAL):
 * the client has no file open under an inode lease and opens none until this is answered, so an
 * inode lease it holds on the file need not come back before the unlink (its own: it is ended,
 * and told with MDS_RECALL before the reply). */
#define LW_NM_UNLEASED 0x1u
struct lw_name_req {
	uint64_t parent;
	uint16_t namelen;
	uint16_t flags;  /* protocol 7 (was pad, 0): LW_NM_* */
	uint16_t pad[2];
};
_Static_assert(sizeof(struct lw_name_req) == 16, "lw_name_req");

/* MDS_SETATTR: request lw_setattr. Reply lw_attr. */
#define LW_SA_MODE      0x001u
#define LW_SA_UID       0x002u
#define LW_SA_GID       0x004u
#define LW_SA_SIZE      0x008u
#define LW_SA_ATIME     0x010u
#define LW_SA_MTIME     0x020u
#define LW_SA_ATIME_NOW 0x040u
#define LW_SA_MTIME_NOW 0x080u
#define LW_SA_CTIME     0x100u
#define LW_SA_FH        0x200u /* the caller holds the file open for writing (ftruncate) */
#define LW_SA_KILLPRIV  0x400u /* a write by the caller: drop setuid/setgid as a write does */
#define LW_SA_ALL       0x7FFu
struct lw_setattr {
	uint64_t ino;
	uint32_t valid;   /* LW_SA_* */
	uint32_t mode;
	uint32_t uid;
	uint32_t gid;
	uint64_t size;
	int64_t  atime;
	int64_t  mtime;
	int64_t  ctime;
	uint32_t atime_ns;
	uint32_t mtime_ns;
	uint32_t ctime_ns;
	uint32_t pad;
};
_Static_assert(sizeof(struct lw_setattr) == 72, "lw_setattr");

/* MDS_CREATE: request lw_create_req + name [+ lw_layout with nobjs 0 if LW_CR_LAYOUT].
 * Also makes fifos, sockets and device nodes (S_IFMT in mode). With LW_CR_OPEN the new or
 * existing file is opened with open_flags as MDS_OPEN would.
 * Reply: lw_create_rep [+ lw_layout + objects for a regular file]. */
#define LW_CR_EXCL    0x1u /* O_EXCL: EEXIST if the name exists */
#define LW_CR_OPEN    0x2u /* open it as well, returning a handle */
#define LW_CR_LAYOUT  0x4u /* a layout request follows the name */
#define LW_CR_TMPFILE 0x8u /* O_TMPFILE: a regular file without a name in directory `parent`,
                            * unlinked from birth; needs LW_CR_OPEN and namelen 0. It lives
                            * while handles hold it: the last close (or the end of the session
                            * holding it) releases it with its objects */
#define LW_CR_INO     0x10u /* protocol 8: the file takes the inode number (a uint64_t after the
                             * name, before any layout) that MDS_INOS handed this client ahead:
                             * the client answered the create itself and sent it behind. -EINVAL
                             * for a number not handed to this client, or taken already; not with
                             * LW_CR_TMPFILE */
struct lw_create_req {
	uint64_t parent;
	uint32_t mode;
	uint32_t rdev;
	uint32_t flags;      /* LW_CR_* */
	uint32_t open_flags; /* O_* as on Linux, when LW_CR_OPEN */
	uint16_t namelen;
	uint16_t pad[3];
};
_Static_assert(sizeof(struct lw_create_req) == 32, "lw_create_req");

#define LW_CRR_CREATED 0x1u /* the file was created by this call (not found existing) */
struct lw_create_rep {
	struct lw_attr attr;
	uint64_t handle;     /* open handle, 0 if not opened */
	uint32_t flags;      /* LW_CRR_* */
	uint32_t has_layout;
};
_Static_assert(sizeof(struct lw_create_rep) == 136, "lw_create_rep");

/* MDS_INOS (protocol 8): hands the client `count` (1 to LW_INOS_MAX) inode numbers ahead, for
 * creates it answers itself (LW_CR_INO), replacing the range it had; committed before the answer,
 * and kept on the MDT with the client (a resend or a replay after a restart takes them too).
 * Reply: lw_inos_rep. */
#define LW_INOS_MAX 1024u
struct lw_inos_req {
	uint32_t count;
	uint32_t pad;       /* 0 */
};
_Static_assert(sizeof(struct lw_inos_req) == 8, "lw_inos_req");
struct lw_inos_rep {
	uint64_t first;     /* first .. first + count - 1 */
	uint32_t count;
	uint32_t pad;
};
_Static_assert(sizeof(struct lw_inos_rep) == 16, "lw_inos_rep");

/* MDS_MKDIR: request lw_mkdir_req + name. Reply lw_attr. */
struct lw_mkdir_req {
	uint64_t parent;
	uint32_t mode;
	uint16_t namelen;
	uint16_t flags;     /* LW_MK_* (protocol 6; before, a pad of 0) */
};
#define LW_MK_LEASE 0x1u /* grant a lease on the new directory (empty: its names are known) */
#define LW_MK_EXCL  0x2u /* with LW_MK_LEASE: exclusive (protocol 8), as LW_RD_EXCL */
_Static_assert(sizeof(struct lw_mkdir_req) == 16, "lw_mkdir_req");

/* MDS_RENAME: request lw_rename_req + old name + new name. Reply empty. */
#define LW_RENAME_NOREPLACE 0x1u /* RENAME_NOREPLACE */
#define LW_RENAME_EXCHANGE  0x2u /* RENAME_EXCHANGE */
struct lw_rename_req {
	uint64_t src_parent;
	uint64_t dst_parent;
	uint32_t flags;
	uint16_t src_namelen;
	uint16_t dst_namelen;
};
_Static_assert(sizeof(struct lw_rename_req) == 24, "lw_rename_req");

/* MDS_LINK: request lw_link_req + new name. Reply lw_attr (of the inode). */
struct lw_link_req {
	uint64_t ino;
	uint64_t new_parent;
	uint16_t namelen;
	uint16_t pad[3];
};
_Static_assert(sizeof(struct lw_link_req) == 24, "lw_link_req");

/* MDS_SYMLINK: request lw_symlink_req + name + target. Reply lw_attr. */
struct lw_symlink_req {
	uint64_t parent;
	uint16_t namelen;
	uint16_t pad;
	uint32_t targetlen;
};
_Static_assert(sizeof(struct lw_symlink_req) == 16, "lw_symlink_req");

/* A length-prefixed reply: READLINK (target), GETXATTR (value or size only), LISTXATTR. */
struct lw_blob_rep {
	uint32_t len;  /* bytes that follow, or for a size query the size */
	uint32_t pad;
};
_Static_assert(sizeof(struct lw_blob_rep) == 8, "lw_blob_rep");

/* MDS_READDIR: request lw_readdir_req. Reply lw_readdir_rep, then count entries, each
 * lw_dirent + name padded with zeros to a multiple of 8 [+ lw_attr with LW_RD_PLUS].
 * Cookies: 0 starts; each entry carries the cookie that resumes after it. "." and ".." come
 * first. An entry added while a reader walks the directory appears after every entry that was
 * there before; one removed is not returned later; the others are returned exactly once. */
#define LW_RD_PLUS 0x1u
#define LW_RD_LEASE 0x2u /* grant a lease on the directory (lw_mds_rep_prefix) if it can (protocol 5) */
#define LW_RD_EXCL  0x4u /* with LW_RD_LEASE: exclusive if nobody else holds one (protocol 8;
                          * LW_RPF_LEASE_EXCL says it is) */
struct lw_readdir_req {
	uint64_t ino;
	uint64_t cookie;
	uint32_t max_bytes; /* bytes of entries wanted; the MDS keeps it within [512, 128 KiB] */
	uint32_t flags;     /* LW_RD_* */
};
_Static_assert(sizeof(struct lw_readdir_req) == 24, "lw_readdir_req");

struct lw_readdir_rep {
	uint32_t count;
	uint32_t eof;
};
_Static_assert(sizeof(struct lw_readdir_rep) == 8, "lw_readdir_rep");

struct lw_dirent {
	uint64_t ino;
	uint64_t cookie;
	uint32_t type;    /* DT_* */
	uint16_t namelen;
	uint16_t pad;
};
_Static_assert(sizeof(struct lw_dirent) == 24, "lw_dirent");

/* MDS_STATFS: request empty (after cred). Reply lw_statfs_rep: the MDT's own figures and the
 * sum of the OSTs' (from their heartbeats), which is what statfs(2) on a mount reports. */
struct lw_statfs_rep {
	struct lw_statfs mdt;
	struct lw_statfs osts;
	uint32_t ost_count;
	uint32_t pad;
};
_Static_assert(sizeof(struct lw_statfs_rep) == 120, "lw_statfs_rep");

/* MDS_GETXATTR: request lw_xattr_req + name; size 0 asks for the value's size only.
 * MDS_SETXATTR: lw_xattr_req + name + value (size bytes). MDS_REMOVEXATTR: lw_xattr_req + name.
 * MDS_LISTXATTR: lw_xattr_req with namelen 0; reply the NUL-terminated names.
 * Replies: GET/LIST lw_blob_rep [+ bytes]; SET/REMOVE empty. */
#define LW_XATTR_CREATE  0x1u /* XATTR_CREATE */
#define LW_XATTR_REPLACE 0x2u /* XATTR_REPLACE */
struct lw_xattr_req {
	uint64_t ino;
	uint32_t size;
	uint32_t flags;
	uint16_t namelen;
	uint16_t pad[3];
};
_Static_assert(sizeof(struct lw_xattr_req) == 24, "lw_xattr_req");

/* MDS_ACCESS: request lw_access_req; reply empty. access(2): mask is R_OK|W_OK|X_OK (F_OK 0),
 * checked as an open or an exec would be. -EACCES when not allowed. */
struct lw_access_req {
	uint64_t ino;
	uint32_t mask;
	uint32_t pad;
};
_Static_assert(sizeof(struct lw_access_req) == 16, "lw_access_req");

/* MDS_LOCK: request lw_lock_req; reply lw_lock_rep. Byte-range (fcntl) and whole-file (flock)
 * locks, held in the MDS's memory so that every mount sees them. A lock belongs to its owner
 * (the client's lock owner id) in the client's session: it outlives a broken connection for the
 * recovery window (waits do not: the client sends them again), and is replayed by its client
 * after an MDS restart.
 *  - type F_RDLCK / F_WRLCK takes a lock, F_UNLCK releases [start, end] (end UINT64_MAX: to the
 *    end of the file); POSIX locks of one owner merge and split as fcntl(2) says.
 *  - LW_LK_TEST (F_GETLK): the reply describes a conflicting lock, or has type F_UNLCK.
 *  - Without LW_LK_WAIT a conflict is -EAGAIN at once; with it, the reply comes when the lock is
 *    granted, or -EINTR when the same owner sends LW_LK_CANCEL for that inode meanwhile.
 *  - LW_LK_FLOCK: a flock(2) lock on the whole file, independent of POSIX locks, as on Linux.
 *  - LW_LK_REPLAY (with F_RDLCK/F_WRLCK, and LW_LK_FLOCK or not; no other flag): a lock this
 *    client held before the MDS restarted, sent again in the client's hello. Granted at once
 *    while the restarted MDS waits for this client; -EAGAIN if it conflicts with a lock replayed
 *    before, -ENOLCK if the MDS does not wait for this client (the lock is lost).
 *  - LW_LK_REPLAY_DONE (alone; type F_UNLCK, 0 to UINT64_MAX): the client has replayed all it
 *    held. Empty reply. Until every client it waits for has said so (or the recovery window
 *    after its start has passed), the MDS answers other requests for locks, and tests, only
 *    then. */
#define LW_LK_WAIT        0x1u
#define LW_LK_TEST        0x2u
#define LW_LK_FLOCK       0x4u
#define LW_LK_CANCEL      0x8u
#define LW_LK_REPLAY      0x10u
#define LW_LK_REPLAY_DONE 0x20u
struct lw_lock_req {
	uint64_t ino;
	uint64_t owner;
	uint64_t start;
	uint64_t end;   /* inclusive */
	uint32_t type;  /* F_RDLCK, F_WRLCK, F_UNLCK */
	uint32_t flags; /* LW_LK_* */
	uint32_t pid;   /* of the process asking, for F_GETLK's l_pid */
	uint32_t pad;
};
_Static_assert(sizeof(struct lw_lock_req) == 48, "lw_lock_req");

struct lw_lock_rep {
	uint64_t start;
	uint64_t end;
	uint32_t type;
	uint32_t pid;
};
_Static_assert(sizeof(struct lw_lock_rep) == 24, "lw_lock_rep");

/* MDS_OPEN: request lw_open_req. Reply lw_open_rep [+ lw_layout + objects for a regular file]
 * [+ dom_len bytes: the file's Data-on-MDT bytes, when its layout has a dom_size; bytes between
 * dom_len and min(size, dom_size) are zeros].
 * The MDS checks access for open_flags' access mode (and O_TRUNC). A handle keeps an unlinked
 * file's objects alive until MDS_CLOSE or until the client's connection goes away.
 * Protocol 3, a conditional open: with LW_OPQ_NAMES the inode must still have name_version
 * `names`, with LW_OPQ_DIR_MOVES the MDS's dir_moves must still be `dir_moves`, else nothing is
 * done (no handle, no O_TRUNC, no permission check: the attributes are anyone's to get) and the
 * reply is lw_open_rep alone with LW_OPR_STALE, handle 0, and the attributes and dir_moves as they
 * are now. A client opening through names it cached learns so, before anything happened, that
 * they may lead elsewhere now.
 * Protocol 7, LW_OPQ_LEASE (a read-only open without O_TRUNC only, else -EINVAL): the client asks
 * for an inode lease on the file with the open; the reply's prefix grants it (lease_ino, lease_gen)
 * unless anyone has the file open for writing. While it holds it, the client may open the file
 * for reading again, under the same credentials, without asking: it uses this reply. The MDS
 * recalls it (MDS_RECALL) before any change to the file's attributes, layout, data or names
 * (a setattr, an open for writing, an xattr, a layout, a link, an unlink or rename of it or over
 * it) and before any directory's rename, from every holder, the changer's own session too; the
 * holder first opens for real (MDS_OPEN) what it opened without asking, then gives it back. */
#define LW_OPQ_NAMES     0x1u
#define LW_OPQ_DIR_MOVES 0x2u
#define LW_OPQ_LEASE     0x4u
struct lw_open_req {
	uint64_t ino;
	uint32_t open_flags;
	uint32_t flags;      /* protocol 3: LW_OPQ_* (was padding, 0) */
	uint64_t names;      /* protocol 3: with LW_OPQ_NAMES */
	uint64_t dir_moves;  /* protocol 3: with LW_OPQ_DIR_MOVES */
};
_Static_assert(sizeof(struct lw_open_req) == 32, "lw_open_req");

#define LW_OPR_STALE 0x1u
struct lw_open_rep {
	struct lw_attr attr;
	uint64_t handle;
	uint32_t has_layout;
	uint32_t dom_len;   /* protocol 2; was padding (0) */
	uint64_t dir_moves; /* protocol 3: the MDS's count of directory renames as of this open (it
	                     * starts anywhere at an MDS start): a client whose cached names could
	                     * lead through a moved directory checks them again when it changed */
	uint32_t flags;     /* protocol 3: LW_OPR_* */
	uint32_t pad;
};
_Static_assert(sizeof(struct lw_open_rep) == 152, "lw_open_rep");

/*
 * MDS_WALK: as much of a path as the MDS can resolve in one round trip; the client walks the rest
 * itself, one MDS_LOOKUP at a time, so that every error and every symlink is its own walk's.
 * Request lw_walk_req + pathlen bytes of path (no NUL in it; components separated by '/', taken
 * from the root). The MDS looks components up in turn, as MDS_LOOKUP with the request's cred,
 * and stops before one that fails to look up, a symlink, a component that is not a directory
 * with anything (even '/') after it, and with LW_WALK_PARENT the last component.
 * Reply lw_walk_rep: the attributes of the last entry reached (the root's if none) and consumed,
 * the bytes of the path that led to it (the rest starts there).
 * LW_WALK_OPEN: when the whole path was resolved (only '/' left) and open_flags are a read-only
 * open without O_TRUNC, the entry is opened too, as MDS_OPEN would: flags has LW_WALKR_OPENED
 * and MDS_OPEN's reply follows. Without it (any failure of that open) the client opens itself.
 */
#define LW_WALK_PARENT 0x1u
#define LW_WALK_OPEN   0x2u
struct lw_walk_req {
	uint32_t flags;      /* LW_WALK_* */
	uint32_t open_flags; /* LW_WALK_OPEN: as lw_open_req's */
	uint16_t pathlen;    /* at most LW_WALK_PATH_MAX */
	uint16_t pad[3];
};
_Static_assert(sizeof(struct lw_walk_req) == 16, "lw_walk_req");
#define LW_WALK_PATH_MAX 4095

#define LW_WALKR_OPENED 0x1u
struct lw_walk_rep {
	struct lw_attr attr;
	uint32_t consumed;
	uint32_t flags;      /* LW_WALKR_* */
};
_Static_assert(sizeof(struct lw_walk_rep) == 128, "lw_walk_rep");

/* MDS_CLOSE (ends a handle) and MDS_SIZE_UPDATE (fsync: the handle stays open): request
 * lw_close_req. The size only grows the MDS's size (truncation is MDS_SETATTR's job); mtime
 * and ctime are set to the given time when LW_CL_MTIME. Reply lw_attr. */
#define LW_CL_SIZE   0x1u
#define LW_CL_MTIME  0x2u
#define LW_CL_BLOCKS 0x4u /* blocks: what the file's objects occupy now (st_blocks) */
#define LW_CL_DOM    0x8u /* protocol 2: dom_parts lw_dom_part, each followed by its bytes,
                           * written to the file's Data-on-MDT bytes in the same transaction as
                           * the size */
#define LW_CL_DATA   0x10u /* protocol 3: the handle wrote since its last report (the data
                            * version advances, also when the writes failed: bytes may have
                            * changed) */
#define LW_CL_ALL    0x1Fu
struct lw_close_req {
	uint64_t ino;
	uint64_t handle;
	uint64_t size;
	int64_t  mtime;
	uint32_t mtime_ns;
	uint32_t flags; /* LW_CL_* */
	uint64_t blocks;
	uint32_t dom_parts; /* protocol 3: with LW_CL_DOM, how many parts follow (>= 1), else 0 */
	uint32_t trunc_epoch; /* protocol 3: the file's trunc_epoch the writes were made in; older
	                       * than the file's, the size is not grown (a truncation came after) */
};
_Static_assert(sizeof(struct lw_close_req) == 56, "lw_close_req");

/* Data-on-MDT bytes: in MDS_CLOSE / MDS_SIZE_UPDATE after lw_close_req (LW_CL_DOM), dom_parts of
 * these, each followed by its `len` bytes (no padding), to be written at `offset`. Parts come in
 * increasing offset order, do not overlap, and are not empty; offset + len <= the layout's
 * dom_size (else -EINVAL). A client sends exactly the bytes it wrote, so that two clients writing
 * disjoint bytes of one page never undo each other's. */
struct lw_dom_part {
	uint64_t offset;
	uint32_t len;
	uint32_t pad;
};
_Static_assert(sizeof(struct lw_dom_part) == 16, "lw_dom_part");

/* MDS_DOM_READ: request lw_ino_req. Reply lw_blob_rep + the file's Data-on-MDT bytes (len; the
 * bytes past them up to min(size, dom_size) are zeros). -EIO when the stored checksum does not
 * match; -EINVAL for a file without a Data-on-MDT component. No permission check: like OST_READ,
 * data access was checked at open. */

/* MDS_SETLAYOUT: request lw_setlayout_req + lw_layout (nobjs 0). On a directory it sets the
 * default for new entries (LW_SL_DELETE removes it); on a regular file it lays out again a file
 * that holds no data yet (size 0), and refuses one with data with -EEXIST as Lustre does
 * ("stripe already set"). Reply: the resulting layout (lw_layout + objects). */
#define LW_SL_DELETE 0x1u
struct lw_setlayout_req {
	uint64_t ino;
	uint32_t flags;
	uint32_t pad;
};
_Static_assert(sizeof(struct lw_setlayout_req) == 16, "lw_setlayout_req");

/* MDS_MIRROR (protocol 9): request lw_mirror_req + count lw_ostobj (flags 0), objects of the
 * mirrored file ino. LW_MIRROR_STALE marks them stale: a writer whose write one copy missed, or
 * a reader that found a copy's bytes bad, says so before it goes on, and nobody reads them until
 * a resync. The caller must hold the file open (-EBADF). -EINVAL for a file that is not mirrored,
 * an object not in its layout, or a stripe whose last in-sync copy it would be. Reply: the
 * layout. LW_MIRROR_RESYNC (count 0) asks the MDS to resync the file's stale copies now, in the
 * background; -EPERM unless the caller owns it or is root. */
#define LW_MIRROR_STALE  1u
#define LW_MIRROR_RESYNC 2u /* count 0: resync the file now (its owner or root); the reply is the
                             * layout as it is, the copies are made in the background */
#define LW_MIRROR_EXTEND 3u /* count 0: one more copy, stale, for the resync to fill (owner or
                             * root; -EINVAL at 16 copies or without OSTs for it) */
#define LW_MIRROR_SPLIT  4u /* count 1, an object of the copy to remove: its objects are
                             * destroyed (owner or root; -EBUSY while the file is open; -EINVAL
                             * for the last copy or a stripe's last in-sync one) */
#define LW_MIRROR_MAX_OBJS LOOM_MAX_STRIPES
struct lw_mirror_req {
	uint64_t ino;
	uint32_t cmd;   /* LW_MIRROR_* */
	uint32_t count; /* objects that follow, 1..LW_MIRROR_MAX_OBJS */
};
_Static_assert(sizeof(struct lw_mirror_req) == 16, "lw_mirror_req");

/* MDS_OST_ADMIN (root only, else -EPERM): request lw_ost_admin_req; sets then clears the
 * administrative state flags of OST idx (only LW_TGT_DEACTIVATED is one; others are -EINVAL).
 * -ENOENT for an index no OST holds. Reply empty. */
struct lw_ost_admin_req {
	uint32_t idx;
	uint32_t set;
	uint32_t clear;
	uint32_t pad;
};
_Static_assert(sizeof(struct lw_ost_admin_req) == 16, "lw_ost_admin_req");
#define LW_TGT_ADMIN_STATE LW_TGT_DEACTIVATED

/* MDS_SWAP_LAYOUTS (migration): request lw_swap_req. ino takes tmp's objects, tmp ino's, when
 * ino is still of size and mtime (else -EAGAIN) and nobody has it open for writing (-EBUSY).
 * Objects ino had stay while handles opened before the swap remain. Reply empty. */
struct lw_swap_req {
	uint64_t ino;
	uint64_t tmp;
	uint64_t size;
	int64_t mtime;
	uint32_t mtime_ns;
	uint32_t pad;
};
_Static_assert(sizeof(struct lw_swap_req) == 40, "lw_swap_req");

/* MDS_POOL: OST pools. Request lw_pool_req. NEW, DESTROY, ADD and REMOVE are root's (-EPERM) and
 * answer empty; LIST answers, for the pool named or for every pool when name is "", one
 * lw_pool_ent each followed by its nosts OST indices (u32, ascending). */
struct lw_pool_req {
	uint32_t cmd; /* LW_POOL_* */
	uint32_t idx; /* ADD, REMOVE: the OST */
	char name[16]; /* NUL-terminated, zero after; "" only for LIST */
};
_Static_assert(sizeof(struct lw_pool_req) == 24, "lw_pool_req");
#define LW_POOL_NEW     1u
#define LW_POOL_DESTROY 2u
#define LW_POOL_ADD     3u
#define LW_POOL_REMOVE  4u
#define LW_POOL_LIST    5u

struct lw_pool_ent {
	char name[16];
	uint32_t nosts;
	uint32_t pad;
};
_Static_assert(sizeof(struct lw_pool_ent) == 24, "lw_pool_ent");

/* MDS_OST_TABLE: request empty. Reply lw_ost_table_rep + count lw_ost_entry. */
struct lw_ost_table_rep {
	uint32_t gen;   /* bumped whenever an OST joins or changes address or state */
	uint32_t count;
};
_Static_assert(sizeof(struct lw_ost_table_rep) == 8, "lw_ost_table_rep");

struct lw_ost_entry {
	uint32_t idx;
	uint32_t state; /* LW_TGT_* */
	uint16_t port;
	uint16_t pad[3];
	char     host[64]; /* NUL-terminated */
	char     uuid[40]; /* NUL-terminated */
	struct lw_statfs sf;
};
_Static_assert(sizeof(struct lw_ost_entry) == 176, "lw_ost_entry");

/* MDS_OST_REGISTER (from an OSS, no cred prefix): request lw_ost_register_req.
 * want_idx is the index the OST was formatted with, or UINT32_MAX for a new OST that the MDS
 * numbers. The MDS refuses (-EEXIST) an index already held by another uuid.
 * Reply lw_ost_register_rep. */
struct lw_ost_register_req {
	uint32_t want_idx;
	uint16_t port;
	uint16_t pad;
	char     host[64];
	char     uuid[40];
	char     fsname[16];
	struct lw_statfs sf;
};
_Static_assert(sizeof(struct lw_ost_register_req) == 184, "lw_ost_register_req");

struct lw_ost_register_rep {
	uint32_t idx;
	uint32_t pad;
	char     fsname[16];
};
_Static_assert(sizeof(struct lw_ost_register_rep) == 24, "lw_ost_register_rep");

/* MDS_OST_FAILOVER (from an OSS, no cred): request lw_ost_addr, where else OST idx may be served
 * (the other server of its failover pair, Lustre's failnode); an empty host clears it. Only the
 * connection that registered idx may send it (-EPERM); a host that is not NUL-terminated or a
 * port 0 with a host: -EPROTO. Kept in the MDS's memory; the table generation changes with it.
 * Reply empty.
 * MDS_OST_FAILOVERS (cred): reply lw_ost_table_rep (gen, count) + count lw_ost_addr, every OST
 * that has a failover address, in index order. */
struct lw_ost_addr {
	uint32_t idx;
	uint16_t port;
	uint16_t pad;
	char     host[64]; /* NUL-terminated */
};
_Static_assert(sizeof(struct lw_ost_addr) == 72, "lw_ost_addr");

/*
 * Replication of the MDT to a standby MDS (src/mdt/redo.c, src/mds/repl.c). The active MDS
 * numbers its top-level MDT commits (seq, from 1, kept in the MDT) and keeps the recent ones as
 * a stream: each commit is a lw_repl_commit, then `len` bytes of records, each a lw_repl_rec,
 * its key, and for a put its value, in the order the commit made them. `db` is the MDT's
 * database index (docs/mdt.md); both ends run one MDT format version (checked in the pull).
 */
#define LW_REPL_PUT 1u
#define LW_REPL_DEL 2u
struct lw_repl_commit {
	uint64_t seq;
	uint64_t epoch;    /* the active's epoch (its coordinator's fencing token) when it committed */
	uint32_t len;      /* bytes of records after this header */
	uint32_t nrec;
};
_Static_assert(sizeof(struct lw_repl_commit) == 24, "lw_repl_commit");
struct lw_repl_rec {
	uint8_t  op;       /* LW_REPL_PUT or LW_REPL_DEL */
	uint8_t  db;
	uint16_t klen;     /* 1..511: LMDB's key size */
	uint32_t vlen;     /* 0 for a delete */
};
_Static_assert(sizeof(struct lw_repl_rec) == 8, "lw_repl_rec");

/* MDS_REPL_PULL (fs key only): a standby asks for the stream from commit from_seq (from_off bytes
 * into it: a commit larger than a reply comes in parts) and says what its MDT holds (applied:
 * every commit up to applied_seq, the last of epoch applied_epoch, durable), which is its
 * acknowledgement. The reply: lw_repl_pull_rep and, in bulk, up to max_bytes of the stream. With
 * nothing new the MDS holds the request up to wait_ms (0..10000) first. -ERANGE: from_seq is
 * no longer kept (take a copy, MDS_REPL_COPY); -ESTALE: the standby's MDT is not a copy of this
 * MDS's history (it holds commits this MDS never made): take a copy; -EXDEV: its MDT is another
 * file system's (uuid); -EPROTONOSUPPORT: another MDT format. */
struct lw_repl_pull_req {
	uint64_t from_seq;
	uint64_t applied_seq;
	uint64_t applied_epoch;
	uint32_t from_off;
	uint32_t max_bytes;      /* 1..LW_MAX_BULK */
	uint32_t wait_ms;
	uint32_t mdt_version;
	uint8_t  mdt_uuid[16];   /* all 0: the standby has no MDT yet */
	char     name[64];       /* the standby's address, as the coordinator names it; NUL-terminated */
};
_Static_assert(sizeof(struct lw_repl_pull_req) == 120, "lw_repl_pull_req");
struct lw_repl_pull_rep {
	uint64_t last_seq;       /* the newest commit the MDS has made */
	uint64_t epoch;          /* the MDS's */
	uint32_t bytes;          /* of stream in the bulk */
	uint32_t flags;          /* LW_REPL_F_* */
};
_Static_assert(sizeof(struct lw_repl_pull_rep) == 24, "lw_repl_pull_rep");
#define LW_REPL_F_SYNC 0x1u /* the MDS counts this standby in: its commits wait for it */

/* MDS_REPL_COPY (fs key only): a consistent copy of the MDT (LMDB's mdb_env_copy2), in parts.
 * offset 0 makes a new copy (the request waits while it is made; -EBUSY while another is made);
 * later offsets read it (-ENOENT: none, or it was read to its end and dropped). The reply:
 * lw_repl_copy_rep and, in bulk, up to max_bytes of the copy's data.mdb from offset. */
struct lw_repl_copy_req {
	uint64_t offset;
	uint32_t max_bytes;      /* 1..LW_MAX_BULK */
	uint32_t pad;            /* 0 */
};
_Static_assert(sizeof(struct lw_repl_copy_req) == 16, "lw_repl_copy_req");
struct lw_repl_copy_rep {
	uint64_t size;           /* of the whole copy */
	uint32_t bytes;
	uint32_t gen;            /* which copy: a reader whose copy changed starts again */
};
_Static_assert(sizeof(struct lw_repl_copy_rep) == 16, "lw_repl_copy_rep");

/*
 * GET_PARAM and SET_PARAM (protocol 10; any server, the file system key only): a server's
 * parameters, named as Lustre's `lctl get_param` names them ("ost.lfs01-OST0002.job_stats",
 * "mdt.lfs01-MDT0000.recovery_status"). name is a pattern (fnmatch(3): "ost.*.stats").
 * GET_PARAM's reply bulk is the text of every parameter that matches, as lctl prints it (a value
 * of one line as "NAME=VALUE", a longer one as "NAME=" then its lines), at most cap bytes of it;
 * SET_PARAM sets value on each that matches (a value a parameter does not take: -EINVAL, and
 * none is set; a parameter that cannot be set: -EACCES). Neither matching anything: -ENOENT.
 * Reply lw_param_rep.
 */
#define LW_PARAM_NAME_MAX 128u
#define LW_PARAM_VALUE_MAX 128u
struct lw_param_req {
	uint32_t cap;                       /* GET_PARAM: most bytes of bulk wanted (<= LW_MAX_BULK);
	                                     * SET_PARAM: 0 */
	uint32_t flags;                     /* 0 */
	char     name[LW_PARAM_NAME_MAX];   /* NUL-terminated, not empty */
	char     value[LW_PARAM_VALUE_MAX]; /* SET_PARAM's, NUL-terminated; GET_PARAM: zeros */
};
_Static_assert(sizeof(struct lw_param_req) == 264, "lw_param_req");
struct lw_param_rep {
	uint32_t len;     /* bytes of text in the bulk */
	uint32_t total;   /* of the whole text: more than len when it was cut at cap (ask again) */
	uint32_t matched; /* parameters the pattern matched */
	uint32_t pad;
};
_Static_assert(sizeof(struct lw_param_rep) == 16, "lw_param_rep");

/* MDS_OST_REPLACE (from an OSS whose OST was formatted with --replace, no cred prefix): request
 * lw_ost_register_req with want_idx the index to take over. The new uuid takes the index from the
 * OST that held it (lost for good: not heard from now), and every object of that OST is lost:
 * those below lost_below. -EBUSY while the OST holding the index is active; -EINVAL without
 * want_idx or for a uuid known at another index. A resend (the same uuid holds the index now) gets
 * the same answer. Reply lw_ost_replace_rep. */
struct lw_ost_replace_rep {
	uint32_t idx;
	uint32_t pad;
	char     fsname[16];
	uint64_t lost_below; /* objects with ids below it were on the old OST: missing means lost */
};
_Static_assert(sizeof(struct lw_ost_replace_rep) == 32, "lw_ost_replace_rep");

/* MDS_OST_REMOVE (root only, with the file system key): request lw_ost_remove_req. Retires OST
 * idx for good: it leaves the OST table, its index is never given to a new OST (only to one
 * formatted with --replace), and it is refused when it registers again. -EBUSY while files have
 * objects there (unless LW_OSTRM_FORCE: their objects there are lost); LW_OSTRM_DRYRUN only
 * counts. -ENOENT for an index no OST holds (or one removed). Reply lw_ost_remove_rep. */
#define LW_OSTRM_DRYRUN 0x1u
#define LW_OSTRM_FORCE  0x2u
struct lw_ost_remove_req {
	uint32_t idx;
	uint32_t flags;
};
_Static_assert(sizeof(struct lw_ost_remove_req) == 8, "lw_ost_remove_req");

struct lw_ost_remove_rep {
	uint64_t files;   /* files (layouts) with objects on the OST */
	uint64_t objects; /* their objects there */
};
_Static_assert(sizeof(struct lw_ost_remove_rep) == 16, "lw_ost_remove_rep");

/* MDS_OST_HEARTBEAT (from an OSS, no cred prefix): lw_ost_heartbeat_req + count
 * lw_ost_heartbeat_ent. Reply lw_ost_heartbeat_rep (an empty reply, from an MDS before it, is
 * taken as nodemap_version 0). */
struct lw_ost_heartbeat_req {
	uint32_t count;
	uint32_t pad;
};
_Static_assert(sizeof(struct lw_ost_heartbeat_req) == 8, "lw_ost_heartbeat_req");

struct lw_ost_heartbeat_ent {
	uint32_t idx;
	uint32_t pad;
	struct lw_statfs sf;
};
_Static_assert(sizeof(struct lw_ost_heartbeat_ent) == 64, "lw_ost_heartbeat_ent");

struct lw_ost_heartbeat_rep {
	uint64_t nodemap_version; /* the nodemap's (lw_nodemap_rep.version): when it changed, the
	                           * OSS asks for the nodemap again */
};
_Static_assert(sizeof(struct lw_ost_heartbeat_rep) == 8, "lw_ost_heartbeat_rep");

/* ---------------------------------------------------------------------------------------------
 * OSS messages: every request body is one lw_ost_io; offsets and lengths are in object space.
 *  OST_READ     read `length` bytes at `offset`; reply lw_ost_io_rep, bulk = the bytes that
 *               exist (fewer at the object's end; a missing object reads as empty).
 *  OST_WRITE    bulk written at `offset` (length == bulk_len); creates the object. Protocol 3:
 *               `trunc_epoch` is the file's as the writer knows it. An object last cut in a
 *               later epoch answers -ESTALE (a truncation came after: learn the epoch, write
 *               again); one whose cut for the writer's epoch has not arrived yet -EAGAIN (try
 *               again shortly). A new object takes the writer's epoch.
 *  OST_PUNCH    discard everything at and beyond `length` (truncate down; never extends).
 *               Protocol 3: sent by the MDS for a truncation of `trunc_epoch`; an object already
 *               in that epoch or a later one is left alone (its bytes are newer than the cut), a
 *               missing one is made, empty, in that epoch. Protocol 9: with flags
 *               LW_PUNCH_ANEW and `length` 0, a missing object (a lost one too) is made, empty,
 *               in `trunc_epoch` (0 included), and an existing one left as it is: the MDS's
 *               resync makes a mirrored file's stale copy anew after destroying it.
 *  OST_GETATTR  reply the object's size.
 *  OST_SYNC     fsync the object (the whole OST when objid is 0).
 *  OST_STATFS   reply lw_statfs in place of lw_ost_io_rep.
 *  OST_DESTROY  remove the object; a missing object is not an error.
 *  OST_DESTROY_MANY  remove the objects whose ids (uint64_t each) the bulk carries, all of OST
 *               `ost_idx`: `length` == bulk_len, a multiple of 8, at most LW_DESTROY_MANY_MAX
 *               ids; `objid` 0. Each as OST_DESTROY; the first failure is the answer (the
 *               ones before it are gone, the rest not tried). Reply: `length` = the count.
 *  OST_SCRUB    `length` is a command: LW_SCRUB_START starts a background scrub of the OST
 *               (objid 0) or of one object, unless one runs already; LW_SCRUB_STATUS only
 *               asks. Either replies lw_scrub_rep in place of lw_ost_io_rep.
 */
#define LW_PUNCH_ANEW 0x1u
struct lw_ost_io {
	uint32_t ost_idx;
	uint32_t flags;      /* per opcode: OST_FALLOCATE's mode, OST_SEEK's whence; 0 for the others */
	uint64_t objid;
	uint64_t offset;
	uint64_t length;
	uint64_t ino;        /* the file the object belongs to, kept with a new object for fsck */
	uint32_t stripe_idx;
	uint32_t layout_gen;
	uint32_t trunc_epoch; /* protocol 3: OST_WRITE, OST_PUNCH (above); else 0 */
	uint32_t pad;
};
_Static_assert(sizeof(struct lw_ost_io) == 56, "lw_ost_io");

/* OST_CONNECT (a client, on every connection to an OST; lw_ost_io with ost_idx, the rest 0):
 * reply lw_ost_connect_rep. The instance changes when writes the OST's server acknowledged may
 * have been lost (a server on another host, or after a reboot, took over from one that had not
 * synced them): a client that wrote since its last OST_SYNC there and sees another instance
 * reports EIO at its next fsync. Never 0. The OST's uuid and file system name come with it: an
 * address that serves another OST (a stale or mistyped failover address, another file system's
 * OSS) is not dialled on. */
struct lw_ost_connect_rep {
	uint64_t instance;
	char     uuid[40];   /* the OST's, NUL-terminated: a client checks it is the OST it wants */
	char     fsname[16]; /* its file system's, NUL-terminated */
};
_Static_assert(sizeof(struct lw_ost_connect_rep) == 64, "lw_ost_connect_rep");

struct lw_ost_io_rep {
	uint64_t length;     /* bytes read or written */
	uint64_t obj_size;   /* object size after the operation; 0 for a missing object */
	uint64_t obj_blocks; /* 512-byte blocks the object occupies (holes take none) */
};
_Static_assert(sizeof(struct lw_ost_io_rep) == 24, "lw_ost_io_rep");

/*
 * OST_FALLOCATE (protocol 3): fallocate(2) on the object over [offset, offset + length); flags is
 * the mode: 0 or LW_FALLOC_KEEP_SIZE (allocate), PUNCH_HOLE|KEEP_SIZE, ZERO_RANGE[|KEEP_SIZE];
 * any other is -EOPNOTSUPP, length 0 -EINVAL, an end past 2^62 -EFBIG. Allocating creates a
 * missing object; punching or zeroing one does nothing. Checksums stay right: a block covered
 * whole has none after, one covered in part that of what it holds (-EIO if the part kept is bad).
 * Reply lw_ost_io_rep (obj_size, obj_blocks).
 * OST_SEEK (protocol 3): lseek(2) from `offset` with flags LW_SEEK_DATA or LW_SEEK_HOLE (else
 * -EINVAL); reply lw_ost_io_rep, the object offset found in `length`. SEEK_DATA finding none is
 * -ENXIO; SEEK_HOLE at or past the end (or of a missing object) finds `offset` itself.
 */
#define LW_FALLOC_KEEP_SIZE  0x01u /* FALLOC_FL_KEEP_SIZE */
#define LW_FALLOC_PUNCH_HOLE 0x02u /* FALLOC_FL_PUNCH_HOLE */
#define LW_FALLOC_ZERO_RANGE 0x10u /* FALLOC_FL_ZERO_RANGE */
#define LW_SEEK_DATA 3u            /* SEEK_DATA */
#define LW_SEEK_HOLE 4u            /* SEEK_HOLE */

/* OST_SCRUB reply: the OST's scrub, running or last finished (kept in the OSS's memory only). The
 * OSS checks every 64 KiB block of every object against the crc32c it stored when the block was
 * written; bad_objids lists the first LW_SCRUB_MAX_BAD objects found bad. */
#define LW_SCRUB_START   0u /* lw_ost_io.length: the commands */
#define LW_SCRUB_STATUS  1u
#define LW_SCRUB_IDLE    0u /* lw_scrub_rep.state: none since the OSS started */
#define LW_SCRUB_RUNNING 1u
#define LW_SCRUB_DONE    2u /* finished, or stopped by an error (`error`) */
#define LW_SCRUB_MAX_BAD 64u
struct lw_scrub_rep {
	uint32_t state;            /* LW_SCRUB_IDLE/RUNNING/DONE */
	int32_t  error;            /* 0, or the negative errno that ended the scrub early */
	uint64_t objid;            /* what it covers: 0 the whole OST, else that one object */
	int64_t  start_time;       /* Unix seconds; 0 when idle */
	int64_t  finish_time;      /* Unix seconds; 0 unless done */
	uint64_t objects_checked;
	uint64_t bytes_checked;
	uint64_t blocks_checked;   /* blocks compared with their stored checksum */
	uint64_t blocks_unchecked; /* blocks read that have no checksum (holes, older data) */
	uint64_t bad_blocks;       /* blocks whose data does not match their checksum */
	uint64_t bad_objects;      /* objects with at least one bad block */
	uint64_t rate;             /* the scrub's limit in bytes per second; 0: none */
	uint32_t nbad;             /* entries of bad_objids used (<= LW_SCRUB_MAX_BAD) */
	uint32_t pad;
	uint64_t bad_objids[LW_SCRUB_MAX_BAD];
};
_Static_assert(sizeof(struct lw_scrub_rep) == 608, "lw_scrub_rep");
_Static_assert(offsetof(struct lw_scrub_rep, bad_objids) == 96, "lw_scrub_rep.bad_objids");

#endif
