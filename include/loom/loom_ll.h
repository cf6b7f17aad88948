/*
 * libloom's inode-level API, for file system front ends such as the FUSE mount.
 *
 * Calls name inodes by number (the root is LOOM_ROOT_INO) and entries by (directory inode,
 * name), as the kernel's VFS does, and carry the identity of the process they act for. Inode
 * numbers are never reused, so a front end may keep them as long as it likes (the generation is
 * always 1). Conventions are those of loom.h: 0 or a negative errno; no symlink is ever followed.
 */
#ifndef LOOM_LOOM_LL_H
#define LOOM_LOOM_LL_H

#include <stdbool.h>

#include "loom/loom.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Attributes as a front end needs them: struct stat, and the versions that tell it whether what
 * it cached of an inode is still the inode's. Another client may have changed it since, and
 * times cannot tell (utimes sets them back, as cp -p, rsync -t and tar -x do).
 */
struct loom_ll_attr {
	struct stat st;
	uint64_t data_version; /* regular files: advanced by exactly one by every change of the bytes
	                        * or the size (a report of writes, a truncation, O_TRUNC, a
	                        * migration); never set back */
	uint64_t name_version; /* advanced by exactly one whenever a name of the inode comes or goes
	                        * (link, unlink, rename of it or over it) */
	uint64_t dir_moves;    /* opens only (0 from the other calls): the MDS's count of directory
	                        * renames, which starts anywhere when an MDS starts. While it stays
	                        * the same, no path a front end resolved through names it cached has
	                        * moved under it */
};

/* Errors: -ENOENT, -ENOTDIR, -EACCES (no search permission on parent). */
int loom_ll_lookup(loom_fs *fs, const struct loom_cred *cr, uint64_t parent, const char *name,
		   struct loom_ll_attr *a);
int loom_ll_getattr(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, struct loom_ll_attr *a);

#define LOOM_SET_MODE      0x001u
#define LOOM_SET_UID       0x002u
#define LOOM_SET_GID       0x004u
#define LOOM_SET_SIZE      0x008u
#define LOOM_SET_ATIME     0x010u
#define LOOM_SET_MTIME     0x020u
#define LOOM_SET_ATIME_NOW 0x040u
#define LOOM_SET_MTIME_NOW 0x080u
#define LOOM_SET_CTIME     0x100u

struct loom_setattr {
	unsigned int valid; /* LOOM_SET_* */
	mode_t mode;
	uid_t uid;
	gid_t gid;
	off_t size;
	struct timespec atime;
	struct timespec mtime;
	struct timespec ctime;
};

/*
 * chmod, chown, utimensat and truncate, with Linux's rules. f, when the caller holds the file
 * open (ftruncate, futimens), lets a writable handle truncate whatever the mode says, and its
 * unreported writes count. A size change also cuts the objects on the OSTs.
 * Errors: -EPERM, -EACCES, -EISDIR (size of a directory), -EFBIG, -EINVAL.
 */
int loom_ll_setattr(loom_fs *fs, const struct loom_cred *cr, uint64_t ino,
		    const struct loom_setattr *sa, loom_file *f, struct loom_ll_attr *a);

/* Regular files, fifos, sockets, devices (by S_IFMT of mode). mode is used as given: the caller
 * applies any umask. Errors: -EEXIST, -ENOSPC (no OST for a regular file's stripes, or the MDT is
 * full). */
int loom_ll_mknod(loom_fs *fs, const struct loom_cred *cr, uint64_t parent, const char *name,
		  mode_t mode, dev_t rdev, struct loom_ll_attr *a);
int loom_ll_mkdir(loom_fs *fs, const struct loom_cred *cr, uint64_t parent, const char *name,
		  mode_t mode, struct loom_ll_attr *a);
int loom_ll_unlink(loom_fs *fs, const struct loom_cred *cr, uint64_t parent, const char *name);
int loom_ll_rmdir(loom_fs *fs, const struct loom_cred *cr, uint64_t parent, const char *name);
/* flags: LOOM_RENAME_NOREPLACE, LOOM_RENAME_EXCHANGE. */
int loom_ll_rename(loom_fs *fs, const struct loom_cred *cr, uint64_t parent, const char *name,
		   uint64_t newparent, const char *newname, unsigned int flags);
