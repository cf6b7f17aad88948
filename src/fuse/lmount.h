/*
 * loom-mount: Loom's POSIX mount, libfuse 3's low-level (inode-based) API over libloom.
 *
 * FUSE node ids are Loom inode numbers (the root is 1 in both), which are never reused, so the
 * mount keeps no per-inode state for the kernel's lookup counts: forget is a no-op. Every request
 * acts with the identity of the calling process (uid, gid, groups), checked by the MDS.
 */
#ifndef LOOM_FUSE_LMOUNT_H
#define LOOM_FUSE_LMOUNT_H

#define FUSE_USE_VERSION 314

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdbool.h>

#include "common/jobid.h"
#include "common/u64map.h"
#include "fuse/mstats.h"
#include "loom/loom_ll.h"

struct lmount_opts {
	char *spec;            /* HOST[:PORT]:/FSNAME */
	char *mountpoint;
	double attr_timeout;   /* seconds the kernel may trust attributes */
	double entry_timeout;  /* ... a name's inode */
	double negative_timeout; /* ... that a name does not exist */
	unsigned max_threads;
	unsigned readahead_kb;
	int foreground;
	int debug;
	int readonly;
	int owner_only;
	int no_default_permissions; /* refused (main.c says why) */
	char *key_file;        /* key=PATH: the file system key (made absolute: the daemon runs in /) */
	unsigned recovery;     /* recovery=SEC: how long requests wait for a server that is away */
	int soft;              /* soft: requests fail with EIO after timeout=SEC (hard: they wait) */
	int hard;
	unsigned timeout;      /* timeout=SEC: a soft mount's limit (default 30) */
	unsigned at_min;       /* at_min=SEC: no reply this long at least means a hung server */
	int root_squash;       /* root_squash: root's requests go to the MDS as nobody */
	int encrypt;           /* encrypt: every frame encrypted, not only authenticated */
	int noleases;          /* noleases: no directory leases (every lookup asks the MDS) */
	int nowsync;           /* nowsync (the default; wsync: off): creates sent behind under
	                        * exclusive directory leases */
	char *door;            /* door=PATH: the socket of the door (door.c) */
	int nodoor;            /* nodoor: serve none */
	char *jobid_var;       /* jobid_var=NAME, jobid_name=PATTERN: how each caller's job id is */
	char *jobid_name;      /* made (common/jobid.h), checked into lmount.jobid */
	char *http;            /* http=HOST:PORT: serve /metrics there (mstats.h); NULL: off */
	int nostats;           /* nostats: count no FUSE request (to measure what counting costs) */
};

/* statahead.c: the listings with attributes of the few directories being scanned, answering
 * lookups in them. */
struct sa_dir;
#define LM_SA_SLOTS 4 /* directories followed at once (mdtest's processes each scan their own) */
struct lm_sa_slot {
	uint64_t streak_dir;   /* the directory of this slot's lookups, how many in a row found */
	uint64_t streak_gen;   /* their names, and gen when the streak began */
	unsigned streak;
	bool building;
	struct sa_dir *dir;    /* the listing of streak_dir, or NULL */
	uint64_t used_ns;      /* its last lookup: the least recently used slot is taken */
};
struct lm_statahead {
	pthread_mutex_t lock;
	_Atomic uint64_t gen;  /* bumped by every change made through this mount */
	_Atomic uint64_t attr_gen; /* the same, but for writes and their reports (lm_sa_wrote) */
	struct lm_sa_slot slot[LM_SA_SLOTS];
};

/* leases.c: directories whose names the mount knows under a lease, answering lookups of names
 * they do not have. */
struct lm_ldir;
#define LM_LEASE_DIRS    64
#define LM_LEASE_BUCKETS 64
struct lm_leases {
	pthread_mutex_t lock;
	bool enabled;
	struct lm_ldir *dir[LM_LEASE_DIRS];
	/* By bucket of directory: this mount's changes under way and done, recalls and when the
	 * last came, and the directory whose "no such name" answers are being counted. */
	uint32_t inflight[LM_LEASE_BUCKETS];
	uint64_t done[LM_LEASE_BUCKETS];
	uint64_t recalls[LM_LEASE_BUCKETS];
	uint64_t recalled_ns[LM_LEASE_BUCKETS];
	uint64_t backoff_ns[LM_LEASE_BUCKETS]; /* no new lease there until recalled_ns + this */
	uint64_t miss_dir[LM_LEASE_BUCKETS];
	unsigned misses[LM_LEASE_BUCKETS];
	bool fetching[LM_LEASE_BUCKETS]; /* a list of a directory there is being fetched */
	uint64_t lost;         /* losses of every lease */
	size_t names;          /* kept, over all directories */
	uint64_t hits, fetches, recalled;
	uint64_t behind;       /* creates and unlinks sent behind under exclusive leases */
	uint32_t links;        /* links made through this mount (lm_lease_linked) */
};

