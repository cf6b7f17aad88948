/*
 * libloom: the Loom client library.
 *
 * A program connects to a file system's MDS, then works with paths inside the file system
 * ("/data/train/x.npy"; a relative path is taken from the root). Metadata calls go to the MDS;
 * file data goes straight to the OSSs that hold the file's stripes, with every piece of a read or
 * write that spans stripes in flight at the same time.
 *
 * Conventions:
 *  - Every call returns 0 (or, for reads and writes, a byte count) on success and a negative
 *    errno on failure; results come back through the last arguments. The errnos are those a local
 *    Linux file system gives for the same operation; the ones listed per call are the ones with a
 *    meaning specific to that call. Any call may also return:
 *      -ENOMEM     out of memory;
 *      -EIO        a server could not be reached or failed mid-request (the request may or may
 *                  not have been applied);
 *      -EPROTO     a server sent something malformed;
 *      -EACCES / -EPERM   permission denied, checked by the MDS against the caller's identity
 *                  (see loom_set_cred);
 *      -ENOENT, -ENOTDIR, -ENAMETOOLONG, -ELOOP   for a path that cannot be resolved.
 *  - A loom_fs may be used by many threads at once. A loom_file or loom_dir by one at a time.
 *  - New files and directories get the mode asked for less the process's umask (as read at
 *    loom_connect), as open(2) and mkdir(2) give them.
 *  - Consistency is close-to-open: data written through a file is visible to every open that
 *    starts after that file's loom_close() or loom_fsync() returned.
 */
#ifndef LOOM_LOOM_H
#define LOOM_LOOM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <time.h>

#include "loom/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_fs loom_fs;
typedef struct loom_file loom_file;
typedef struct loom_dir loom_dir;

/* ---- connecting ---- */

/*
 * Connects to the MDS at mds_addr: "HOST" or "HOST:PORT" (the default port is 9900; HOST a name,
 * resolved by getaddrinfo, or an IPv4 address), or a failover list of them, "mds1,mds2:9901"; a
 * Lustre NID stands for its host, "mds1@tcp" (tcpN too), and Lustre's ":" between NIDs lists
 * them, "mds1@tcp:mds2@tcp". The addresses are tried in turn, when connecting and whenever the
 * MDS is lost; the first that answers with the file system wins. A mount's source,
 * "LIST:/FSNAME", names the file system too. fsname, if not NULL, must match the file system's
 * name. The caller's identity defaults to the process's uid, gid and supplementary groups.
 * Errors: -ECONNREFUSED, -ETIMEDOUT, -EHOSTUNREACH (nothing answers at that address, or its
 *         name does not resolve); -EINVAL (malformed address); -ENODEV (fsname differs);
 *         -EPROTONOSUPPORT (the MDS speaks another protocol version). loom_connect_error says
 *         which address said what.
 */
int loom_connect(const char *mds_addr, const char *fsname, loom_fs **out);

/*
 * Why this thread's last loom_connect or loom_connect_with failed, as one line that names the
 * address: "cannot resolve mds9: Name or service not known", "the MDS at mds1:9900 serves file
 * system a, not b", "127.0.0.1:9900: Connection refused" (with "; " between the addresses of a
 * list), "bad port '99999' in 'mds1:99999' (1 to 65535)". "" after a success.
 */
#define LOOM_CONNECT_ERROR_LEN 1024
const char *loom_connect_error(void);

/* How to connect, beyond the address. Zeroed fields take their defaults. */
struct loom_connect_opts {
	const char *fsname;        /* NULL: any; else must match the file system's name */
	const char *key_file;      /* the file system key; NULL: $LOOM_KEY_FILE if set, else
	                            * /etc/loom/loom.key if it exists, else none */
	unsigned recovery_seconds; /* how long requests wait for a server that went away before
	                            * they fail with -EIO; 0: $LOOM_RECOVERY_SECONDS, else 100 */
	unsigned soft_seconds;     /* soft: a request not answered within this long fails with
	                            * -EIO, whatever the servers do; 0: hard (wait as above) */
	unsigned at_min_seconds;   /* a server that answers no request within its adaptive
	                            * timeout, at least this long, is taken for hung (stopped,
	                            * wedged) and reconnected to; 0: $LOOM_AT_MIN_SECONDS, else 20 */
	bool encrypt;              /* encrypt every frame, not only authenticate it (needs the key;
	                            * a server started with --encrypt has every client do it) */
};

/*
 * loom_connect with options. Beyond loom_connect's errors:
 *         -EACCES (the servers refused this client's key, or it has none and they require one);
 *         -EKEYREJECTED (the key file is not a key); -ENOENT (no key file there);
 *         -ENOKEY (this user may not read the key file); -EINVAL (encrypt without a key);
 *         -EPERM (the key file is not private: its group or others may read or write it, or it
 *         belongs to neither this user nor root; loom_key_refusal says which, and the fix).
 * While a server is away, calls wait for it to come back (the connection resends what was in
 * flight; the servers apply it once) for the recovery window; then they fail with -EIO.
 */