int loom_ll_link(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, uint64_t newparent,
		 const char *newname, struct loom_ll_attr *a);
int loom_ll_symlink(loom_fs *fs, const struct loom_cred *cr, const char *target, uint64_t parent,
		    const char *name, struct loom_ll_attr *a);
/* As loom_readlink. */
int loom_ll_readlink(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, char *buf, size_t cap,
		     size_t *len);

/* access(2): mask of R_OK, W_OK, X_OK (F_OK = 0), checked by the MDS. Errors: -EACCES. */
int loom_ll_access(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, int mask);

/* What a front end that reached an inode through names it cached expects still to hold when it
 * opens it (0: no expectation). Versions are never 0. */
struct loom_ll_expect {
	uint64_t name_version; /* no name of it came or went since */
	uint64_t dir_moves;    /* no directory moved since */
};

/* Opens an inode (the MDS checks the access mode). *a holds the attributes as of the open, from
 * the MDS (with dir_moves), so a front end can tell whether what it cached is still valid. Reads
 * and writes then use loom_pread/loom_pwrite/loom_fsync/loom_close. The file acts with the
 * identity given here. With expect (may be NULL), nothing at all is done when an expectation
 * fails (no O_TRUNC): -ESTALE, with *a as the inode is now (and dir_moves). -ESTALE with
 * a->st.st_ino 0: the inode is gone. */
int loom_ll_open(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, int flags,
		 const struct loom_ll_expect *expect, loom_file **out, struct loom_ll_attr *a);
/* Creates (or with !(flags & O_EXCL) opens an existing) regular file and opens it. mode as given.
 * Errors: -EEXIST (O_EXCL), -EISDIR. */
int loom_ll_create(loom_fs *fs, const struct loom_cred *cr, uint64_t parent, const char *name,
		   mode_t mode, int flags, loom_file **out, struct loom_ll_attr *a);
/* Reports the size and mtime of what f wrote to the MDS, without closing: after it returns,
 * every later open anywhere sees the data (close-to-open). A no-op when nothing was written. */
int loom_flush(loom_file *f);
/* loom_flush of every handle this client holds open on ino (before releasing a lock, so that the
 * next holder sees what was written under it). */
int loom_ll_flush_ino(loom_fs *fs, uint64_t ino);
/* The inode a file handle is open on. */
uint64_t loom_file_ino(const loom_file *f);
/* The flags it was opened with (O_ACCMODE and the others given to open). */
int loom_file_flags(const loom_file *f);
/* The file's attributes as this handle last heard them from the MDS (at open, fstat, flush or
 * fsync), with its own writes counted. No request is sent. */
void loom_file_attr(loom_file *f, struct stat *st);
void loom_file_ll_attr(loom_file *f, struct loom_ll_attr *a);
/* After loom_flush or loom_fsync: the data version the MDS gave when that report carried writes
 * (the version before it was one less: a cache that was valid then, and holds these writes, is
 * valid now), else 0. */
uint64_t loom_file_reported_version(loom_file *f);
/* f holds writes that no report has carried yet (its close will report them). */
bool loom_file_unreported(loom_file *f);
/* The same when those attributes are at most max_age_ns old (0); -EAGAIN when older. For a mount
 * that may answer a getattr through an open file from them within its attribute timeout. */
int loom_file_attr_recent(loom_file *f, uint64_t max_age_ns, struct stat *st);
/* The same for an inode, through any handle of it in this client whose tag is `tag` (fstat(2)
 * reaches a FUSE mount as a getattr without its file handle). -EAGAIN when there is none. */
int loom_ll_attr_recent(loom_fs *fs, uint64_t ino, uint64_t max_age_ns, uint64_t tag,
			struct stat *st);
