/*
 * loom-nullfs: what a metadata workload can cost through FUSE on this machine at all. A file
 * system held in memory whose daemon answers every request at once, facing the kernel exactly
 * as loom-mount does (src/fuse: the same capabilities, entry and attribute timeouts of 1 s, no
 * negative entries, direct I/O for write-only opens, no write-back cache, the same loop). What
 * it reaches beside a local folder is the ceiling of loom/local for that workload: every
 * request a FUSE file system must answer, and nothing else. bench/fuse_floor.py runs the
 * bench's own workloads (bench/workloads.py) on it, on Loom and on a local folder.
 *
 *     loom-nullfs MOUNTPOINT [--cache SEC]
 *
 * --cache gives entries, negative entries and attributes SEC seconds instead (what a file
 * system that never has to check with a server could ask of the kernel).
 *
 * Not part of Loom: a yardstick, as a local folder is. One lock; no hard links, renames,
 * symlinks or extended attributes.
 */
#define FUSE_USE_VERSION 314
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>

#include "yardstick.h"

struct node {
	struct stat st;
	char *data;              /* a file's bytes (cap of them allocated) */
	size_t cap;
	struct entry *first;   /* a directory's entries, newest first */
};

struct entry {
	struct entry *next_in_dir, *prev_in_dir, *next_hash;
	fuse_ino_t parent, ino;
	char name[];
};

#define HASH_BITS 20
static struct entry *hash[1u << HASH_BITS];
static struct node **nodes;    /* by inode number */
static fuse_ino_t nnodes, cap_nodes;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static double entry_timeout = 1.0, attr_timeout = 1.0, negative_timeout = 0.0;

static unsigned bucket(fuse_ino_t parent, const char *name)
{
	uint64_t h = 1469598103934665603ull ^ parent;

	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 1099511628211ull;
	return (unsigned)(h >> (64 - HASH_BITS));
}

static struct entry *find(fuse_ino_t parent, const char *name)
{
	for (struct entry *d = hash[bucket(parent, name)]; d; d = d->next_hash)
		if (d->parent == parent && strcmp(d->name, name) == 0)
			return d;
	return NULL;
}

static struct node *node_of(fuse_ino_t ino)
{
	return ino < nnodes ? nodes[ino] : NULL;
}

static struct node *node_new(mode_t mode, const struct fuse_ctx *ctx)
{
	struct node *n = calloc(1, sizeof(*n));
	struct timespec now;

	if (!n)
		return NULL;
	if (nnodes == cap_nodes) {
		fuse_ino_t cap = cap_nodes ? cap_nodes * 2 : 1024;
		struct node **g = realloc(nodes, cap * sizeof(*g));

		if (!g) {
			free(n);
			return NULL;
		}
		nodes = g;
		cap_nodes = cap;
	}
	clock_gettime(CLOCK_REALTIME, &now);
	n->st.st_ino = nnodes;
	n->st.st_mode = mode;
	n->st.st_nlink = S_ISDIR(mode) ? 2 : 1;
	n->st.st_uid = ctx ? ctx->uid : 0;
	n->st.st_gid = ctx ? ctx->gid : 0;
	n->st.st_blksize = 4096;
	n->st.st_atim = n->st.st_mtim = n->st.st_ctim = now;
	nodes[nnodes++] = n;
	return n;
}

static int link_in(fuse_ino_t parent, const char *name, fuse_ino_t ino)
{
	size_t len = strlen(name);
	struct entry *d = calloc(1, sizeof(*d) + len + 1);
	struct node *dir = node_of(parent);
	unsigned b = bucket(parent, name);

	if (!d)
		return -ENOMEM;
	d->parent = parent;
	d->ino = ino;
	memcpy(d->name, name, len + 1);
	d->next_hash = hash[b];
	hash[b] = d;
	d->next_in_dir = dir->first;
	if (dir->first)
		dir->first->prev_in_dir = d;
	dir->first = d;
	clock_gettime(CLOCK_REALTIME, &dir->st.st_mtim);
	dir->st.st_ctim = dir->st.st_mtim;
	return 0;
}

