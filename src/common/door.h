/*
 * The mount's door: how a process without the file system key reaches Loom natively, through
 * the loom-mount of its node (src/fuse/door.c serves it, src/client/door.c asks). 3FS's USRBIO
 * does the same through its FUSE daemon.
 *
 * - Finding it: LOOM_IOC_DOOR on any file of the mount answers the socket's path and the
 *   daemon's pid; the client checks that the process at the other end (SO_PEERCRED) is that one.
 * - Who asks: the daemon learns the caller's uid, gid and groups from the kernel (SO_PEERCRED,
 *   SO_PEERGROUPS), never from the caller, and does each request with them on a connection of
 *   its own to the servers (one per session), so the MDS checks them as it checks a mount's.
 * - Data: each channel (one unix stream socket) brings a sealed memfd of DOOR_SLOT_BYTES, which
 *   both sides map. Reads land in it and writes are taken from it; the socket carries only the
 *   fixed request and reply headers and the paths. The seals (no shrinking) keep a caller from
 *   making the daemon fault on a truncated mapping.
 * - Sessions: the first channel says DOOR_OP_HELLO and gets a session id and a random token;
 *   further channels (one per thread in flight, at most DOOR_MAX_CHANNELS) say DOOR_OP_ATTACH
 *   with both, from a process of the same uid. Handles (files, directories) belong to the
 *   session; when its last channel closes, the daemon closes them and its connection.
 * - Each channel is strictly one request, one reply. Native byte order: it never leaves the node.
 */
#ifndef LOOM_COMMON_DOOR_H
#define LOOM_COMMON_DOOR_H

#include <stdint.h>
#include <sys/ioctl.h>

#include "common/mount_ioctl.h"

#define DOOR_VERSION       1u           /* both sides must say the same (structs below, and
                                          * struct loom_layout, loom_attr and loom_fsattr) */
#define DOOR_SLOT_BYTES    (2u << 20)   /* each channel's shared memory */
#define DOOR_MAX_CHANNELS  16u          /* per session */
#define DOOR_MAX_FILES     1024u        /* open files per session */
#define DOOR_MAX_DIRS      64u          /* open directories per session (each holds a page) */
#define DOOR_HEAD_BYTES    (64u << 10)  /* what an OPEN for reading asks of the file's start */
#define DOOR_PATH_MAX      4096u
#define DOOR_BODY_MAX      (2u * DOOR_PATH_MAX + 512u) /* at most two paths, or a path and a name */

/* LOOM_IOC_DOOR: where the mount's door is. */
struct loom_ioc_door {
	char path[108];  /* sun_path; "" when the mount serves none */
	uint32_t pid;    /* loom-mount's */
	uint32_t version;
};
#define LOOM_IOC_DOOR _IOWR(LOOM_IOC_MAGIC, 0xA4, struct loom_ioc_door)

/* What a handle must be. */
enum door_fh_kind { DOOR_FH_NONE, DOOR_FH_FILE, DOOR_FH_DIR, DOOR_FH_PREFETCH };

/* Whether an op changes the file system: refused with -EROFS on a read-only mount. OPEN does
 * when it creates, truncates or opens for writing. */
enum door_change { DOOR_READS, DOOR_CHANGES, DOOR_MAY_CHANGE };

/*
 * Every per-opcode fact: X(NAME, paths in the body, the handle it acts on, whether it changes
 * the file system).
 * Request fields each op uses: off, len, flags, mode, arg (as its door.c says); data in the slot
 * for PWRITE, WRITE, SETXATTR (the value), UTIMENS (2 struct timespec), SETLAYOUT and OPEN
 * (a struct loom_layout when len > 0). A reply's len counts bytes the daemon put in the slot.
 * OPEN answers the file's struct loom_attr, then for a read-only open with arg > 0 up to arg
 * bytes of the file from its start (fewer: that is the whole file).
 */