/* A value the caller keeps with a handle (0 until set): loom-mount keeps its change count. */
void loom_file_set_tag(loom_file *f, uint64_t tag);
uint64_t loom_file_tag(const loom_file *f);

/*
 * Lists a directory from `cookie` (0 at the start). For each entry, calls fn with the entry, its
 * attributes when plus (else NULL) and the cookie that resumes after it; fn returns nonzero to
 * stop (its buffer is full), and that entry counts as not delivered. *eof tells whether the end
 * was reached. Errors: -ENOTDIR, -EACCES.
 */
typedef int (*loom_ll_dirent_fn)(void *arg, const struct loom_dirent *ent,
				 const struct loom_ll_attr *a, uint64_t next_cookie);
int loom_ll_readdir(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, uint64_t cookie,
		    bool plus, size_t max_bytes, loom_ll_dirent_fn fn, void *arg, bool *eof);

/*
 * Directory leases (docs/architecture.md, "Directory leases"). A client that caches what a
 * directory holds (and what it does not) asks for a lease with the listing; until the lease is
 * given back, the MDS recalls it before another client changes the directory's entries.
 *  - loom_ll_set_lease_handler names fn, once: fn(arg, ino, gen) runs on the MDS connection's
 *    thread when the MDS recalls the lease on directory ino (every grant up to gen): fn drops
 *    what it cached under it, quickly and without calling libloom, and libloom gives the lease
 *    back once fn returned. fn(arg, 0, gen): every lease up to gen is lost (the MDS took them
 *    back, or a new session began).
 *  - loom_ll_leases_fresh: whether the MDS was heard from recently enough for a lease still
 *    held to be trusted (a client stopped for a while may have lost its leases unawares).
 *  - loom_ll_readdir_leased is loom_ll_readdir asking for a lease: *lease_gen is the grant
 *    (0: none), valid unless a recall or a loss covering it came meanwhile. With *excl true
 *    it asks for the lease exclusive (nobody else holds one: then others' lookups and listings
 *    of the directory wait for it too, and its owner and mode are covered): *excl says whether
 *    it is. Under an exclusive lease, loom_ll_create_behind may make files there.
 *  - loom_ll_mkdir_leased is loom_ll_mkdir asking for a lease on the new directory, which is
 *    empty: *lease_gen and *excl as above.
 *  - loom_ll_lease_return gives a lease back unasked (the cache let the directory go).
 */
typedef void (*loom_lease_fn)(void *arg, uint64_t ino, uint64_t gen);
int loom_ll_set_lease_handler(loom_fs *fs, loom_lease_fn fn, void *arg);
int loom_ll_readdir_leased(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, uint64_t cookie,
			   bool plus, size_t max_bytes, loom_ll_dirent_fn fn, void *arg, bool *eof,
			   uint64_t *lease_gen, bool *excl);
int loom_ll_mkdir_leased(loom_fs *fs, const struct loom_cred *cr, uint64_t parent, const char *name,
			 mode_t mode, struct loom_ll_attr *a, uint64_t *lease_gen, bool *excl);
void loom_ll_lease_return(loom_fs *fs, uint64_t ino, uint64_t gen);
bool loom_ll_leases_fresh(loom_fs *fs);

/*
 * Creates sent behind (docs/architecture.md, "Creates sent behind"), under an exclusive lease on
 * directory parent whose owner and mode are dir's: the file is made here, with an inode number
 * the MDS handed ahead and the attributes it will have (*a), and the create goes to the MDS
 * without waiting for its answer. -EAGAIN: not this way (no numbers at hand, a caller the MDS
 * must judge, a node key, or still(arg) false once the create counts as in flight: the lease it
 * relied on was recalled meanwhile): create as usual. The file's calls wait for the answer:
 *  - loom_behind_file: the open file (once the MDS answered), or the create's error (-EIO, the
 *    same every time, once it failed), or -EINTR when the caller was interrupted;
 *  - loom_behind_close: waits, closes the file, frees b; the create's error if it failed.
 * Every other request of this client goes after the creates sent behind were answered.
 */
