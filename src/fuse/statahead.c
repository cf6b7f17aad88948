/*
 * Statahead: a program that stats (or opens) many names of one directory one after another --
 * `ls -l` without readdir, a training job's loader, a tar or rsync pass -- costs one MDS round
 * trip per name. Lustre's answer is statahead; this is Loom's. After STREAK lookups in a row in
 * one directory, the whole directory is fetched with its attributes (readdirplus: a few large
 * MDS replies instead of thousands of small ones), and later lookups in it are answered from
 * that listing, as long as it is fresh. A few directories are followed at once, each with its
 * own streak and listing (LM_SA_SLOTS: processes that each scan a directory of their own, as
 * mdtest's do, would otherwise break each other's streaks). A listing is fresh while it is:
 *   - younger than the mount's entry and attribute timeouts (what the kernel itself may trust);
 *   - nothing changed through this mount since it was fetched (lm_sa_changed), so the mount
 *     always sees its own changes at once.
 * Another mount's changes show within the timeouts, as with the kernel's own caches, except where
 * close-to-open needs them at once: a name missing from the listing is asked of the MDS (it may
 * have been made and closed elsewhere since: a training job's rank 0 writes an index, a barrier,
 * and the others open it), and a name the listing had wrongly is caught by the open (cache.c),
 * which then drops the listing (lm_sa_changed). The kernel checks the caller's right to search
 * the directory (default_permissions) before it asks.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "fuse/lmount.h"

#define STREAK      16        /* lookups in a row in one directory before it is fetched whole */
#define MAX_ENTRIES (1u << 17) /* a bigger directory is not fetched (about 200 bytes each) */

struct sa_entry {
	char *name;
	struct loom_ll_attr a;
};

struct sa_dir {
	uint64_t ino;
	uint64_t gen;       /* of the mount's changes when it was fetched */
	uint64_t fetched_ns;
	struct sa_entry *ents; /* sorted by name */
	size_t n, cap;
	uint64_t next_cookie; /* while fetching: where the listing resumes */
	bool failed;        /* while fetching: too big, or out of memory */
};

static void dir_free(struct sa_dir *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->n; i++)
		free(d->ents[i].name);
	free(d->ents);
	free(d);
}

static int cmp_ent(const void *a, const void *b)
{
	return strcmp(((const struct sa_entry *)a)->name, ((const struct sa_entry *)b)->name);
}

static int collect(void *arg, const struct loom_dirent *ent, const struct loom_ll_attr *a, uint64_t next)
{
	struct sa_dir *d = arg;

	if (strcmp(ent->name, ".") && strcmp(ent->name, "..")) {
		if (d->n == MAX_ENTRIES) {
			d->failed = true;
			return 1; /* stop here */
		}
		if (d->n == d->cap) {
			size_t cap = d->cap ? d->cap * 2 : 256;
			struct sa_entry *e = realloc(d->ents, cap * sizeof(*e));

			if (!e) {
				d->failed = true;
				return 1;
			}
			d->ents = e;
			d->cap = cap;
		}
		d->ents[d->n].name = strdup(ent->name);
		if (!d->ents[d->n].name) {
			d->failed = true;
			return 1;
		}
		d->ents[d->n].a = *a;
		d->n++;
	}
	d->next_cookie = next;
	return 0;
}

/* The listing of dir as the caller may read it now; NULL if it cannot be had. */
static struct sa_dir *fetch(struct lmount *m, const struct loom_cred *cr, uint64_t dir, uint64_t gen)
{
	struct sa_dir *d = calloc(1, sizeof(*d));
	uint64_t cookie = 0;
	bool eof = false;

	if (!d)
		return NULL;
	d->ino = dir;
	d->gen = gen;
	d->fetched_ns = clock_mono_ns();
	while (!eof) {
		int rc;

		d->next_cookie = cookie;
		rc = loom_ll_readdir(m->fs, cr, dir, cookie, true, 1u << 20, collect, d, &eof);
		if (rc || d->failed || (d->next_cookie == cookie && !eof)) {
			dir_free(d);
			return NULL;
		}
		cookie = d->next_cookie;
	}
	qsort(d->ents, d->n, sizeof(*d->ents), cmp_ent);
	return d;
}

static double timeout_s(const struct lmount *m)
{
	return m->opts.entry_timeout < m->opts.attr_timeout ? m->opts.entry_timeout
							      : m->opts.attr_timeout;
}

static bool fresh(const struct lmount *m, const struct sa_dir *d, uint64_t gen, uint64_t now)
{
	return d && d->gen == gen && (double)(now - d->fetched_ns) < timeout_s(m) * 1e9;
}

/* Under sa_lock: whether d has name (and *a). */
static bool answer(const struct sa_dir *d, const char *name, struct loom_ll_attr *a)
{
	struct sa_entry key = { .name = (char *)name };
	const struct sa_entry *e = bsearch(&key, d->ents, d->n, sizeof(*d->ents), cmp_ent);

	if (!e)
		return false;
	*a = e->a;
	return true;
}

/* Under sa_lock: the slot following parent, or NULL. */
static struct lm_sa_slot *slot_of(struct lm_statahead *sa, uint64_t parent)
{
	for (int i = 0; i < LM_SA_SLOTS; i++)
		if (sa->slot[i].streak_dir == parent && (sa->slot[i].streak || sa->slot[i].dir ||
							  sa->slot[i].building))
			return &sa->slot[i];
	return NULL;
}