int loom_connect_with(const char *mds_addr, const struct loom_connect_opts *opts, loom_fs **out);

/*
 * Why the key file at path is refused (loom_connect_with's -EPERM), as one line that ends with
 * the fix: "key file F is readable by its group and others (mode 0644): chmod 600 F". A buffer of
 * 2 * PATH_MAX + 160 bytes holds any. 0 with the line in buf; -EAGAIN if the file is private
 * now; the error of stat(2) on path.
 */
int loom_key_refusal(const char *path, char *buf, size_t cap);

/*
 * Connects through the door of the Loom mount that holds path (a mount point, or any path on
 * the mount), for a process without the file system key: that node's loom-mount, which holds
 * it, does each request as this process's user (the kernel tells it who that is), and data
 * moves through memory both map. The paths given to the calls are the file system's (as for
 * loom_connect), not the mount's. The calls on files and directories, names, attributes,
 * extended attributes, layouts and prefetch work as on a keyed connection; the others (targets,
 * pools, nodemaps, the inode-level API) fail with -EOPNOTSUPP: they need the key.
 * Errors: -ENOTTY (not a Loom mount, or one without doors), -ENOENT (the mount serves no door),
 *         -EACCES (the daemon refused this user, or another process answered), -EUSERS (this
 *         user has too many sessions open there), and the servers' errors. loom_connect_error()
 *         says which.
 */
int loom_connect_mount(const char *path, loom_fs **out);

/* Closes every connection. Files and directories still open are invalid afterwards. First has
 * the MDS commit what it answered this client and not committed yet (only this process could
 * replay it after an MDS crash), waiting for an MDS that is away as any call does (up to the
 * recovery window), and tells it this client goes, so that a restart of the MDS does not wait
 * for it. */
void loom_disconnect(loom_fs *fs);
/* As loom_disconnect, without waiting for an MDS that is away: what it answered this client and
 * had not committed is lost should it have crashed. For a finalizer at a program's exit that
 * did not ask for durability (no fsync, no loom_sync, no explicit close). */
void loom_disconnect_nowait(loom_fs *fs);

/* The file system's name. */
const char *loom_fsname(const loom_fs *fs);

/* Sets the identity later calls present to the MDS (root may act for other users; a process
 * that is not root can only present its own identity: -EPERM otherwise). */
int loom_set_cred(loom_fs *fs, const struct loom_cred *cred);
/* The umask new files and directories of this connection get (as read from the process at
 * connect, until set): a daemon acting for callers that applied their own sets 0. */
int loom_set_umask(loom_fs *fs, mode_t mask);

/* ---- job ids (Lustre's jobstats) ---- */

/*
 * Every request carries the job id of the process it is for, and the servers keep statistics per
 * job (`loom jobstats`). A connection's requests are this process's: its job id is made as
 * loom-mount(8) says for the options jobid_var and jobid_name (by default procname_uid and
 * "%e.%u", the command's name and the uid: "python3.1000"; jobid_var=SLURM_JOB_ID takes that
 * variable's value when the process has one), once per connection and again in a child after
 * fork (%p). Writes sent behind and prefetchers' reads carry the job of the thread that wrote or
 * started them. Through a mount's door (loom_connect_mount) the mount tags the requests itself,
 * with its own settings.
 *
 * loom_jobid_conf: this connection's settings (NULL leaves one as it is). The environment
 *   variables LOOM_JOBID_VAR and LOOM_JOBID_NAME, when set, win over them. Errors: -EINVAL (a
 *   value loom-mount refuses: jobid_var is disable, procname_uid, nodelocal or a variable's name;
 *   jobid_name 1 to 63 printable characters).
 * loom_jobid_from_mount: the settings of the Loom mount that holds path (its -o jobid_var and
 *   jobid_name, asked of its loom-mount), so that a program is counted alike whether it reads
 *   through the mount or through libloom (the Python package does this when it connects through
 *   a mount). Errors: -ENOTTY (not a Loom mount, or one too old to say), open(2)'s for path.
 * loom_jobid: the job id the calling thread's requests carry now, NUL-terminated ("": none), cut
 *   to cap bytes (LOOM_JOBID_LEN hold any).
 */
#define LOOM_JOBID_LEN 32
int loom_jobid_conf(loom_fs *fs, const char *var, const char *name);
int loom_jobid_from_mount(loom_fs *fs, const char *path);
void loom_jobid(loom_fs *fs, char *buf, size_t cap);

