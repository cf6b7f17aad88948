/*
 * Negative lookups answered by the mount, under directory leases (the MDS's side:
 * src/mds/leases.c). A create is a lookup of a name that is not there, then the create: in a
 * loop of creates (np.save of one file per example, a checkpoint's shards) the lookup's MDS
 * round trip is a third of the time. After LEASE_MISSES lookups in one directory that the MDS
 * answered "no such name", the mount lists the directory's names with a lease (MDS_READDIR,
 * LW_RD_LEASE), and from then on answers a lookup of a name not in the list itself, ENOENT, for
 * as long as it holds the lease. That stays right because:
 *  - the MDS recalls the lease before another client changes the directory's entries, and the
 *    list is dropped before the lease goes back (loom_ll_set_lease_handler's thread);
 *  - this mount's own changes (create, mknod, mkdir, symlink, link, unlink, rmdir, rename) update
 *    the list before their answer reaches the kernel; one whose outcome is unknown (an error
 *    other than a plain refusal) drops the list;
 *  - a list is installed only if no recall, no loss and none of this mount's changes in that
 *    directory came while it was being fetched (counters by bucket of directory);
 *  - a lease lost (not given back in time, a reconnection) drops every list up to it, and no
 *    list is trusted once the MDS has not been heard from for half its lease timeout (a mount
 *    stopped that long may have lost its leases with the recall still in its socket): the
 *    lookup asks the MDS then, whose answer makes the lists trusted again.
 * Names that exist are still looked up at the MDS (or in statahead's listing): the kernel is
 * given their attributes, which a directory lease does not cover. The kernel checks the right
 * to search the directory itself (default_permissions) before it asks.
 * After a recall the directory is not taken again for a while (RECALL_BACKOFF_NS, doubled for
 * each recall that comes soon after the last, up to RECALL_BACKOFF_MAX_NS), so that two mounts
 * creating in one directory do not pass the lease back and forth at every create, nor list a
 * large directory again and again.
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "fuse/lmount.h"
#include "fuse/nameset.h"

#define LEASE_MISSES      4          /* "no such name" answers in a row before the listing */
#define LEASE_MAX_NAMES   (1u << 17) /* a bigger directory is not taken */
#define LEASE_ALL_NAMES   (1u << 20) /* names kept over all directories (about 50 MiB) */
/* A tenth of a second after one recall (another client's one touch of the directory: a
 * setstripe, an ls), doubling while recalls keep coming soon after: up to about a minute. */
#define RECALL_BACKOFF_NS (100ull * 1000000ull)
#define RECALL_BACKOFF_MAX_NS (640ull * RECALL_BACKOFF_NS)
#define RECALL_SOON_NS (2000ull * 1000000ull)
#define FETCH_BYTES       (1u << 20)


struct lm_ldir {
	uint64_t ino;
	uint64_t gen;      /* the newest grant of its lease */
	uint64_t used_ns;
	struct nameset names;
	/* The lease is exclusive: nobody else holds one, and it covers the directory's owner and
	 * mode (st) too: creates there may be sent behind (libloom's behind.c). Its other
	 * attributes change only through this mount then: with times_valid, st is what the MDS has
	 * (or will have, once the creates sent behind reach it), and answers the kernel's getattr,
	 * which it sends after every create there (the create made its attributes stale). */
	bool excl;
	bool times_valid;
	struct stat st;
};


static void ldir_free(struct lm_ldir *d)
{
	if (!d)
		return;
	ns_free(&d->names);
	free(d);
}

static unsigned bucket(uint64_t ino)
{
	return (unsigned)((ino * 0x9e3779b97f4a7c15ull) >> 58) & (LM_LEASE_BUCKETS - 1);
}

/* Under lock: the slot of dir, or -1. */
static int slot_of(const struct lm_leases *ls, uint64_t dir)
{
	for (int i = 0; i < LM_LEASE_DIRS; i++)
		if (ls->dir[i] && ls->dir[i]->ino == dir)
			return i;
	return -1;
}

