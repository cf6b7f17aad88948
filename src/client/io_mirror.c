/*
 * Mirrored files (docs/architecture.md, "Mirrors"): every write goes to every in-sync copy at
 * once, and is acknowledged once each stripe's copies answered; a copy that missed it is marked
 * stale on the MDS before the write is acknowledged, so that nobody reads it until a resync.
 * Reads take one in-sync copy of each stripe (clients start from different copies, so that their
 * reads spread) and go to the next copy on an error.
 *
 * The first try of a write or read does not wait for a server that is away (RPC_NOWAIT): a dead
 * OSS costs its copies a stale mark, not the application a recovery window. Only when no copy of
 * a stripe could be reached does a second try wait for the servers, as a plain file's I/O does.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client/io_job.h"
#include "common/log.h"
#include "common/stripe.h"
#include "common/util.h"

/* The registry's key for an object: object ids are counters, far below 2^48. */
static uint64_t obj_key(const struct loom_ostobj *o)
{
	return ((uint64_t)o->ost_idx << 48) ^ o->objid;
}

void mirror_learn(loom_fs *fs, const struct loom_layout *l)
{
	pthread_mutex_lock(&fs->stale_lock);
	for (uint32_t i = 0; i < l->nobjs; i++) {
		uintptr_t gen = (uintptr_t)u64map_get(&fs->stale, obj_key(&l->objs[i]));

		if ((l->objs[i].flags & LOOM_OBJ_STALE) && gen < (uintptr_t)l->layout_gen + 1)
			(void)u64map_put(&fs->stale, obj_key(&l->objs[i]), (void *)((uintptr_t)l->layout_gen + 1));
	}
	pthread_mutex_unlock(&fs->stale_lock);
}

bool mirror_obj_stale(loom_fs *fs, const struct loom_layout *l, uint32_t obj)
{
	uintptr_t gen;

	if (l->objs[obj].flags & LOOM_OBJ_STALE)
		return true;
	pthread_mutex_lock(&fs->stale_lock);
	gen = (uintptr_t)u64map_get(&fs->stale, obj_key(&l->objs[obj]));
	pthread_mutex_unlock(&fs->stale_lock);
	/* Marked here at layout generation gen - 1; a layout read after a resync is newer. */
	return gen && l->layout_gen < gen;
}

/* Marks objects objs[0..n) of l stale on the MDS, and in this client's registry. */
int mirror_mark_stale(loom_fs *fs, uint64_t ino, const struct loom_layout *l, const uint32_t *objs,
		      uint32_t n, const char *why)
{
	struct loom_ostobj *list;
	uint32_t gen = 0;
	int rc;

	if (n == 0)
		return 0;
	list = malloc(n * sizeof(*list));
	if (!list)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++)
		list[i] = l->objs[objs[i]];
	rc = mdc_mirror_stale(fs, ino, list, n, &gen);
	if (rc == 0) {
		pthread_mutex_lock(&fs->stale_lock);
		for (uint32_t i = 0; i < n; i++)
			if (u64map_put(&fs->stale, obj_key(&list[i]), (void *)(uintptr_t)(gen + 1)) < 0)
				rc = -ENOMEM;
		pthread_mutex_unlock(&fs->stale_lock);
	}
	for (uint32_t i = 0; i < n && !l->ec_parity; i++)
		log_warn("mirrored file %llu: mirror %u stripe %u (OST%04x object %#llx) %s: %s",
			 (unsigned long long)ino, objs[i] / layout_per_copy(l), objs[i] % layout_per_copy(l),
			 list[i].ost_idx, (unsigned long long)list[i].objid, why,
			 rc ? "could not be marked stale" : "marked stale until its resync");
	for (uint32_t i = 0; i < n && l->ec_parity; i++)
		log_warn("erasure-coded file %llu: %s object %u (OST%04x object %#llx) %s: %s",
			 (unsigned long long)ino, objs[i] < layout_per_copy(l) ? "data" : "parity", objs[i],
			 list[i].ost_idx, (unsigned long long)list[i].objid, why,
			 rc ? "could not be marked stale" : "marked stale until its rebuild");
	free(list);
	return rc;
}

