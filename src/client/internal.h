/*
 * libloom internals: the metadata client (mdc_*), the object client and striping (io_*), and
 * the shared state of a connected file system.
 */
#ifndef LOOM_CLIENT_INTERNAL_H
#define LOOM_CLIENT_INTERNAL_H

#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "loom/loom.h"
#include "client/jobtag.h"
#include "common/auth.h"
#include "common/mdsaddr.h"
#include "common/u64map.h"
#include "net/rpc.h"
#include "proto/codec.h"
#include "proto/wire.h"

/*
 * One OST as this client knows it: where its OSS is, and a connection to it of its own. The
 * connection recovers by itself (reconnects and resends within the recovery window), asking
 * the MDS's OST table where the OST is now before each attempt (an OSS that restarted may listen
 * elsewhere).
 */
struct ost_slot {
	loom_fs *fs;
	uint32_t idx;
	pthread_mutex_t lock;  /* everything below */
	bool known;
	uint32_t state;
	char uuid[40];
	char host[64];
	uint16_t port;
	char fo_host[64];      /* its failover partner's address ("": none), from the MDS */
	uint16_t fo_port;
	bool dial_fo;          /* the next dial goes to the partner (they alternate) */
	uint64_t instance;     /* the OST's, as its server said at the last connection (0: none yet) */
	_Atomic uint32_t loss_gen; /* times it changed: writes acknowledged before may be lost
	                            * (bumped by the connection's hello, on its I/O thread) */
	struct rpc_conn *conn; /* NULL until first use, or after it failed for good */
};

struct loom_fs {
	pthread_mutex_t mds_lock;      /* mds, when it is replaced after a failure */
	struct rpc_conn *mds;
	char fsname[16];
	/* Where the MDS may answer: a failover list, tried in turn when (re)connecting. The MDS
	 * connection's thread reads it before every dial (fs_mds_resolve), so it has a lock of its
	 * own, never held across a call. */
	pthread_mutex_t addr_lock;
	struct mds_addrs mds_addrs;
	unsigned mds_cur;              /* the address dialled last */
	bool mds_stay;                 /* it answered: the next dial tries it again first */
	char mds_other_fs[16];         /* what the last MDS that refused our fsname serves */
	uint64_t uuid[2];              /* this client, for the MDS's sessions and reply cache */
	uint8_t key[64];               /* the file system key, or this node's (keylen 0: none) */
	size_t keylen;
	struct loom_key_id key_id;     /* whose key: node "" is the file system's */
	uint32_t recovery_ms;          /* how long a lost server is waited for */
	uint32_t soft_ms;              /* soft mounts: how long a request may go unanswered */
	bool encrypt;                  /* every connection encrypts its frames */
	uint32_t at_min_ms;            /* the least time without a reply that means a hung server */
	uint64_t mds_boot;             /* the MDS session last connected to (MDS_CONNECT session_id) */
	bool stopping;                 /* loom_disconnect began (set under mds_lock and ost_lock) */
	bool no_walk;                  /* the MDS has no MDS_WALK (it predates it): walk by lookups */

	pthread_mutex_t cred_lock;
	struct loom_cred cred;
	mode_t umask;                  /* the process's, applied to new files and directories as
	                                * open(2) and mkdir(2) would */

	pthread_mutex_t ost_lock;      /* the OST table (the slots array; each slot has its lock) */
	struct ost_slot **osts;        /* indexed by OST index; NULL where none */
	uint32_t nosts;                /* slots allocated */
	uint32_t ost_gen;
	struct rpc_conn **graveyard;   /* failed connections, freed at disconnect */
	uint32_t ngraveyard;
	uint64_t last_refresh_ns;      /* of the OST table, after a failure to reach an OST */

