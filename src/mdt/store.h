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
 *
 * Names are checked again with lw_name_check() (its errnos: -ENAMETOOLONG, -EINVAL, -ENOENT for
 * an empty one); "." and ".." are answered as Linux answers them. Names are not NUL-terminated.
 * A failed call may have written part of its work into the transaction: the caller aborts the
 * (child) transaction on any error. See docs/mdt.md for the on-disk format and the decisions.
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

#define MDT_FORMAT_VERSION 1u /* of the records: a standby's must be its active's (repl.c) */

/*
 * Versions of inodes, for replays (Lustre's VBR): each inode records the transno of its last
 * change. While a request runs, the inodes it writes are noted with their versions before it
 * (`got`), which its reply carries to the client. A replay gives the versions its first run
 * noted (`expect`): writing an inode that is not at the version it was then (something the
 * replay does not know of changed it, or a change before it was lost) fails with
 * MDT_EVERSION, and the replay is refused whole.
 */
struct mdt_vers {
	uint32_t n;
	bool overflow;                          /* more inodes than got holds */
	struct lw_obj_version got[LW_MAX_VERS];
	const struct lw_obj_version *expect;    /* a replay's, else NULL */
	uint32_t nexpect;
	uint64_t mismatch_ino;                  /* what refused it, for the log */
	uint64_t mismatch_have;
	/* A replay of a change that made an inode, or allocated objects: the inode number and the
	 * objects its first run's reply named, taken by the allocators instead of new ones. */
	uint64_t want_ino;
	const struct loom_ostobj *want_objs; /* want_nobjs of them; NULL: none given */
	uint32_t want_nobjs;
};
#define MDT_EVERSION (-EREMCHG)
/* From now on t's inode writes belong to change `transno` (0: none), noted in v (may be NULL). */
void mdt_txn_set_change(struct mdt_txn *t, uint64_t transno, struct mdt_vers *v);
/* The transno the MDT's disk holds everything up to (0 for an MDT that never recorded one), and
 * its update, written in t (committed with it). */
int mdt_last_transno_get(struct mdt_txn *t, uint64_t *transno);
int mdt_last_transno_put(struct mdt_txn *t, uint64_t transno);
/* An inode's version (0: there is none). */
int mdt_inode_version(struct mdt_txn *t, uint64_t ino, uint64_t *version);
/* Moves the inode counter and every OST's object counter n forward: after a crash that may have
 * lost changes answered with numbers above them, none of those numbers is handed out again
 * (a client that missed the replays may still hold them). What they were goes to *old_next_ino
 * and, per OST, to old_objid (the range replays may take numbers from). */
int mdt_numbers_skip(struct mdt_txn *t, uint64_t n, uint64_t *old_next_ino,
		     void (*old_objid)(void *arg, uint32_t ost, uint64_t next_objid), void *arg);
/* The replays after the skip all ran (or nobody was awaited): the next start that finds listed
 * clients skips afresh. Until then a start reuses the skip's window (a crash during recovery
 * must not put the numbers the first crash lost below a second skip). */
int mdt_numbers_settled(struct mdt_txn *t);
/* Inode numbers from now on are above ino (a replay re-creating an inode its first run made). */
int mdt_ino_reserve(struct mdt_txn *t, uint64_t ino);

/* Not an errno: LMDB's transaction is full, or the batch's growth is (see mdt_txn_commit).
 * Never leaves the MDS. */
#define MDT_ETXNFULL (-4096 - 1)

/* Creates a new MDT in mdt_dir (created if missing): root directory (ino 1, mode 0755, uid 0,
 * gid 0) and the filesystem default layout (RAID-0, 4 MiB, 1 stripe, offset -1).
 * -EEXIST if mdt_dir already holds an MDT, -EBUSY while an MDS has it open; -EINVAL for an
 * fsname of 0 or more than 8 characters or with characters other than [A-Za-z0-9_-]. A format
 * that was interrupted (no commit) is simply done again. */
int mdt_format(const char *mdt_dir, const char *fsname);

/* Opens an MDT; -ENOENT if none was formatted there, -EBUSY if another process (or another open
 * in this one) holds it, -EPROTONOSUPPORT for an MDT of another format version, -EIO if damaged. */
int mdt_store_open(const char *mdt_dir, struct mdt_store **out);
void mdt_store_close(struct mdt_store *s);
const char *mdt_store_fsname(const struct mdt_store *s);

/* One write transaction at a time (LMDB's writer lock: a second mdt_txn_begin(write) on the same
 * thread would deadlock); read transactions may be open alongside. */
int mdt_txn_begin(struct mdt_store *s, bool write, struct mdt_txn **out);
/* A nested write transaction inside a write transaction (-EINVAL for a read one). While a child is
 * open its parent must not be used. */
int mdt_txn_child(struct mdt_txn *parent, struct mdt_txn **out);
/* Both end (and free) the transaction, also when commit fails. Commit makes it durable (fsync) for
 * a top-level one, and only then do OST registrations made in it reach the in-memory table.
 * Errors of the store's operations and of commit: -ENOSPC (the map or the disk is full, or an
 * operation that grows the MDT met its reserve: see mdt_space), MDT_ETXNFULL (the transaction
 * touched too many pages, or its growth so far leaves no room for one more: commit the batch,
 * retry the request alone), -EIO (damaged MDT; a short write of a full disk is -EIO too). */
int mdt_txn_commit(struct mdt_txn *t);
void mdt_txn_abort(struct mdt_txn *t);

/* ---- namespace ---- */

/* "." and ".." are understood in lookup. Lookup needs search (x) permission on parent.
 * -ENOENT, -ENOTDIR (parent not a directory), -EACCES. */