/* Under lock: takes slot i's directory out (the caller gives its lease back, frees it). */
static struct lm_ldir *take(struct lm_leases *ls, int i)
{
	struct lm_ldir *d = ls->dir[i];

	ls->dir[i] = NULL;
	if (d)
		ls->names -= d->names.n;
	return d;
}

/* Outside the lock: gives d's lease back and frees it. */
static void give_back(struct lmount *m, struct lm_ldir *d)
{
	if (!d)
		return;
	loom_ll_lease_return(m->fs, d->ino, d->gen);
	ldir_free(d);
}

/* Whether the lists may answer for name: leases on, trusted, and a name the MDS would take (one
 * too long gets the MDS's answer, not ENOENT). */
static bool lists_answer(struct lmount *m, const char *name)
{
	return m->leases.enabled && strnlen(name, LOOM_NAME_MAX + 1) <= LOOM_NAME_MAX &&
	       loom_ll_leases_fresh(m->fs);
}

bool lm_lease_absent(struct lmount *m, uint64_t parent, const char *name)
{
	struct lm_leases *ls = &m->leases;
	bool absent = false;
	int i;

	if (!lists_answer(m, name))
		return false;
	pthread_mutex_lock(&ls->lock);
	i = slot_of(ls, parent);
	if (i >= 0) {
		ls->dir[i]->used_ns = clock_mono_ns();
		absent = !ns_has(&ls->dir[i]->names, name);
		ls->hits += absent;
	}
	pthread_mutex_unlock(&ls->lock);
	return absent;
}

/* Whether name (type t, marked at links) in list i is a file this mount made under the grant it
 * holds now: the lease exclusive, and no link made through the mount since it was marked (the
 * inode may have another name then, by which others reach it). */
static bool made_under_grant(struct lm_leases *ls, int i, int t, uint32_t links)
{
	return i >= 0 && ls->dir[i]->excl && t > 0 && (t & LM_NAME_MADE) && links == ls->links &&
	       (t & ~LM_NAME_MADE) != DT_UNKNOWN && (t & ~LM_NAME_MADE) != DT_DIR;
}

/* Under ls->lock: parent's list (*i, -1 if none kept) and the type of name in it (-1 if absent),
 * with the links count it was marked at. */
static int name_in_list(struct lm_leases *ls, uint64_t parent, const char *name, int *i,
			uint32_t *links)
{
	*i = slot_of(ls, parent);
	return *i >= 0 ? ns_type(&ls->dir[*i]->names, name, links) : -1;
}

/* Whether a change of name in parent may be sent behind: an exclusive lease, trusted, on parent,
 * whose list has name as a file that is not a directory (unlink), or has it not (create). */
static bool behind_ok(struct lmount *m, uint64_t parent, const char *name, bool unlink,
		      struct stat *dir, struct lm_lease_mark *mark)
{
	struct lm_leases *ls = &m->leases;
	uint64_t made_gen;
	uint32_t links = 0;
	bool ok = false;
	int i, t;

	if (!lists_answer(m, name))
		return false;
	pthread_mutex_lock(&ls->lock);
	t = name_in_list(ls, parent, name, &i, &links);
	/* An unlink only of a file made here under this grant: nobody else can have reached it,
	 * so no other client's inode lease on it can hold the unlink up at the MDS (where every
	 * later request of this client would wait for it, and another client's give-back of a
	 * lease could wait for one of its own unlinks held up by this client's). */
	if (unlink ? made_under_grant(ls, i, t, links) : i >= 0 && ls->dir[i]->excl && t < 0) {
		ls->dir[i]->used_ns = clock_mono_ns();
		*dir = ls->dir[i]->st;
		ok = true;
		mark->done = ls->done[bucket(parent)];
		mark->times_valid = ls->dir[i]->times_valid;
		mark->gen = ls->dir[i]->gen;
		mark->made_ino = 0;
		if (unlink)
			(void)ns_made(&ls->dir[i]->names, name, &mark->made_ino, &made_gen);
	}
	pthread_mutex_unlock(&ls->lock);
	return ok;
}