/* ---- names and attributes ---- */

/* stat follows a final symlink, lstat does not. */
int loom_stat(loom_fs *fs, const char *path, struct stat *st);
int loom_lstat(loom_fs *fs, const char *path, struct stat *st);

/* Errors: -EEXIST, -ENOSPC (the MDT is full: down to the reserve it keeps for deletions, which
 * always work; so do symlink, link and new xattrs). */
int loom_mkdir(loom_fs *fs, const char *path, mode_t mode);
/* Errors: -ENOTEMPTY, -ENOTDIR, -EBUSY (the root). */
int loom_rmdir(loom_fs *fs, const char *path);
/* Errors: -EISDIR. An open file stays readable and writable until its last close. */
int loom_unlink(loom_fs *fs, const char *path);

#define LOOM_RENAME_NOREPLACE 0x1u /* as RENAME_NOREPLACE */
#define LOOM_RENAME_EXCHANGE  0x2u /* as RENAME_EXCHANGE */
/* Errors: -EINVAL (a directory into its own subtree, or bad flags), -ENOTEMPTY, -EISDIR,
 *         -ENOTDIR, -EEXIST (NOREPLACE). */
int loom_rename(loom_fs *fs, const char *from, const char *to, unsigned int flags);

/* Errors: -EEXIST, -EPERM (from is a directory), -EMLINK. */
int loom_link(loom_fs *fs, const char *from, const char *to);
/* Creates linkpath pointing at target (stored as given, up to LOOM_SYMLINK_MAX bytes). */
int loom_symlink(loom_fs *fs, const char *target, const char *linkpath);
/* Copies the target (not NUL-terminated, truncated to cap) and its full length to *len.
 * Errors: -EINVAL (not a symlink). */
int loom_readlink(loom_fs *fs, const char *path, char *buf, size_t cap, size_t *len);

int loom_chmod(loom_fs *fs, const char *path, mode_t mode);
/* (uid_t)-1 / (gid_t)-1 leave that id unchanged. */
int loom_chown(loom_fs *fs, const char *path, uid_t uid, gid_t gid);
/* times[0] = atime, times[1] = mtime; UTIME_NOW and UTIME_OMIT as utimensat(2); NULL = now. */
int loom_utimens(loom_fs *fs, const char *path, const struct timespec times[2]);
/* Errors: -EISDIR, -EFBIG, -EINVAL (negative size). */
int loom_truncate(loom_fs *fs, const char *path, off_t size);

/* The file system as statfs(2) on a mount reports it: the OSTs' space, the MDT's inodes. */
int loom_statfs(loom_fs *fs, struct statvfs *st);

/* ---- extended attributes ---- */

/* cap 0 asks for the size only. Errors: -ENODATA (no such attribute), -ERANGE (cap too small),
 * -ENOTSUP. */
int loom_getxattr(loom_fs *fs, const char *path, const char *name, void *buf, size_t cap,
		  size_t *len);
#define LOOM_XATTR_CREATE  0x1 /* as XATTR_CREATE: -EEXIST if it exists */
#define LOOM_XATTR_REPLACE 0x2 /* as XATTR_REPLACE: -ENODATA if it does not */
/* Errors: -E2BIG (value over LOOM_XATTR_SIZE_MAX), -ERANGE (name too long), -EEXIST, -ENODATA. */
int loom_setxattr(loom_fs *fs, const char *path, const char *name, const void *value,
		  size_t len, int flags);
/* NUL-terminated names one after another; cap 0 asks for the size. Errors: -ERANGE. */
int loom_listxattr(loom_fs *fs, const char *path, char *buf, size_t cap, size_t *len);
int loom_removexattr(loom_fs *fs, const char *path, const char *name);

/* ---- directories ---- */

struct loom_dirent {
	uint64_t ino;
	unsigned char type;           /* DT_* */
	char name[LOOM_NAME_MAX + 1]; /* NUL-terminated */
};

/* Errors: -ENOTDIR. */
int loom_opendir(loom_fs *fs, const char *path, loom_dir **out);
/* Returns 1 with the next entry ("." and ".." first), 0 at the end, or a negative errno.
 * Entries added or removed meanwhile may or may not appear; the others appear exactly once. */
int loom_readdir(loom_dir *dir, struct loom_dirent *ent);
void loom_closedir(loom_dir *dir);

/* ---- files ---- */

/*
 * Opens (and with O_CREAT creates) a file. flags: O_RDONLY, O_WRONLY, O_RDWR, O_CREAT, O_EXCL,
 * O_TRUNC, O_APPEND; others are ignored. A new regular file takes its directory's default layout.
 * Errors: -EEXIST (O_CREAT|O_EXCL), -EISDIR (a directory for writing), -ENOSPC (no OST can take
 *         the new file's stripes, or the MDT is full).
 */
