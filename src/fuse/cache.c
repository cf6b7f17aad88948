/*
 * What this mount's kernel caches of each inode, and the check at every open that it is still
 * the inode's: close-to-open across mounts. Once close(2) returned on any node, an open here
 * sees that node's names, data and size, whatever the times say.
 *
 * The kernel caches three things per inode, each with its own proof of freshness:
 *  - pages: valid for the data version they were read at (lw_attr.data_version, which every
 *    change of the bytes or the size advances and no utimes sets back). An open keeps them only
 *    when the version is unchanged; this mount's own reports advance the version they hold only
 *    if nobody else's change came in between (the version before ours was theirs).
 *  - attributes (size, mtime): what it was last told. An open of a file that changed elsewhere
 *    makes the kernel forget them; if the file shrank, the kernel's size would let reads run past
 *    the new end (and the short reads of read-ahead cannot be trusted to fix it), and an O_APPEND
 *    open's writes start at the kernel's size, so then the open answers ESTALE once: the VFS
 *    walks the path again with LOOKUP_REVAL, whose lookups give it the new size first.
 *  - names (dentries): told while the inode's name version was V. If an open finds another
 *    version, a name of it came or went elsewhere, and the dentry the kernel used may be one
 *    that no longer exists (a file renamed over, or renamed away and its name reused). Every
 *    dentry told for the inode is dropped (fuse_lowlevel_notify_inval_entry) and the open
 *    answers ESTALE: the retry looks the path up afresh. That retry's open, by the same opener
 *    right after, went through dentries its walk just looked up: it is held to the newest
 *    version a lookup told, and once it succeeded, the dentries of older versions are dropped
 *    (a file renamed over a name whose file this mount knew under another name: the retry's
 *    lookup tells the newer version while the old name is still remembered). Any other open is
 *    held to the oldest, as the kernel may have used any of them. Dentries of directories are checked
 *    the same way as a group: every open brings the MDS's count of directory renames, and when
 *    it moved, every directory dentry told is dropped before the retry (a path through a moved
 *    directory leads elsewhere now).
 * Dentries are dropped only from opens: their opener holds no directory lock, so the kernel can
 * take the parents' locks. A lookup must not (the kernel holds the parent's lock meanwhile).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "common/util.h"
#include "fuse/lmount.h"

/* Dentries remembered per inode; beyond, the inode's names are only checked by version. */
#define MAX_DENTRIES 8

struct told_name {
	uint64_t parent;
	char *name;
	uint64_t version;         /* the inode's name version it was told at (files) */
};

struct lm_inode {
	bool data_valid;          /* the pages hold data_version */
	uint64_t data_version;
	bool told_valid;          /* the kernel was told this size and mtime */
	uint64_t told_size;
	int64_t told_mtime;
	uint32_t told_mtime_ns;
	bool size_estale;        /* an open answered ESTALE for a resize since told_size was set */
	bool names_valid;         /* every dentry told for it was current at name_version */
	uint64_t name_version;
	uint64_t newest_version;  /* the newest a lookup told (>= name_version) */
	struct told_name names[MAX_DENTRIES];
	uint32_t nnames;
};

/* Under cache_lock: the state of ino, made when missing (NULL without memory). */
static struct lm_inode *inode_of(struct lmount *m, uint64_t ino)
{
	struct lm_inode *in = u64map_get(&m->inodes, ino);

	if (!in && (in = calloc(1, sizeof(*in))) != NULL && u64map_put(&m->inodes, ino, in) < 0) {
		free(in);
		in = NULL;
	}
	return in;
}

static void names_clear(struct lm_inode *in)
{
	for (uint32_t i = 0; i < in->nnames; i++)
		free(in->names[i].name);
	in->nnames = 0;
}

static void inode_free(uint64_t ino, void *val, void *arg)
{
	(void)ino;
	(void)arg;
	names_clear(val);
	free(val);
}

static void dir_free(uint64_t ino, void *val, void *arg)
{
	(void)ino;
	(void)arg;
	free(((struct told_name *)val)->name);
	free(val);
}

void lm_cache_init(struct lmount *m)
{
	pthread_mutex_init(&m->cache_lock, NULL);
	u64map_init(&m->inodes);
	u64map_init(&m->dirs);
}

