/*
 * The MDT: Loom's namespace, attributes, xattrs, layouts and OST table in one LMDB environment.
 *
 * Everything here runs on the MDS's single metadata thread, which batches requests into one
 * write transaction (group commit), so nothing in the store takes locks. Every function returns 0
 * or a negative errno, with the errno a local Linux file system would give for the same call.
 *
 * Transactions: the server opens one write transaction per batch and one child transaction per
 * request (mdt_txn_child), so a failed request leaves no trace and the others still commit.
 *
 * Inode numbers come from a counter that only grows, so a number is never reused (gen is 1).
 */
#ifndef LOOM_MDT_STORE_H
#define LOOM_MDT_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "loom/types.h"
#include "proto/codec.h"
#include "proto/wire.h"

struct mdt_store;
struct mdt_txn;

/* Creates a new MDT in mdt_dir (created if missing): root directory (ino 1, mode 0755, uid 0,
 * gid 0) and the filesystem default layout (RAID-0, 4 MiB, 1 stripe, offset -1).
 * -EEXIST if mdt_dir already holds an MDT; -EINVAL for an fsname of 0 or more than 8 characters
 * or with characters other than [A-Za-z0-9_-]. */
int mdt_format(const char *mdt_dir, const char *fsname);

/* Opens an MDT; -ENOENT if none was formatted there. */
int mdt_store_open(const char *mdt_dir, struct mdt_store **out);
void mdt_store_close(struct mdt_store *s);
const char *mdt_store_fsname(const struct mdt_store *s);

int mdt_txn_begin(struct mdt_store *s, bool write, struct mdt_txn **out);
/* A nested write transaction inside a write transaction. */
int mdt_txn_child(struct mdt_txn *parent, struct mdt_txn **out);
/* Both end (and free) the transaction. Commit makes it durable (fsync) for a top-level one. */
int mdt_txn_commit(struct mdt_txn *t);
void mdt_txn_abort(struct mdt_txn *t);

/* ---- namespace ---- */

/* "." and ".." are understood in lookup. Lookup needs search (x) permission on parent. */
int mdt_lookup(struct mdt_txn *t, const struct loom_cred *cr, uint64_t parent, const char *name,
	       size_t len, struct lw_attr *out);
int mdt_getattr(struct mdt_txn *t, uint64_t ino, struct lw_attr *out);

/* chmod/chown/utimes/truncate rules as Linux applies them (owner or root for chmod, root for
 * chown to another uid, setgid cleared by chmod of a non-member's file, setuid/setgid cleared by
 * chown, UTIME_NOW needs write permission or ownership, SIZE needs write permission unless
 * LW_SA_FH). ctime is updated on any change. Truncation of a regular file changes only the MDS's
 * size; the client punches the objects. */
int mdt_setattr(struct mdt_txn *t, const struct loom_cred *cr, const struct lw_setattr *sa,
		struct timespec now, struct lw_attr *out);

/* Creates a regular file (or fifo, socket, char/block device: S_IFMT of mode; 0 = regular).
 * Needs w+x on parent. The new file's gid follows a setgid parent. A regular file gets a layout
 * at once: `req` (may be NULL) fields that are 0/empty inherit from the parent's default, which
 * itself falls back to the filesystem default; its objects are allocated on OSTs chosen as
 * mdt_alloc_stripes says. Returns -ENOSPC when not enough OSTs are active for the count asked.
 * An existing name: -EEXIST if excl, else its attributes (and layout) with *created = false.
 * *layout_out (may be NULL) receives a malloc'd layout for regular files, NULL otherwise. */
int mdt_create(struct mdt_txn *t, const struct loom_cred *cr, uint64_t parent, const char *name,
	       size_t len, uint32_t mode, uint32_t rdev, bool excl, const struct lw_layout *req,
	       struct timespec now, struct lw_attr *out, struct loom_layout **layout_out,
	       bool *created);

/* A new directory inherits its parent's default layout (if the parent has one of its own). */
int mdt_mkdir(struct mdt_txn *t, const struct loom_cred *cr, uint64_t parent, const char *name,
	      size_t len, uint32_t mode, struct timespec now, struct lw_attr *out);

/* What happened to an inode whose name went away (unlink, or rename over it). */
struct mdt_unlinked {
	uint64_t ino;    /* 0 if no inode lost a link */
	uint32_t nlink;  /* links left; at 0 the inode is an orphan, see mdt_inode_release */
	uint32_t mode;
};

