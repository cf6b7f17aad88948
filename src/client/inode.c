/*
 * Per inode, what this client's handles of it share besides the Data-on-MDT cache (dom.c): the
 * write errors not yet reported, and the truncation epoch they write in. Kept while a handle of
 * the inode is open here (fs->shared, under fs->shared_lock, which is taken inside files_lock
 * and wb_lock and never around another lock).
 *
 * Write errors, as Linux's errseq: every handle of the inode reports, at its next flush, fsync
 * or close, the last error of a write through any of them since it last reported one, and a
 * handle opened after an error nobody has reported yet reports it too. A write that went behind
 * fails after write(2) returned, and whichever descriptor wrote it (mmapped pages go through
 * any), each one that could have must hear of it once.
 *
 * The truncation epoch (protocol.md, lw_attr.trunc_epoch): writes and size reports are made in
 * the newest epoch any handle here learned, from an MDS reply or from an OSS that refused a
 * write as older than its object's last cut. A handle that moves to a newer epoch forgets what
 * it wrote before (file.c): those writes came before the truncation, which cut what of them lay
 * past its size.
 */
#include <errno.h>
#include <stdlib.h>

#include "client/internal.h"

struct ino_shared {
	int err;
	uint64_t err_seq;  /* errors so far */
	bool err_seen;     /* the last one was reported through some handle */
	uint32_t trunc_epoch;
	/* Acknowledged since the last fsync: each OST, with its loss generation (ostconns.c) at
	 * the oldest acknowledgement (ino_mark_acked). */
	struct ost_loss_mark *marks;
	uint32_t nmarks;
	bool kept;         /* counted in fs->marks_kept: its last handle here closed with marks */
};

/* Inodes whose last handle closed with writes not fsynced keep their marks, so that an fsync
 * through a later open (a checkpointer's) still hears of a loss; at most this many. */
#define MARKS_KEPT_MAX 65536u

/* Under shared_lock: ino's state, made when missing with create (NULL without memory). */
static struct ino_shared *shared_of(loom_fs *fs, uint64_t ino, bool create)
{
	struct ino_shared *e = u64map_get(&fs->shared, ino);

	if (!e && create && (e = calloc(1, sizeof(*e))) != NULL && u64map_put(&fs->shared, ino, e) < 0) {
		free(e);
		e = NULL;
	}
	return e;
}

void ino_error(loom_fs *fs, uint64_t ino, int err)
{
	struct ino_shared *e;

	pthread_mutex_lock(&fs->shared_lock);
	if ((e = shared_of(fs, ino, true)) != NULL) {
		e->err = err;
		e->err_seq++;
		e->err_seen = false;
	}
	pthread_mutex_unlock(&fs->shared_lock);
}

uint64_t ino_error_sample(loom_fs *fs, uint64_t ino)
{
	struct ino_shared *e;
	uint64_t seq = 0;

	pthread_mutex_lock(&fs->shared_lock);
	if ((e = shared_of(fs, ino, false)) != NULL)
		seq = e->err_seen ? e->err_seq : e->err_seq - 1;
	pthread_mutex_unlock(&fs->shared_lock);
	return seq;
}

int ino_error_take(loom_fs *fs, uint64_t ino, uint64_t *sample)
{
	struct ino_shared *e;
	int rc = 0;

	pthread_mutex_lock(&fs->shared_lock);
	e = shared_of(fs, ino, false);
	if (e && e->err_seq != *sample) {
		rc = e->err;
		*sample = e->err_seq;
		e->err_seen = true;
	}
	pthread_mutex_unlock(&fs->shared_lock);
	return rc;
}

uint32_t ino_epoch(loom_fs *fs, uint64_t ino, uint32_t learned)
{
	struct ino_shared *e;
	uint32_t epoch = learned;

	pthread_mutex_lock(&fs->shared_lock);
	if ((e = shared_of(fs, ino, learned != 0)) != NULL) {
		if (learned > e->trunc_epoch)
			e->trunc_epoch = learned;
		epoch = e->trunc_epoch;
	}
	pthread_mutex_unlock(&fs->shared_lock);
	return epoch;
}

/* Under shared_lock: e's mark of ost (created, with gen, when missing; NULL without memory). */
static struct ost_loss_mark *mark_of(struct ino_shared *e, uint32_t ost, uint32_t gen)
{
	struct ost_loss_mark *m;

	for (uint32_t j = 0; j < e->nmarks; j++)
		if (e->marks[j].ost == ost)
			return &e->marks[j];
	m = realloc(e->marks, (e->nmarks + 1) * sizeof(*m));
	if (!m)
		return NULL;
	e->marks = m;
	m = &e->marks[e->nmarks++];
	*m = (struct ost_loss_mark){ .ost = ost, .gen = gen };
	return m;
}

void ino_mark_acked(loom_fs *fs, uint64_t ino, uint32_t ost, uint32_t gen)
{
	struct ino_shared *e;
	struct ost_loss_mark *m;

	pthread_mutex_lock(&fs->shared_lock);
	e = shared_of(fs, ino, true);
	/* The oldest acknowledgement counts: a change of server after it may have lost it. (Out
	 * of memory, the mark is missing: a loss goes untold, as before marks existed.) */
	if (e && (m = mark_of(e, ost, gen)) != NULL && gen < m->gen)
		m->gen = gen;
	pthread_mutex_unlock(&fs->shared_lock);
}

void ino_mark_unsynced(loom_fs *fs, uint64_t ino, struct ost_loss_mark *marks, uint32_t n)
{
	struct ino_shared *e;

	pthread_mutex_lock(&fs->shared_lock);
	e = shared_of(fs, ino, true);
	for (uint32_t i = 0; e && i < n; i++) {
		struct ost_loss_mark *m = mark_of(e, marks[i].ost, marks[i].gen);

		if (m && marks[i].gen < m->gen)
			m->gen = marks[i].gen;
	}
	pthread_mutex_unlock(&fs->shared_lock);
	free(marks);
}

struct ost_loss_mark *ino_unsynced_take(loom_fs *fs, uint64_t ino, uint32_t *n)
{
	struct ino_shared *e;
	struct ost_loss_mark *marks = NULL;

	*n = 0;
	pthread_mutex_lock(&fs->shared_lock);
	e = shared_of(fs, ino, false);
	if (e && e->marks) {
		marks = e->marks;
		*n = e->nmarks;
		e->marks = NULL;
		e->nmarks = 0;
	}
	pthread_mutex_unlock(&fs->shared_lock);
	return marks;
}

static void shared_free(void *p)
{
	struct ino_shared *e = p;

	if (e)
		free(e->marks);
	free(e);
}

void ino_forget(loom_fs *fs, uint64_t ino)
{
	struct ino_shared *e;

	pthread_mutex_lock(&fs->shared_lock);
	e = shared_of(fs, ino, false);
	if (e && e->marks && (e->kept || fs->marks_kept < MARKS_KEPT_MAX)) {
		/* Written and not fsynced: a later open's fsync reports a loss (and the error no
		 * handle reported yet, as Linux does for a new descriptor). */
		if (!e->kept)
			fs->marks_kept++;
		e->kept = true;
	} else if (e) {
		if (e->kept)
			fs->marks_kept--;
		shared_free(u64map_del(&fs->shared, ino));
	}
	pthread_mutex_unlock(&fs->shared_lock);
}

static void free_one(uint64_t key, void *val, void *arg)
{
	(void)key;
	(void)arg;
	shared_free(val);
}

void ino_shared_destroy(loom_fs *fs)
{
	u64map_each(&fs->shared, free_one, NULL);
	u64map_destroy(&fs->shared);
}