/* Which objects a job has pieces for. */
static void job_touched(const struct io_job *job, bool *touched)
{
	for (uint32_t i = 0; i < job->np; i++)
		touched[job->pieces[i].body.stripe_idx] = true;
}

/*
 * A try's verdict, stripe by stripe: copies that failed where another copy of the stripe took
 * the bytes go into stale[]; *lost says a stripe none of whose copies took them, with the error
 * in *worst. A write to make again in another truncation epoch is the caller's, at once.
 */
struct verdict {
	uint32_t *stale, nstale;
	bool lost;
	int worst;
	int redo; /* -ESTALE or -EAGAIN: the caller writes again */
};

static void judge(const struct loom_layout *l, const bool *touched, const int *err, struct verdict *v)
{
	uint32_t per = layout_per_copy(l), copies = layout_copies(l);

	v->nstale = 0;
	v->lost = false;
	v->worst = 0;
	v->redo = 0;
	for (uint32_t i = 0; i < l->nobjs; i++)
		if (touched[i] && (err[i] == -ESTALE || err[i] == -EAGAIN))
			v->redo = err[i];
	for (uint32_t k = 0; k < per; k++) {
		bool any = false, ok = false;

		for (uint32_t m = 0; m < copies; m++) {
			uint32_t o = m * per + k;

			any |= touched[o];
			ok |= touched[o] && err[o] == 0;
		}
		if (!any)
			continue;
		if (!ok) {
			v->lost = true;
			for (uint32_t m = 0; m < copies; m++)
				if (touched[m * per + k])
					v->worst = io_merge_err(v->worst, io_app_err(err[m * per + k]));
			continue;
		}
		for (uint32_t m = 0; m < copies; m++)
			if (touched[m * per + k] && err[m * per + k])
				v->stale[v->nstale++] = m * per + k;
	}
}

/* A stripe none of whose copies took a write may hold it in some and not others: every copy but
 * the first is marked stale, so that what the copies say agrees again after a resync. */
static void stale_all_but_first(const struct loom_layout *l, const bool *touched, const int *err,
				struct verdict *v)
{
	uint32_t per = layout_per_copy(l), copies = layout_copies(l);

	for (uint32_t k = 0; k < per; k++) {
		bool first = true, ok = false;

		for (uint32_t m = 0; m < copies; m++)
			ok |= touched[m * per + k] && err[m * per + k] == 0;
		if (ok)
			continue; /* its failed copies are listed already */

		for (uint32_t m = 0; m < copies; m++) {
			uint32_t o = m * per + k;
			bool listed = false;

			if (!touched[o])
				continue;
			if (first) {
				first = false;
				continue;
			}
			for (uint32_t i = 0; i < v->nstale && !listed; i++)
				listed = v->stale[i] == o;
			if (!listed)
				v->stale[v->nstale++] = o;
		}
	}
}

int mirror_write_settle(loom_fs *fs, uint64_t ino, const struct loom_layout *l, struct io_job *job,
			uint8_t *buf, uint64_t len, uint64_t off, uint32_t epoch, int64_t *obj_blocks)
{
	uint32_t n = l->nobjs;
	bool *touched = calloc(n, sizeof(bool));
	int *err = calloc(n, sizeof(int));
	struct verdict v = { .stale = calloc(n, sizeof(uint32_t)) };
	int rc;

	if (!touched || !err || !v.stale) {
		io_job_finish(job, obj_blocks, NULL);
		rc = -ENOMEM;
		goto out;
	}
	job_touched(job, touched);
	io_job_finish(job, obj_blocks, err);
	judge(l, touched, err, &v);
	if (v.lost && !v.redo) {
		/* No copy of some stripe was reachable at once: wait for the servers, as a plain
		 * file's write does, on every copy again. */
		memset(touched, 0, n * sizeof(bool));
		memset(err, 0, n * sizeof(int));
		rc = io_job_start(fs, ino, l, NULL, buf, len, off, true, epoch, 0, job);
		if (rc)
			goto out;
		job_touched(job, touched);
		io_job_finish(job, obj_blocks, err);
		judge(l, touched, err, &v);
	}
	if (v.redo) {
		rc = v.redo;
		goto out;
	}
	if (v.lost)
		stale_all_but_first(l, touched, err, &v);
	rc = mirror_mark_stale(fs, ino, l, v.stale, v.nstale, "missed a write");
	if (v.lost)
		rc = v.worst;
out:
	free(touched);
	free(err);
	free(v.stale);
	return rc;
}