struct lm_door;

struct lmount {
	loom_fs *fs;
	struct loom_connect_opts copts; /* how fs connected: the door's sessions connect alike */
	struct lm_door *door;    /* NULL: no door */
	struct fuse_session *se; /* for invalidating cached pages */
	struct lmount_opts opts;
	char mds_addr[512];      /* the MDS's addresses: a failover list (common/mdsaddr.h) */
	char fsname[16];
	/* The root's attributes as last read: what a stat of the mount point gets while the MDS is
	 * away, so that umount(8), which stats it, never waits for a server. */
	pthread_mutex_t root_lock;
	struct stat root_st;
	bool root_known;
	struct statvfs statfs_st; /* the same for statfs(2), which umount(8) asks too */
	bool statfs_known;

	/* What the kernel caches of each inode, and since when (cache.c). */
	pthread_mutex_t cache_lock;
	struct u64map inodes;  /* ino -> struct lm_inode * */
	struct u64map dirs;    /* directory ino -> its one dentry told (struct told_name *) */
	uint64_t dir_moves;    /* the MDS's dir_moves when every directory dentry was current (0:
	                        * not known yet) */
	uint32_t moved_pid;    /* the opener told ESTALE last because directories moved, and when */
	uint64_t moved_ns;
	uint32_t stale_pid;    /* the opener told ESTALE last, and when (its retry follows) */
	uint64_t stale_ns;

	pthread_mutex_t stamp_lock;
	/* Inodes this mount ever set an fcntl lock on (under stamp_lock): closing them must release
	 * the closer's locks at the MDS, as close(2) releases a process's locks. */
	struct u64map posix_locked;
	/* Closes dropping locks that are under way (under stamp_lock): the kernel sends the
	 * release of a process that died without waiting for it, so a lock request that finds the
	 * lock still held waits for them and asks again, as it would find it free on a local disk. */
	unsigned unlocks_running;
	pthread_cond_t unlocks_done;
	/* Handles this mount holds open, per inode (under stamp_lock; the count is the value). The
	 * kernel sends a release after close(2) has returned, so a layout change right after a
	 * close here can find the handle still open at the MDS; it waits for these instead. */
	struct u64map open_handles;
	pthread_cond_t handles_done;
	/* Every handle (fi->fh) the kernel holds, files' and directories' (under stamp_lock): a
	 * release the kernel queued before the unmount may never come, and what it would have
	 * closed is closed at the end (lm_handles_close_left). */
	struct u64map fhs;
	struct lm_statahead sa;
	struct lm_leases leases;
	/* Job ids: every request goes to the servers tagged with its caller's (common.c and door.c
	 * set it per request from jobs, which reads /proc/PID/environ and keeps it 10 s). */
	struct jobid_conf jobid;
	struct jobid_cache *jobs;
	/* What the mount counts of its requests and caches (mstats.h). */
	struct lm_mstats mstats;
};

/* Leases (leases.c). */
int lm_leases_init(struct lmount *m);
void lm_leases_fini(struct lmount *m);
/* Whether name is known not to be in parent (a lookup answers ENOENT without the MDS). */
bool lm_lease_absent(struct lmount *m, uint64_t parent, const char *name);
/* Whether a create of name in parent may be sent behind (libloom's loom_ll_create_behind): the
 * mount holds an exclusive lease on parent, trusted, without name; *dir its owner and mode. */
struct lm_lease_mark {
	uint64_t done;     /* the bucket's changes done when marked */
	bool times_valid;
	uint64_t gen;      /* the lease's grant (lm_lease_behind) */
	uint64_t made_ino; /* lm_lease_unlink_behind: the inode lm_lease_made_set noted, or 0 */
};
/* A file made behind under name in parent (its list has it marked LM_NAME_MADE): its inode, and
 * lm_attr_change_count when it was made. lm_lease_made: whether name is such a file, made under
 * the exclusive grant the mount holds now (trusted), and which (loom_ll_made_attr may answer its
 * lookup while the count has not moved since). */