void lm_cache_fini(struct lmount *m)
{
	u64map_each(&m->inodes, inode_free, NULL);
	u64map_destroy(&m->inodes);
	u64map_each(&m->dirs, dir_free, NULL);
	u64map_destroy(&m->dirs);
	pthread_mutex_destroy(&m->cache_lock);
}

/* Under cache_lock: the attributes the kernel now holds. */
static void told_attrs(struct lm_inode *in, const struct stat *st)
{
	if (!in->told_valid || in->told_size != (uint64_t)st->st_size)
		in->size_estale = false;
	in->told_valid = true;
	in->told_size = (uint64_t)st->st_size;
	in->told_mtime = st->st_mtim.tv_sec;
	in->told_mtime_ns = (uint32_t)st->st_mtim.tv_nsec;
}

static bool told_is(const struct lm_inode *in, const struct stat *st)
{
	return in->told_valid && in->told_size == (uint64_t)st->st_size &&
	       in->told_mtime == st->st_mtim.tv_sec && in->told_mtime_ns == (uint32_t)st->st_mtim.tv_nsec;
}

/* Under cache_lock: the kernel holds a dentry (parent, name) for in, told at version. */
static void told_name(struct lm_inode *in, uint64_t parent, const char *name, uint64_t version)
{
	for (uint32_t i = 0; i < in->nnames; i++)
		if (in->names[i].parent == parent && !strcmp(in->names[i].name, name)) {
			if (version > in->names[i].version)
				in->names[i].version = version;
			return;
		}
	if (in->nnames == MAX_DENTRIES) {
		/* Hard links past the limit: the oldest is forgotten, and with it the means to drop
		 * it if its name goes elsewhere (the version check still sends the opener back). */
		free(in->names[0].name);
		memmove(in->names, in->names + 1, (MAX_DENTRIES - 1) * sizeof(in->names[0]));
		in->nnames--;
	}
	in->names[in->nnames].name = strdup(name);
	if (in->names[in->nnames].name) {
		in->names[in->nnames].parent = parent;
		in->names[in->nnames].version = version;
		in->nnames++;
	}
}

/* Under cache_lock: a directory's one dentry, for dropping them all when directories move. */
static void told_dir(struct lmount *m, uint64_t ino, uint64_t parent, const char *name)
{
	struct told_name *d = u64map_get(&m->dirs, ino);

	if (d && d->parent == parent && !strcmp(d->name, name))
		return;
	if (!d) {
		d = calloc(1, sizeof(*d));
		if (!d)
			return;
		if (u64map_put(&m->dirs, ino, d) < 0) {
			free(d);
			return;
		}
	}
	free(d->name);
	d->parent = parent;
	d->name = strdup(name);
}

void lm_told_entry(struct lmount *m, uint64_t parent, const char *name, const struct loom_ll_attr *a)
{
	uint64_t ino = a->st.st_ino;
	struct lm_inode *in;

	pthread_mutex_lock(&m->cache_lock);
	if ((in = inode_of(m, ino)) != NULL) {
		if (S_ISREG(a->st.st_mode))
			told_attrs(in, &a->st);
		/* A name version other than the one the other dentries were told at keeps the old:
		 * they may be stale, and the next open drops them all. */
		if (!in->names_valid) {
			in->names_valid = true;
			in->name_version = in->newest_version = a->name_version;
		} else if (a->name_version > in->newest_version) {
			in->newest_version = a->name_version;
		}
		told_name(in, parent, name, a->name_version);
	}
	if (S_ISDIR(a->st.st_mode))
		told_dir(m, ino, parent, name);
	pthread_mutex_unlock(&m->cache_lock);
}

void lm_told_attr(struct lmount *m, const struct stat *st)
{
	struct lm_inode *in;

	if (!S_ISREG(st->st_mode))
		return;
	pthread_mutex_lock(&m->cache_lock);
	if ((in = inode_of(m, st->st_ino)) != NULL)
		told_attrs(in, st);
	pthread_mutex_unlock(&m->cache_lock);
}

void lm_wrote(struct lmount *m, uint64_t ino, uint64_t end)
{
	struct lm_inode *in;

	/* The kernel grows the size it holds itself as it writes. */
	pthread_mutex_lock(&m->cache_lock);
	in = u64map_get(&m->inodes, ino);
	if (in && in->told_valid && end > in->told_size) {
		in->told_size = end;
		in->size_estale = false;
	}
	pthread_mutex_unlock(&m->cache_lock);
}