int mirror_write(loom_fs *fs, uint64_t ino, const struct loom_layout *l, uint8_t *buf, uint64_t len,
		 uint64_t off, uint32_t epoch, int64_t *obj_blocks)
{
	struct io_job job;
	int rc = io_job_start(fs, ino, l, NULL, buf, len, off, true, epoch, RPC_NOWAIT, &job);

	return rc ? rc : mirror_write_settle(fs, ino, l, &job, buf, len, off, epoch, obj_blocks);
}

/* The first copy of stripe k from copy `first` on that is in sync and not tried yet (its object),
 * one whose OSS is away only if no other is left; UINT32_MAX if none. */
static uint32_t next_copy(loom_fs *fs, const struct loom_layout *l, uint32_t first, uint32_t k,
			  const bool *tried)
{
	uint32_t per = layout_per_copy(l), copies = layout_copies(l), away = UINT32_MAX;

	for (uint32_t i = 0; i < copies; i++) {
		uint32_t o = ((first + i) % copies) * per + k;

		if (tried[o] || mirror_obj_stale(fs, l, o))
			continue;
		if (!io_ost_away(fs, l->objs[o].ost_idx))
			return o;
		if (away == UINT32_MAX)
			away = o;
	}
	return away;
}

/* Reads [off, off + len) starting each stripe at copy `first`, going to its next copies on errors. */
static int read_part(loom_fs *fs, uint64_t ino, const struct loom_layout *l, uint8_t *buf, uint64_t len,
		     uint64_t off, uint32_t first)
{
	uint32_t per = layout_per_copy(l), n = l->nobjs, nbad = 0;
	uint32_t *pick = calloc(per, sizeof(uint32_t)), *bad = calloc(n, sizeof(uint32_t));
	bool *tried = calloc(n, sizeof(bool)), *touched = calloc(n, sizeof(bool));
	int *err = calloc(n, sizeof(int));
	bool exhausted = false;
	struct io_job job;
	int rc = 0;

	if (!pick || !bad || !tried || !touched || !err) {
		rc = -ENOMEM;
		goto out;
	}
	for (uint32_t k = 0; k < per; k++) {
		pick[k] = next_copy(fs, l, first, k, tried);
		if (pick[k] == UINT32_MAX)
			pick[k] = k; /* every copy marked here: the MDS keeps one in sync; ask the first */
	}
	for (;;) {
		bool failed = false;

		memset(touched, 0, n * sizeof(bool));
		memset(err, 0, n * sizeof(int));
		rc = io_job_start(fs, ino, l, pick, buf, len, off, false, 0, exhausted ? 0 : RPC_NOWAIT, &job);
		if (rc)
			goto out;
		job_touched(&job, touched);
		rc = io_job_finish(&job, NULL, err);
		if (rc == 0 || exhausted)
			break;
		/* The stripes whose copy failed go to their next copy; a copy whose bytes were bad
		 * (the OSS's checksum) is marked stale once the read is whole. */
		for (uint32_t k = 0; k < per; k++) {
			uint32_t o = pick[k];

			if (!touched[o] || err[o] == 0)
				continue;
			failed = true;
			tried[o] = true;
			if (err[o] == -EUCLEAN)
				bad[nbad++] = o;
			o = next_copy(fs, l, first, k, tried);
			if (o == UINT32_MAX)
				exhausted = true; /* every copy failed: a last try that waits */
			else
				pick[k] = o;
		}
		if (!failed)
			break; /* an error that is no object's (memory): as it is */
	}
	if (rc == 0 && nbad)
		mirror_mark_stale(fs, ino, l, bad, nbad, "read back bad bytes");
out:
	free(pick);
	free(bad);
	free(tried);
	free(touched);
	free(err);
	return rc;
}