void lm_lease_made_set(struct lmount *m, uint64_t parent, const char *name, uint64_t ino,
		       uint64_t attr_gen);
bool lm_lease_made(struct lmount *m, uint64_t parent, const char *name, uint64_t *ino,
		   uint64_t *attr_gen);
/* Whether this mount still holds grant gen of an exclusive lease on dir, trusted. */
bool lm_lease_excl_held(struct lmount *m, uint64_t dir, uint64_t gen);
bool lm_lease_behind(struct lmount *m, uint64_t parent, const char *name, struct stat *dir,
		     struct lm_lease_mark *mark);
/* Whether an unlink of name in parent may be sent behind (loom_ll_unlink_behind): the mount
 * holds an exclusive lease on parent, trusted, whose list has name as a file this mount made
 * under that grant (nobody else can hold an inode lease on it), not a directory. */
bool lm_lease_unlink_behind(struct lmount *m, uint64_t parent, const char *name, struct stat *dir,
			    struct lm_lease_mark *mark);
/* libloom's still(arg) for a change sent behind (asked once it counts as in flight, which a
 * give-back of the lease then waits for): the exclusive lease it relies on still stands. */
struct lm_lease_check {
	struct lmount *m;
	uint64_t parent;
	const char *name;
	bool unlink;
};
bool lm_lease_still(void *arg);
/* After lm_entries_end of a change sent behind in parent: its directory's times are now. */
void lm_lease_behind_done(struct lmount *m, uint64_t parent, const struct lm_lease_mark *mark);
/* A getattr of a directory this mount leases exclusively, answered from the lease (true, *st);
 * else *mark, for lm_lease_dir_seen with the MDS's answer. */
bool lm_lease_dir_attr(struct lmount *m, uint64_t dir, struct stat *st, struct lm_lease_mark *mark);
void lm_lease_dir_seen(struct lmount *m, uint64_t dir, const struct stat *st,
		       const struct lm_lease_mark *mark);
/* Drops the list of dir and gives its lease back (a create sent behind failed there). */
void lm_lease_drop(struct lmount *m, uint64_t dir);
/* The open file of a FUSE handle: a create sent behind is waited for (its error, or -EINTR). */
int lm_file(fuse_req_t req, struct fuse_file_info *fi, loom_file **f);
#define LM_FH_BEHIND ((uintptr_t)1) /* fi->fh tag: a loom_behind, not a loom_file */
/* The MDS answered a lookup in parent with "no such name" (after a few, a lease is taken). */
void lm_lease_missed(struct lmount *m, const struct loom_cred *cr, uint64_t parent);
/* loom_ll_mkdir, taking a lease on the new directory (empty: its list is known at once). */
int lm_mkdir_leased(struct lmount *m, const struct loom_cred *cr, uint64_t parent, const char *name,
		    mode_t mode, struct loom_ll_attr *a);
/* Around a change of entries through this mount: before the request (the directories it
 * changes), and after it with its result, the name removed from from_dir and the name added to
 * to_dir (NULL: none there; 0: no such directory), with the added name's type (DT_*; 0: not
 * known, or a rename's source's) and LM_NAME_MADE for a new inode this mount made. */
#define LM_NAME_MADE 0x80u
void lm_entries_begin(struct lmount *m, uint64_t dir1, uint64_t dir2);
void lm_entries_end(struct lmount *m, int rc, uint64_t from_dir, const char *removed,
		    uint64_t to_dir, const char *added, unsigned added_type);
/* The names' types are not known any more (a rename that exchanged them). */
void lm_lease_untype(struct lmount *m, uint64_t dir, const char *name);
/* A link made through this mount: the inode of a name marked LM_NAME_MADE may have it, and
 * others may reach that inode through it. */
void lm_lease_linked(struct lmount *m);

/* Statahead (statahead.c): true when the lookup of name in parent was answered from a listing
 * (*a); false to ask the MDS (names missing from a listing are always asked). */
bool lm_sa_lookup(struct lmount *m, const struct loom_cred *cr, uint64_t parent, const char *name,
		  struct loom_ll_attr *a);
