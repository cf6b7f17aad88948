/*
 * The ioctls loom-mount answers on any file or directory of its mount, so that the `loom` tool
 * can show what needs the MDS (`loom df`, `loom pool list`) to a user without the file system
 * key: the key stays in loom-mount, and a user learns only what statfs(2) and `lfs df` tell
 * anyone who can open a file there (Lustre's IOC_OBD_STATFS and OBD_IOC_LIST_POOLS, on the
 * mounted file).
 *
 * FUSE passes only "restricted" ioctls from a mount: the command encodes the argument's size
 * (_IOWR), the kernel copies that many bytes in and at most that many back, and the size field
 * holds 14 bits. So every argument here is a fixed-size struct under 16 KiB, and lists come a
 * page at a time: the caller sets `start`, the reply says how many there are in all (`total`)
 * and how many it holds from start on (`count`). A list that changed between two pages (total
 * moved) is read again from the start. Errors are the ioctl's errno: ENOENT (no such pool),
 * EINVAL (a malformed argument), ENOTTY (a command this mount does not know), or the MDS's.
 */
#ifndef LOOM_COMMON_MOUNT_IOCTL_H
#define LOOM_COMMON_MOUNT_IOCTL_H

#include <stdint.h>
#include <sys/ioctl.h>

#define LOOM_IOC_MAGIC 'L' /* numbers from 0xA0 on: the loop driver's 'L' ioctls stop at 0x0B */

/* A struct statvfs in fixed-size fields. */
struct loom_ioc_statfs {
	uint64_t blocks, bfree, bavail;
	uint64_t files, ffree, favail;
	uint32_t bsize, frsize, namemax, flag;
};

struct loom_ioc_target {
	uint32_t kind;  /* LOOM_TGT_MDT or LOOM_TGT_OST */
	uint32_t idx;
	uint32_t flags; /* LOOM_TGTF_* */
	uint32_t pad;
	struct loom_ioc_statfs st; /* valid unless LOOM_TGTF_INACTIVE */
};

#define LOOM_IOC_TARGETS_PAGE 150
/* loom_targets(): the MDT, then every OST, with fresh space figures. */
struct loom_ioc_targets {
	uint32_t start; /* in */
	uint32_t total, count, pad;
	char fsname[16];
	struct loom_ioc_target t[LOOM_IOC_TARGETS_PAGE];
};

#define LOOM_IOC_POOLS_PAGE 512
/* loom_pool_list(fs, NULL): every pool's name. */
struct loom_ioc_pools {
	uint32_t start; /* in */
	uint32_t total, count, pad;
	char fsname[16];
	char names[LOOM_IOC_POOLS_PAGE][16];
};

#define LOOM_IOC_POOL_PAGE 2048
/* loom_pool_list(fs, name): the OSTs of one pool, ascending. */
struct loom_ioc_pool {
	char name[16];  /* in: the pool, without the fsname */
	uint32_t start; /* in */
	uint32_t total, count, pad;
	char fsname[16];
	uint32_t osts[LOOM_IOC_POOL_PAGE];
};

/*
 * The mount's job id settings (its -o jobid_var and jobid_name: common/jobid.h), so that libloom
 * in a process on this node tags its requests as the mount tags that process's
 * (loom_jobid_from_mount); and job, the job id the mount gives the caller's own requests now.
 */
struct loom_ioc_jobid {
	char var[64];  /* NUL-terminated */
	char name[64];
	char job[32];  /* the caller's, NUL-terminated; "" for none */
};

/*
 * The mount's own counters (src/fuse/mstats.h) as the parameters llite.FSNAME-XXXXXXXXXXXXXXXX.NAME
 * (stats, statahead_stats, read_ahead_stats, cache_stats, write_behind_stats), as `lctl
 * get_param` names Lustre's: the text of those whose full name matches pattern (fnmatch), as
 * `loom get_param` prints it; or, with LOOM_MSTATS_SET, value set on them ("clear" on stats starts
 * every counter again; only root or the user who mounted may). matched says how many matched
 * (0 is no error: another mount's names, say). A text that does not fit is refused with
 * EOVERFLOW, never cut; EINVAL for a pattern or value not NUL-terminated, or unknown flags;
 * EPERM, and set's own EACCES (a parameter that cannot be set) and EINVAL (a value refused).
 */
#define LOOM_IOC_MSTATS_TEXT 12288
#define LOOM_MSTATS_SET      1u
struct loom_ioc_mstats {
	char pattern[128]; /* in */
	char value[32];    /* in, with LOOM_MSTATS_SET */
	uint32_t flags;    /* in: LOOM_MSTATS_* */
	uint32_t matched;  /* out */
	uint32_t len;      /* out: bytes of text, which is NUL-terminated too */
	uint32_t pad;
	char text[LOOM_IOC_MSTATS_TEXT]; /* out */
};

#define LOOM_IOC_TARGETS _IOWR(LOOM_IOC_MAGIC, 0xA1, struct loom_ioc_targets)
#define LOOM_IOC_POOLS   _IOWR(LOOM_IOC_MAGIC, 0xA2, struct loom_ioc_pools)
#define LOOM_IOC_POOL    _IOWR(LOOM_IOC_MAGIC, 0xA3, struct loom_ioc_pool)
/* 0xA4 is LOOM_IOC_DOOR (common/door.h). */
#define LOOM_IOC_JOBID   _IOWR(LOOM_IOC_MAGIC, 0xA5, struct loom_ioc_jobid)
#define LOOM_IOC_MSTATS  _IOWR(LOOM_IOC_MAGIC, 0xA6, struct loom_ioc_mstats)

/* _IOC_SIZE has 14 bits. */
_Static_assert(sizeof(struct loom_ioc_targets) < 16384, "a FUSE ioctl argument is under 16 KiB");
_Static_assert(sizeof(struct loom_ioc_pools) < 16384, "a FUSE ioctl argument is under 16 KiB");
_Static_assert(sizeof(struct loom_ioc_pool) < 16384, "a FUSE ioctl argument is under 16 KiB");
_Static_assert(sizeof(struct loom_ioc_mstats) < 16384, "a FUSE ioctl argument is under 16 KiB");

#endif
