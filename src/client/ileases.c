/*
 * Inode leases, the client's side (the MDS's: src/mds/leases.c; protocol 7, LW_OPQ_LEASE): opens
 * for reading without a round trip, as NFSv4's read delegations allow.
 *
 * The second read-only open of a file asks the MDS for a lease with the open (the first of an
 * epoch over a dataset would gain nothing from one, and asking costs the open its fast path on the
 * MDS). The granted reply is kept. While the lease stands and the MDS was heard from within the
 * trust window (loom_ll_leases_fresh), a read-only open of that file by the same credentials is
 * answered from it: a loom_file with no MDS handle ("local"), and its close asks nothing either.
 *
 * The MDS keeps an unlinked file's objects only while a handle holds it, and it does not know of
 * local opens: before a lease goes back, the file's local opens become real ones (an MDS_OPEN
 * each, on the lease thread, with the recalled change waiting at the MDS); a lease lost (a
 * reconnection, not answering in time) turns every local open into a real one the same way, and
 * one whose file is gone by then fails its reads with ESTALE rather than read what was freed. A
 * local open that was answered while its lease was being recalled finds it gone after it joined
 * the open files (under open_lock, which the conversions walk under) and opens for real itself.
 *
 * Recalls come on the MDS connection's I/O thread (leases.c), which drops the kept reply at once.
 * A grant whose reply comes back after a recall of that file or a loss came while it was asked
 * (the asking map, the loss epoch) is not kept but given back: the recall may have been for it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client/internal.h"
#include "common/log.h"
#include "common/util.h"
#include "loom/loom_ll.h"

#define ILEASE_MAX       65536u          /* the MDS's bound per session too */
#define ILEASE_BYTES_MAX (64ull << 20)   /* of kept replies (Data-on-MDT bytes among them) */
#define ILEASE_SEEN_MAX  (1u << 18)      /* files opened once, remembered for the second */

struct ilease {
	uint64_t gen;
	struct loom_cred cred; /* the opener the MDS checked: others ask it themselves */
	void *body;            /* the MDS_OPEN reply */
	uint32_t len;
};

struct loom_ileases {
	pthread_mutex_t lock;
	pthread_mutex_t convert_lock; /* local files made real; local files leaving the open ones */
	struct u64map map;     /* ino -> struct ilease */
	uint64_t bytes;
	uint64_t epoch;        /* losses seen */
	struct u64map asking;  /* ino -> opens asking for its lease now << 1 | a recall came */
	struct u64map seen;    /* inos opened for reading once */
	uint64_t *order;       /* inos in grant order, a ring: the oldest go back first */
	uint32_t head, n;
	uint32_t nlocal;       /* files open here under a lease, unknown to the MDS */
	uint32_t unlinking;    /* unlinks on their way that said so (LW_NM_UNLEASED) */
};

int ileases_init(loom_fs *fs)
{
	struct loom_ileases *il = calloc(1, sizeof(*il));

	if (!il)
		return -ENOMEM;
	il->order = calloc(ILEASE_MAX, sizeof(*il->order));
	if (!il->order) {
		free(il);
		return -ENOMEM;
	}
	pthread_mutex_init(&il->lock, NULL);
	pthread_mutex_init(&il->convert_lock, NULL);
	u64map_init(&il->map);
	u64map_init(&il->seen);
	u64map_init(&il->asking);
	fs->ileases = il;
	return 0;
}

static void free_lease(uint64_t ino, void *val, void *arg)
{
	struct ilease *e = val;

	(void)ino;
	(void)arg;
	free(e->body);
	free(e);
}

void ileases_destroy(loom_fs *fs)
{
	struct loom_ileases *il = fs->ileases;

	if (!il)
		return;
	fs->ileases = NULL;
	u64map_each(&il->map, free_lease, NULL);
	u64map_destroy(&il->map);
	u64map_destroy(&il->seen);
	u64map_destroy(&il->asking);
	pthread_mutex_destroy(&il->lock);
	pthread_mutex_destroy(&il->convert_lock);
	free(il->order);
	free(il);
}

static bool same_cred(const struct loom_cred *a, const struct loom_cred *b)
{
	return a->uid == b->uid && a->gid == b->gid && a->ngroups == b->ngroups &&
	       memcmp(a->groups, b->groups, a->ngroups * sizeof(a->groups[0])) == 0;
}

/* Under il->lock: e (ino's) is forgotten. */
static void forget(struct loom_ileases *il, uint64_t ino, struct ilease *e)
{
	u64map_del(&il->map, ino);
	il->bytes -= e->len;
	free(e->body);
	free(e);
}