int loom_open(loom_fs *fs, const char *path, int flags, mode_t mode, loom_file **out);

/* Like loom_open with O_CREAT, but a new file gets `layout` (stripe_size/stripe_count 0 and
 * stripe_offset -1 inherit from the directory's default). */
int loom_create(loom_fs *fs, const char *path, int flags, mode_t mode,
		const struct loom_layout *layout, loom_file **out);

/* Reads up to len bytes; returns the count (0 at end of file) or a negative errno. Holes read as
 * zeros. Errors: -EBADF (not open for reading), -EIO (an OSS failed or a checksum mismatched). */
ssize_t loom_pread(loom_file *f, void *buf, size_t len, off_t off);
/* Writes len bytes; returns len or a negative errno (nothing is partly acknowledged).
 * Errors: -EBADF (not open for writing), -ENOSPC (an OST is full), -EFBIG. */
ssize_t loom_pwrite(loom_file *f, const void *buf, size_t len, off_t off);
/* Read and write at the file position, which they advance. With O_APPEND writes go to the end. */
ssize_t loom_read(loom_file *f, void *buf, size_t len);
ssize_t loom_write(loom_file *f, const void *buf, size_t len);
/* Sets the file position as lseek(2) (SEEK_SET, SEEK_CUR, SEEK_END, and SEEK_DATA / SEEK_HOLE as
 * loom_seek_data finds them); *pos gets the new one. Errors: -EINVAL (whence, or a position
 * before 0), and loom_seek_data's. */
int loom_lseek(loom_file *f, off_t off, int whence, off_t *pos);

/*
 * Where data or a hole begins, as lseek(2) with SEEK_DATA or SEEK_HOLE finds it (the file
 * position stays): *out gets the first offset at or after off that holds data (SEEK_DATA), or
 * that is in a hole (SEEK_HOLE; the end of the file is one, so a file without holes answers its
 * size). As on a local file, a hole may also be reported as data (zeros are data too), never
 * data as a hole: a Data-on-MDT part is data up to what the MDS stores of it, so a range punched
 * there reads as zeros but is found as data; a range allocated and never written is a hole.
 * What this client wrote through any handle is waited for first.
 * Errors: -ENXIO (off < 0 or at or past the end of the file, or SEEK_DATA and no data after off),
 *         -EINVAL (whence), -EIO (an OSS failed).
 */
int loom_seek_data(loom_file *f, off_t off, int whence, off_t *out);

/*
 * Manipulates the space of [off, off + len), as fallocate(2) with these modes (FALLOC_FL_*):
 *   0                          allocates the range; the file grows to off + len if shorter
 *   KEEP_SIZE                  allocates, the size unchanged (also past the end)
 *   PUNCH_HOLE | KEEP_SIZE     the range reads as zeros and takes no space on the OSTs
 *   ZERO_RANGE [| KEEP_SIZE]   the range reads as zeros; the file grows unless KEEP_SIZE
 * The change is reported to the MDS as a write is (size, mtime, st_blocks, with the next flush,
 * fsync or close), after every write of this client to the file in flight has landed. Within a
 * file's Data-on-MDT part a punch writes zeros; allocating there changes nothing.
 * Errors: -EINVAL (off < 0, len <= 0), -EOPNOTSUPP (any other mode: COLLAPSE_RANGE, INSERT_RANGE,
 *         UNSHARE_RANGE, PUNCH_HOLE without KEEP_SIZE...), -EBADF (not open for writing),
 *         -ENODEV (not a regular file), -EFBIG (off + len past 2^62), -ENOSPC (an OST is full),
 *         -EIO (an OSS failed, or a block the range covers in part is corrupt; the range may be
 *         done in part).
 */
int loom_fallocate(loom_file *f, int mode, off_t off, off_t len);

/* Makes the file's data durable on its OSTs, then reports size and mtime to the MDS, and returns
 * once the MDS has committed them and every other change this client made (loom_sync).
 * Errors: a write's that failed behind (-ENOSPC, -EFBIG, -EIO), and -ENOSPC when the MDT had no
 * room for the file's Data-on-MDT bytes (they stay unsaved: the next fsync or close tries again). */
int loom_fsync(loom_file *f);
/* Returns once the MDS has committed every namespace change it answered this client (it may
 * answer a change before its commit, and this client replays it should the MDS crash first):
 * what fsync of a directory, syncfs and sync need. At once when nothing is uncommitted.
 * Errors: -EIO (the MDS cannot be reached). */
int loom_sync(loom_fs *fs);
/* Errors: -EBADF (not open for writing), -EFBIG. */
int loom_ftruncate(loom_file *f, off_t size);
int loom_fstat(loom_file *f, struct stat *st);
/* Reports size and mtime to the MDS and frees f, even when it returns an error (which is the
 * error of that last report: the data written is on the OSTs; -ENOSPC when the MDT had no room
 * for the Data-on-MDT bytes, which are then lost, the file being closed all the same). */