	/* Open files by inode, so that what this client wrote and has not reported yet shows in
	 * every answer about that inode (stat after write), and an explicit mtime wins over it. */
	pthread_mutex_t files_lock;
	struct u64map files;           /* ino -> first loom_file (linked by next_same_ino) */
	/* Inodes the MDS said have no extended attributes (LW_ATTR_F_NO_XATTRS), with when it said
	 * so: getxattr answers ENODATA for them itself for a second, as an attribute cache would. */
	pthread_mutex_t bare_lock;
	struct u64map bare;            /* ino -> (void *)(uintptr_t)monotonic ns */
	/* The same files in a list of their own, which the MDS connection walks to open them again
	 * after the MDS restarted: its lock is never held across a request. */
	pthread_mutex_t open_lock;
	loom_file *open_list;
	uint64_t mds_gen;              /* under open_lock: bumped each time the list was opened
	                                * again, so that an open answered meanwhile can tell */
	/* Per inode, while a handle of it is open here: write errors and the truncation epoch
	 * (inode.c). Taken inside files_lock and wb_lock, never around another lock. */
	pthread_mutex_t shared_lock;
	struct u64map shared;          /* ino -> struct ino_shared */
	uint32_t marks_kept;           /* entries kept past their inode's last close for their
	                                * writes' marks (inode.c), under shared_lock */
	/* Mirrored files' objects this client marked stale (io_mirror.c): no handle here reads them,
	 * whatever layout it was opened with. Keyed by mirror_obj_key. */
	pthread_mutex_t stale_lock;
	struct u64map stale;
	/* The locks the MDS granted this client, per inode (locks.c): replayed after an MDS
	 * restart. Taken on the MDS connection's I/O thread, never around another lock. */
	pthread_mutex_t held_lock;
	struct u64map held;            /* ino -> struct lock_range list (sid 0) */
	/* Changes answered and not committed yet, by transno (replay.c): changed on the MDS
	 * connection's I/O thread only. */
	pthread_mutex_t kept_lock;
	struct kept_change *kept;
	size_t nkept;
	uint64_t last_committed;       /* the highest any reply said */
	bool changed;                  /* a change was answered before its commit: say goodbye */
	struct loom_leases *leases;    /* directory leases' handler and thread (leases.c), or NULL */
	struct loom_ileases *ileases;  /* inode leases (ileases.c), with leases only */
	/* When the last MDS reply arrived (monotonic ns), and how long leases stay trusted after
	 * one (its lease_trust_ms): written on the MDS connection's I/O thread. */
	_Atomic uint64_t mds_heard_ns;
	_Atomic uint32_t lease_trust_ms;
	/* Creates sent behind (behind.c): how many are in flight, and the inode numbers the MDS
	 * handed ahead that are not used yet (under behind_lock, never held across a call but the
	 * one asking for numbers, made when none is in flight). */
	pthread_mutex_t behind_lock;
	pthread_cond_t behind_cond;
	_Atomic uint32_t behind_inflight;
	_Atomic uint32_t behind_orphans; /* answered after their caller let go: closes owed */
	_Atomic bool inos_stale;       /* the MDS may have dropped the range (a new session there,
	                                * or a number refused): the next create asks anew */
	uint64_t inos_next, inos_end;
	uint64_t inos_refused_ns;      /* MDS_INOS failed then: not asked again for a while */
	/* Unlinks sent behind, in flight, counted by a hash of their directory and name (under
	 * behind_lock): a create of such a name is not sent behind. */
	uint16_t unlinking[64];
	/* Files made behind whose open file is not made yet (their first use builds it from the
	 * create's answer), by inode: the count of directory recalls when made, shifted left, with
	 * bit 0 set once another open or a setattr of the inode went through this client (under
	 * behind_lock). A recall since means another client may have reached it too. */
	struct u64map unsettled;
	_Atomic uint64_t dir_recalls;
	/* Attributes of files made behind, after their last close (made.c), by inode. */
	pthread_mutex_t made_lock;
	struct u64map made;
	/* Connected through a mount's door (door.c), not to the servers: the public calls the door
	 * carries go through it, and everything else fails with -EOPNOTSUPP. */
	struct door *door;
	/* This process's job id, for the calls of threads that have none of their own (jobtag.c):
	 * made from job_conf (with the environment's overrides) in the process of fork generation
	 * job_gen (0: not made yet). */
	pthread_mutex_t job_lock;
	struct jobid_conf job_conf;
	char job[LOOM_JOBID_LEN];
	unsigned job_gen;
};

struct loom_file {
	loom_fs *fs;
	uint64_t door_fh;          /* the door's handle, when fs->door */
	struct stat door_st;       /* ... and for a file opened for reading there: its attributes at */
	void *door_head;           /* open, and its first door_head_len bytes (all of it when fewer */
	size_t door_head_len;      /* than DOOR_HEAD_BYTES), which reads are served from */
	struct loom_file *next_same_ino; /* under fs->files_lock */
	struct loom_file *prev_open, *next_open; /* under fs->open_lock */
	struct loom_cred cred;     /* who opened it: reports go out in that name */
	uint64_t ino;
	uint64_t obj_owner;        /* the inode its objects are tagged with, for loom fsck (what
	                            * OST_WRITE carries): ino, or for a migration's copy the file it
	                            * copies, whose objects they become at the swap */
	uint64_t handle;           /* the MDS's; 0 while local */
	bool local;                /* opened under an inode lease, unknown to the MDS (ileases.c);
	                            * under fs->open_lock and lock */
	bool made_here;            /* made behind by this client (made.c keeps it after its close) */
	bool born_local;           /* ... when opened (its close asks nothing of the MDS unless it
	                            * became real) */
	int lost_err;              /* made real too late: its file was gone (reads fail) */
	uint64_t lease_gen;        /* the inode lease it was opened under */
	int flags;                 /* open flags */
	struct loom_layout *layout;/* NULL for non-regular files */
	pthread_mutex_t lock;      /* size, pos, dirty, written_end */
	pthread_mutex_t append_lock; /* one O_APPEND write at a time: offset choice and I/O */
	uint64_t size;             /* the file's size as this client knows it */
	uint64_t pos;
	bool dirty;                /* written since the last report to the MDS */
	uint64_t writes;           /* file_modified calls: a report clears dirty only if none came
	                            * while it was on its way (another descriptor's close, a FLUSH,
	                            * runs beside this one's writes) */
	bool mtime_dirty;          /* ... and no explicit mtime was set since: report the write time */
	bool privs_checked;        /* setuid/setgid dropped (or not there) since they were last set */
	int64_t *obj_blocks;       /* per stripe, blocks the object occupies as last heard (-1:
	                            * unknown); reported as st_blocks with the size */
	uint64_t reported_version; /* the data version the last report made, when it carried
	                            * writes (0: it did not) */
	uint32_t trunc_epoch;      /* the file's truncation epoch as this handle knows it: its writes
	                            * and reports are made in it */
	uint64_t written_end;      /* the end of what this handle wrote (and the servers took) since
	                            * its last report: what it reports, so a size it merely saw is
	                            * never reported */
	uint64_t fail_off;         /* the first byte of a write that failed since then (UINT64_MAX:
	                            * none): the report stops there */
	uint64_t err_sample;       /* the inode's write errors this handle has reported (errseq) */
	struct timespec mtime;     /* of the last write */
	struct lw_attr attr;       /* as of open */
	uint64_t attr_ns;          /* clock_mono_ns() when attr came from the MDS */
	uint64_t tag;              /* the caller's (loom_file_set_tag) */
	/* A file made behind (loom_behind_own): attr and this handle's unreported writes are the
	 * file's attributes while nothing but its own reports changed it (the caller's own_gen says
	 * what else changed) and the exclusive lease on own_parent (grant own_lease) stands:
	 * nobody else can reach it. 0 once a report failed (the MDS may hold anything). */
	uint64_t own_gen, own_parent, own_lease;
	/* Write-behind: small writes are answered once their data is copied and on its way; they
	 * are waited for before anything that must see them (a read, a truncate, fsync, the size
	 * report at flush and close), and their errors are reported there. wb_lock is held while
	 * waiting. */
	pthread_mutex_t wb_lock;
	struct io_wb *wb[16];      /* in flight, oldest first from wb_first */
	unsigned wb_first, wb_count;
	uint64_t wb_bytes;
	int wb_err;                /* the first error of a write already answered */
	/* An erasure-coded file's row that sequential writes are filling (write.c), under wb_lock:
	 * sent whole with its parity when full, or when drained. */
	uint8_t *ec_row;           /* the row's bytes from ec_off, ec_len of them */
	uint64_t ec_off, ec_len;
	uint64_t ec_sent;          /* the first ec_sent of them are on the objects already, */
	uint32_t ec_epoch;         /* sent in this truncation epoch, */
	bool ec_trust;             /* and nobody here wrote over them since */
	char ec_jobid[LOOM_JOBID_LEN]; /* the job that wrote the first bytes not sent (jobtag.h) */
	struct dom_cache *dom;     /* Data-on-MDT bytes (layout->dom_size > 0), shared per inode */
};