static void unlink_out(struct entry *d)
{
	struct node *dir = node_of(d->parent);
	struct entry **pp = &hash[bucket(d->parent, d->name)];

	while (*pp != d)
		pp = &(*pp)->next_hash;
	*pp = d->next_hash;
	if (d->prev_in_dir)
		d->prev_in_dir->next_in_dir = d->next_in_dir;
	else
		dir->first = d->next_in_dir;
	if (d->next_in_dir)
		d->next_in_dir->prev_in_dir = d->prev_in_dir;
	clock_gettime(CLOCK_REALTIME, &dir->st.st_mtim);
	dir->st.st_ctim = dir->st.st_mtim;
	free(d);
}

/* Room for size bytes of n's data (doubling): 0 or ENOMEM. */
static int node_reserve(struct node *n, size_t size)
{
	size_t cap = size < 2 * n->cap ? 2 * n->cap : size;
	char *g;

	if (size <= n->cap)
		return 0;
	if (!(g = realloc(n->data, cap)))
		return ENOMEM;
	n->data = g;
	n->cap = cap;
	return 0;
}

static void entry_of(const struct node *n, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = n->st.st_ino;
	e->generation = 1;
	e->attr = n->st;
	e->attr.st_blocks = (n->st.st_size + 511) / 512;
	e->attr_timeout = attr_timeout;
	e->entry_timeout = entry_timeout;
}

static void nf_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	/* loom-mount's choices (src/fuse/ops_file.c, lm_init). */
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS | FUSE_CAP_READDIRPLUS_AUTO;
	conn->want &= ~(FUSE_CAP_AUTO_INVAL_DATA | FUSE_CAP_WRITEBACK_CACHE);
	if (conn->capable & FUSE_CAP_HANDLE_KILLPRIV)
		conn->want |= FUSE_CAP_HANDLE_KILLPRIV;
	if (conn->capable & FUSE_CAP_IOCTL_DIR)
		conn->want |= FUSE_CAP_IOCTL_DIR;
	conn->max_readahead = 16u << 20;
	conn->max_background = 64;
	conn->congestion_threshold = 48;
}

static void nf_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	struct entry *d;

	pthread_mutex_lock(&lock);
	d = find(parent, name);
	if (d)
		entry_of(node_of(d->ino), &e);
	pthread_mutex_unlock(&lock);
	if (d) {
		fuse_reply_entry(req, &e);
	} else if (negative_timeout > 0) {
		memset(&e, 0, sizeof(e));
		e.entry_timeout = negative_timeout;
		fuse_reply_entry(req, &e);
	} else {
		fuse_reply_err(req, ENOENT);
	}
}

static void nf_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fuse_entry_param e;
	struct node *n;

	(void)fi;
	pthread_mutex_lock(&lock);
	n = node_of(ino);
	if (n)
		entry_of(n, &e);
	pthread_mutex_unlock(&lock);
	if (n)
		fuse_reply_attr(req, &e.attr, attr_timeout);
	else
		fuse_reply_err(req, ENOENT);
}

static void nf_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct fuse_entry_param e;
	struct node *n;
	int rc = 0;

	(void)fi;
	pthread_mutex_lock(&lock);
	n = node_of(ino);
	if (!n) {
		rc = ENOENT;
	} else {
		if (to_set & FUSE_SET_ATTR_MODE)
			n->st.st_mode = (n->st.st_mode & S_IFMT) | (attr->st_mode & 07777);
		if (to_set & FUSE_SET_ATTR_UID)
			n->st.st_uid = attr->st_uid;
		if (to_set & FUSE_SET_ATTR_GID)
			n->st.st_gid = attr->st_gid;
		if (to_set & FUSE_SET_ATTR_SIZE) {
			rc = node_reserve(n, (size_t)attr->st_size);
			if (!rc && attr->st_size > n->st.st_size)
				memset(n->data + n->st.st_size, 0, (size_t)(attr->st_size - n->st.st_size));
			if (!rc)
				n->st.st_size = attr->st_size;
		}
		if (to_set & FUSE_SET_ATTR_ATIME)
			n->st.st_atim = attr->st_atim;
		if (to_set & FUSE_SET_ATTR_MTIME)
			n->st.st_mtim = attr->st_mtim;
		if (to_set & (FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_MTIME_NOW))
			clock_gettime(CLOCK_REALTIME, &n->st.st_mtim);
		clock_gettime(CLOCK_REALTIME, &n->st.st_ctim);
		entry_of(n, &e);
	}
	pthread_mutex_unlock(&lock);
	if (rc)
		fuse_reply_err(req, rc);
	else
		fuse_reply_attr(req, &e.attr, attr_timeout);
}