void lm_reported(struct lmount *m, const struct loom_ll_attr *a)
{
	struct lm_inode *in;
	bool stale = false;

	pthread_mutex_lock(&m->cache_lock);
	in = u64map_get(&m->inodes, a->st.st_ino);
	/* The size the writes made is not the size now (a truncation elsewhere came between, or a
	 * write failed): the kernel, which grew its own with the writes, asks again. */
	if (in && in->told_valid && in->told_size != (uint64_t)a->st.st_size) {
		told_attrs(in, &a->st);
		stale = true;
	}
	pthread_mutex_unlock(&m->cache_lock);
	if (stale)
		fuse_lowlevel_notify_inval_inode(m->se, a->st.st_ino, -1, 0);
}

void lm_data_changed(struct lmount *m, uint64_t ino, uint64_t version)
{
	struct lm_inode *in;

	pthread_mutex_lock(&m->cache_lock);
	in = u64map_get(&m->inodes, ino);
	if (in) {
		/* Our change is version; the pages held the one before it only if nobody else's
		 * change came in between. Then they hold ours too (the kernel writes through them). */
		if (in->data_valid && version && in->data_version + 1 == version)
			in->data_version = version;
		else
			in->data_valid = false;
	}
	pthread_mutex_unlock(&m->cache_lock);
}

bool lm_data_current(struct lmount *m, uint64_t ino, uint64_t version)
{
	struct lm_inode *in;
	bool same;

	pthread_mutex_lock(&m->cache_lock);
	in = inode_of(m, ino);
	same = in && in->data_valid && in->data_version == version;
	if (in) {
		in->data_valid = true;
		in->data_version = version;
	}
	pthread_mutex_unlock(&m->cache_lock);
	return same;
}

void lm_forget_inode(struct lmount *m, uint64_t ino)
{
	struct lm_inode *in;
	struct told_name *d;

	pthread_mutex_lock(&m->cache_lock);
	in = u64map_del(&m->inodes, ino);
	d = u64map_del(&m->dirs, ino);
	pthread_mutex_unlock(&m->cache_lock);
	if (in)
		inode_free(ino, in, NULL);
	if (d)
		dir_free(ino, d, NULL);
}

struct dropped {
	struct told_name *names;
	size_t n, cap;
};

static void take_dir(uint64_t ino, void *val, void *arg)
{
	struct dropped *dr = arg;

	(void)ino;
	if (dr->n < dr->cap)
		dr->names[dr->n++] = *(struct told_name *)val;
	else
		free(((struct told_name *)val)->name);
	free(val);
}

/* Drops the kernel's dentries: not under cache_lock (the kernel may need other requests of ours
 * to finish before it can take the parents' locks). Frees the names. */
static void drop_dentries(struct lmount *m, struct told_name *names, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int rc = fuse_lowlevel_notify_inval_entry(m->se, names[i].parent, names[i].name,
							  strlen(names[i].name));
		if (rc && rc != -ENOENT)
			log_debug("dropping dentry %llu/%s: %s", (unsigned long long)names[i].parent,
				  names[i].name, strerror(-rc));
		free(names[i].name);
	}
}

/* How long after an open answered ESTALE because directories moved its opener's retry is not
 * held to dir_moves again: the VFS retries once only, and another directory renamed elsewhere in
 * between (a job that rotates checkpoint directories) must not fail the open. The retry walked
 * its whole path afresh (LOOKUP_REVAL); a rename after that walk began is concurrent with it. */
#define RETRY_GRACE_NS (200ull * 1000000ull)

void lm_open_expect(struct lmount *m, uint64_t ino, uint32_t pid, struct loom_ll_expect *ex)
{
	struct lm_inode *in;

	pthread_mutex_lock(&m->cache_lock);
	in = u64map_get(&m->inodes, ino);
	ex->name_version = in && in->names_valid ? in->name_version : 0;
	if (pid && pid == m->stale_pid && clock_mono_ns() - m->stale_ns < RETRY_GRACE_NS) {
		/* The retry of an open told ESTALE: its walk looked every name up afresh. */
		if (in && in->names_valid)
			ex->name_version = in->newest_version;
		m->stale_pid = 0;
	}
	ex->dir_moves = m->dir_moves;
	if (pid && pid == m->moved_pid && clock_mono_ns() - m->moved_ns < RETRY_GRACE_NS) {
		ex->dir_moves = 0;
		m->moved_pid = 0;
	}
	pthread_mutex_unlock(&m->cache_lock);
}