int mdt_lookup(struct mdt_txn *t, const struct loom_cred *cr, uint64_t parent, const char *name,
	       size_t len, struct lw_attr *out);
int mdt_getattr(struct mdt_txn *t, uint64_t ino, struct lw_attr *out);
/* MDS_WALK: looks up path's components from the root while each lookup succeeds, stopping before
 * a symlink, before a non-directory with anything after it, and with stop_at_last before the last
 * component. *out gets the last entry reached (the root if none), *consumed the bytes of path
 * that led to it. Errors only for the root itself. With watch, watch->held(arg, dir) is asked
 * before each directory's entries are read: true stops the walk there, with -EAGAIN (the MDS's
 * exclusive leases: another client may be making files there). */
struct mdt_walk_watch {
	bool (*held)(void *arg, uint64_t dir);
	void *arg;
};
int mdt_walk(struct mdt_txn *t, const struct loom_cred *cr, const char *path, size_t len,
	     bool stop_at_last, const struct mdt_walk_watch *watch, struct lw_attr *out,
	     uint32_t *consumed);

/* chmod/chown/utimes/truncate rules as Linux applies them (owner or root for chmod, root for
 * chown to another uid, setgid cleared by chmod of a non-member's file, setuid/setgid cleared by
 * chown (root's too) and by truncation by non-root, UTIME_NOW needs write permission or
 * ownership, SIZE needs write permission unless LW_SA_FH; LW_SA_KILLPRIV drops setuid/setgid as a write by cr does, for anyone who may write).
 * ctime is updated on any change (to
 * sa->ctime with LW_SA_CTIME). Truncation of a regular file changes only the MDS's size (and
 * mtime when the size changes); the client punches the objects. -ENOENT, -EPERM, -EACCES,
 * -EISDIR (size of a directory), -EINVAL (size of another non-regular file, bad nsec, unknown
 * valid bits), -EFBIG (size > 2^62), -EOPNOTSUPP (mode of a symlink). */
int mdt_setattr(struct mdt_txn *t, const struct loom_cred *cr, const struct lw_setattr *sa,
		struct timespec now, struct lw_attr *out);

/* Creates a regular file (or fifo, socket, char/block device: S_IFMT of mode; 0 = regular).
 * Needs x on parent, then w+x unless the name exists. The new file's gid follows a setgid parent.
 * A regular file gets a layout at once: `req` (may be NULL) fields that are unset (stripe_size 0,
 * stripe_count 0, stripe_offset -1, pool "") inherit from the parent's own default, then the
 * filesystem default (the root's), then 4 MiB/1 stripe; its objects are allocated on OSTs chosen
 * as mdt_alloc_stripes says: a count larger than the OSTs usable is capped, and -ENOSPC means
 * no OST is usable at all.
 * An existing name: -EEXIST if excl, -EISDIR if it is a directory (as open(O_CREAT)), else its
 * attributes (and layout) with *created = false; no permission beyond search is checked then:
 * the caller checks the open with mdt_open. "." and "..": -EEXIST if excl, else -EISDIR.
 * -EPERM for S_IFDIR in mode or a device node by non-root, -EINVAL for another unknown type.
 * *layout_out (may be NULL) receives a malloc'd layout for regular files, NULL otherwise;
 * created may be NULL. */
int mdt_create(struct mdt_txn *t, const struct loom_cred *cr, uint64_t parent, const char *name,
	       size_t len, uint32_t mode, uint32_t rdev, bool excl, const struct lw_layout *req,
	       struct timespec now, struct lw_attr *out, struct loom_layout **layout_out,
	       bool *created);

/* open(O_TMPFILE) of directory parent: a regular file without a name (nlink 0, in the orphan
 * list from birth), laid out as a new file of parent (req may be NULL). Needs x and w on parent,
 * which does not change. -EINVAL for a mode of another type. The caller opens it at once: its
 * handles are all that keeps it. *layout_out (may be NULL) receives its malloc'd layout. */
int mdt_create_tmpfile(struct mdt_txn *t, const struct loom_cred *cr, uint64_t parent, uint32_t mode,
		       const struct lw_layout *req, struct timespec now, struct lw_attr *out,
		       struct loom_layout **layout_out);

/* Needs x on parent, then w+x; -EEXIST for an existing name (also "." and ".."). The mode keeps
 * its 01777 bits, plus setgid under a setgid parent. A new directory inherits its parent's default
 * layout if the parent has one of its own and is not the root (the root's default is the
 * filesystem default, which applies to every directory without one by fallback). A directory's
 * link count is 2 + its subdirectories, with no limit (as ext4's dir_nlink). */
int mdt_mkdir(struct mdt_txn *t, const struct loom_cred *cr, uint64_t parent, const char *name,
	      size_t len, uint32_t mode, struct timespec now, struct lw_attr *out);

/* What happened to an inode whose name went away (unlink, or rename over it). */
struct mdt_unlinked {
	uint64_t ino;    /* 0 if no inode lost a link */
	uint32_t nlink;  /* links left; at 0 the inode is an orphan, see mdt_inode_release */
	uint32_t mode;
};

/* Sticky-directory rules apply (-EPERM). unlink of a directory: -EISDIR; of "." or "..": -EISDIR.
 * The inode's ctime and the parent's mtime/ctime become now. At nlink 0 the inode is recorded as
 * an orphan and stays until mdt_inode_release. victim may be NULL. */
int mdt_unlink(struct mdt_txn *t, const struct loom_cred *cr, uint64_t parent, const char *name,
	       size_t len, struct timespec now, struct mdt_unlinked *victim);
/* -ENOTEMPTY for a non-empty directory, -ENOTDIR for a non-directory, -EBUSY for the root,
 * -EINVAL for ".", -ENOTEMPTY for "..". The directory is deleted at once (with its xattrs and
 * default layout); a handle the server keeps on it finds -ENOENT afterwards. */