bool lm_lease_behind(struct lmount *m, uint64_t parent, const char *name, struct stat *dir,
		     struct lm_lease_mark *mark)
{
	return behind_ok(m, parent, name, false, dir, mark);
}

bool lm_lease_unlink_behind(struct lmount *m, uint64_t parent, const char *name, struct stat *dir,
			    struct lm_lease_mark *mark)
{
	return behind_ok(m, parent, name, true, dir, mark);
}

void lm_lease_made_set(struct lmount *m, uint64_t parent, const char *name, uint64_t ino,
		       uint64_t attr_gen)
{
	struct lm_leases *ls = &m->leases;
	int i;

	if (!ls->enabled)
		return;
	pthread_mutex_lock(&ls->lock);
	i = slot_of(ls, parent);
	if (i >= 0)
		ns_set_made(&ls->dir[i]->names, name, ino, attr_gen);
	pthread_mutex_unlock(&ls->lock);
}

bool lm_lease_made(struct lmount *m, uint64_t parent, const char *name, uint64_t *ino,
		   uint64_t *attr_gen)
{
	struct lm_leases *ls = &m->leases;
	uint32_t links = 0;
	bool ok = false;
	int i, t;

	if (!lists_answer(m, name))
		return false;
	pthread_mutex_lock(&ls->lock);
	t = name_in_list(ls, parent, name, &i, &links);
	if (made_under_grant(ls, i, t, links) && ns_made(&ls->dir[i]->names, name, ino, attr_gen)) {
		ls->dir[i]->used_ns = clock_mono_ns();
		ok = true;
	}
	pthread_mutex_unlock(&ls->lock);
	return ok;
}

bool lm_lease_excl_held(struct lmount *m, uint64_t dir, uint64_t gen)
{
	struct lm_leases *ls = &m->leases;
	bool held;
	int i;

	if (!ls->enabled || !loom_ll_leases_fresh(m->fs))
		return false;
	pthread_mutex_lock(&ls->lock);
	i = slot_of(ls, dir);
	held = i >= 0 && ls->dir[i]->excl && ls->dir[i]->gen == gen;
	pthread_mutex_unlock(&ls->lock);
	return held;
}

bool lm_lease_still(void *arg)
{
	struct lm_lease_check *c = arg;
	struct lm_lease_mark mark;
	struct stat dir;

	return behind_ok(c->m, c->parent, c->name, c->unlink, &dir, &mark);
}

/* Under lock: the exclusive list of dir, if trusted. */
static struct lm_ldir *excl_dir(struct lmount *m, uint64_t dir)
{
	int i = slot_of(&m->leases, dir);

	return i >= 0 && m->leases.dir[i]->excl ? m->leases.dir[i] : NULL;
}

void lm_lease_behind_done(struct lmount *m, uint64_t parent, const struct lm_lease_mark *mark)
{
	struct lm_leases *ls = &m->leases;
	unsigned b = bucket(parent);
	struct lm_ldir *d;

	pthread_mutex_lock(&ls->lock);
	ls->behind++;
	d = excl_dir(m, parent);
	/* Its own change alone since the mark: the directory's times are the create's. */
	if (d && mark->times_valid && ls->done[b] == mark->done + 1 && ls->inflight[b] == 0) {
		struct timespec now;

		clock_gettime(CLOCK_REALTIME, &now);
		d->st.st_mtim = d->st.st_ctim = now;
		d->times_valid = true;
	}
	pthread_mutex_unlock(&ls->lock);
}

bool lm_lease_dir_attr(struct lmount *m, uint64_t dir, struct stat *st, struct lm_lease_mark *mark)
{
	struct lm_leases *ls = &m->leases;
	struct lm_ldir *d;
	bool ok = false;

	mark->done = 0;
	mark->times_valid = false;
	if (!ls->enabled || !loom_ll_leases_fresh(m->fs))
		return false;
	pthread_mutex_lock(&ls->lock);
	d = excl_dir(m, dir);
	if (d && d->times_valid) {
		*st = d->st;
		ok = true;
	}
	mark->done = ls->done[bucket(dir)];
	mark->times_valid = ls->inflight[bucket(dir)] == 0;
	pthread_mutex_unlock(&ls->lock);
	return ok;
}