typedef struct loom_behind loom_behind;
int loom_ll_create_behind(loom_fs *fs, const struct loom_cred *cr, uint64_t parent,
			  const struct stat *dir, const char *name, mode_t mode, int flags,
			  bool (*still)(void *arg), void *arg, struct loom_ll_attr *a, loom_behind **out);
uint64_t loom_behind_ino(const loom_behind *b);
uint64_t loom_behind_parent(const loom_behind *b);
/* Whether the file was asked for yet (loom_behind_file): if not, nothing was written to it. */
bool loom_behind_used(loom_behind *b);
int loom_behind_file(loom_behind *b, loom_file **f);
int loom_behind_close(loom_behind *b);
/*
 * Attributes nobody else can change. A file made behind can be reached by nobody else while the
 * exclusive lease on its directory stands: its attributes are those the MDS answered at its
 * create, or at the last report of this client's writes, with the writes not yet reported. The
 * caller tells what else it had changed when the create was made (gen, its own count of changes
 * through it; 0: nothing kept) and the lease's grant (lease_gen). loom_ll_attr_own answers those
 * attributes (0) while exactly one handle of ino is open here, made behind, and none of its
 * reports failed, with the gen, directory and grant the caller must check still hold; -EAGAIN
 * otherwise (ask the MDS).
 */
void loom_behind_own(loom_behind *b, uint64_t gen, uint64_t lease_gen);
int loom_ll_attr_own(loom_fs *fs, uint64_t ino, struct stat *st, uint64_t *gen, uint64_t *parent,
		     uint64_t *lease_gen);
/*
 * The attributes of a file made behind, after its last close: what the MDS answered at its create
 * (a file let go before the answer) or at its last close here, whichever came last (0). Valid
 * while nobody else can reach the file (the exclusive lease it was made under stands) and
 * nothing changed it through this client since: the caller checks both. -ENOENT: not kept (not
 * made here, or forgotten); -EBUSY: a handle of it is open here. loom_ll_made_forget drops what
 * is kept of ino (an unlink or rename of it).
 */
int loom_ll_made_attr(loom_fs *fs, uint64_t ino, struct loom_ll_attr *a);
void loom_ll_made_forget(loom_fs *fs, uint64_t ino);
/*
 * An unlink sent behind, under an exclusive lease on directory parent whose owner and mode are
 * dir's and whose list has name as a file that is not a directory: 0 once it is on its way to the
 * MDS. -EAGAIN: not this way (a caller the MDS must judge, a sticky directory, files open here
 * under inode leases, a node key, or still(arg) false once it counts as in flight): unlink as
 * usual. Refused by the MDS after all, it is logged and the lease handler is told to drop parent
 * (as at a recall). A create of the same name is not sent behind until the MDS answered.
 */
int loom_ll_unlink_behind(loom_fs *fs, const struct loom_cred *cr, uint64_t parent,
			  const struct stat *dir, const char *name, bool (*still)(void *arg), void *arg);

int loom_ll_getxattr(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, const char *name,
		     void *buf, size_t cap, size_t *len);
int loom_ll_setxattr(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, const char *name,
		     const void *value, size_t len, int flags);
int loom_ll_listxattr(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, char *buf, size_t cap,
		      size_t *len);
int loom_ll_removexattr(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, const char *name);

/* As loom_getlayout / loom_setlayout / loom_dellayout, by inode. */
int loom_ll_getlayout(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, struct loom_layout **out);
int loom_ll_setlayout(loom_fs *fs, const struct loom_cred *cr, uint64_t ino,
		      const struct loom_layout *layout);
int loom_ll_dellayout(loom_fs *fs, const struct loom_cred *cr, uint64_t ino);

/* ---- locks, held at the MDS so that every mount sees them ---- */

struct loom_lock {
	int type;        /* F_RDLCK, F_WRLCK, F_UNLCK */
	uint64_t start;
	uint64_t end;    /* inclusive; UINT64_MAX: to the end of the file, however long */
	uint32_t pid;    /* the process that holds (or asks for) it */
};
#define LOOM_LOCK_WAIT  0x1u /* block until granted (F_SETLKW, flock without LOCK_NB) */
#define LOOM_LOCK_FLOCK 0x4u /* a flock(2) lock: whole file, apart from fcntl locks */