/* Sticky-directory rules apply. unlink of a directory: -EISDIR. */
int mdt_unlink(struct mdt_txn *t, const struct loom_cred *cr, uint64_t parent, const char *name,
	       size_t len, struct timespec now, struct mdt_unlinked *victim);
/* -ENOTEMPTY for a non-empty directory, -ENOTDIR for a non-directory, -EBUSY for the root. */
int mdt_rmdir(struct mdt_txn *t, const struct loom_cred *cr, uint64_t parent, const char *name,
	      size_t len, struct timespec now);

/* rename(2) and renameat2(2) (LW_RENAME_NOREPLACE, LW_RENAME_EXCHANGE): onto an existing file or
 * empty directory; -EINVAL when moving a directory into its own subtree; -EISDIR/-ENOTDIR for
 * mismatched types; -ENOTEMPTY over a non-empty directory; same-inode rename is a no-op.
 * *victim reports the replaced inode, if any. */
int mdt_rename(struct mdt_txn *t, const struct loom_cred *cr, uint64_t src_parent,
	       const char *src, size_t src_len, uint64_t dst_parent, const char *dst,
	       size_t dst_len, uint32_t flags, struct timespec now, struct mdt_unlinked *victim);

/* -EPERM for a directory; -EMLINK beyond 65000 links. */
int mdt_link(struct mdt_txn *t, const struct loom_cred *cr, uint64_t ino, uint64_t new_parent,
	     const char *name, size_t len, struct timespec now, struct lw_attr *out);
int mdt_symlink(struct mdt_txn *t, const struct loom_cred *cr, uint64_t parent, const char *name,
		size_t len, const char *target, size_t target_len, struct timespec now,
		struct lw_attr *out);
/* -EINVAL if ino is not a symlink. buf gets the target (not NUL-terminated). */
int mdt_readlink(struct mdt_txn *t, uint64_t ino, char *buf, size_t cap, size_t *len);

/* Appends entries after `cookie` to w with lw_readdir_put (with attributes when plus) until w is
 * full or the directory ends. "." has cookie 1, ".." cookie 2, then entries in creation order
 * with cookies from 3 (an entry renamed in gets a new cookie). Needs read permission.
 * -ENOTDIR for a non-directory. If not even one entry fits, -EINVAL. */
int mdt_readdir(struct mdt_txn *t, const struct loom_cred *cr, uint64_t ino, uint64_t cookie,
		bool plus, struct lw_wr *w, uint32_t *count, bool *eof);

/* ---- xattrs: user.* need read/write permission on the inode (and user.* only on regular files
 * and directories, else -EPERM on write); trusted.* need root (uid 0); security.* and system.*
 * are stored as given. -ENODATA for a missing one; -ERANGE when cap is too small (cap 0 asks
 * for the size only). ---- */
int mdt_getxattr(struct mdt_txn *t, const struct loom_cred *cr, uint64_t ino, const char *name,
		 size_t nlen, void *buf, size_t cap, size_t *len);
int mdt_setxattr(struct mdt_txn *t, const struct loom_cred *cr, uint64_t ino, const char *name,
		 size_t nlen, const void *value, size_t vlen, uint32_t flags, struct timespec now);
/* NUL-terminated names one after another (those the caller may see: trusted.* for root only). */
int mdt_listxattr(struct mdt_txn *t, const struct loom_cred *cr, uint64_t ino, void *buf,
		  size_t cap, size_t *len);
int mdt_removexattr(struct mdt_txn *t, const struct loom_cred *cr, uint64_t ino,
		    const char *name, size_t nlen, struct timespec now);

/* ---- files ---- */

/* Checks that cr may open ino with open_flags (access mode, O_TRUNC), as open(2) would:
 * -EISDIR for writing a directory, -ELOOP for a symlink, -EACCES, -ENOENT. With O_TRUNC (and
 * write access) a regular file's size becomes 0 and mtime/ctime now. Returns the attributes and,
 * for a regular file, its layout (malloc'd; caller frees), else NULL. */
int mdt_open(struct mdt_txn *t, const struct loom_cred *cr, uint64_t ino, uint32_t open_flags,
	     struct timespec now, struct lw_attr *out, struct loom_layout **layout_out);

/* Data written through a handle: size = max(size, given) with LW_CL_SIZE; mtime = ctime = given
 * with LW_CL_MTIME. A missing inode (unlinked and released) is -ENOENT. */