/* A lookup of parent went to the MDS and answered rc. */
void lm_sa_looked_up(struct lmount *m, uint64_t parent, int rc);
/* Something changed through this mount: listings fetched before are not used again. */
void lm_sa_changed(struct lmount *m);
/* Writes through a handle, and their reports (flush, fsync, release): listings fetched before
 * are not used again, but attributes kept by loom_ll_attr_own stay (their handle's own). */
void lm_sa_wrote(struct lmount *m);
/* The count of changes through this mount other than lm_sa_wrote's. */
uint64_t lm_attr_change_count(struct lmount *m);
/* An open for writing: another handle's writes and reports may change a file's attributes
 * behind those loom_ll_attr_own keeps (listings fetched before stay good). */
void lm_attr_changed(struct lmount *m);
void lm_sa_init(struct lmount *m);
/* rc, after noting that the request that returned it may have changed something. */
static inline int lm_changed(struct lmount *m, int rc)
{
	lm_sa_changed(m);
	return rc;
}
void lm_sa_fini(struct lmount *m);
/* How many changes this mount has made (lm_sa_changed counts them). */
uint64_t lm_change_count(struct lmount *m);

/* The caller's identity for a request (groups read from /proc for non-root callers). */
void lm_cred(fuse_req_t req, struct loom_cred *cr);
struct lmount *lm_of(fuse_req_t req);
/* Replies with an entry (parent, name) for a (or the error). */
void lm_reply_entry(fuse_req_t req, int rc, uint64_t parent, const char *name, const struct loom_ll_attr *a);
void lm_reply_attr(fuse_req_t req, int rc, const struct stat *st);
/*
 * Interrupts. The kernel sends FUSE_INTERRUPT when the process waiting for a request gets a
 * signal; for kill -9 it then waits, in D state, until the request is answered. Every operation
 * that may wait for a server starts with LM_INTERRUPTIBLE(req): an interrupt then ends the
 * thread's waits for the servers, and the request is answered with EINTR at once.
 * The same scope tags the thread's requests with the caller's job id (libloom's loom_job_set)
 * until the operation returns, and then takes it back: a serving thread never carries one
 * caller's job into the next caller's requests. And it counts the request (mstats.h): its row
 * is named by the handler's name (lm_lookup: "lookup"), found once per handler.
 * LM_COUNTED(req) counts and does nothing else, for the handlers that never wait (forget).
 */
struct lm_intr_scope {
	int slot; /* this thread's slot in common.c's table, or -1 */
};
struct lm_intr_scope lm_intr_enter(fuse_req_t req, int row);
void lm_intr_leave(struct lm_intr_scope *s);
#define LM_INTERRUPTIBLE(req) \
	static _Atomic int lm_op_row_ = -1; \
	struct lm_intr_scope lm_intr_scope_ __attribute__((cleanup(lm_intr_leave), unused)) = \
		lm_intr_enter(req, lm_op_row(&lm_op_row_, __func__))
struct lm_count_scope {
	int row;
};
struct lm_count_scope lm_count_enter(fuse_req_t req, int row);
void lm_count_leave(struct lm_count_scope *s);
#define LM_COUNTED(req) \
	static _Atomic int lm_op_row_ = -1; \
	struct lm_count_scope lm_count_scope_ __attribute__((cleanup(lm_count_leave), unused)) = \
		lm_count_enter(req, lm_op_row(&lm_op_row_, __func__))

/* Wraps every reply to the kernel (fuse_reply_*): the request is counted just before the kernel
 * has its answer, so that the caller, woken by it, finds it counted (`rm f; loom stats
 * --mount`). A reply without it is counted when its handler returns. */
#define LM_REPLY(reply) (lm_op_end(), (reply))

/* Replies with an error (rc: 0 for success, or an errno of either sign), counted as the
 * request's error unless it answers a question (mstats.h, LM_ANS_*). Handlers answer errors
 * only through it. */
static inline void lm_reply_err(fuse_req_t req, int rc)
{
	lm_op_error(rc);
	LM_REPLY(fuse_reply_err(req, rc < 0 ? -rc : rc));
}

/* The lock and handle bookkeeping, freed once the session has ended. */
void lm_stamps_fini(struct lmount *m);
/* This mount's open handles of ino: one more, one fewer, and waiting (up to ms) until none
 * is left (true then). */