void lm_lease_dir_seen(struct lmount *m, uint64_t dir, const struct stat *st,
		       const struct lm_lease_mark *mark)
{
	struct lm_leases *ls = &m->leases;
	unsigned b = bucket(dir);
	struct lm_ldir *d;

	if (!ls->enabled || !S_ISDIR(st->st_mode))
		return;
	pthread_mutex_lock(&ls->lock);
	d = excl_dir(m, dir);
	/* No change of this mount's there came between the ask and now. */
	if (d && mark->times_valid && ls->done[b] == mark->done && ls->inflight[b] == 0 &&
	    st->st_mode == d->st.st_mode && st->st_uid == d->st.st_uid && st->st_gid == d->st.st_gid) {
		d->st = *st;
		d->times_valid = true;
	}
	pthread_mutex_unlock(&ls->lock);
}

void lm_lease_drop(struct lmount *m, uint64_t dir)
{
	struct lm_leases *ls = &m->leases;
	struct lm_ldir *d = NULL;
	int i;

	if (!ls->enabled)
		return;
	pthread_mutex_lock(&ls->lock);
	i = slot_of(ls, dir);
	if (i >= 0)
		d = take(ls, i);
	pthread_mutex_unlock(&ls->lock);
	give_back(m, d);
}

struct fetch {
	struct nameset names;
	uint64_t next;   /* the cookie that resumes after the last name taken */
	bool failed;
};

static int collect(void *arg, const struct loom_dirent *ent, const struct loom_ll_attr *a, uint64_t next)
{
	struct fetch *f = arg;

	(void)a;
	if (strcmp(ent->name, ".") && strcmp(ent->name, "..") &&
	    (f->names.n >= LEASE_MAX_NAMES ||
	     ns_add(&f->names, ent->name, (unsigned char)(ent->type & ~LM_NAME_MADE), 0))) {
		f->failed = true;
		return 1;
	}
	f->next = next;
	return 0;
}

static struct lm_ldir *install(struct lm_leases *ls, struct lm_ldir *d);

/* What the counters of dir's bucket said when a fetch began. */
struct fetch_mark {
	uint64_t recalls, done, lost;
};

/* Under lock. */
static bool quiet_since(const struct lm_leases *ls, unsigned b, const struct fetch_mark *mk)
{
	return ls->inflight[b] == 0 && ls->done[b] == mk->done && ls->recalls[b] == mk->recalls &&
	       ls->lost == mk->lost;
}