int loom_close(loom_file *f);

/* ---- layouts ---- */

/* A file's layout, or a directory's default (flags LOOM_LAYOUT_DEFAULT, and
 * LOOM_LAYOUT_INHERITED when it has none of its own). Free with loom_layout_free().
 * Errors: -ENODATA (a symlink or device has none). */
int loom_getlayout(loom_fs *fs, const char *path, struct loom_layout **out);
/*
 * On a directory, sets the default layout for new files and directories in it (nobjs ignored;
 * fields left 0 / -1 / "" inherit). On a path that does not exist, creates an empty file with that
 * layout (as `lfs setstripe FILE`). On an existing empty file, lays it out again.
 * Errors: -EEXIST (a file that holds data: its layout is fixed), -EINVAL (stripe size not a
 *         multiple of 64 KiB, stripe count or offset out of range, no such OST), -EBUSY (the
 *         file is open somewhere; one closed on a mount a moment ago, whose release is on its
 *         way, is waited for, about 1.5 s at most).
 */
int loom_setlayout(loom_fs *fs, const char *path, const struct loom_layout *layout);
/*
 * Migration (`loom migrate`), in two steps:
 *
 * loom_open_copy opens for writing a new file without a name (as open(O_TMPFILE) of path's
 * directory), laid out as layout (fields left unset come from that directory's default; give
 * path's Data-on-MDT size), to receive a whole copy of regular file path. The MDS keeps it only
 * while it is open: its last close, or the end of this client's session (the process died, and
 * the MDS's recovery window passed), releases it and its objects, so a migration that never
 * finishes leaves nothing behind. Its objects are tagged (for loom fsck) as path's, whose they
 * become at the swap. Errors: -EINVAL (path is not a regular file), those of loom_create.
 *
 * loom_swap_layouts_copy gives path the objects of copy, once the whole of path is written into
 * it, and copy the old ones; it takes ownership of copy and closes it whatever happens, which
 * releases it (with the old objects after a swap). expect is path's stat from before the copy
 * began. -EAGAIN when path changed since (or names another file now), -EBUSY while it is open for
 * writing anywhere (after about 1.5 s of waiting for a close on a mount to land), -EINVAL when
 * copy is not a whole copy (another size or Data-on-MDT size). Readers that have path open keep
 * reading the old objects, which stay until they close.
 */
int loom_open_copy(loom_fs *fs, const char *path, const struct loom_layout *layout, loom_file **out);
int loom_swap_layouts_copy(loom_fs *fs, const char *path, loom_file *copy, const struct stat *expect);
/* The same swap with a copy that has a name, tmp_path (written, flushed and closed); unlink it
 * afterwards. Its objects stay tagged as tmp_path's, which loom fsck reports (and --repair
 * retags), and a copy left by a process that died stays until removed: loom_open_copy has
 * neither problem. */
int loom_swap_layouts(loom_fs *fs, const char *path, const char *tmp_path, const struct stat *expect);
/* Removes a directory's own default layout. Errors: -ENODATA (it had none), -EPERM (the root). */
int loom_dellayout(loom_fs *fs, const char *path);
void loom_layout_free(struct loom_layout *layout);

/* ---- mirrored files (loom mirror) ---- */

/* Asks the MDS to copy path's stale copies again from in-sync ones (it does so in the
 * background, at its --resync-rate), and waits until none is stale, or timeout_s seconds (0: no
 * limit; then -ETIMEDOUT, for instance while a stale copy's OST is away). The owner or root only
 * (-EPERM); -EINVAL for a file that is not mirrored. */
int loom_mirror_resync(loom_fs *fs, const char *path, unsigned timeout_s);
/* lfs mirror extend: one more copy, filled by the MDS's resync in the background; -EINVAL for a
 * file that is not mirrored, at 16 copies, or without OSTs for another copy. */
int loom_mirror_extend(loom_fs *fs, const char *path);
/* lfs mirror split -d: copy mirror_id (from 1) goes and its objects are destroyed; -ENOENT for no
 * such mirror, -EBUSY while the file is open anywhere, -EINVAL for a file that is not mirrored or
 * a copy that is some stripe's last in sync. With two copies, the file is plain after it. */