bool ileases_want(loom_fs *fs, uint64_t ino, uint64_t *epoch)
{
	struct loom_ileases *il = fs->ileases;
	bool want;

	if (!il)
		return false;
	pthread_mutex_lock(&il->lock);
	*epoch = il->epoch;
	want = u64map_get(&il->seen, ino) != NULL;
	if (want) {
		uintptr_t v = (uintptr_t)u64map_get(&il->asking, ino);

		want = u64map_put(&il->asking, ino, (void *)(v + 2)) == 0;
	} else {
		if (il->seen.count >= ILEASE_SEEN_MAX) {
			u64map_destroy(&il->seen);
			u64map_init(&il->seen);
		}
		u64map_put(&il->seen, ino, (void *)(uintptr_t)1);
	}
	pthread_mutex_unlock(&il->lock);
	return want;
}

void ileases_keep(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, uint64_t epoch,
		  struct mdc_lease_grant *g)
{
	struct loom_ileases *il = fs->ileases;
	struct ilease *e = NULL, *old;
	uint64_t back_ino = 0, back_gen = 0;
	uintptr_t v;
	bool recalled;

	pthread_mutex_lock(&il->lock);
	v = (uintptr_t)u64map_get(&il->asking, ino);
	recalled = v & 1;
	if (v <= 3)
		u64map_del(&il->asking, ino);
	else
		u64map_put(&il->asking, ino, (void *)(v - 2)); /* only shrinks: no memory asked */
	if (!g->gen) {
		pthread_mutex_unlock(&il->lock);
		return;
	}
	if (recalled || il->epoch != epoch || !(e = calloc(1, sizeof(*e)))) {
		pthread_mutex_unlock(&il->lock);
		free(g->body);
		g->body = NULL;
		leases_push_inode(fs, ino, g->gen);
		return;
	}
	/* The oldest goes back to make room (its local opens become real first). */
	while (il->n && (il->n >= ILEASE_MAX || il->bytes + g->len > ILEASE_BYTES_MAX)) {
		uint64_t o = il->order[il->head];
		struct ilease *oe = u64map_get(&il->map, o);

		il->head = (il->head + 1) % ILEASE_MAX;
		il->n--;
		if (!oe || o == ino)
			continue;
		back_ino = o;
		back_gen = oe->gen;
		forget(il, o, oe);
		break;
	}
	old = u64map_get(&il->map, ino);
	if (old)
		forget(il, ino, old);
	e->gen = g->gen;
	e->cred = *cr;
	e->body = g->body;
	e->len = g->len;
	g->body = NULL;
	if (il->n >= ILEASE_MAX || u64map_put(&il->map, ino, e)) {
		pthread_mutex_unlock(&il->lock);
		leases_push_inode(fs, ino, e->gen);
		free(e->body);
		free(e);
		e = NULL;
	} else {
		il->bytes += e->len;
		il->order[(il->head + il->n++) % ILEASE_MAX] = ino;
		pthread_mutex_unlock(&il->lock);
	}
	if (back_ino)
		leases_push_inode(fs, back_ino, back_gen);
}

bool ileases_recalled(loom_fs *fs, uint64_t ino, uint64_t gen)
{
	struct loom_ileases *il = fs->ileases;
	struct ilease *e;

	if (!il)
		return false;
	pthread_mutex_lock(&il->lock);
	e = u64map_get(&il->map, ino);
	/* A newer grant than the recall's came after it was answered: it stays. */
	if (e && e->gen <= gen)
		forget(il, ino, e);
	/* A grant on its way for this file may be the one recalled. */
	uintptr_t v = (uintptr_t)u64map_get(&il->asking, ino);
	if (v)
		u64map_put(&il->asking, ino, (void *)(v | 1));
	pthread_mutex_unlock(&il->lock);
	/* A file's either way: the mount's directory lists (and their back-off) are not told. */
	return e != NULL || v != 0;
}

struct drop_scan {
	uint64_t upto;
	struct lw_lease *v;
	uint32_t n;
};

static void drop_one(uint64_t ino, void *val, void *arg)
{
	struct drop_scan *s = arg;
	struct ilease *e = val;

	if (e->gen <= s->upto)
		s->v[s->n++] = (struct lw_lease){ ino, e->gen };
}

/* Under il->lock: every lease granted up to upto is forgotten; *out (malloc'd) lists them, or is
 * NULL when there was no memory to list them: then every lease is forgotten. */
static uint32_t drop_upto(struct loom_ileases *il, uint64_t upto, struct lw_lease **out)
{
	struct drop_scan s = { .upto = upto };

	il->epoch++;
	s.v = malloc((il->map.count + 1) * sizeof(*s.v));
	if (s.v) {
		u64map_each(&il->map, drop_one, &s);
		for (uint32_t i = 0; i < s.n; i++)
			forget(il, s.v[i].ino, u64map_get(&il->map, s.v[i].ino));
	} else {
		u64map_each(&il->map, free_lease, NULL);
		u64map_destroy(&il->map);
		u64map_init(&il->map);
		il->bytes = 0;
	}
	*out = s.v;
	return s.n;
}