/* Lists dir's names with a lease, and keeps them if nothing came between. */
static void take_lease(struct lmount *m, const struct loom_cred *cr, uint64_t dir)
{
	struct lm_leases *ls = &m->leases;
	unsigned b = bucket(dir);
	struct fetch f = { 0 };
	struct fetch_mark mk;
	struct lm_ldir *d = NULL, *old = NULL;
	uint64_t cookie = 0, gen = 0;
	bool eof = false, kept = false, excl = m->opts.nowsync != 0;
	struct loom_ll_attr da;

	pthread_mutex_lock(&ls->lock);
	mk = (struct fetch_mark){ ls->recalls[b], ls->done[b], ls->lost };
	if (ls->inflight[b]) {
		ls->fetching[b] = false;
		pthread_mutex_unlock(&ls->lock);
		return;
	}
	pthread_mutex_unlock(&ls->lock);

	while (!eof && !f.failed) {
		uint64_t g = 0;
		int rc;

		bool x = excl;

		f.next = cookie;
		rc = loom_ll_readdir_leased(m->fs, cr, dir, cookie, false, FETCH_BYTES, collect, &f,
					    &eof, &g, &x);
		if (g) {
			gen = g; /* the MDS holds the newest: the one to give back */
			excl = x;
		}
		if (rc || !g || (!eof && f.next == cookie))
			f.failed = true;
		cookie = f.next;
	}
	/* Exclusive: its owner and mode, which the lease covers from the grant on (a change of
	 * them recalls it, and the list is not kept then). */
	if (!f.failed && excl && loom_ll_getattr(m->fs, cr, dir, &da) != 0)
		excl = false;
	d = f.failed ? NULL : calloc(1, sizeof(*d));
	pthread_mutex_lock(&ls->lock);
	ls->fetching[b] = false;
	if (slot_of(ls, dir) >= 0) {
		/* A list of dir is kept already (made meanwhile): the MDS's one holder of this
		 * session now has this grant, which the list takes. Giving it back would end the
		 * lease the list relies on. */
		struct lm_ldir *k = ls->dir[slot_of(ls, dir)];

		if (gen > k->gen) {
			k->gen = gen;
			k->excl = k->excl && excl; /* what the newest grant says */
		}
		gen = 0;
	} else if (d && quiet_since(ls, b, &mk) && ls->names + f.names.n <= LEASE_ALL_NAMES) {
		d->ino = dir;
		d->gen = gen;
		d->used_ns = clock_mono_ns();
		d->excl = excl && S_ISDIR(da.st.st_mode);
		if (d->excl)
			d->st = da.st;
		d->times_valid = d->excl;
		d->names = f.names;
		memset(&f.names, 0, sizeof(f.names));
		old = install(ls, d);
		ls->fetches++;
		kept = true;
	}
	pthread_mutex_unlock(&ls->lock);
	log_debug("lease on directory %llu: %s", (unsigned long long)dir,
		  kept ? "kept" : f.failed ? "not granted" : "changed meanwhile, or too many names");
	if (!kept) {
		free(d);
		if (gen)
			loom_ll_lease_return(m->fs, dir, gen);
	}
	ns_free(&f.names);
	give_back(m, old);
}

/* Under lock: d takes a slot (the least recently used one's directory is returned, to give back). */
static struct lm_ldir *install(struct lm_leases *ls, struct lm_ldir *d)
{
	struct lm_ldir *old = NULL;
	int i, lru = 0;

	for (i = 0; i < LM_LEASE_DIRS; i++) {
		if (!ls->dir[i])
			break;
		if (ls->dir[i]->used_ns < ls->dir[lru]->used_ns)
			lru = i;
	}
	if (i == LM_LEASE_DIRS) {
		old = take(ls, lru);
		i = lru;
	}
	ls->dir[i] = d;
	ls->names += d->names.n;
	return old;
}

int lm_mkdir_leased(struct lmount *m, const struct loom_cred *cr, uint64_t parent, const char *name,
		    mode_t mode, struct loom_ll_attr *a)
{
	struct lm_leases *ls = &m->leases;
	struct lm_ldir *d, *old = NULL;
	uint64_t gen = 0, recalled, lost;
	bool excl = m->opts.nowsync != 0;
	int rc;

	if (!ls->enabled)
		return loom_ll_mkdir(m->fs, cr, parent, name, mode, a);
	pthread_mutex_lock(&ls->lock);
	recalled = ls->recalled;
	lost = ls->lost;
	pthread_mutex_unlock(&ls->lock);
	rc = loom_ll_mkdir_leased(m->fs, cr, parent, name, mode, a, &gen, &excl);
	if (rc || !gen)
		return rc;
	/* Nobody can have changed it yet but through a recall (its name is not known to this
	 * kernel before the reply): the list is empty, unless a recall came meanwhile. */
	d = calloc(1, sizeof(*d));
	pthread_mutex_lock(&ls->lock);
	if (d && ls->recalled == recalled && ls->lost == lost) {
		d->ino = a->st.st_ino;
		d->gen = gen;
		d->used_ns = clock_mono_ns();
		d->excl = excl;
		d->st = a->st;
		d->times_valid = excl;
		old = install(ls, d);
		ls->fetches++;
		d = NULL;
		gen = 0;
	}
	pthread_mutex_unlock(&ls->lock);
	free(d);
	if (gen)
		loom_ll_lease_return(m->fs, a->st.st_ino, gen);
	give_back(m, old);
	return 0;
}