int mdt_rmdir(struct mdt_txn *t, const struct loom_cred *cr, uint64_t parent, const char *name,
	      size_t len, struct timespec now);

/* rename(2) and renameat2(2) (LW_RENAME_NOREPLACE, LW_RENAME_EXCHANGE): onto an existing file or
 * empty directory; -EINVAL when moving a directory into its own subtree; -EISDIR/-ENOTDIR for
 * mismatched types; -ENOTEMPTY over a non-empty directory (or one that contains the source);
 * same-inode rename is a no-op; -ENOENT for EXCHANGE without a target, -EEXIST for NOREPLACE with
 * one; -EBUSY for "." or ".." (-EEXIST for a NOREPLACE target "." or ".."); -EACCES/-EPERM as
 * may_delete/may_create, and a directory moving to another parent must be writable (its ".."
 * changes). The renamed entry gets a new readdir cookie (exchanged entries keep theirs).
 * *victim (may be NULL) reports the replaced inode, if any: a replaced directory is deleted at
 * once and reported with nlink 0; a file as by unlink. *moved_mode (may be NULL) gets the mode of
 * what moved (with EXCHANGE, a directory's if either is one), 0 when nothing did. The inodes
 * whose names change get name_version + 1. */
int mdt_rename(struct mdt_txn *t, const struct loom_cred *cr, uint64_t src_parent,
	       const char *src, size_t src_len, uint64_t dst_parent, const char *dst,
	       size_t dst_len, uint32_t flags, struct timespec now, struct mdt_unlinked *victim,
	       uint32_t *moved_mode);

/* Needs x, then w+x on new_parent. -EEXIST for a taken name (and "." or ".."), -EPERM for a
 * directory, -ENOENT for a missing inode or one with no links left, -EMLINK at 65000 links. */
int mdt_link(struct mdt_txn *t, const struct loom_cred *cr, uint64_t ino, uint64_t new_parent,
	     const char *name, size_t len, struct timespec now, struct lw_attr *out);
int mdt_symlink(struct mdt_txn *t, const struct loom_cred *cr, uint64_t parent, const char *name,
		size_t len, const char *target, size_t target_len, struct timespec now,
		struct lw_attr *out);
/* -EINVAL if ino is not a symlink. buf gets the target (not NUL-terminated) and *len its length;
 * -ERANGE (with *len set) if cap is smaller than the target (LOOM_SYMLINK_MAX always fits). */
int mdt_readlink(struct mdt_txn *t, uint64_t ino, char *buf, size_t cap, size_t *len);

/* Appends entries after `cookie` to w with lw_readdir_put (with attributes when plus) until w is
 * full or the directory ends. "." has cookie 1, ".." cookie 2, then entries in creation order
 * with cookies from 3 (an entry renamed in gets a new cookie). Each entry's cookie resumes after
 * it. *eof is true when the last entry has been written (also for a cookie past the end, with
 * *count 0). Needs read permission. -ENOTDIR for a non-directory. If not even one entry fits,
 * -EINVAL. An entry with its attributes takes at most 24 + 256 + 96 bytes. */
int mdt_readdir(struct mdt_txn *t, const struct loom_cred *cr, uint64_t ino, uint64_t cookie,
		bool plus, struct lw_wr *w, uint32_t *count, bool *eof);