#define DOOR_OPS(X)                                           \
	X(HELLO,       0, DOOR_FH_NONE, DOOR_READS)                  \
	X(ATTACH,      0, DOOR_FH_NONE, DOOR_READS)                  \
	X(STAT,        1, DOOR_FH_NONE, DOOR_READS)                  \
	X(LSTAT,       1, DOOR_FH_NONE, DOOR_READS)                  \
	X(MKDIR,       1, DOOR_FH_NONE, DOOR_CHANGES)                \
	X(RMDIR,       1, DOOR_FH_NONE, DOOR_CHANGES)                \
	X(UNLINK,      1, DOOR_FH_NONE, DOOR_CHANGES)                \
	X(RENAME,      2, DOOR_FH_NONE, DOOR_CHANGES)                \
	X(LINK,        2, DOOR_FH_NONE, DOOR_CHANGES)                \
	X(SYMLINK,     2, DOOR_FH_NONE, DOOR_CHANGES)                \
	X(READLINK,    1, DOOR_FH_NONE, DOOR_READS)                  \
	X(CHMOD,       1, DOOR_FH_NONE, DOOR_CHANGES)                \
	X(CHOWN,       1, DOOR_FH_NONE, DOOR_CHANGES)                \
	X(UTIMENS,     1, DOOR_FH_NONE, DOOR_CHANGES)                \
	X(TRUNCATE,    1, DOOR_FH_NONE, DOOR_CHANGES)                \
	X(STATFS,      0, DOOR_FH_NONE, DOOR_READS)                  \
	X(GETXATTR,    2, DOOR_FH_NONE, DOOR_READS)                  \
	X(SETXATTR,    2, DOOR_FH_NONE, DOOR_CHANGES)                \
	X(LISTXATTR,   1, DOOR_FH_NONE, DOOR_READS)                  \
	X(REMOVEXATTR, 2, DOOR_FH_NONE, DOOR_CHANGES)                \
	X(GETLAYOUT,   1, DOOR_FH_NONE, DOOR_READS)                  \
	X(SETLAYOUT,   1, DOOR_FH_NONE, DOOR_CHANGES)                \
	X(DELLAYOUT,   1, DOOR_FH_NONE, DOOR_CHANGES)                \
	X(SYNC,        0, DOOR_FH_NONE, DOOR_READS)                  \
	X(OPENDIR,     1, DOOR_FH_NONE, DOOR_READS)                  \
	X(READDIR,     0, DOOR_FH_DIR,  DOOR_READS)                  \
	X(CLOSEDIR,    0, DOOR_FH_DIR,  DOOR_READS)                  \
	X(OPEN,        1, DOOR_FH_NONE, DOOR_MAY_CHANGE)             \
	X(PREAD,       0, DOOR_FH_FILE, DOOR_READS)                  \
	X(PWRITE,      0, DOOR_FH_FILE, DOOR_CHANGES)                \
	X(READ,        0, DOOR_FH_FILE, DOOR_READS)                  \
	X(WRITE,       0, DOOR_FH_FILE, DOOR_CHANGES)                \
	X(LSEEK,       0, DOOR_FH_FILE, DOOR_READS)                  \
	X(SEEK_DATA,   0, DOOR_FH_FILE, DOOR_READS)                  \
	X(FALLOCATE,   0, DOOR_FH_FILE, DOOR_CHANGES)                \
	X(FSYNC,       0, DOOR_FH_FILE, DOOR_READS)                  \
	X(FTRUNCATE,   0, DOOR_FH_FILE, DOOR_CHANGES)                \
	X(FSTAT,       0, DOOR_FH_FILE, DOOR_READS)                  \
	X(FILE_ATTR,   0, DOOR_FH_FILE, DOOR_READS)                  \
	X(CLOSE,       0, DOOR_FH_FILE, DOOR_READS)                  \
	X(PF_NEW,      0, DOOR_FH_NONE, DOOR_READS)                  \
	X(PF_ITEMS,    0, DOOR_FH_PREFETCH, DOOR_READS)              \
	X(PF_START,    0, DOOR_FH_PREFETCH, DOOR_READS)              \
	X(PF_TAKE,     0, DOOR_FH_PREFETCH, DOOR_READS)              \
	X(PF_STATS,    0, DOOR_FH_PREFETCH, DOOR_READS)              \
	X(PF_STOP,     0, DOOR_FH_PREFETCH, DOOR_READS)


enum door_op {
#define DOOR_ENUM(name, paths, fh, change) DOOR_OP_##name,
	DOOR_OPS(DOOR_ENUM)
#undef DOOR_ENUM
	DOOR_OP_COUNT
};

struct door_req {
	uint32_t op;
	uint32_t body_len; /* bytes of paths that follow, each NUL-terminated */
	uint64_t fh;
	int64_t off;
	uint64_t len;      /* bytes: to read into, or taken from, the slot */
	uint32_t flags;
	uint32_t mode;
	uint64_t arg;
};

struct door_rep {
	int64_t rc;        /* >= 0: the call's value (a count, a handle, an offset); else -errno */
	uint64_t len;      /* bytes the daemon left in the slot */
};

/* HELLO and ATTACH's answer, in the slot. */
struct door_hello {
	uint32_t version;
	uint32_t slot_bytes;
	uint64_t session;
	uint8_t token[16];
	char fsname[16];
};

/* ATTACH's request, in the slot. */
struct door_attach {
	uint64_t session;
	uint8_t token[16];
};

/*
 * A prefetcher run by the daemon for the session (loom_prefetch_* of a door connection): PF_NEW
 * (arg = max_bytes, flags = threads, mode = max_ahead) makes one, holding at most what is left
 * of its uid's share (the bytes granted, a uint64, in the slot), PF_ITEMS adds the items in the
 * slot (len bytes of struct door_pf_item, each followed by its path, 8-byte aligned), PF_START
 * starts it, PF_TAKE (off = item, arg = bytes of it already had) answers the item's length in
 * rc and as much of it from arg on as the slot holds, PF_STATS a struct loom_prefetch_stats,
 * PF_STOP ends it. The daemon bounds what its prefetchers hold (DOOR_PF_BYTES_*).
 */
struct door_pf_item {
	uint64_t offset;
	int64_t length;
	uint32_t pathlen;  /* bytes of path that follow, no NUL */
	uint32_t pad;
};
#define DOOR_PF_PER_SESSION  4u              /* prefetchers at once */
#define DOOR_PF_ITEM_BYTES   (64u << 20)     /* of items (paths included) per prefetcher */
#define DOOR_PF_BYTES_UID    (4ull << 30)    /* what one uid's prefetchers may hold, in all */
#define DOOR_PF_BYTES_ALL    (16ull << 30)   /* ... and every uid's */
#define DOOR_PF_BYTES_LEAST  (8u << 20)      /* a prefetcher granted less is refused */

/* One READDIR entry in the slot, its name (namelen bytes, no NUL) after it, 8-byte aligned. */
struct door_dirent {
	uint64_t ino;
	uint16_t namelen;
	uint8_t type;
	uint8_t pad[5];
};

#endif