uint32_t ileases_take_all(loom_fs *fs, struct lw_lease **out)
{
	struct loom_ileases *il = fs->ileases;
	uint32_t n;

	*out = NULL;
	if (!il)
		return 0;
	pthread_mutex_lock(&il->lock);
	n = drop_upto(il, UINT64_MAX, out);
	pthread_mutex_unlock(&il->lock);
	return n;
}

void ileases_lost(loom_fs *fs, uint64_t upto)
{
	struct loom_ileases *il = fs->ileases;
	struct lw_lease *dropped;

	if (!il)
		return;
	pthread_mutex_lock(&il->lock);
	drop_upto(il, upto, &dropped);
	pthread_mutex_unlock(&il->lock);
	free(dropped);
	/* What was opened under them becomes real, from the lease thread. */
	leases_push_inode(fs, 0, 0);
}

/* Under il->convert_lock: f, opened locally, opened for real at the MDS. A file gone meanwhile
 * fails its reads from now on: its objects may be gone too. */
static int make_real(loom_file *f)
{
	struct loom_layout *layout = NULL;
	struct lw_open_rep rep;
	bool local, surplus;
	int rc;

	pthread_mutex_lock(&f->lock);
	local = f->local;
	rc = f->lost_err;
	pthread_mutex_unlock(&f->lock);
	if (!local)
		return rc;
	rc = mdc_open(f->fs, &f->cred, f->ino, O_RDONLY, NULL, &rep, &layout, NULL);
	free(layout);
	pthread_mutex_lock(&f->lock);
	local = f->local;
	surplus = rc == 0 && !local; /* the reconnection opened it meanwhile */
	if (!local)
		;
	else if (rc == 0)
		f->handle = rep.handle;
	else if (rc == -ENOENT || rc == -ESTALE)
		f->lost_err = -ESTALE; /* gone: its objects may be too */
	else
		local = false; /* a passing error (an interrupt, the MDS away): tried again */
	if (local)
		f->local = false;
	pthread_mutex_unlock(&f->lock);
	if (local)
		ileases_local_ended(f->fs);
	if (surplus)
		(void)mdc_close_detached(f->fs, &f->cred, f->ino, rep.handle);
	if (rc == -ENOENT || rc == -ESTALE)
		log_warn("inode %llu, opened under a lease that was lost, is gone: its reads fail",
			 (unsigned long long)f->ino);
	return rc == -ENOENT ? -ESTALE : rc;
}

void ileases_make_real(loom_fs *fs, const uint64_t *inos, uint32_t ninos)
{
	struct loom_ileases *il = fs->ileases;
	loom_file **files = NULL;
	size_t n = 0, cap = 0;
	struct u64map set;
	bool all = false;

	if (!il || !ninos)
		return;
	/* One walk over the open files for a whole batch of leases (a directory's rename recalls
	 * them all). */
	u64map_init(&set);
	for (uint32_t i = 0; i < ninos && !all; i++)
		all = inos[i] == 0 || u64map_put(&set, inos[i], (void *)(uintptr_t)1) < 0;
	/* The files are gathered under open_lock, which is never held across a request, and stay
	 * while convert_lock is held: a local file leaves the open files under it (close_local). */
	pthread_mutex_lock(&il->convert_lock);
	pthread_mutex_lock(&fs->open_lock);
	for (loom_file *f = fs->open_list; f; f = f->next_open) {
		if (!f->local || (!all && !u64map_get(&set, f->ino)))
			continue;
		if (n == cap) {
			size_t c = cap ? cap * 2 : 16;
			loom_file **p = realloc(files, c * sizeof(*p));

			if (!p)
				break; /* the rest become real at their next read (file_check: no lease) */
			files = p;
			cap = c;
		}
		files[n++] = f;
	}
	pthread_mutex_unlock(&fs->open_lock);
	for (size_t i = 0; i < n; i++)
		make_real(files[i]);
	pthread_mutex_unlock(&il->convert_lock);
	free(files);
	u64map_destroy(&set);
}

/* f, a local file, alone. */
static int make_one_real(loom_file *f)
{
	struct loom_ileases *il = f->fs->ileases;
	int rc;

	pthread_mutex_lock(&il->convert_lock);
	rc = make_real(f);
	pthread_mutex_unlock(&il->convert_lock);
	return rc;
}