/* ---- xattrs: user.* need read/write permission on the inode (and user.* only on regular files
 * and directories, else -EPERM on write, -ENODATA on read; in a sticky directory only its owner or
 * root writes them); trusted.* need root (uid 0): -EPERM to write, -ENODATA to read;
 * security.* are read by anyone and written by root only (-EPERM), as Linux without an LSM;
 * system.* (POSIX ACLs, which Loom does not implement) and any other prefix: -EOPNOTSUPP; a bare prefix
 * ("user."): -EINVAL. -ENODATA for a missing one; -ERANGE when cap is too small (cap 0 asks
 * for the size only; *len is set either way). Set and remove update ctime. Set: XATTR_CREATE on
 * an existing name -EEXIST, XATTR_REPLACE on a missing one -ENODATA, a value over
 * LOOM_XATTR_SIZE_MAX -E2BIG. ---- */
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
 * -EISDIR for writing a directory (O_TRUNC counts as writing), -ELOOP for a symlink, -ENOTDIR
 * for O_DIRECTORY on a non-directory, -EPERM for O_NOATIME by a non-owner, -EACCES, -ENOENT.
 * O_CREAT and O_EXCL are ignored. With O_TRUNC a regular file's size becomes 0 and mtime/ctime
 * now (the caller punches the objects when the size was not 0). Fifos and devices open with no
 * layout. Returns the attributes and, for a regular file, its layout (malloc'd; caller frees),
 * else NULL; layout_out may be NULL. */
int mdt_open(struct mdt_txn *t, const struct loom_cred *cr, uint64_t ino, uint32_t open_flags,
	     struct timespec now, struct lw_attr *out, struct loom_layout **layout_out);

/* access(2): mask of R_OK (4), W_OK (2), X_OK (1), or 0 for existence; 0 or -EACCES (-ENOENT). */
int mdt_access(struct mdt_txn *t, const struct loom_cred *cr, uint64_t ino, uint32_t mask);

/* Data written through a handle in truncation epoch `epoch`: size = max(size, given) with
 * LW_CL_SIZE unless a truncation that cut the objects came since (epoch older than the file's);
 * size = max(size, carried) with LW_CL_SIZE whatever the epoch (the end of the bytes the report
 * itself carries, Data-on-MDT parts, written in its transaction)
 * (-EINVAL for a non-regular file, -EFBIG beyond 2^62); mtime = ctime = given with LW_CL_MTIME; with
 * LW_CL_BLOCKS the 512-byte blocks its objects occupy (st_blocks from then on, holes counting
 * for nothing). A missing inode (unlinked and released) is -ENOENT. No permission check: the
 * handle was checked at open. */
int mdt_size_update(struct mdt_txn *t, uint64_t ino, uint32_t flags, uint64_t size, uint32_t epoch,
		    uint64_t carried, struct timespec mtime, uint64_t blocks, struct lw_attr *out);

/* ---- Data-on-MDT (dom.c): bytes [0, dom_size) of a file whose layout has a dom_size ---- */

/* The stored bytes: *data points into the transaction's view (valid until it ends; NULL and
 * *len 0 when none are stored). -EIO when they do not match their checksum. */
int mdt_dom_peek(struct mdt_txn *t, uint64_t ino, const void **data, uint32_t *len);
/* The same after checking ino is a regular file with a Data-on-MDT part (-EINVAL otherwise,
 * -ENOENT for a missing inode). */
int mdt_dom_read(struct mdt_txn *t, uint64_t ino, const void **data, uint32_t *len);
/* Writes len bytes at off (zeros fill a gap); off + len must be within the layout's dom_size
 * (-EINVAL). No permission check: the caller's handle was checked at open. */
int mdt_dom_write(struct mdt_txn *t, uint64_t ino, uint64_t off, const void *data, uint32_t len);
/* The same for several extents at once, in one store of the value; bytes between them keep what
 * they held. Every extent is checked before anything is written. */
struct mdt_dom_extent {
	uint64_t off;
	uint32_t len;
	const void *data;
};
int mdt_dom_write_parts(struct mdt_txn *t, uint64_t ino, const struct mdt_dom_extent *ext, uint32_t n);
/* Truncation: keeps bytes below size (all of them when size is past the end). */
int mdt_dom_cut(struct mdt_txn *t, uint64_t ino, uint64_t size);

/* ---- layouts ---- */

/* A file's layout, or a directory's default (flag LOOM_LAYOUT_DEFAULT; when the directory has
 * none of its own, the filesystem default with LOOM_LAYOUT_INHERITED as well). -ENODATA for
 * other types. Caller frees *out. */
int mdt_getlayout(struct mdt_txn *t, uint64_t ino, struct loom_layout **out);

/* On a directory: sets its default (fields 0/empty are "not set": stored as given, so that files
 * inherit those from the filesystem default; an offset must name a known OST, else -EINVAL), or
 * removes it with LW_SL_DELETE (-ENODATA if it had none; the root's default can be changed but
 * not removed: -EPERM); *out is then the directory's layout as mdt_getlayout gives it. On a
 * regular file of size 0: allocates new objects (the old ones are queued for destruction) and
 * bumps layout_gen; unset fields come from the current layout, except the offset, which the MDS
 * chooses again. A file with data: -EEXIST. Other types, or LW_SL_DELETE on a file: -EINVAL.
 * Needs ownership or root (-EPERM). A new file's layout_gen is 0, as Lustre's. The server must
 * not relayout a file that is open for writing (its data may not have reached the size yet).
 * Caller frees *out. */
int mdt_setlayout(struct mdt_txn *t, const struct loom_cred *cr, uint64_t ino,
		  const struct lw_layout *req, uint32_t flags, struct loom_layout **out);

/*
 * Mirrored files (mirror.c). The `mirrors` table lists those that need looking after: stale
 * copies to resync, or LOOM_LAYOUT_WRITE_PENDING. mdt_mirror_note puts ino there or takes it out
 * as l says (l NULL: out). mdt_mirror_list lists from after + 1 on (max at most).
 * mdt_mirror_write_begin marks a mirrored file write-pending (a writer opened it; committed
 * before the open is answered), mdt_mirror_write_end clears it (its last writer closed).
 * mdt_mirror_abandoned: a write-pending file whose writers went without closing: every stripe's
 * copies but its first in-sync one become stale (*marked says how many). mdt_mirror_resynced:
 * objects (indexes) copied from an in-sync copy are in sync again, if the layout is still of
 * generation gen and not write-pending (-EAGAIN); *out gets the layout. Plain files are left
 * alone (0). */
int mdt_mirror_note(struct mdt_txn *t, uint64_t ino, const struct loom_layout *l);
int mdt_mirror_list(struct mdt_txn *t, uint64_t after, uint64_t *inos, size_t max, size_t *n);
int mdt_mirror_write_begin(struct mdt_txn *t, uint64_t ino);
int mdt_mirror_write_end(struct mdt_txn *t, uint64_t ino);
int mdt_mirror_abandoned(struct mdt_txn *t, uint64_t ino, uint32_t *marked);
int mdt_mirror_resynced(struct mdt_txn *t, uint64_t ino, uint32_t gen, const uint32_t *objs, uint32_t n,
			struct loom_layout **out);
/* OST idx was replaced: mirrored files' in-sync objects there below lost_below were lost with it
 * and become stale, for the resync to make again on the new OST (those with another in-sync copy
 * of their stripe; *files counts the files). A scan of every layout, in t. */
int mdt_mirror_ost_lost(struct mdt_txn *t, uint32_t idx, uint64_t lost_below, uint32_t *files);
/* Object obj (its index in the layout) of mirrored file ino becomes stale: -EBUSY where it is
 * its stripe's last in-sync copy (loom fsck, for a copy's missing object). */
int mdt_mirror_mark(struct mdt_txn *t, uint64_t ino, uint32_t obj);
/* loom mirror extend: ino gets one more copy, stale, for the resync to fill; -EINVAL for a file
 * that is not mirrored or at LOOM_MAX_MIRRORS, or without OSTs for it. loom mirror split: the copy
 * holding object (ost, objid) goes, its objects queued for destruction; -EINVAL for the last copy,
 * or where a stripe would be left without an in-sync copy. *out gets the new layout. */
int mdt_mirror_extend(struct mdt_txn *t, uint64_t ino, struct loom_layout **out);
int mdt_mirror_split(struct mdt_txn *t, uint64_t ino, uint32_t ost, uint64_t objid, struct loom_layout **out);
/* An erasure-coded file l (ino's) is cut at `cut` in t: a cut inside a row changes that row's
 * data, so its parity becomes stale, for the resync to make again; -EBUSY while a data object is
 * stale (the parity is what gives its bytes back: rebuild it first). Other files: 0. */
int mdt_ec_cut(struct mdt_txn *t, uint64_t ino, struct loom_layout *l, uint64_t cut);

/* Marks objects of the mirrored file ino stale (mirror.c): count objects, named by OST and id.
 * -EINVAL for a file that is not mirrored, an object not in its layout, or the last in-sync
 * copy of a stripe; objects marked already are left as they are. *out gets the layout. */
int mdt_mirror_stale(struct mdt_txn *t, uint64_t ino, const struct loom_ostobj *objs, uint32_t count,
		     struct loom_layout **out);
/* Migration: regular file ino takes the objects of tmp, a whole copy of it made with the new
 * layout, and tmp the old ones (which go when tmp is released). Layouts must have the same
 * Data-on-MDT size (both keep their bytes, equal after the copy). -EAGAIN when ino's size or mtime
 * is no longer (size, mtime, mtime_ns): it changed since the copy began. -EINVAL when tmp's size
 * differs or either is not a regular file, -EPERM unless the caller owns both (or is root).
 * ino's layout_gen grows; mtime stays, ctime is now; the truncation epochs go with the objects
 * (-EBUSY while a truncation of either still has objects to cut). The server must not swap under
 * a writer. */
int mdt_swap_layouts(struct mdt_txn *t, const struct loom_cred *cr, uint64_t ino, uint64_t tmp,
		     uint64_t size, int64_t mtime, uint32_t mtime_ns, struct timespec now);

/* ---- orphans and object destruction ---- */

/* Frees an inode whose link count is 0 once nobody holds it open: its layout's objects go to the
 * destroy queue and the inode, its xattrs and layout are deleted. A no-op (0) for an inode that
 * still has links or is already gone. */
int mdt_inode_release(struct mdt_txn *t, uint64_t ino);
/* Up to max inodes numbered above after, in order, with nlink 0 and not yet released (at
 * start-up, after a crash, all of them are). */
int mdt_orphan_list(struct mdt_txn *t, uint64_t after, uint64_t *inos, size_t max, size_t *n);

/* Objects waiting to be destroyed on their OSTs, from the start of the queue (ordered by OST,
 * then object id). mdt_destroy_done of an object not queued is 0, so a resend is harmless. */
int mdt_destroy_list(struct mdt_txn *t, struct loom_ostobj *out, size_t max, size_t *n);
/* The same for one OST only, so that an OST that is down holds up no other. */
int mdt_destroy_list_ost(struct mdt_txn *t, uint32_t ost_idx, struct loom_ostobj *out, size_t max,
			 size_t *n);
int mdt_destroy_done(struct mdt_txn *t, uint32_t ost_idx, uint64_t objid);

/* ---- truncations whose objects are still to be cut (trunc.c) ---- */

/* A truncation under way: cut every object of ino to what it holds of a file of `cut` bytes, in
 * truncation epoch `epoch`. */
struct mdt_trunc {
	uint64_t ino;
	uint32_t epoch;
	uint64_t cut;
};
/* Whether truncation (ino, epoch) is still to be cut. */
bool mdt_trunc_pending(struct mdt_txn *t, uint64_t ino, uint32_t epoch);
/* Up to max truncations to cut now: of each inode only the first (its lowest epoch), in inode
 * order. */
int mdt_trunc_list(struct mdt_txn *t, struct mdt_trunc *out, size_t max, size_t *n);
/* Every object was cut: the entry goes (a missing one is fine). */
int mdt_trunc_done(struct mdt_txn *t, uint64_t ino, uint32_t epoch);

/* ---- the reply cache: answers to requests that must not be applied twice ---- */

/*
 * A client that lost its connection resends what was in flight; a request the MDS had already
 * applied is answered from here instead of being applied again (an unlink that succeeded must
 * not fail with ENOENT the second time). Entries are written in the same transaction as the
 * change they answer, so they survive a restart exactly when the change does.
 * Keys are the client's uuid and the request id.
 */
int mdt_reply_put(struct mdt_txn *t, const uint64_t uuid[2], uint64_t req_id, uint16_t opcode,
		  int status, const void *body, uint32_t len, int64_t now_s);
/* -ENOENT if there is none (or the one there answered another opcode); else *body is malloc'd
 * (caller frees). */
int mdt_reply_get(struct mdt_txn *t, const uint64_t uuid[2], uint64_t req_id, uint16_t opcode,
		  int *status, void **body, uint32_t *len);
/* Removes up to max entries written before older_than_s, oldest first; *removed counts them. */
int mdt_reply_sweep(struct mdt_txn *t, int64_t older_than_s, size_t max, size_t *removed);

/* ---- clients that may hold locks ---- */

/*
 * Locks live in the MDS's memory; after a restart their clients replay them. A start must know
 * whom to wait for before it grants anything new: the clients listed here. A client is written
 * in the transaction of its session's first MDS_LOCK (committed before any lock is answered),
 * and removed when its session ends, or goes away holding no lock. Keys are client uuids.
 *
 * Beside the list, the inode numbers handed to a client ahead (MDS_INOS, protocol 8), for the
 * creates it answers itself and sends behind (LW_CR_INO): the range and which of it were used,
 * so that a number is taken once, by that client only, also by a resend or a replay after a
 * restart (a number is never reused: FUSE node ids are inode numbers). They stay until the
 * client's session ends (mdt_client_inos_del), whether it is listed or not.
 */
#define MDT_CLIENT_INOS_MAX 1024u
int mdt_client_put(struct mdt_txn *t, const uint64_t uuid[2]);
/* Hands the client count (<= MDT_CLIENT_INOS_MAX) new inode numbers from *first on, replacing the
 * range it had. */
int mdt_client_inos_grant(struct mdt_txn *t, const uint64_t uuid[2], uint32_t count, uint64_t *first);
/* Takes ino from the client's range: -EINVAL if it is not in it, or was taken already. */
int mdt_client_ino_take(struct mdt_txn *t, const uint64_t uuid[2], uint64_t ino);
/* Forgets the client's range (a missing one is fine). */
int mdt_client_inos_del(struct mdt_txn *t, const uint64_t uuid[2]);
/* The clients that hold a range: *uuids (malloc'd, caller frees; NULL when none) and *n. */
int mdt_client_inos_owners(struct mdt_txn *t, uint64_t (**uuids)[2], uint32_t *n);
/* count numbers from the inode counter, which moves past them. */
int mdt_ino_alloc_range(struct mdt_txn *t, uint32_t count, uint64_t *first);
/* A missing one is fine. */
int mdt_client_del(struct mdt_txn *t, const uint64_t uuid[2]);
/* Every listed client: *uuids (malloc'd, caller frees; NULL when none) and *n. */
int mdt_clients_list(struct mdt_txn *t, uint64_t (**uuids)[2], uint32_t *n);

/* ---- the OST table ---- */

struct mdt_ost {
	uint32_t idx;
	uint32_t state;    /* LW_TGT_*: READONLY/NOCREATE as the OSS reports, INACTIVE from expiry */
	uint16_t port;
	char host[64];
	char uuid[40];
	struct lw_statfs sf;
	uint64_t last_heard_ns; /* clock_mono_ns() of the last register/heartbeat; in memory only */
	bool heard;             /* registered or heartbeat since this MDS opened the MDT */
	char fo_host[64];       /* where else it may be served (its failover partner; "": none), as */
	uint16_t fo_port;       /* its OSS said (MDS_OST_FAILOVER); in memory only */
};

/* ---- replication (redo.c) ----
 * With capture on (mdt_store_set_redo), each top-level commit that wrote anything is numbered
 * (seq from 1, kept in the MDT with the commit, epoch beside it) and its redo, a lw_repl_commit
 * and its records (wire.h), is handed to fn after the commit is durable: fn owns the malloc'd
 * buffer. A standby applies commits with mdt_redo_apply and mdt_repl_pos_put in its own
 * transactions. */
struct mdt_repl_pos {
	uint64_t seq;
	uint64_t epoch;
};
typedef void (*mdt_redo_fn)(void *arg, void *commit, size_t len);
int mdt_store_set_redo(struct mdt_store *s, uint64_t epoch, mdt_redo_fn fn, void *arg);
uint64_t mdt_store_repl_seq(const struct mdt_store *s);
/* The last commit this MDT holds (0, 0 for one never replicated). */
int mdt_repl_pos_get(struct mdt_txn *t, struct mdt_repl_pos *pos);
int mdt_repl_pos_put(struct mdt_txn *t, const struct mdt_repl_pos *pos);
/* Where this MDT's epoch began: the epoch before it and the last seq of that one (replicated as
 * any record, so a standby knows its active's history one epoch back). */
int mdt_repl_prev_get(struct mdt_txn *t, struct mdt_repl_pos *prev);
int mdt_repl_prev_put(struct mdt_txn *t, const struct mdt_repl_pos *prev);
/* Applies one commit's records (nrec of them) in t. -EPROTO for malformed records, -ESTALE for a
 * delete of a key t lacks (this MDT is not a copy of the active's). */
int mdt_redo_apply(struct mdt_txn *t, const void *redo, size_t len, uint32_t nrec);
/* Everything committed is on the disk, the last meta page too (the MDT's commits leave it to the
 * next commit's sync: MDB_NOMETASYNC). */
int mdt_store_sync(struct mdt_store *s);
/* The MDT's uuid (made at format). */
int mdt_store_uuid(struct mdt_store *s, uint8_t uuid[16]);
/* Writes a consistent copy of the MDT's data file to fd (LMDB's mdb_env_copyfd2). */
int mdt_store_copy_fd(struct mdt_store *s, int fd);
/* Writes the MDT as read transaction rt sees it into the new directory dir (an MDT that
 * mdt_store_open opens), rt left open: a snapshot's namespace, copied after the changes the
 * barrier held have gone on (snapcopy.c). Through dir.part, synced, then renamed: dir exists only
 * whole. *entries: the records copied. -EEXIST when dir exists. */
int mdt_store_copy_txn(struct mdt_txn *rt, const char *dir, uint64_t *entries);

/* Called before every top-level write commit: a non-zero return aborts the transaction with that
 * error. The MDS's multi-mount protection check (common/mmp.h): a server deposed while it was
 * frozen writes nothing more to the MDT. */
void mdt_store_set_write_guard(struct mdt_store *s, int (*guard)(void *arg), void *arg);

/* Sets where else OST idx may be served (host "" clears it); *changed (and the table generation)
 * when it did. -ENOENT for an index the table does not hold. Memory only: its OSS says it again after
 * each registration. */
int mdt_ost_set_failover(struct mdt_store *s, uint32_t idx, const char *host, uint16_t port,
			 bool *changed);

/* Registers an OST (persistently): a known uuid keeps its index (its address may change; asking
 * for another index is -EINVAL); a new uuid gets want_idx if free (or the lowest free index when
 * want_idx is UINT32_MAX), with object ids from 1. -EEXIST if want_idx belongs to another uuid;
 * -EINVAL for a mismatched fsname, an empty host or uuid, or want_idx above 65535. The OST is
 * active, with req->sf's free space and flags, once t's top-level transaction commits, which also
 * bumps the table generation when anything changed. */
int mdt_ost_register(struct mdt_txn *t, const struct lw_ost_register_req *req, uint64_t now_ns,
		     uint32_t *idx_out);
/* What mdt_ost_replace did. */
struct mdt_ost_replaced {
	uint32_t idx;
	uint64_t lost_below;  /* objects below it were the old OST's (0: none were) */
	bool replaced;        /* the index changed hands now (not a resend, not a new index) */
	bool was_removed;     /* the OST it replaced had been removed */
	uint32_t mirrored;    /* mirrored files with copies there, now stale, to resync */
	char old_uuid[40];
};
/* A new OST (req->uuid, formatted with --replace) takes index req->want_idx from the OST that held
 * it, lost for good: objects below the index's object counter become lost (table ost_lost), the
 * record takes the new uuid and address, keeps the counter and the administrative state. The
 * uuid holding the index already: the same answer again. An index nobody held: a plain
 * registration. -EBUSY while the OST holding it is active (-EAGAIN while it may yet be: this MDS
 * started less than an expiry period ago and has not heard from it), -EINVAL for want_idx UINT32_MAX, a
 * uuid known at another index, or what mdt_ost_register refuses. */
int mdt_ost_replace(struct mdt_txn *t, const struct lw_ost_register_req *req, uint64_t now_ns,
		    struct mdt_ost_replaced *out);
/* Objects of OST idx with ids below *lost_below were lost with the OST it replaced (0: none). */
int mdt_ost_lost_below(struct mdt_txn *t, uint32_t idx, uint64_t *lost_below);
/* How many files (layouts, the unlinked-but-open ones too) have objects on OST idx, and how many
 * objects. One pass over every layout. */
int mdt_ost_usage(struct mdt_txn *t, uint32_t idx, uint64_t *files, uint64_t *objects);
/* Retires OST idx: counts (mdt_ost_usage) and, unless dryrun, marks it removed (out of the table
 * at commit, out of its pools, its destroy queue dropped). -EBUSY when files have objects there
 * and not force; -ENOENT for an index no OST holds or one removed already. A removed OST's uuid
 * registering again is -ENODEV; its index goes to no new OST but a replacement. */
int mdt_ost_remove(struct mdt_txn *t, uint32_t idx, bool force, bool dryrun, uint64_t *files,
		   uint64_t *objects);
/* Sets, then clears, administrative state flags of OST idx (LW_TGT_DEACTIVATED: no new stripes),
 * kept in its record across restarts and registrations; the table follows at commit. -ENOENT for
 * an unknown index, -EINVAL for other flags. */
int mdt_ost_admin(struct mdt_txn *t, uint32_t idx, uint32_t set, uint32_t clear);
/* Updates an OST's free space and LW_TGT_NOCREATE/READONLY flags from sf (memory only); an
 * inactive OST heard from is active again. Bumps the generation when the state changed.
 * -ENOENT for an unknown index. */
int mdt_ost_heartbeat(struct mdt_store *s, uint32_t idx, const struct lw_statfs *sf,
		      uint64_t now_ns);
/* Marks OSTs not heard from since `deadline_ns` inactive (and heard ones active); returns
 * whether any state changed (then the table generation was bumped). */
bool mdt_ost_expire(struct mdt_store *s, uint64_t deadline_ns);
/* Marks an OST inactive at once (its OSS's connection to the MDS closed: it stopped or died), so
 * no new stripe goes there while it is down. Its next registration or heartbeat makes it active
 * again. -ENOENT for an unknown index. */
int mdt_ost_lost(struct mdt_store *s, uint32_t idx);
/* The table, in index order. The array belongs to the store; heartbeats and expiry update its
 * entries in place, and the commit of a top-level transaction that registered an OST replaces it
 * (pointers into it are then stale). */
const struct mdt_ost *mdt_ost_table(const struct mdt_store *s, uint32_t *count, uint32_t *gen);

/* ---- the nodemap (nodemap.c): client nodes with keys of their own (wire_auth.h) ---- */

/* The node named (-ENOENT). */
int mdt_nodemap_get(struct mdt_txn *t, const char *name, struct lw_node_ent *out);
/* Adds or replaces the node ent names (its name checked: -EINVAL). */
int mdt_nodemap_put(struct mdt_txn *t, const struct lw_node_ent *ent);
/* -ENOENT if there is no such node. Its record stays, marked removed (nodemap.c). */
int mdt_nodemap_del(struct mdt_txn *t, const char *name);
/* The generation name last had, removed since or not: -ENOENT for a name never added. */
int mdt_nodemap_last_generation(struct mdt_txn *t, const char *name, uint32_t *generation);
/* Every node, in name order (*out malloc'd). */
int mdt_nodemap_all(struct mdt_txn *t, struct lw_node_ent **out, uint32_t *n);

/* ---- OST pools (pool.c) ---- */

/* 0 for a valid pool name (1-15 letters, digits, '_' or '-'), else -EINVAL. */
int mdt_pool_name_check(const char *name);
bool mdt_pool_exists(struct mdt_txn *t, const char *name);
/* -EEXIST, -EINVAL (a bad name). */
int mdt_pool_new(struct mdt_txn *t, const char *name);
/* -ENOENT, -ENOTEMPTY (it still has OSTs). */
int mdt_pool_destroy(struct mdt_txn *t, const char *name);
/* -ENOENT (no pool), -ENODEV (no such OST), -EEXIST (in it already). */
int mdt_pool_add(struct mdt_txn *t, const char *name, uint32_t idx);
/* -ENOENT (no pool, or the OST is not in it). */
int mdt_pool_remove(struct mdt_txn *t, const char *name, uint32_t idx);
/* The pool's OSTs, ascending (*osts malloc'd). -ENOENT for no such pool. */
int mdt_pool_members(struct mdt_txn *t, const char *name, uint32_t **osts, uint32_t *n);
/* Calls fn for every pool in name order; stops at fn's first non-zero return. */
int mdt_pool_each(struct mdt_txn *t, int (*fn)(const char *name, const uint32_t *osts, uint32_t n, void *arg),
		  void *arg);

/*
 * Chooses `count` distinct usable OSTs for a new file (count -1: every usable OST) and gives each
 * stripe an object. Usable: not LW_TGT_INACTIVE, LW_TGT_NOCREATE or LW_TGT_READONLY. A count
 * larger than the number usable is capped to that number, as Lustre does; -ENOSPC only when no
 * OST is usable. With offset >= 0, stripes go to offset, offset+1, ... (by index, wrapping,
 * skipping unusable ones; -EINVAL if offset names no OST). With -1, as Lustre's allocator: round
 * robin from a start that moves one OST per file while free space is balanced (the emptiest
 * within 17% of the fullest), else at random weighted by free space. -EINVAL for count 0 or
 * below -1. objs must have room for min(count, table size) entries (table size for -1); *n_out
 * is how many were filled. Object ids come from a per-OST counter persisted in t, never reused
 * once t commits. With a pool (not NULL or ""), only its OSTs are used (-ENOSPC when none of them
 * is usable); a pool that does not exist any more does not restrict.
 *
 * With mirrors > 1, mirrors copies of count stripes, mirror by mirror, every object on an OST of
 * its own, the copies of a stripe on different OSSs (hosts) where the OSTs allow: count is capped
 * to what the usable OSTs hold (-1: as many as they hold); copies for which there are not enough
 * usable OSTs go to known OSTs not heard from now, marked LOOM_OBJ_STALE. -EINVAL when the file
 * system (or the pool) has fewer OSTs than copies; objs then needs room for the table size.
 *
 * With parity > 0 (erasure coding, mirrors 1), count data objects then parity parity objects,
 * every one on an OST of its own, taken over the hosts in turn so that a host holds as few of
 * them as there can be (within a host, in the allocator's order); count -1: as many data objects as the usable OSTs leave room
 * for. -EINVAL when the file system (or the pool) has fewer OSTs than count + parity; objects
 * for which no usable OST is left go, stale, to OSTs not heard from now (at most parity of them,
 * else -ENOSPC).
 */
int mdt_alloc_stripes(struct mdt_txn *t, int32_t count, int32_t offset, const char *pool,
		      uint32_t mirrors, uint32_t parity, struct loom_ostobj *objs, uint32_t *n_out);
/* Objects for one more copy of l (loom mirror extend): one a stripe, each on an OST l has no object
 * on (its pool's, if it names one that exists), usable ones first; all stale. -EINVAL when there
 * are not that many OSTs left. objs needs room for one copy's objects. */
int mdt_alloc_copy(struct mdt_txn *t, const struct loom_layout *l, struct loom_ostobj *objs);

/* ---- space (space.c) ---- */

/*
 * What the MDT holds and how much more it can take: LMDB's map and the disk under it, whichever
 * fills first, counting the pages LMDB's freelist has for reuse. The store keeps a reserve of that
 * room for what frees space: operations that make the MDT hold more (creates, mkdir, symlink,
 * link, setxattr, layouts, pools, Data-on-MDT writes) fail with -ENOSPC once they would eat into
 * it; unlink, rmdir, truncation, closes, size reports and the MDS's own work may use it. The
 * others of this file do not say -ENOSPC each: any write may meet it.
 */
struct mdt_space {
	uint64_t page_size;
	uint64_t map_size;    /* bytes of LMDB's map: the most the MDT can ever hold */
	uint64_t disk_total;  /* bytes of the file system under the MDT directory */
	uint64_t disk_left;   /* bytes it has free (f_bavail), the data file's own slack not counted */
	uint64_t in_use;      /* bytes of the pages the MDT holds */
	uint64_t room;        /* bytes it can still take, the reserve included */
	uint64_t reserve;     /* bytes of room kept for what frees space */
	bool map_bound;       /* the map fills before the disk does */
};
int mdt_space(struct mdt_store *s, struct mdt_space *out);
/* The reserve, in bytes (0, as after open: growth may take the last page). When the disk under
 * the MDT has less than twice the reserve left, the data file holds it (preallocated), so that no
 * other program can take it; a disk with more holds nothing. */
void mdt_store_set_reserve(struct mdt_store *s, uint64_t bytes);
/* Holds the reserve in the data file if the disk under the MDT has come down to twice the reserve
 * (each top-level commit does it too): the MDS calls it every second, so that a disk that fills
 * without the MDT writing still leaves it its reserve. Best effort, no error. */
void mdt_reserve_hold(struct mdt_store *s);
/* The most the MDT may hold (LMDB's map; 64 GiB unless set). At least what it holds already
 * (LMDB keeps that much, with a warning); -EINVAL below 64 pages. Only while no transaction is
 * open, e.g. right after mdt_store_open. */
int mdt_store_set_map_size(struct mdt_store *s, uint64_t bytes);

/* MDT space for statfs(2), in page-size units: blocks what it holds plus its room, bfree the
 * room, bavail the room beyond the reserve; files = inodes in use + ffree, ffree as many more as
 * bavail lets in; namemax 255. */
int mdt_statfs(struct mdt_txn *t, struct lw_statfs *out);

#endif