void lm_lease_missed(struct lmount *m, const struct loom_cred *cr, uint64_t parent)
{
	struct lm_leases *ls = &m->leases;
	unsigned b = bucket(parent);
	bool fetch = false;

	if (!ls->enabled)
		return;
	pthread_mutex_lock(&ls->lock);
	if (ls->miss_dir[b] != parent) {
		ls->miss_dir[b] = parent;
		ls->misses[b] = 0;
	}
	/* One fetch per bucket at a time: two of one directory would each get a grant, and the
	 * second's would replace the first's at the MDS. */
	if (++ls->misses[b] >= LEASE_MISSES && slot_of(ls, parent) < 0 && !ls->fetching[b] &&
	    clock_mono_ns() - ls->recalled_ns[b] >= ls->backoff_ns[b]) {
		ls->misses[b] = 0;
		ls->fetching[b] = true;
		fetch = true;
	}
	pthread_mutex_unlock(&ls->lock);
	if (fetch)
		take_lease(m, cr, parent);
}

void lm_entries_begin(struct lmount *m, uint64_t dir1, uint64_t dir2)
{
	struct lm_leases *ls = &m->leases;

	if (!ls->enabled)
		return;
	pthread_mutex_lock(&ls->lock);
	ls->inflight[bucket(dir1)]++;
	if (dir2)
		ls->inflight[bucket(dir2)]++;
	pthread_mutex_unlock(&ls->lock);
}

/* A change whose failure says nothing happened. */
static bool refused(int rc)
{
	switch (-rc) {
	case EEXIST: case ENOENT: case ENOTEMPTY: case EACCES: case EPERM: case ENOTDIR:
	case EISDIR: case EINVAL: case ENAMETOOLONG: case ENOSPC: case EDQUOT: case EXDEV:
	case EROFS: case EMLINK: case ELOOP: case EBUSY: case ESTALE:
		return true;
	default:
		return false;
	}
}

/* Under lock: name leaves or joins dir's list; a list that cannot follow is taken out. */
static struct lm_ldir *apply(struct lm_leases *ls, uint64_t dir, const char *name, bool add, int rc,
			     unsigned char type)
{
	int i = slot_of(ls, dir);
	struct nameset *ns;
	size_t before;

	if (i < 0)
		return NULL;
	ls->dir[i]->times_valid = false; /* its times moved, or may have */
	if (rc && !refused(rc))
		return take(ls, i); /* it may or may not have happened */
	/* EEXIST to a name the list did not have: it is there (the list mends itself). */
	if ((rc && !(rc == -EEXIST && add)) || !name)
		return NULL;
	ns = &ls->dir[i]->names;
	before = ns->n;
	if (!add) {
		ns_del(ns, name);
		ls->names -= before - ns->n;
		return NULL;
	}
	/* Made here under a lease others may share: they may have opened it since. */
	if (!ls->dir[i]->excl)
		type &= (unsigned char)~LM_NAME_MADE;
	if (ns->n >= LEASE_MAX_NAMES || ls->names >= LEASE_ALL_NAMES ||
	    ns_add(ns, name, type, ls->links))
		return take(ls, i);
	ls->names += ns->n - before;
	return NULL;
}

void lm_entries_end(struct lmount *m, int rc, uint64_t from_dir, const char *removed,
		    uint64_t to_dir, const char *added, unsigned added_type)
{
	struct lm_leases *ls = &m->leases;
	struct lm_ldir *gone[2] = { NULL, NULL };
	unsigned char type = rc ? DT_UNKNOWN : (unsigned char)added_type;

	if (!ls->enabled)
		return;
	pthread_mutex_lock(&ls->lock);
	if (from_dir) {
		int i = slot_of(ls, from_dir), t = -1;

		/* A name renamed keeps its type (not that this mount made the inode under the
		 * lease of the directory it goes to). */
		if (i >= 0 && removed && added && !added_type && !rc)
			t = ns_type(&ls->dir[i]->names, removed, NULL);
		if (t > 0)
			type = (unsigned char)(t & ~LM_NAME_MADE);
		gone[0] = apply(ls, from_dir, removed, false, rc, DT_UNKNOWN);
		ls->inflight[bucket(from_dir)]--;
		ls->done[bucket(from_dir)]++;
	}
	if (to_dir) {
		/* A rename within one directory was begun once. */
		if (gone[0] == NULL || to_dir != from_dir)
			gone[1] = apply(ls, to_dir, added, true, rc, type);
		if (to_dir != from_dir) {
			ls->inflight[bucket(to_dir)]--;
			ls->done[bucket(to_dir)]++;
		}
	}
	pthread_mutex_unlock(&ls->lock);
	give_back(m, gone[0]);
	give_back(m, gone[1]);
}