int ileases_file_check(loom_file *f)
{
	struct loom_ileases *il = f->fs->ileases;
	struct ilease *e;
	bool held;

	pthread_mutex_lock(&f->lock);
	held = f->local;
	pthread_mutex_unlock(&f->lock);
	if (!held)
		return f->lost_err;
	/* Its own lease, still kept (not recalled, not lost), and trusted: the file is there. The
	 * clock alone would not do: a reply after the lease was lost makes the client trusted again,
	 * before the lease thread made this open real. */
	pthread_mutex_lock(&il->lock);
	e = u64map_get(&il->map, f->ino);
	held = e && e->gen == f->lease_gen;
	pthread_mutex_unlock(&il->lock);
	if (held && loom_ll_leases_fresh(f->fs))
		return 0;
	return make_one_real(f);
}

void ileases_leave(loom_file *f)
{
	struct loom_ileases *il = f->fs->ileases;
	bool local;

	if (il)
		pthread_mutex_lock(&il->convert_lock);
	files_remove(f->fs, f);
	if (il)
		pthread_mutex_unlock(&il->convert_lock);
	pthread_mutex_lock(&f->lock);
	local = f->local;
	f->local = false;
	pthread_mutex_unlock(&f->lock);
	if (local)
		ileases_local_ended(f->fs);
}

void ileases_gone(loom_file *f)
{
	bool local;

	pthread_mutex_lock(&f->lock);
	local = f->local;
	if (local) {
		f->local = false;
		f->lost_err = -ESTALE;
	}
	pthread_mutex_unlock(&f->lock);
	if (local)
		ileases_local_ended(f->fs);
}

void ileases_local_ended(loom_fs *fs)
{
	struct loom_ileases *il = fs->ileases;

	if (!il)
		return;
	pthread_mutex_lock(&il->lock);
	il->nlocal--;
	pthread_mutex_unlock(&il->lock);
}

bool ileases_unlink_begin(loom_fs *fs)
{
	struct loom_ileases *il = fs->ileases;
	bool none;

	if (!il)
		return false;
	pthread_mutex_lock(&il->lock);
	il->unlinking++;
	none = il->nlocal == 0;
	pthread_mutex_unlock(&il->lock);
	return none;
}

void ileases_unlink_end(loom_fs *fs)
{
	struct loom_ileases *il = fs->ileases;

	if (!il)
		return;
	pthread_mutex_lock(&il->lock);
	il->unlinking--;
	pthread_mutex_unlock(&il->lock);
}

int ileases_open(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, int flags,
		 const struct loom_ll_expect *expect, loom_file **out, struct lw_attr *attr,
		 uint64_t *dir_moves)
{
	struct loom_ileases *il = fs->ileases;
	struct loom_layout *layout = NULL;
	struct mdc_dom dom = { 0 };
	struct lw_open_rep rep;
	struct ilease *e;
	uint64_t gen = 0;
	void *body = NULL;
	uint32_t len = 0;
	int rc;

	if (!il || !loom_ll_leases_fresh(fs))
		return -EAGAIN;
	pthread_mutex_lock(&il->lock);
	e = u64map_get(&il->map, ino);
	if (e && same_cred(&e->cred, cr) && (body = malloc(e->len)) != NULL) {
		memcpy(body, e->body, e->len);
		len = e->len;
		gen = e->gen;
	}
	pthread_mutex_unlock(&il->lock);
	if (!body)
		return -EAGAIN;
	rc = mdc_open_decode(body, len, &rep, &layout, &dom);
	free(body);
	/* What the caller expects of names is checked by the MDS otherwise: here the lease says
	 * nothing changed since the kept reply (names and directory moves recall it). */
	if (rc == 0 && expect &&
	    ((expect->name_version && expect->name_version != rep.attr.name_version) ||
	     (expect->dir_moves && expect->dir_moves != rep.dir_moves)))
		rc = -EAGAIN;
	if (rc) {
		free(layout);
		free(dom.data);
		return -EAGAIN;
	}
	/* Counted from here; none while an unlink that said there are none is on its way. */
	pthread_mutex_lock(&il->lock);
	if (il->unlinking)
		rc = -EAGAIN;
	else
		il->nlocal++;
	pthread_mutex_unlock(&il->lock);
	if (rc) {
		free(layout);
		free(dom.data);
		return rc;
	}
	rc = file_open_local(fs, cr, flags, &rep.attr, layout, &dom, out);
	free(dom.data);
	if (rc) {
		ileases_local_ended(fs);
		return rc;
	}
	(*out)->lease_gen = gen;
	/* Recalled while this was answered: the conversions may have passed it by. */
	pthread_mutex_lock(&il->lock);
	e = u64map_get(&il->map, ino);
	bool kept = e && e->gen == gen;
	pthread_mutex_unlock(&il->lock);
	if (!kept && (rc = make_one_real(*out)) != 0) {
		loom_close(*out);
		*out = NULL;
		return rc;
	}
	*attr = rep.attr;
	*dir_moves = rep.dir_moves;
	return 0;
}