void lm_handle_opened(struct lmount *m, uint64_t ino);
void lm_handle_released(struct lmount *m, uint64_t ino);
/* The kernel holds fh from now on / gave it back (a loom_file, or a loom_behind tagged
 * LM_FH_BEHIND). */
void lm_fh_held(struct lmount *m, uint64_t fh);
void lm_fh_given_back(struct lmount *m, uint64_t fh);
/* After the session: closes the handles whose release never came (a close right before the
 * unmount), so that their writes are reported and nothing is left open at the MDS. */
void lm_handles_close_left(struct lmount *m);
bool lm_handles_wait(struct lmount *m, uint64_t ino, unsigned ms);
/* cache.c: what the kernel caches of each inode, checked at every open. */
void lm_cache_init(struct lmount *m);
void lm_cache_fini(struct lmount *m);
/* The kernel was given a dentry (parent, name) for a->st.st_ino, with these attributes. */
void lm_told_entry(struct lmount *m, uint64_t parent, const char *name, const struct loom_ll_attr *a);
/* The kernel was given these attributes. */
void lm_told_attr(struct lmount *m, const struct stat *st);
/* A report of this mount's writes was answered with these attributes: the kernel forgets the
 * size it holds if they differ. */
void lm_reported(struct lmount *m, const struct loom_ll_attr *a);
/* The kernel wrote up to end through this mount (its size grows with its writes). */
void lm_wrote(struct lmount *m, uint64_t ino, uint64_t end);
/* A change of the data made through this mount is version (0: one of unknown version): the
 * pages stay valid only if they held the version just before it. */
void lm_data_changed(struct lmount *m, uint64_t ino, uint64_t version);
/* Whether the pages hold version; from now on they do (an open: kept or dropped by the kernel). */
bool lm_data_current(struct lmount *m, uint64_t ino, uint64_t version);
/* What to expect of ino when opening it (for thread pid) through the names the kernel cached. */
void lm_open_expect(struct lmount *m, uint64_t ino, uint32_t pid, struct loom_ll_expect *ex);
/* After loom_ll_open of ino with those expectations returned rc (and *a): drops the dentries that
 * may lead wrongly and returns -ESTALE when the VFS must walk the path again (also for an open that
 * succeeded: the caller closes it), else rc; makes the kernel forget stale attributes. */
int lm_open_settle(struct lmount *m, uint64_t ino, uint32_t pid, int rc, const struct loom_ll_attr *a,
		   int flags);
/* The kernel dropped the inode, its dentries and cached pages with it. */
void lm_forget_inode(struct lmount *m, uint64_t ino);

/* Locks: record that ino has fcntl locks through this mount; release an owner's on close. */
void lm_locks_note(struct lmount *m, uint64_t ino);
/* Around the work of a close (flush or release): lock requests that find a conflict wait for
 * it. */
void lm_unlock_begin(struct lmount *m);
void lm_unlock_end(struct lmount *m);
void lm_locks_on_close(fuse_req_t req, uint64_t ino, struct fuse_file_info *fi);

/* The operation tables, one file per group. */
void lm_entry_ops(struct fuse_lowlevel_ops *ops);
void lm_file_ops(struct fuse_lowlevel_ops *ops);
void lm_dir_ops(struct fuse_lowlevel_ops *ops);
void lm_xattr_ops(struct fuse_lowlevel_ops *ops);
void lm_lock_ops(struct fuse_lowlevel_ops *ops);
void lm_ioctl_ops(struct fuse_lowlevel_ops *ops);

/* The virtual xattr holding a file's layout (as Lustre's lustre.lov). */
#define LM_LOV_XATTR "loom.lov"
#define LM_LOV_XATTR_LUSTRE "lustre.lov"

/* The job id of process pid (its uid and gid as the kernel gave them) for the calling thread's
 * requests from now on; pid 0 (the kernel's own requests: a release, pages written back): the
 * mount's own. lm_job_leave takes it back. */
void lm_job_enter(struct lmount *m, pid_t pid, uid_t uid, gid_t gid);
void lm_job_leave(void);

/* door.c: the door for users without the key (src/common/door.h). */
int lm_door_start(struct lmount *m, const char *path, struct lm_door **out);
const char *lm_door_path(const struct lm_door *d);
void lm_door_stop(struct lm_door *d);

#endif