int loom_mirror_split(loom_fs *fs, const char *path, uint32_t mirror_id);
/* The first difference loom_mirror_verify found, if any. */
struct loom_mirror_diff {
	bool differ;
	uint32_t mirror_a, mirror_b; /* mirror ids (from 1) that differ */
	uint64_t offset;             /* the first file offset where they do */
	uint64_t compared;           /* object bytes of the first copy compared */
};
/* Reads every in-sync copy of every stripe of path and compares them (lfs mirror verify); stale
 * copies are known to differ and are skipped. 0 with diff->differ set if two differ. -EINVAL
 * for a file that is not mirrored. An erasure-coded file: its in-sync objects are checked against
 * the code (the first stripe_count of them give the others); mirror_a is 0 and mirror_b the first
 * object (its index in the layout, from 1) that holds something else, offset the file offset of
 * its row's bytes there. */
int loom_mirror_verify(loom_fs *fs, const char *path, struct loom_mirror_diff *diff);

/* ---- targets, for `loom df` ---- */

#define LOOM_TGT_MDT 0
#define LOOM_TGT_OST 1
struct loom_target {
	int kind;             /* LOOM_TGT_MDT or LOOM_TGT_OST */
	uint32_t idx;
	uint32_t flags;       /* LOOM_TGTF_* */
	char uuid[40];
	char addr[80];        /* "host:port" */
	struct statvfs st;    /* valid unless LOOM_TGTF_INACTIVE */
};
#define LOOM_TGTF_INACTIVE 0x1u /* could not be reached */
#define LOOM_TGTF_READONLY 0x2u
#define LOOM_TGTF_NOCREATE 0x4u /* the OSS takes no new objects (out of space, read-only...) */
#define LOOM_TGTF_DEACTIVATED 0x8u /* by `loom ost deactivate`: no new stripes, files readable */

/* The MDT and every OST with fresh space figures, each asked directly. *out is malloc'd. */
int loom_targets(loom_fs *fs, struct loom_target **out, uint32_t *count);
/* Deactivates (no new stripes go there; its files stay readable) or activates again OST idx.
 * The MDS keeps the state across restarts. Errors: -EPERM (not root), -ENOENT (no such OST). */
int loom_ost_set_active(loom_fs *fs, uint32_t idx, bool active);
/* Retires OST idx for good (`loom ost remove`, Lustre's lctl del_ost): it leaves `loom df` and
 * the placement of stripes, its index goes to no new OST (only to one formatted with --replace),
 * and its OSS is refused if it registers again. *files and *objects (either may be NULL) get how
 * many files still have objects there and how many objects, counted by the MDS. With
 * LOOM_OST_REMOVE_DRYRUN it only counts. Errors: -EBUSY (files have objects there, and not
 * LOOM_OST_REMOVE_FORCE, which removes it all the same: their objects there are lost), -EPERM
 * (not root, or a node's key), -ENOENT (no such OST, or removed already). */
#define LOOM_OST_REMOVE_DRYRUN 0x1u
#define LOOM_OST_REMOVE_FORCE  0x2u
int loom_ost_remove(loom_fs *fs, uint32_t idx, uint32_t flags, uint64_t *files, uint64_t *objects);

/* ---- OST pools, for `loom pool` (Lustre's lctl pool_*) ---- */

#define LOOM_POOL_NEW     1 /* loom_pool_ctl commands */
#define LOOM_POOL_DESTROY 2 /* only an empty pool: -ENOTEMPTY */
#define LOOM_POOL_ADD     3 /* ost_idx joins: -ENODEV for no such OST, -EEXIST if in it */
#define LOOM_POOL_REMOVE  4 /* ost_idx leaves */
struct loom_pool {
	char name[LOOM_POOL_NAME_MAX + 1];
	uint32_t nosts;
	uint32_t *osts; /* ascending; points into the list's memory */
};
/* Changes a pool (root only: -EPERM). -ENOENT for no such pool, -EEXIST for NEW of one that
 * exists, -EINVAL for a bad name (1-15 letters, digits, '_' or '-'). */
int loom_pool_ctl(loom_fs *fs, int cmd, const char *name, uint32_t ost_idx);
/* Every pool, or the one named (-ENOENT if none): *out is one allocation for loom_pool_list_free. */
int loom_pool_list(loom_fs *fs, const char *name, struct loom_pool **out, uint32_t *count);
void loom_pool_list_free(struct loom_pool *pools);

/* ---- the nodemap, for `loom nodemap` and `loom key new --node` (Lustre's lctl nodemap_*) ---- */

/* A client node may hold a key of its own instead of the file system key: derived from the file
 * system key, the node's name and a generation, so that the servers need nothing but the file
 * system key and the nodemap to check it. The nodemap says what each node may claim. */