/* Takes or releases (F_UNLCK) a lock for owner (an id the caller chooses: a process's for fcntl
 * locks, an open file's for flock). Errors: -EAGAIN (conflict, no wait), -EINTR (waiting and
 * loom_ll_lock_cancel was called), -ENOENT. */
int loom_ll_lock(loom_fs *fs, uint64_t ino, uint64_t owner, const struct loom_lock *lk, unsigned flags);
/* F_GETLK: *lk in, the first conflicting lock out (type F_UNLCK when there is none). */
int loom_ll_getlock(loom_fs *fs, uint64_t ino, uint64_t owner, struct loom_lock *lk, unsigned flags);
/* Ends a waiting loom_ll_lock of this owner on ino with -EINTR. */
int loom_ll_lock_cancel(loom_fs *fs, uint64_t ino, uint64_t owner);

/*
 * Interrupts. A thread that serves a request its caller may give up on (a FUSE request the
 * kernel interrupts for a signal, kill -9 included) enters an interrupt; loom_intr_fire, from any
 * other thread, then ends that thread's waits for the servers: the calls make -EINTR. Requests
 * already sent may still be applied, as after a signal on NFS with `intr`.
 */
typedef struct loom_intr loom_intr;
loom_intr *loom_intr_new(void);
void loom_intr_free(loom_intr *in);
/* From now on the calling thread's waits end when `in` fires (NULL: they no longer do). */
void loom_intr_enter(loom_intr *in);
void loom_intr_fire(loom_intr *in);
/*
 * Job ids (loom.h, "job ids"). A front end's thread that acts for another process (loom-mount,
 * for the caller of each request) names that process's job id: the thread's requests carry it
 * until the next loom_job_set, and so does the work they leave for later (writes sent behind and
 * sent again, Data-on-MDT bytes sent at a close, prefetchers started). "": none; NULL: this
 * process's own again (the default).
 */
void loom_job_set(const char *job);
/* Whether the MDS is away (its connection reconnecting): a request to it would wait. */
bool loom_ll_mds_away(loom_fs *fs);
/* While on, the calling thread's requests do not wait for a server that is away or found hung:
 * they fail with -EIO then. Returns what it was. */
bool loom_ll_nowait(bool on);

/*
 * What this process's client decided from its caches since it started (or the last
 * loom_client_stats_clear), counted where each decision is made, for a front end to show
 * (loom-mount's `loom stats --mount`). Process-wide: every loom_fs of the process counts here.
 * size is sizeof(struct loom_client_stats) as the caller was built with (a later libloom's
 * longer struct fills only that much).
 */
struct loom_client_stats {
	uint64_t dom_hits;        /* reads of Data-on-MDT bytes answered from this client's copy */
	uint64_t dom_misses;      /* ... that fetched them from the MDS first */
	uint64_t writes_behind;   /* writes answered before the OSTs had them (1 MiB or less) */
	uint64_t writes_sync;     /* writes answered once written (larger ones) */
	uint64_t creates_behind;  /* creates answered here and sent behind (directory leases) */
	uint64_t unlinks_behind;  /* unlinks answered here and sent behind */
	uint64_t prefetch_hits;   /* loom_prefetch_take: items ready when taken */
	uint64_t prefetch_waits;  /* items taken while being read (the reader waited) */
	uint64_t prefetch_misses; /* items the reader read itself (it jumped ahead) */
};
void loom_client_stats(struct loom_client_stats *out, size_t size);
void loom_client_stats_clear(void);

/* The wire image of a layout (what the "loom.lov" virtual xattr holds), and back. */
int loom_layout_to_xattr(const struct loom_layout *l, void *buf, size_t cap, size_t *len);
int loom_layout_from_xattr(const void *buf, size_t len, struct loom_layout **out);

#ifdef __cplusplus
}
#endif

#endif