/*
 * A read: each client starts at a copy of its own (its id and the file's), so that many clients'
 * reads spread over every copy (one client keeps to its copy, whose OSSs then see its reads in
 * order and read ahead: alternating copies by offset halved a reader's MiB/s); a read of several stripe rows is cut into one part per copy,
 * all in flight at once, so that one reader has every copy's OSTs at work. A part that fails is
 * read again with read_part, going from copy to copy.
 */
int mirror_read(loom_fs *fs, uint64_t ino, const struct loom_layout *l, uint8_t *buf, uint64_t len,
		uint64_t off)
{
	uint32_t copies = layout_copies(l), per = layout_per_copy(l);
	uint32_t first = (uint32_t)((fs->uuid[0] ^ ino) % copies);
	uint64_t row = (uint64_t)l->stripe_size * per, part;
	struct io_job jobs[LOOM_MAX_MIRRORS];
	uint64_t at[LOOM_MAX_MIRRORS + 1];
	bool started[LOOM_MAX_MIRRORS] = { false };
	uint32_t *pick;
	bool *untried;
	int rc = 0;

	if (len < 2 * row)
		return read_part(fs, ino, l, buf, len, off, first);
	part = (len / copies + row - 1) / row * row;
	pick = calloc(per, sizeof(uint32_t));
	untried = calloc(l->nobjs, sizeof(bool));
	if (!pick || !untried) {
		free(pick);
		free(untried);
		return -ENOMEM;
	}
	for (uint32_t j = 0; j < copies; j++) {
		at[j] = MIN(len, (uint64_t)j * part);
		at[j + 1] = MIN(len, (uint64_t)(j + 1) * part);
		if (at[j] == at[j + 1])
			continue;
		for (uint32_t k = 0; k < per; k++) {
			pick[k] = next_copy(fs, l, (first + j) % copies, k, untried);
			if (pick[k] == UINT32_MAX)
				pick[k] = k;
		}
		started[j] = io_job_start(fs, ino, l, pick, buf + at[j], at[j + 1] - at[j], off + at[j], false, 0,
					  RPC_NOWAIT, &jobs[j]) == 0;
	}
	free(pick);
	free(untried);
	for (uint32_t j = 0; j < copies; j++) {
		int err = started[j] ? io_job_finish(&jobs[j], NULL, NULL) : -EAGAIN;

		if (at[j] == at[j + 1])
			continue;
		if (err)
			err = read_part(fs, ino, l, buf + at[j], at[j + 1] - at[j], off + at[j], (first + j) % copies);
		rc = io_merge_err(rc, err);
	}
	return rc;
}

int mirror_settle_each(loom_fs *fs, uint64_t ino, const struct loom_layout *l, const bool *asked,
		       const int *obj_err)
{
	uint32_t n = l->nobjs;
	struct verdict v = { .stale = calloc(n, sizeof(uint32_t)) };
	int rc;

	if (!v.stale)
		return -ENOMEM;
	judge(l, asked, obj_err, &v);
	if (v.redo) {
		free(v.stale);
		return v.redo;
	}
	if (v.lost)
		stale_all_but_first(l, asked, obj_err, &v);
	rc = mirror_mark_stale(fs, ino, l, v.stale, v.nstale, "missed a change");
	free(v.stale);
	return v.lost ? v.worst : rc;
}