#define LOOM_NODE_NAME_MAX 31 /* 1..31 of [A-Za-z0-9._-] */
#define LOOM_NODE_ADMIN    0x1 /* its root is root (Lustre's admin property) */
#define LOOM_NODE_TRUSTED  0x2 /* its ids are taken as they are, ranges aside (Lustre's trusted) */
#define LOOM_NODE_READONLY 0x4 /* it may only read: changes are -EROFS (Lustre's readonly_mount) */
struct loom_node {
	char name[LOOM_NODE_NAME_MAX + 1];
	uint32_t generation; /* of its key: 1 at first, one more at each revoke */
	uint32_t flags;      /* LOOM_NODE_* */
	/* Unless ADMIN, its uid 0 and gid 0 become these; unless TRUSTED, so do its ids outside
	 * [uid_min, uid_max] and [gid_min, gid_max] (supplementary groups outside are dropped). */
	uint32_t squash_uid, squash_gid;
	uint32_t uid_min, uid_max, gid_min, gid_max;
};
#define LOOM_NODEMAP_ADD    1 /* loom_nodemap_ctl commands: a new node, generation 1 */
#define LOOM_NODEMAP_DEL    2 /* the node leaves the nodemap: its key is refused from then on */
#define LOOM_NODEMAP_MODIFY 3 /* flags, squash ids and ranges (the generation stays) */
#define LOOM_NODEMAP_REVOKE 4 /* a new generation: the node's key so far is refused from then on */
/* Changes the nodemap: root holding the file system key only (-EPERM otherwise). ADD: -EEXIST if
 * there; DEL, MODIFY, REVOKE: -ENOENT if not. -EINVAL for a bad name, flags or a range whose min
 * is above its max. node->generation is not read. *out (may be NULL) gets the node as it is after
 * ADD, MODIFY or REVOKE. */
int loom_nodemap_ctl(loom_fs *fs, int cmd, const struct loom_node *node, struct loom_node *out);
/* Every node (name NULL or "") or the one named (-ENOENT if none), in name order: *out is one
 * allocation for free(). */
int loom_nodemap_list(loom_fs *fs, const char *name, struct loom_node **out, uint32_t *count);
/* Writes the key of node `name` of that generation to path (mode 0600), derived from the file
 * system key fs connected with: -ENOKEY if fs holds no key or only a node's key. -EEXIST if path
 * exists; -EINVAL for a bad name or generation 0. */
int loom_node_key_write_file(loom_fs *fs, const char *path, const char *name, uint32_t generation);

/* ---- integrity, for `loom scrub` ---- */

#define LOOM_SCRUB_START   0 /* commands */
#define LOOM_SCRUB_STATUS  1
#define LOOM_SCRUB_IDLE    0 /* states: none since the OSS started */
#define LOOM_SCRUB_RUNNING 1
#define LOOM_SCRUB_DONE    2
#define LOOM_SCRUB_MAX_BAD 64
struct loom_scrub_status {
	int state;                 /* LOOM_SCRUB_IDLE/RUNNING/DONE */
	int error;                 /* 0, or the negative errno that ended the scrub early */
	time_t start_time;         /* 0 when idle */
	time_t finish_time;        /* 0 unless done */
	uint64_t objects_checked;
	uint64_t bytes_checked;
	uint64_t blocks_checked;   /* 64 KiB blocks compared with their checksum */
	uint64_t blocks_unchecked; /* blocks read that have no checksum (holes, older data) */
	uint64_t bad_blocks;       /* blocks whose data does not match their checksum */
	uint64_t bad_objects;
	uint64_t rate;             /* the scrub's limit, bytes per second; 0: none */
	uint32_t nbad;             /* entries of bad_objids used */
	uint64_t bad_objids[LOOM_SCRUB_MAX_BAD]; /* the first bad objects found */
};

/*
 * The scrub of OST ost_idx: its OSS reads every object of the OST in the background, at a
 * bounded rate, and checks each 64 KiB block against the crc32c stored when it was written
 * (a bad block also fails every read of it with -EIO). LOOM_SCRUB_START starts one, unless one
 * runs already (then it only reports that one); LOOM_SCRUB_STATUS asks about the running or
 * last one. *st gets the status either way. Does not wait for a server that is away.
 * Errors: -EINVAL (cmd), -ENODEV (no such OST), -EIO (its OSS cannot be reached),
 *         -EOPNOTSUPP (its OSS cannot scrub).
 */
int loom_ost_scrub(loom_fs *fs, uint32_t ost_idx, int cmd, struct loom_scrub_status *st);

/* ---- parameters and statistics, for `loom get_param`, `set_param`, `jobstats` ---- */

/*
 * The parameters of the file system's servers whose names match pattern (fnmatch(3), as
 * `lctl get_param` takes: "ost.*.job_stats", "mdt.*.recovery_status"), the MDS's first, then each
 * OST's in index order, as lctl prints them (NAME=VALUE, or NAME= and the value's lines below):
 * *out malloc'd (NUL-terminated, *len bytes). Needs the file system key. A server that does not
 * answer is left out; -ENOENT when nothing matched anywhere (or the first server's error when
 * no server could be asked).
 */