/* A new name in parent for a new inode of mode; *e its entry. */
static int make(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		struct fuse_entry_param *e)
{
	struct node *n, *dir;
	int rc = 0;

	pthread_mutex_lock(&lock);
	dir = node_of(parent);
	if (!dir || !S_ISDIR(dir->st.st_mode))
		rc = -ENOTDIR;
	else if (find(parent, name))
		rc = -EEXIST;
	else if (!(n = node_new(mode, fuse_req_ctx(req))))
		rc = -ENOMEM;
	else if ((rc = link_in(parent, name, n->st.st_ino)) == 0) {
		if (S_ISDIR(mode))
			dir->st.st_nlink++;
		entry_of(n, e);
	}
	pthread_mutex_unlock(&lock);
	return rc;
}

static void nf_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct fuse_entry_param e;
	int rc = make(req, parent, name, S_IFDIR | (mode & 07777), &e);

	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_entry(req, &e);
}

static void nf_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct fuse_entry_param e;
	int rc = make(req, parent, name, S_IFREG | (mode & 07777), &e);

	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	if ((fi->flags & O_DIRECT) || (fi->flags & O_ACCMODE) == O_WRONLY)
		fi->direct_io = 1;
	fuse_reply_create(req, &e, fi);
}

static void remove_name(fuse_req_t req, fuse_ino_t parent, const char *name, int dir)
{
	struct entry *d;
	struct node *n;
	int rc = 0;

	pthread_mutex_lock(&lock);
	d = find(parent, name);
	n = d ? node_of(d->ino) : NULL;
	if (!n)
		rc = ENOENT;
	else if (dir && !S_ISDIR(n->st.st_mode))
		rc = ENOTDIR;
	else if (!dir && S_ISDIR(n->st.st_mode))
		rc = EISDIR;
	else if (dir && n->first)
		rc = ENOTEMPTY;
	if (!rc) {
		unlink_out(d);
		n->st.st_nlink = 0;
		if (dir)
			node_of(parent)->st.st_nlink--;
		/* The inode stays (the kernel may still hold it open); its bytes go. */
		free(n->data);
		n->data = NULL;
		n->cap = 0;
	}
	pthread_mutex_unlock(&lock);
	fuse_reply_err(req, rc);
}

static void nf_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_name(req, parent, name, 0);
}

static void nf_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_name(req, parent, name, 1);
}

static void nf_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	pthread_mutex_lock(&lock);
	if ((fi->flags & O_TRUNC) && node_of(ino))
		node_of(ino)->st.st_size = 0;
	pthread_mutex_unlock(&lock);
	fi->keep_cache = 1;
	if ((fi->flags & O_DIRECT) || (fi->flags & O_ACCMODE) == O_WRONLY)
		fi->direct_io = 1;
	fuse_reply_open(req, fi);
}

static void nf_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct node *n;
	char *buf = malloc(size ? size : 1);
	size_t k = 0;

	(void)fi;
	pthread_mutex_lock(&lock);
	n = node_of(ino);
	if (n && buf && off < n->st.st_size) {
		k = (size_t)(n->st.st_size - off) < size ? (size_t)(n->st.st_size - off) : size;
		memcpy(buf, n->data + off, k);
	}
	pthread_mutex_unlock(&lock);
	if (!buf)
		fuse_reply_err(req, ENOMEM);
	else
		fuse_reply_buf(req, buf, k);
	free(buf);
}