void lm_lease_untype(struct lmount *m, uint64_t dir, const char *name)
{
	struct lm_leases *ls = &m->leases;
	struct lm_ldir *gone = NULL;
	int i;

	if (!ls->enabled || !name)
		return;
	pthread_mutex_lock(&ls->lock);
	i = slot_of(ls, dir);
	if (i >= 0 && ns_type(&ls->dir[i]->names, name, NULL) >= 0 &&
	    ns_add(&ls->dir[i]->names, name, DT_UNKNOWN, 0) != 0)
		gone = take(ls, i); /* a list that cannot follow is taken out */
	pthread_mutex_unlock(&ls->lock);
	give_back(m, gone);
}

void lm_lease_linked(struct lmount *m)
{
	struct lm_leases *ls = &m->leases;

	pthread_mutex_lock(&ls->lock);
	ls->links++;
	pthread_mutex_unlock(&ls->lock);
}

/* The MDS connection's thread: the MDS recalls dir's lease (ino 0: every lease up to gen is
 * lost). */
static void on_recall(void *arg, uint64_t ino, uint64_t gen)
{
	struct lmount *m = arg;
	struct lm_leases *ls = &m->leases;
	struct lm_ldir *gone[LM_LEASE_DIRS];
	uint64_t now = clock_mono_ns();
	int n = 0;

	pthread_mutex_lock(&ls->lock);
	if (ino == 0) {
		ls->lost++;
		for (int i = 0; i < LM_LEASE_DIRS; i++)
			if (ls->dir[i] && ls->dir[i]->gen <= gen)
				gone[n++] = take(ls, i);
	} else {
		int i = slot_of(ls, ino);
		unsigned b = bucket(ino);

		ls->recalls[b]++;
		/* Recalled again soon after the last (within twice the wait, and at least
		 * RECALL_SOON_NS: another node that lists the directory every second or two): the
		 * directory is contended, wait longer. */
		if (ls->backoff_ns[b] && (now - ls->recalled_ns[b] < 2 * ls->backoff_ns[b] ||
					  now - ls->recalled_ns[b] < RECALL_SOON_NS))
			ls->backoff_ns[b] = ls->backoff_ns[b] * 2 > RECALL_BACKOFF_MAX_NS
						? RECALL_BACKOFF_MAX_NS : ls->backoff_ns[b] * 2;
		else
			ls->backoff_ns[b] = RECALL_BACKOFF_NS;
		ls->recalled_ns[b] = now;
		ls->recalled++;
		/* A newer grant than the recall's came after it was answered: it stays. */
		if (i >= 0 && ls->dir[i]->gen <= gen)
			gone[n++] = take(ls, i);
	}
	pthread_mutex_unlock(&ls->lock);
	/* Nothing to give back but what was recalled: libloom answers the recall. */
	for (int i = 0; i < n; i++)
		ldir_free(gone[i]);
}

int lm_leases_init(struct lmount *m)
{
	struct lm_leases *ls = &m->leases;

	pthread_mutex_init(&ls->lock, NULL);
	if (m->opts.noleases)
		return 0;
	ls->enabled = loom_ll_set_lease_handler(m->fs, on_recall, m) == 0;
	return ls->enabled ? 0 : -ENOMEM;
}

void lm_leases_fini(struct lmount *m)
{
	struct lm_leases *ls = &m->leases;

	for (int i = 0; i < LM_LEASE_DIRS; i++)
		ldir_free(take(ls, i));
	pthread_mutex_destroy(&ls->lock);
}