static inline bool file_can_write(const loom_file *f)
{
	return (f->flags & O_ACCMODE) != O_RDONLY;
}

struct loom_dir {
	loom_fs *fs;
	struct loom_cred cred;
	uint64_t ino;
	uint64_t cookie;
	bool eof;
	void *page;      /* the reply body being walked */
	uint32_t page_len;
	struct lw_rd rd;
	uint32_t left;   /* entries left in the page */
	uint64_t door_fh; /* the door's handle, when fs->door (page holds door_dirents) */
	uint32_t door_pos; /* where the next one is in page */
};

/* fs.c */
loom_fs *fs_new(void);
void fs_connect_why(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void fs_cred(loom_fs *fs, struct loom_cred *out);
/* An error of a call in a connection's hello that means the connection failed (rather than the
 * server answering): the hello is tried again on the next connection. */
bool fs_conn_error(int rc);
/* What an attribute reply says about the inode's extended attributes; forget it (a change). */
void fs_note_attr(loom_fs *fs, const struct lw_attr *attr);
void fs_forget_bare(loom_fs *fs, uint64_t ino);
/* The MDS said within the last second that ino has no extended attributes. */
bool fs_known_bare(loom_fs *fs, uint64_t ino);
/* The MDS connection; a failed one is replaced by a new one first (requests that were in flight
 * on the old one failed with -EIO). -EIO when the MDS cannot be reached. */
int fs_mds_conn(loom_fs *fs, struct rpc_conn **out);
/* The connection for an OST index, refreshing the OST table once if the index is unknown.
 * -ENODEV for an index the MDS does not know; -EIO when the OSS cannot be reached. */
int fs_ost_conn(loom_fs *fs, uint32_t ost_idx, struct rpc_conn **out);
/* What every connection of fs is opened with, beyond its own name, hello and address. */
void fs_conn_opts(const loom_fs *fs, struct rpc_conn_opts *o);
/* How many times OST idx's server changed for one that may have lost writes the one before
 * acknowledged (its instance, OST_CONNECT): 0 for an OST not connected to yet. */
uint32_t fs_ost_loss_gen(loom_fs *fs, uint32_t idx);
/* The same counter, to read at a reply's arrival (slots live until disconnect); NULL for an OST
 * not known. */
_Atomic uint32_t *fs_ost_loss_ref(loom_fs *fs, uint32_t idx);
/* Under ost_lock: keeps a failed connection until disconnect, since another thread may still be
 * submitting to it (which fails such calls at once). */
void fs_bury(loom_fs *fs, struct rpc_conn *c);
int fs_refresh_osts(loom_fs *fs);

/* abi.c: struct stat and statvfs back from their fixed-width forms. */
void abi_stat_from_attr(const struct loom_attr *a, struct stat *st);
void abi_statvfs_from_fsattr(const struct loom_fsattr *a, struct statvfs *st);

/* door.c and door_api.c: the calls a mount's door carries, for a loom_fs connected through one
 * (loom_connect_mount). Each mirrors the public call of its name. */
void door_close(loom_fs *fs);
int door_stat(loom_fs *fs, const char *path, bool follow, struct stat *st);
int door_path_op(loom_fs *fs, int op, const char *p0, const char *p1, uint32_t flags, uint32_t mode, int64_t off);
int door_readlink(loom_fs *fs, const char *path, char *buf, size_t cap, size_t *len);
int door_utimens(loom_fs *fs, const char *path, const struct timespec times[2]);
int door_statfs(loom_fs *fs, struct statvfs *st);
int door_getxattr(loom_fs *fs, const char *path, const char *name, void *buf, size_t cap, size_t *len);
int door_setxattr(loom_fs *fs, const char *path, const char *name, const void *value, size_t len, int flags);
int door_listxattr(loom_fs *fs, const char *path, char *buf, size_t cap, size_t *len);
int door_getlayout(loom_fs *fs, const char *path, struct loom_layout **out);
int door_setlayout(loom_fs *fs, const char *path, const struct loom_layout *layout);
int door_opendir(loom_fs *fs, const char *path, loom_dir **out);
int door_readdir(loom_dir *d, struct loom_dirent *ent);
void door_closedir(loom_dir *d);
int door_open(loom_fs *fs, const char *path, int flags, mode_t mode, const struct loom_layout *layout,
	      loom_file **out);
ssize_t door_rw(loom_file *f, int op, void *buf, size_t len, off_t off);
int door_file_op(loom_file *f, int op, int64_t off, uint32_t flags, uint64_t arg, int64_t *val);
int door_seek(loom_file *f, int op, off_t off, int whence, off_t *out);
int door_fstat(loom_file *f, int op, struct stat *st);
int door_close_file(loom_file *f);

/* mdc.c: metadata RPCs, by inode. Replies are checked for length before use. */
int mdc_getattr(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, struct lw_attr *out);
int mdc_lookup(loom_fs *fs, const struct loom_cred *cr, uint64_t parent, const char *name,
	       size_t len, struct lw_attr *out);
int mdc_setattr(loom_fs *fs, const struct loom_cred *cr, const struct lw_setattr *sa,
		struct lw_attr *out);
/* layout_out may be NULL; handle is 0 unless LW_CR_OPEN. */
int mdc_create(loom_fs *fs, const struct loom_cred *cr, uint64_t parent, const char *name,
	       size_t len, uint32_t mode, uint32_t rdev, uint32_t flags, uint32_t open_flags,
	       const struct loom_layout *layout, struct lw_create_rep *rep,
	       struct loom_layout **layout_out);
/* An MDS_CREATE reply's body: the answer, and the layout (malloc'd; NULL: none). */
int mdc_create_rep_decode(const void *body, uint32_t len, struct lw_create_rep *rep,
			  struct loom_layout **layout_out);
/* MDS_INOS: count inode numbers ahead, for creates sent behind. */
int mdc_inos(loom_fs *fs, uint32_t count, struct lw_inos_rep *out);
/* behind.c: creates sent behind. */
void behind_init(loom_fs *fs);
void behind_destroy(loom_fs *fs);
/* An open or setattr of ino through this client: a file made behind and not used yet must not
 * take the create's answer for its size and Data-on-MDT bytes (behind.c). */
void behind_touch(loom_fs *fs, uint64_t ino);
/* Waits until every create sent behind was answered (-EINTR: the caller was interrupted). */
int behind_barrier(loom_fs *fs);
/* A create sent behind whose caller let go before the answer: its handle is closed (with send; a
 * call: the lease thread's, through leases_push_orphan from the I/O thread), and it is freed. */
struct loom_behind;
void behind_orphan_close(struct loom_behind *b, bool send);
void leases_push_orphan(loom_fs *fs, struct loom_behind *b);
/* Whether the calling thread is libloom's lease thread. */
bool leases_on_own_thread(void);
/* With lease_gen non-NULL, asks for a lease on the new directory (*lease_gen: 0, none); *excl
 * as for mdc_readdir. */
int mdc_mkdir(loom_fs *fs, const struct loom_cred *cr, uint64_t parent, const char *name,
	      size_t len, uint32_t mode, struct lw_attr *out, uint64_t *lease_gen, bool *excl);
int mdc_unlink(loom_fs *fs, const struct loom_cred *cr, uint16_t op, uint64_t parent,
	       const char *name, size_t len, uint16_t flags);
int mdc_rename(loom_fs *fs, const struct loom_cred *cr, uint64_t sp, const char *sn, size_t sl,
	       uint64_t dp, const char *dn, size_t dl, uint32_t flags);
int mdc_link(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, uint64_t parent,
	     const char *name, size_t len, struct lw_attr *out);
int mdc_symlink(loom_fs *fs, const struct loom_cred *cr, uint64_t parent, const char *name,
		size_t len, const char *target, size_t tlen, struct lw_attr *out);
int mdc_readlink(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, char *buf, size_t cap,
		 size_t *len);
/* leases.c: the MDS connection's notifications; a reply's or a new session's LEASES_LOST;
 * at disconnect, the lease thread stops (before the connections), then its memory goes. */
void leases_on_notify(void *arg, uint16_t opcode, const void *body, uint32_t len);
void leases_lost(loom_fs *fs, uint64_t upto_gen);
/* What this client keeps under its lease on directory dir is wrong (a change sent behind failed
 * there): the handler drops it, as at a recall; the lease goes back when the MDS recalls it. */
void leases_drop_dir(loom_fs *fs, uint64_t dir);
void leases_on_prefix(void *arg, const struct lw_mds_rep_prefix *pre, uint64_t sent_ns);
void leases_stop(loom_fs *fs);
void leases_destroy(loom_fs *fs);
/* An inode lease to give back (ino 0: every local open becomes real), from the lease thread. */
void leases_push_inode(loom_fs *fs, uint64_t ino, uint64_t gen);

struct loom_ll_expect;
struct mdc_lease_grant;
/* ileases.c: inode leases, and opens for reading answered under them ("local" files). */
int ileases_init(loom_fs *fs);
void ileases_destroy(loom_fs *fs);
/* Whether an open of ino should ask for a lease (it was opened before); *epoch for keep. */
bool ileases_want(loom_fs *fs, uint64_t ino, uint64_t *epoch);
/* After an open that asked (ileases_want true), whatever its outcome: keeps a grant (takes
 * g->body), or gives it back when a recall of ino or a loss came meanwhile. */
void ileases_keep(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, uint64_t epoch,
		  struct mdc_lease_grant *g);
/* I/O thread: a recall; whether it was of an inode lease this client keeps or is asking for. */
bool ileases_recalled(loom_fs *fs, uint64_t ino, uint64_t gen);
/* I/O thread: leases up to upto lost; their local opens become real (from the lease thread). */
void ileases_lost(loom_fs *fs, uint64_t upto);
/* At disconnect: every inode lease kept, taken out (*out malloc'd); they all go back at once
 * (LW_LEASE_ALL). */
uint32_t ileases_take_all(loom_fs *fs, struct lw_lease **out);
/* Lease thread: the local opens of inos (an ino 0: all) become real MDS opens. */
void ileases_make_real(loom_fs *fs, const uint64_t *inos, uint32_t ninos);
/* A read-only open answered from a kept lease: -EAGAIN when it must go to the MDS. */
int ileases_open(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, int flags,
		 const struct loom_ll_expect *expect, loom_file **out, struct lw_attr *attr,
		 uint64_t *dir_moves);
/* Before a read of f: a local open whose lease is no longer trusted becomes real (its error,
 * if its file is gone). */
int ileases_file_check(loom_file *f);
/* A local file (born so) leaves the open files, where no conversion finds it from then on. */
void ileases_leave(loom_file *f);
/* A file stopped being local (made real, or closed). */
void ileases_local_ended(loom_fs *fs);
/* The MDS said f's file is gone: if f is local, its reads fail with ESTALE from now on. */
void ileases_gone(loom_file *f);
/* Around an unlink: whether it may say LW_NM_UNLEASED (nothing open here under a lease, and
 * nothing opens so until ileases_unlink_end). */
bool ileases_unlink_begin(loom_fs *fs);
void ileases_unlink_end(loom_fs *fs);

/* Returns the reply body (caller frees) holding lw_readdir_rep + entries. With lease_gen
 * non-NULL, asks for a lease on the directory: *lease_gen the grant (0: none); *excl (may be
 * NULL) asks it exclusive, and says whether it is. */
int mdc_readdir(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, uint64_t cookie,
		uint32_t max_bytes, bool plus, void **page, uint32_t *page_len, uint64_t *lease_gen,
		bool *excl);
int mdc_statfs(loom_fs *fs, const struct loom_cred *cr, struct lw_statfs_rep *out);
int mdc_ost_admin(loom_fs *fs, const struct loom_cred *cr, uint32_t idx, uint32_t set, uint32_t clear);
int mdc_ost_remove(loom_fs *fs, const struct loom_cred *cr, uint32_t idx, uint32_t flags,
		   struct lw_ost_remove_rep *out);
int mdc_swap_layouts(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, uint64_t tmp, uint64_t size,
		     int64_t mtime, uint32_t mtime_ns);
/* MDS_POOL; with reply, the reply body (malloc'd) for LIST. */
/* The parts of a request body after the cred prefix: a fixed struct and up to three tails. */
struct mdc_body {
	const void *part[4];
	size_t len[4];
};
/* Sends one MDS request (cred NULL: without a cred prefix) and waits. On success the reply body
 * is in call->rbody (release with rpc_call_release). */
int mdc_call(loom_fs *fs, const struct loom_cred *cr, uint16_t op, const struct mdc_body *b,
	     struct rpc_call *call);
/* MDS_MIRROR LW_MIRROR_STALE: objects of mirrored file ino (by OST and id) are stale, committed
 * when this returns 0; *gen gets the layout generation that says so. */
int mdc_mirror_stale(loom_fs *fs, uint64_t ino, const struct loom_ostobj *objs, uint32_t n,
		     uint32_t *gen);
int mdc_pool(loom_fs *fs, const struct loom_cred *cr, uint32_t cmd, const char *name, uint32_t idx,
	     void **reply, uint32_t *len);
/* GETXATTR / LISTXATTR (name NULL). */
int mdc_getxattr(loom_fs *fs, const struct loom_cred *cr, uint16_t op, uint64_t ino,
		 const char *name, void *buf, size_t cap, size_t *len);
int mdc_setxattr(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, const char *name,
		 const void *value, size_t vlen, uint32_t flags);
int mdc_removexattr(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, const char *name);
/* MDS_LOCK; rep is filled for a test. */
int mdc_lock(loom_fs *fs, const struct loom_cred *cr, const struct lw_lock_req *req,
	     struct lw_lock_rep *rep);
int mdc_access(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, uint32_t mask);
/* Data-on-MDT bytes as they travel with MDS_OPEN (known: the layout has a Data-on-MDT part and
 * its bytes came along; data malloc'd, NULL when len is 0) or MDS_CLOSE (written at off). */
struct mdc_dom {
	bool known;
	void *data;
	uint64_t off;
	uint32_t len;
};
/* Conditions of an open (LW_OPQ_*): when they no longer hold, mdc_open returns -ESTALE with
 * rep->attr and rep->dir_moves as they are now (rep->attr.ino != 0; for a gone inode it is 0). */
struct mdc_open_if {
	uint32_t flags;
	uint64_t names;
	uint64_t dir_moves;
};
/* dom (may be NULL) receives the file's Data-on-MDT bytes; cond may be NULL. */
int mdc_open(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, uint32_t open_flags,
	     const struct mdc_open_if *cond, struct lw_open_rep *rep, struct loom_layout **layout_out,
	     struct mdc_dom *dom);
/* An inode lease granted with an open (LW_OPQ_LEASE): gen 0 when none; body (malloc'd, the
 * caller's) is the open's reply. */
struct mdc_lease_grant {
	uint64_t gen;
	void *body;
	uint32_t len;
};
/* mdc_open asking for an inode lease (a read-only open without O_TRUNC). */
int mdc_open_leased(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, uint32_t open_flags,
		    const struct mdc_open_if *cond, struct lw_open_rep *rep,
		    struct loom_layout **layout_out, struct mdc_dom *dom, struct mdc_lease_grant *grant);
/* An MDS_OPEN reply's body, decoded as mdc_open does. */
int mdc_open_decode(const void *body, uint32_t len, struct lw_open_rep *rep,
		    struct loom_layout **layout_out, struct mdc_dom *dom);
/* MDS_WALK's open: filled when it opened (opened), as mdc_open fills its results. */
struct mdc_walk_open {
	uint32_t open_flags;  /* wire open flags; read-only without O_TRUNC */
	bool opened;
	struct lw_open_rep rep;
	struct loom_layout *layout;
	struct mdc_dom dom;
};
/* MDS_WALK: as much of path (len bytes) as the MDS resolves (flags LW_WALK_PARENT); with wo, the
 * entry is opened too when the MDS can (wo->opened). -EOPNOTSUPP from an MDS without it. */
int mdc_walk(loom_fs *fs, const struct loom_cred *cr, const char *path, size_t len, uint32_t flags,
	     struct mdc_walk_open *wo, struct lw_attr *attr, uint32_t *consumed);
/* MDS_CLOSE of a handle that reports nothing (opened read-only), sent without waiting for the
 * answer: the handle only keeps an unlinked file alive, and the MDS ends it in order. */
int mdc_close_detached(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, uint64_t handle);
/* MDS_DOM_READ: *data malloc'd (NULL when *len is 0). */
int mdc_dom_read(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, void **data, uint32_t *len);
/* MDS_CLOSE or MDS_SIZE_UPDATE of writes made in truncation epoch `epoch`; with dom (n > 0), its
 * parts are written (LW_CL_DOM). */
struct dom_parts;
int mdc_close(loom_fs *fs, const struct loom_cred *cr, uint16_t op, uint64_t ino, uint64_t handle,
	      uint32_t flags, uint64_t size, uint32_t epoch, struct timespec mtime, uint64_t blocks,
	      const struct dom_parts *dom, struct lw_attr *out);
int mdc_getlayout(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, struct loom_layout **out);
int mdc_setlayout(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, uint32_t flags,
		  const struct loom_layout *req, struct loom_layout **out);
/* Returns the reply body (caller frees) holding lw_ost_table_rep + entries, checked. */
int mdc_ost_table(loom_fs *fs, void **body, uint32_t *count, uint32_t *gen);
/* The same for MDS_OST_FAILOVERS: lw_ost_table_rep + count lw_ost_addr, checked (-EOPNOTSUPP
 * from an MDS without it). */
int mdc_ost_failovers(loom_fs *fs, void **body, uint32_t *count);

/* io.c: striped data I/O against the OSSs. */
/* Reads [off, off+len) of a file of file_size bytes; bytes past the objects' ends are zeros.
 * The caller has clipped len to file_size. */
int io_read(loom_fs *fs, uint64_t ino, const struct loom_layout *l, void *buf, uint64_t len,
	    uint64_t off);
/* obj_blocks (may be NULL): per stripe, the blocks each object occupies, as the replies say.
 * Made in truncation epoch `epoch`: -ESTALE when an object was cut in a later one (learn it and
 * write again), -EAGAIN when the cut of this one has not reached an object yet (again shortly). */
int io_write(loom_fs *fs, uint64_t ino, const struct loom_layout *l, const void *buf, uint64_t len,
	     uint64_t off, uint32_t epoch, int64_t *obj_blocks);
/* What a write to an erasure-coded file knows of the rest of its rows (io_ec.c): with it, more
 * rows go whole, with their parity, rather than with their parity marked stale. */
struct ec_span {
	uint64_t known;  /* buf[-known, 0) holds the file's bytes just before off, on the objects */
	bool ends_file;  /* the file ends at off + len: its last row has zeros after that */
};
/* io_write with what the caller knows of the rows around (span; only for an erasure-coded
 * file, else as io_write). */
int io_write_span(loom_fs *fs, uint64_t ino, const struct loom_layout *l, const void *buf, uint64_t len,
		  uint64_t off, uint32_t epoch, const struct ec_span *span, int64_t *obj_blocks);
/* Write-behind (io.c): a write of a copy of buf, in flight until io_wb_finish. */
struct io_wb;
int io_wb_start(loom_fs *fs, uint64_t ino, const struct loom_layout *l, const void *buf,
		uint64_t len, uint64_t off, uint32_t epoch, struct io_wb **out);
/* The same with data (malloc'd) handed over: the batch frees it; on a failure the caller keeps it. */
int io_wb_start_owned(loom_fs *fs, uint64_t ino, const struct loom_layout *l, uint8_t *data,
		      uint64_t len, uint64_t off, uint32_t epoch, struct io_wb **out);
/* The write's own copy of the bytes (valid until io_wb_finish), its truncation epoch, and the
 * job it was written for (jobtag.h): settling it and sending it again are that job's. */
const void *io_wb_data(const struct io_wb *b);
uint32_t io_wb_epoch(const struct io_wb *b);
const char *io_wb_jobid(const struct io_wb *b);
bool io_wb_done(struct io_wb *b);
/* Waits until it has been answered (0), or until the calling thread is interrupted (-EINTR),
 * when it stays in flight: the one waiting gives up waiting, not the write. */
int io_wb_settled(struct io_wb *b);
bool io_wb_overlaps(const struct io_wb *b, uint64_t off, uint64_t len);
uint64_t io_wb_len(const struct io_wb *b);
uint64_t io_wb_off(const struct io_wb *b);
/* Waits for it and records the blocks its objects reported, keeping it (and its bytes); its
 * error. io_wb_free then frees it. */
int io_wb_wait(struct io_wb *b, int64_t *obj_blocks);
void io_wb_free(struct io_wb *b);
/* Waits for it, records the blocks its objects reported, frees it; its error. */
int io_wb_finish(struct io_wb *b, int64_t *obj_blocks);
/* fallocate(2) of mode (LW_FALLOC_*) over file range [off, off + len) of the objects: one
 * OST_FALLOCATE per object the range touches, all at once; obj_blocks (may be NULL) gets what
 * each reports. A failure may leave the range done on some objects only. */
int io_fallocate(loom_fs *fs, uint64_t ino, const struct loom_layout *l, uint32_t mode,
		 uint32_t epoch, uint64_t off, uint64_t len, int64_t *obj_blocks);
/* The first file offset at or after off where the objects hold data (LW_SEEK_DATA) or a hole
 * (LW_SEEK_HOLE; an object's end starts one): one OST_SEEK per object, all at once. *found is
 * UINT64_MAX when there is none. Knows nothing of the file's size or Data-on-MDT part. */
int io_seek(loom_fs *fs, const struct loom_layout *l, uint32_t whence, uint64_t off, uint64_t *found);
/* Fills the entries of obj_blocks that are < 0 (unknown) by asking those objects' OSSs. */
int io_blocks(loom_fs *fs, uint64_t ino, const struct loom_layout *l, int64_t *obj_blocks);
/* fsync of every object. */
int io_sync(loom_fs *fs, uint64_t ino, const struct loom_layout *l);

/* dom.c: a file's Data-on-MDT bytes, one cache per inode shared by its handles here. */
struct dom_cache;
/* A cache of its own for a new handle; data (malloc'd, owned from now on) is what the open
 * brought when known. */
int dom_new(uint32_t cap, void *data, uint32_t len, bool known, struct dom_cache **out);
/* Under fs->files_lock: the handle joins the inode's cache; what its open brought refreshes it.
 * Frees mine. */
void dom_share(struct dom_cache *shared, struct dom_cache *mine);
/* Under fs->files_lock: a handle leaves. */
void dom_put(struct dom_cache *c);
/* [off, off + len) within [0, dom_size): fetched from the MDS first when not known. */
int dom_read(loom_file *f, void *buf, size_t len, uint64_t off);
int dom_write(loom_file *f, const void *buf, size_t len, uint64_t off);
/* Dirty bytes on their way to the MDS: the body tail of MDS_CLOSE / MDS_SIZE_UPDATE (n
 * lw_dom_part, each followed by its bytes) and what dom_sent needs to know. */
struct dom_parts {
	void *buf;     /* malloc'd; NULL when nothing is dirty */
	uint32_t len;  /* bytes of buf */
	uint32_t n;    /* parts in it */
	uint64_t end;  /* the end of the last part: the size it implies */
	uint64_t gen;  /* the write generation it was taken at */
	bool more;     /* dirty extents that did not fit in the budget remain */
	char jobid[LOOM_JOBID_LEN]; /* the job that wrote them: their report goes in its name */
};
/* The first dirty extents, as many as fit in budget bytes of parts (at least one). */
int dom_take(struct dom_cache *c, size_t budget, struct dom_parts *out);
/* A report carried them: they are clean unless written (or cut) since they were taken. */
void dom_sent(struct dom_cache *c, const struct dom_parts *sent);
void dom_truncate(struct dom_cache *c, uint64_t size);
/* Forgets the bytes that are not dirty (a lock was granted: another node may have written). */
void dom_forget(struct dom_cache *c);
/* 512-byte blocks its bytes occupy on the MDT, for st_blocks. */
uint64_t dom_blocks(struct dom_cache *c);
/* [off, off + len) within [0, dom_size) reads as zeros from now on: the data bytes there are
 * written with zeros (sent with the next report, as a write's), those past the data's end are a
 * hole already. Fetched from the MDS first when not known. */
int dom_zero(loom_file *f, uint64_t off, uint64_t len);
/* Where the data bytes end: [0, *end) is data, then a hole up to dom_size (or the file's end).
 * Fetched from the MDS first when not known. */
int dom_data_end(loom_file *f, uint64_t *end);
void files_dom_forget(loom_fs *fs, uint64_t ino);

/* file.c */
/* Completes an open that the MDS granted: with O_TRUNC cuts the objects (the MDS already set the
 * size to 0), then makes the handle. Takes ownership of layout. On failure the MDS handle is
 * closed again. mds_gen is fs_mds_gen() from before the open was sent: if the MDS restarted
 * since, the handle may be the dead MDS's, and the file is opened again. */
/* A read-only open answered under an inode lease (ileases.c): no MDS handle. */
int file_open_local(loom_fs *fs, const struct loom_cred *cr, int flags, const struct lw_attr *attr,
		    struct loom_layout *layout, struct mdc_dom *dom, loom_file **out);
int file_finish_open(loom_fs *fs, const struct loom_cred *cr, int flags, const struct lw_attr *attr,
		     uint64_t handle, struct loom_layout *layout, bool created, struct mdc_dom *dom,
		     uint64_t mds_gen, loom_file **out);
/* How many times the MDS connection opened this client's files again after an MDS restart. */
uint64_t fs_mds_gen(loom_fs *fs);

/* write.c */
/* The handle changed the file's bytes, its size up to end (0: not its size), or its space: its
 * next report says so (LW_CL_DATA, the size, mtime and blocks), as for a write. */
void file_modified(loom_file *f, uint64_t end);
/* A change of [off, off + len) reached the objects (rc 0), or failed with rc (it may have been
 * applied in part): the end the next report may give as the size, or the error every handle of
 * the inode reports once (errseq). */
void file_wrote(loom_file *f, uint64_t off, uint64_t len, int rc);
/* Before the first change through a handle: setuid/setgid go, as a write by others drops them. */
int file_drop_privs(loom_file *f);
/* The truncation epoch this handle writes in: the newest one known here. A handle that moves to
 * a newer one forgets what it wrote before (those writes came before the truncation, which cut
 * what of them lay past its size). */
uint32_t file_epoch(loom_file *f);
/* A request to the objects made in a truncation epoch (a write, an allocation): 0 or an error. */
typedef int (*file_epoch_send)(loom_file *f, uint32_t epoch, void *arg);
/* Sends it again after rc (-ESTALE or -EAGAIN) from sending it in epoch `sent`: in a newer
 * epoch (-ESTALE: a truncation elsewhere cut an object since; the MDS tells which, unless this
 * client learned it meanwhile), or shortly (-EAGAIN: the cut of an epoch this client already
 * knows of has not reached an object yet). Gives up with -EIO after the recovery window. Any
 * other rc is returned as it is. */
int file_send_again(loom_file *f, int rc, uint32_t sent, file_epoch_send send, void *arg);
/* Sends it in the handle's epoch, and again as file_send_again does. */
int file_send_in_epoch(loom_file *f, file_epoch_send send, void *arg);
/* Waits for the write-behind of every handle of ino here; its error (kept for their flush), or
 * -EINTR when the calling thread was interrupted first: the writes stay in flight, and a caller
 * that drains to keep an order (nothing of ours lands after a punch) must stop there. */
int files_drain_ino(loom_fs *fs, uint64_t ino);
/* The same for one handle; file_drain_locked under its wb_lock. */
int file_drain(loom_file *f);
int file_drain_locked(loom_file *f);

/* Open-file registry (files.c). */
/* The file's size as this client knows it (size: the caller's own figure): another handle of
 * ours may have written past what it saw at its open (a reader that bypasses the page cache must
 * see it, as locally). */
uint64_t files_written_size(loom_fs *fs, uint64_t ino, uint64_t size);
void files_add(loom_fs *fs, loom_file *f);
void files_remove(loom_fs *fs, loom_file *f);
/* Folds this client's unreported writes to ino into attributes the MDS just gave (and lets
 * handles without such writes learn the size). */
void files_pending_attr(loom_fs *fs, struct lw_attr *attr);
/* An explicit mtime was set on ino: the handles' write times must not overwrite it. */
void files_forget_mtime(loom_fs *fs, uint64_t ino);
/* Reports what every handle of ino here wrote and has not reported yet (before a truncation;
 * file.c). */
int files_report_ino(loom_fs *fs, uint64_t ino);
/* inode.c: per inode, what the handles here share: write errors (errseq) and the truncation
 * epoch. ino_forget when the inode's last handle here goes, ino_shared_destroy at disconnect. */
void ino_error(loom_fs *fs, uint64_t ino, int err);
/* Where a new handle starts: before the last error when nobody has reported it. */
uint64_t ino_error_sample(loom_fs *fs, uint64_t ino);
/* The error a handle at *sample has not reported yet (0: none), which it reports now. */
int ino_error_take(loom_fs *fs, uint64_t ino, uint64_t *sample);
/* The newest truncation epoch known here, after learning `learned` (0: nothing new). */
uint32_t ino_epoch(loom_fs *fs, uint64_t ino, uint32_t learned);
void ino_forget(loom_fs *fs, uint64_t ino);
void ino_shared_destroy(loom_fs *fs);
/* Writes acknowledged and not yet fsynced, by the objects' owner (lw_ost_io.ino): each OST that
 * acknowledged one, with its loss generation (ostconns.c) when the oldest was acknowledged. An
 * fsync takes them, syncs, and reports EIO when an OST's server changed since for one that may
 * have lost them (file.c). */
struct ost_loss_mark {
	uint32_t ost;
	uint32_t gen;
};
/* A write to ost acknowledged by the server of loss generation gen (io.c). */
void ino_mark_acked(loom_fs *fs, uint64_t ino, uint32_t ost, uint32_t gen);
/* Gives back marks taken (malloc'd, n of them) that an fsync could not settle; merged with those
 * made meanwhile, the older generation winning. */
void ino_mark_unsynced(loom_fs *fs, uint64_t ino, struct ost_loss_mark *marks, uint32_t n);
/* The marks, which leave the inode (caller frees; NULL: nothing unsynced). */
struct ost_loss_mark *ino_unsynced_take(loom_fs *fs, uint64_t ino, uint32_t *n);
/* ino was truncated through this client (attr: the MDS's answer): its handles' sizes, their
 * Data-on-MDT cache and the truncation epoch follow. */
void files_truncated(loom_fs *fs, const struct lw_attr *attr);
/* Under f->lock: the file's mode as last heard; setuid/setgid set again (a chmod since the last
 * write, here or elsewhere) are dropped by the next write, as locally. */
static inline void file_privs_follow(loom_file *f, uint32_t mode)
{
	if (mode & (S_ISUID | S_ISGID))
		f->privs_checked = false;
}
/* A setattr through this client changed ino's mode or owner (attr, the MDS's answer): its
 * handles know, and a write drops setuid/setgid bits set again. */
void files_mode_set(loom_fs *fs, const struct lw_attr *attr);

/* locks.c: the locks this client holds, as the MDS granted them, for the replay after an MDS
 * restart. */
/* replay.c */
void kept_changes_init(loom_fs *fs);
void kept_changes_destroy(loom_fs *fs);
/* The MDS connection's on_reply: keeps what may have to be replayed, drops what is committed. */
void kept_changes_on_reply(void *arg, struct rpc_call *call);
bool kept_changes_any(loom_fs *fs);
/* loom_disconnect: commits what is kept, and tells the MDS this client goes (MDS_SYNC, BYE);
 * waits for an MDS that is away only with wait, and only when something is kept. */
void kept_changes_goodbye(loom_fs *fs, bool wait);
/* In the hello after an MDS restart: sends what is kept, then that there is no more. */
int kept_changes_replay(loom_fs *fs, struct rpc_hs *hs);

void held_locks_init(loom_fs *fs);
void held_locks_destroy(loom_fs *fs);
/* An MDS_LOCK request on its way, for held_locks_on_reply. */
struct held_note {
	loom_fs *fs;
	struct lw_lock_req req;
};
/* rpc_call's on_complete for MDS_LOCK (arg: a struct held_note): a grant or an unlock the MDS
 * answered with 0 changes the record, as it changed the MDS's locks. */
void held_locks_on_reply(struct rpc_call *call, void *arg);
/* In the MDS connection's hello, after an MDS restart and the files opened again: every lock
 * held is replayed (LW_LK_REPLAY), those the MDS refuses are forgotten (logged), and the end is
 * said (LW_LK_REPLAY_DONE). 0, or the connection's error (the hello is tried again). */
int held_locks_replay(loom_fs *fs, struct rpc_hs *hs);
/* The number of ranges held on ino (tests, and the log). */
size_t held_locks_count(loom_fs *fs, uint64_t ino);

/* api.c */
void attr_to_stat(const struct lw_attr *a, struct stat *st);
/* ll.c */
struct loom_ll_attr;
void attr_to_ll(const struct lw_attr *attr, struct loom_ll_attr *a);
/* made.c: keeps attr as the file's after its last close here; a file not kept yet only if
 * made_here (made behind by this client). */
void made_init(loom_fs *fs);
void made_destroy(loom_fs *fs);
void made_put(loom_fs *fs, const struct lw_attr *attr, bool made_here);

#endif