static void nf_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct node *n;
	size_t end = (size_t)off + size;
	int rc = 0;

	(void)fi;
	pthread_mutex_lock(&lock);
	n = node_of(ino);
	if (!n) {
		rc = ENOENT;
	} else if ((rc = node_reserve(n, end)) == 0) {
		if ((off_t)off > n->st.st_size)
			memset(n->data + n->st.st_size, 0, (size_t)(off - n->st.st_size));
		memcpy(n->data + off, buf, size);
		if ((off_t)end > n->st.st_size)
			n->st.st_size = (off_t)end;
		clock_gettime(CLOCK_REALTIME, &n->st.st_mtim);
		n->st.st_ctim = n->st.st_mtim;
	}
	pthread_mutex_unlock(&lock);
	if (rc)
		fuse_reply_err(req, rc);
	else
		fuse_reply_write(req, size);
}

static void nf_ok(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static void nf_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)datasync;
	nf_ok(req, ino, fi);
}

static void nf_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	fuse_reply_open(req, fi);
}

/* Entries from offset off (the count of entries before), as many as fit in size. */
static void nf_readdir_any(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, int plus)
{
	char *buf = malloc(size);
	size_t used = 0;
	off_t i = 0;
	struct node *dir;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_lock(&lock);
	dir = node_of(ino);
	for (struct entry *d = dir ? dir->first : NULL; d; d = d->next_in_dir, i++) {
		struct fuse_entry_param e;
		size_t k;

		if (i < off)
			continue;
		entry_of(node_of(d->ino), &e);
		k = plus ? fuse_add_direntry_plus(req, buf + used, size - used, d->name, &e, i + 1)
			 : fuse_add_direntry(req, buf + used, size - used, d->name, &e.attr, i + 1);
		if (k > size - used)
			break;
		used += k;
	}
	pthread_mutex_unlock(&lock);
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void nf_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	(void)fi;
	nf_readdir_any(req, ino, size, off, 0);
}

static void nf_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	(void)fi;
	nf_readdir_any(req, ino, size, off, 1);
}

static void nf_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv = { .f_bsize = 4096, .f_frsize = 4096, .f_blocks = 1u << 28,
			      .f_bfree = 1u << 27, .f_bavail = 1u << 27, .f_files = 1u << 24,
			      .f_ffree = 1u << 23, .f_namemax = 255 };

	(void)ino;
	fuse_reply_statfs(req, &sv);
}

/* loom-mount answers its own ioctls (loom df); a terminal's (isatty) is refused. */
static void nf_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
		     struct fuse_file_info *fi, unsigned flags, const void *in_buf, size_t in_bufsz,
		     size_t out_bufsz)
{
	(void)ino, (void)cmd, (void)arg, (void)fi, (void)flags, (void)in_buf, (void)in_bufsz;
	(void)out_bufsz;
	fuse_reply_err(req, ENOTTY);
}

static const struct fuse_lowlevel_ops ops = {
	.init = nf_init,
	.lookup = nf_lookup,
	.getattr = nf_getattr,
	.setattr = nf_setattr,
	.mkdir = nf_mkdir,
	.unlink = nf_unlink,
	.rmdir = nf_rmdir,
	.create = nf_create,
	.open = nf_open,
	.read = nf_read,
	.write = nf_write,
	.flush = nf_ok,
	.release = nf_ok,
	.fsync = nf_fsync,
	.opendir = nf_opendir,
	.readdir = nf_readdir,
	.readdirplus = nf_readdirplus,
	.releasedir = nf_ok,
	.fsyncdir = nf_fsync,
	.statfs = nf_statfs,
	.ioctl = nf_ioctl,
};

int main(int argc, char **argv)
{
	char *fargv[] = { argv[0], "-o", "fsname=nullfs,default_permissions", NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, fargv);
	struct node *root;
	int rc = 1;

	if (argc != 2 && !(argc == 4 && strcmp(argv[2], "--cache") == 0)) {
		fprintf(stderr, "usage: %s MOUNTPOINT [--cache SEC]\n", argv[0]);
		return 2;
	}
	if (argc == 4)
		entry_timeout = attr_timeout = negative_timeout = strtod(argv[3], NULL);
	(void)node_new(0, NULL); /* inode 0: none */
	root = node_new(S_IFDIR | 0755, NULL);
	if (!root || root->st.st_ino != FUSE_ROOT_ID)
		return 1;
	rc = yardstick_serve(&args, &ops, sizeof(ops), argv[1]);
	fuse_opt_free_args(&args);
	return rc;
}