int mdt_size_update(struct mdt_txn *t, uint64_t ino, uint32_t flags, uint64_t size,
		    struct timespec mtime, struct lw_attr *out);

/* ---- layouts ---- */

/* A file's layout, or a directory's default (flag LOOM_LAYOUT_DEFAULT; when the directory has
 * none of its own, the filesystem default with LOOM_LAYOUT_INHERITED as well). -ENODATA for
 * other types. Caller frees *out. */
int mdt_getlayout(struct mdt_txn *t, uint64_t ino, struct loom_layout **out);

/* On a directory: sets its default (fields 0/empty are "not set": stored as given, so that files
 * inherit those from the filesystem default), or removes it with LW_SL_DELETE (-ENODATA if it had
 * none; the root's default can be changed but not removed: -EPERM). On a regular file of size 0:
 * allocates new objects (the old ones are queued for destruction) and bumps layout_gen; a file
 * with data: -EEXIST. Needs ownership or root. Caller frees *out. */
int mdt_setlayout(struct mdt_txn *t, const struct loom_cred *cr, uint64_t ino,
		  const struct lw_layout *req, uint32_t flags, struct loom_layout **out);

/* ---- orphans and object destruction ---- */

/* Frees an inode whose link count is 0 once nobody holds it open: its layout's objects go to the
 * destroy queue and the inode, its xattrs and layout are deleted. A no-op (0) for an inode that
 * still has links or is already gone. */
int mdt_inode_release(struct mdt_txn *t, uint64_t ino);
/* Inodes with nlink 0 not yet released (at start-up, after a crash, all of them are). */
int mdt_orphan_list(struct mdt_txn *t, uint64_t *inos, size_t max, size_t *n);

/* Objects waiting to be destroyed on their OSTs, from the start of the queue. */
int mdt_destroy_list(struct mdt_txn *t, struct loom_ostobj *out, size_t max, size_t *n);
int mdt_destroy_done(struct mdt_txn *t, uint32_t ost_idx, uint64_t objid);

/* ---- the OST table ---- */

struct mdt_ost {
	uint32_t idx;
	uint32_t state;    /* LW_TGT_*; LW_TGT_INACTIVE is set by the server when heartbeats stop */
	uint16_t port;
	char host[64];
	char uuid[40];
	struct lw_statfs sf;
	uint64_t last_heard_ns; /* clock_mono_ns() of the last register/heartbeat; in memory only */
};

/* Registers an OST (persistently): a known uuid keeps its index (its address may change); a new
 * uuid gets want_idx if free (or the next free index when want_idx is UINT32_MAX). -EEXIST if
 * want_idx belongs to another uuid; -EINVAL for a mismatched fsname. Bumps the table generation
 * when anything changed. */
int mdt_ost_register(struct mdt_txn *t, const struct lw_ost_register_req *req, uint64_t now_ns,
		     uint32_t *idx_out);
/* Updates an OST's free space (memory only). -ENOENT for an unknown index. */
int mdt_ost_heartbeat(struct mdt_store *s, uint32_t idx, const struct lw_statfs *sf,
		      uint64_t now_ns);
/* Marks OSTs not heard from since `deadline_ns` inactive (and heard ones active); returns
 * whether any state changed (then the table generation was bumped). */
bool mdt_ost_expire(struct mdt_store *s, uint64_t deadline_ns);
/* The table, in index order. The array belongs to the store and is valid until the next call
 * that changes the table. */
const struct mdt_ost *mdt_ost_table(const struct mdt_store *s, uint32_t *count, uint32_t *gen);

/*
 * Chooses `count` distinct active OSTs for a new file (count -1: every active OST). With
 * offset >= 0, stripes go to offset, offset+1, ... (by index, wrapping, skipping inactive ones;
 * -EINVAL if offset names no OST). With -1, as Lustre's allocator: round robin from a rotating
 * start while free space is balanced (the emptiest within 17% of the fullest), else weighted by
 * free space. -ENOSPC when fewer than count OSTs are active (count is then capped at the number
 * active for -1). Object ids come from a per-OST counter kept in the MDT, never reused.
 */
int mdt_alloc_stripes(struct mdt_txn *t, int32_t count, int32_t offset, struct loom_ostobj *objs,
		      uint32_t *n_out);

/* MDT space as statfs(2) gives it for the MDT directory; files = inodes in use + free estimate. */
int mdt_statfs(struct mdt_txn *t, struct lw_statfs *out);

#endif