int loom_get_param(loom_fs *fs, const char *pattern, char **out, size_t *len);
/*
 * Sets value on every parameter that matches pattern, on every server ("*.job_stats" "clear").
 * *matched (may be NULL) gets how many were set. -ENOENT when none matched; -EINVAL for a value a
 * parameter does not take, -EACCES for one that cannot be set (neither sets anything on that
 * server).
 */
int loom_set_param(loom_fs *fs, const char *pattern, const char *value, uint32_t *matched);

/* ---- prefetch: reading ahead in an order known in advance ---- */

/*
 * A training loop knows the order it will read its samples in (the sampler's indices) before it
 * reads them. A prefetcher takes that order as a list of items, each a whole file or a byte range
 * of one, and reads ahead of the reader with `threads` reads in flight at once, from every server
 * that holds them, while the bytes it holds (read and not yet taken, and reads in flight) stay
 * within max_bytes. One item larger than max_bytes alone is still read, when nothing else is held.
 */
typedef struct loom_prefetch loom_prefetch;

struct loom_prefetch_item {
	const char *path;
	uint64_t offset;
	int64_t length;        /* bytes from offset; -1: to the end of the file */
};

struct loom_prefetch_opts {
	size_t max_bytes;      /* 0: 256 MiB */
	unsigned threads;      /* reads in flight at once; 0: 16 */
	unsigned max_ahead;    /* items read ahead of the reader at most; 0: 4096 */
};

struct loom_prefetch_stats {
	uint64_t fetched;      /* items read by the prefetcher */
	uint64_t ready;        /* items that were there when taken */
	uint64_t waited;       /* items taken while still being read (the reader waited) */
	uint64_t direct;       /* items the reader had to read itself (it jumped ahead of the
	                        * prefetcher) */
	uint64_t dropped;      /* items read ahead and then skipped by the reader */
	uint64_t bytes_fetched;
	size_t bytes_held;     /* now */
	size_t peak_bytes;     /* the most ever held; never above max_bytes unless one item is */
};

/* Starts reading items (copied; the caller's array may go) ahead. Errors: -EINVAL (n 0, or a
 * NULL path), -EAGAIN (no thread could be started). */
int loom_prefetch_start(loom_fs *fs, const struct loom_prefetch_item *items, size_t n,
			const struct loom_prefetch_opts *opts, loom_prefetch **out);
/*
 * Item i's bytes: *buf gets a malloc'd copy (free it with loom_prefetch_free) and the return value
 * is its length, or a negative errno (that of the open or read, as loom_open and loom_pread give).
 * Items are meant to be taken in order; taking i gives up the items before it not yet taken (they
 * are freed). Taking an item already given up, or one the prefetcher has not reached, reads it
 * in the caller's thread. Any thread may take, one at a time.
 */
ssize_t loom_prefetch_take(loom_prefetch *pf, size_t i, void **buf);
void loom_prefetch_free(void *buf);
void loom_prefetch_get_stats(loom_prefetch *pf, struct loom_prefetch_stats *st);
/* Stops the threads (a read in flight finishes first) and frees everything not taken. */
void loom_prefetch_stop(loom_prefetch *pf);

/* ---- for bindings (ctypes, cffi) ---- */

/*
 * struct stat and struct statvfs in fixed-width fields of the same layout on every architecture
 * and C library, for bindings that cannot include <sys/stat.h>: they pass loom_stat and
 * loom_statfs a buffer of loom_struct_size("stat") (or "statvfs") bytes, and read it through
 * these. Neither copies libc's layout by hand.
 */
struct loom_attr {
	uint64_t dev, ino, nlink, rdev;
	uint32_t mode, uid, gid, pad;
	int64_t size, blksize, blocks;
	int64_t atime_sec, atime_nsec, mtime_sec, mtime_nsec, ctime_sec, ctime_nsec;
};

struct loom_fsattr {
	uint64_t bsize, frsize, blocks, bfree, bavail, files, ffree, favail, fsid, flag, namemax;
};

void loom_attr_from_stat(const struct stat *st, struct loom_attr *out);
void loom_fsattr_from_statvfs(const struct statvfs *st, struct loom_fsattr *out);

/*
 * sizeof the named struct as this library was built: "stat", "statvfs", or a struct of this
 * header without its "loom_" ("attr", "fsattr", "connect_opts", "dirent", "layout" (without its
 * objects), "ostobj", "prefetch_item", "prefetch_opts", "prefetch_stats"). 0 for a name it does
 * not know. A binding that mirrors a struct checks its size against this at load.
 */
size_t loom_struct_size(const char *name);

#ifdef __cplusplus
}
#endif

#endif