/* Under cache_lock: every directory dentry told, taken out to be dropped. */
static void take_dirs(struct lmount *m, struct dropped *dirs)
{
	dirs->cap = m->dirs.count;
	dirs->names = dirs->cap ? malloc(dirs->cap * sizeof(*dirs->names)) : NULL;
	if (!dirs->names)
		dirs->cap = 0;
	u64map_each(&m->dirs, take_dir, dirs);
	u64map_destroy(&m->dirs);
	u64map_init(&m->dirs);
}

/* Under cache_lock: in's dentries told before the newest version (an open held to it succeeded),
 * taken out to be dropped; the rest are current. */
static size_t take_older_names(struct lm_inode *in, struct told_name *names)
{
	size_t n = 0;
	uint32_t kept = 0;

	for (uint32_t i = 0; i < in->nnames; i++) {
		if (in->names[i].version < in->newest_version)
			names[n++] = in->names[i];
		else
			in->names[kept++] = in->names[i];
	}
	in->nnames = kept;
	in->name_version = in->newest_version;
	return n;
}

/* Under cache_lock: in's dentries, taken out to be dropped; the next one told sets the version. */
static size_t take_names(struct lm_inode *in, struct told_name *names)
{
	size_t n = in->nnames;

	memcpy(names, in->names, n * sizeof(names[0]));
	in->nnames = 0;
	in->names_valid = false;
	return n;
}

int lm_open_settle(struct lmount *m, uint64_t ino, uint32_t pid, int rc, const struct loom_ll_attr *a,
		   int flags)
{
	struct told_name names[MAX_DENTRIES];
	struct dropped dirs = { 0 };
	size_t nnames = 0;
	bool attrs_stale = false;
	struct lm_inode *in;

	if (rc && rc != -ESTALE)
		return rc;
	pthread_mutex_lock(&m->cache_lock);
	in = u64map_get(&m->inodes, ino);
	if (rc == -ESTALE) {
		/* Gone, or names or directories moved since the kernel's dentries were told: every
		 * dentry that may lead here wrongly goes, and the VFS walks the path again. */
		if (in)
			nnames = take_names(in, names);
		m->stale_pid = pid;
		m->stale_ns = clock_mono_ns();
		if (a->st.st_ino && a->dir_moves != m->dir_moves) {
			take_dirs(m, &dirs);
			m->dir_moves = a->dir_moves;
			m->moved_pid = pid;
			m->moved_ns = clock_mono_ns();
		}
	} else {
		if (a->dir_moves && m->dir_moves != a->dir_moves) {
			/* Not known yet (the mount's first look failed): from now on. */
			take_dirs(m, &dirs);
			m->dir_moves = a->dir_moves;
		}
		/* Held to the newest version and found current: the older dentries are stale. */
		if (in && in->names_valid && in->newest_version > in->name_version &&
		    a->name_version == in->newest_version)
			nnames = take_older_names(in, names);
		if (in && S_ISREG(a->st.st_mode) && !(flags & O_TRUNC) && in->told_valid && !in->size_estale &&
		    (in->told_size > (uint64_t)a->st.st_size ||
		     ((flags & O_APPEND) && in->told_size != (uint64_t)a->st.st_size))) {
			/* Resized elsewhere, and the kernel's size matters before it would ask again:
			 * reads stop at it (and would read zeros past a new end), appends start there.
			 * The lookups of the walk again give it the size before anything happens. */
			in->size_estale = true;
			rc = -ESTALE;
		} else if (in && S_ISREG(a->st.st_mode) && (flags & O_TRUNC)) {
			told_attrs(in, &a->st); /* the kernel cut its size to 0 itself */
		} else if (in && S_ISREG(a->st.st_mode) && !told_is(in, &a->st)) {
			attrs_stale = in->told_valid;
		}
	}
	pthread_mutex_unlock(&m->cache_lock);

	drop_dentries(m, dirs.names, dirs.n);
	free(dirs.names);
	drop_dentries(m, names, nnames);
	if (rc) {
		/* What statahead holds is no proof any more: it asks the MDS again. */
		lm_sa_changed(m);
		return rc;
	}
	if (attrs_stale) {
		/* The kernel holds attributes of before a change elsewhere: it asks again. */
		fuse_lowlevel_notify_inval_inode(m->se, ino, -1, 0);
		lm_told_attr(m, &a->st);
	}
	return 0;
}