/* Under sa_lock: a slot for parent, the least recently used one given over to it (its listing
 * goes: returned in *old, to be freed outside the lock), unless it is being fetched. */
static struct lm_sa_slot *slot_take(struct lm_statahead *sa, uint64_t parent, uint64_t now,
				     struct sa_dir **old)
{
	struct lm_sa_slot *s = slot_of(sa, parent), *lru = NULL;

	if (s)
		return s;
	for (int i = 0; i < LM_SA_SLOTS; i++)
		if (!sa->slot[i].building && (!lru || sa->slot[i].used_ns < lru->used_ns))
			lru = &sa->slot[i];
	if (!lru)
		return NULL;
	*old = lru->dir;
	*lru = (struct lm_sa_slot){ .streak_dir = parent, .used_ns = now };
	return lru;
}

bool lm_sa_lookup(struct lmount *m, const struct loom_cred *cr, uint64_t parent, const char *name,
		  struct loom_ll_attr *a)
{
	struct lm_statahead *sa = &m->sa;
	uint64_t gen = atomic_load(&sa->gen), now = clock_mono_ns();
	struct sa_dir *d, *old = NULL;
	struct lm_sa_slot *s;
	bool build = false, stale = false;

	if (timeout_s(m) <= 0)
		return false;
	pthread_mutex_lock(&sa->lock);
	s = slot_of(sa, parent);
	if (s)
		s->used_ns = now;
	d = s ? s->dir : NULL;
	if (d && fresh(m, d, gen, now)) {
		bool found = answer(d, name, a);

		pthread_mutex_unlock(&sa->lock);
		lm_cache_note(&m->mstats, found ? LM_SA_HIT : LM_SA_MISS);
		return found;
	}
	if (d) {
		old = d; /* stale: its memory goes now */
		s->dir = NULL;
		stale = true;
	}
	if (s && s->streak_gen == gen && s->streak >= STREAK && !s->building) {
		s->building = true;
		build = true;
	}
	pthread_mutex_unlock(&sa->lock);
	dir_free(old);
	if (!build) {
		if (stale) /* a listing, but stale: asked of the MDS */
			lm_cache_note(&m->mstats, LM_SA_MISS);
		return false;
	}
	old = NULL;

	d = fetch(m, cr, parent, gen);
	log_debug("statahead: directory %llu fetched: %s, %zu entries", (unsigned long long)parent,
		  d ? "ok" : "failed", d ? d->n : 0);
	pthread_mutex_lock(&sa->lock);
	/* The slot stays parent's while it is being fetched (slot_take skips it). */
	s->building = false;
	s->streak = 0;
	if (d) {
		old = s->dir;
		s->dir = d;
		lm_cache_note(&m->mstats, LM_SA_LISTING);
	}
	if (d && fresh(m, d, atomic_load(&sa->gen), clock_mono_ns())) {
		bool found = answer(d, name, a);

		pthread_mutex_unlock(&sa->lock);
		dir_free(old);
		lm_cache_note(&m->mstats, found ? LM_SA_HIT : LM_SA_MISS);
		return found;
	}
	pthread_mutex_unlock(&sa->lock);
	dir_free(old);
	lm_cache_note(&m->mstats, LM_SA_MISS); /* (the listing could not be had, or went stale) */
	return false;
}

void lm_sa_looked_up(struct lmount *m, uint64_t parent, int rc)
{
	struct lm_statahead *sa = &m->sa;
	uint64_t gen = atomic_load(&sa->gen);
	struct sa_dir *old = NULL;
	struct lm_sa_slot *s;

	pthread_mutex_lock(&sa->lock);
	s = rc == 0 ? slot_take(sa, parent, clock_mono_ns(), &old) : slot_of(sa, parent);
	if (s && rc == 0 && s->streak_gen == gen) {
		s->streak++;
	} else if (s) {
		/* A missing name (a create's lookup) or a change in between: not a scan. */
		s->streak_gen = gen;
		s->streak = rc == 0;
	}
	pthread_mutex_unlock(&sa->lock);
	dir_free(old);
}

void lm_sa_changed(struct lmount *m)
{
	atomic_fetch_add(&m->sa.attr_gen, 1);
	atomic_fetch_add(&m->sa.gen, 1);
}

void lm_sa_wrote(struct lmount *m)
{
	atomic_fetch_add(&m->sa.gen, 1);
}

void lm_attr_changed(struct lmount *m)
{
	atomic_fetch_add(&m->sa.attr_gen, 1);
}

uint64_t lm_attr_change_count(struct lmount *m)
{
	return atomic_load(&m->sa.attr_gen);
}

void lm_sa_init(struct lmount *m)
{
	pthread_mutex_init(&m->sa.lock, NULL);
	atomic_init(&m->sa.gen, 0);
	atomic_init(&m->sa.attr_gen, 0);
}

void lm_sa_fini(struct lmount *m)
{
	for (int i = 0; i < LM_SA_SLOTS; i++) {
		dir_free(m->sa.slot[i].dir);
		m->sa.slot[i].dir = NULL;
	}
	pthread_mutex_destroy(&m->sa.lock);
}

uint64_t lm_change_count(struct lmount *m)
{
	return atomic_load(&m->sa.gen);
}
