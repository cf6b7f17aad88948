/*
 * Prefetch: reading ahead in an order the caller knows in advance (a sampler's epoch).
 *
 * Threads claim items in order (cursor) and read them through the public API, each with reads of
 * its own in flight, so the pieces of many items travel from every server at once. Memory is
 * reserved in item order (next_reserve): item k waits until every item before it has reserved,
 * and until what is held leaves room for it. The reader takes items in order too (take_pos), so
 * the item it waits for is always the next to get memory: reading ahead can never starve it.
 *
 * Item i's life: WAITING -> CLAIMED (a thread reads it) -> READY -> GONE (taken or given up).
 * An item before take_pos that is still CLAIMED is freed by its thread when the read ends.
 *
 * Ranged items that share an aligned block of a file with others (prefetch_blocks.c) go another
 * way: the thread that reaches the first of them reads the block, the others' threads pass them
 * by, and the reader copies each out of the block when it takes it. They reserve nothing in item
 * order (next_reserve skips them): the blocks have a share of the memory of their own.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "client/cstats.h"
#include "client/jobtag.h"
#include "client/prefetch.h"

/* Under pf->lock, after anything the threads may wait for changed (take_pos, next_reserve, held):
 * only threads that wait are woken, so a reader taking items at speed does not wake the idle
 * ones each time. */
static void wake(loom_prefetch *pf)
{
	if (pf->reserve_waiters)
		pthread_cond_broadcast(&pf->work);
	if (pf->window_waiters)
		pthread_cond_broadcast(&pf->window);
}

/* The files one thread keeps open, for the ranged items of a few large files. */
struct pf_open_files {
	struct {
		const char *path;
		loom_file *f;
		uint64_t used;
	} e[PF_OPEN_FILES];
	uint64_t tick;
};

static int cached_open(struct pf_open_files *of, loom_fs *fs, const char *path, loom_file **out)
{
	int victim = 0, rc;

	for (int k = 0; k < PF_OPEN_FILES; k++) {
		if (of->e[k].f && strcmp(of->e[k].path, path) == 0) {
			of->e[k].used = ++of->tick;
			*out = of->e[k].f;
			return 0;
		}
		if (!of->e[k].f || of->e[k].used < of->e[victim].used)
			victim = k;
		if (!of->e[victim].f)
			break;
	}
	rc = loom_open(fs, path, O_RDONLY, 0, out);
	if (rc)
		return rc;
	if (of->e[victim].f)
		loom_close(of->e[victim].f);
	of->e[victim].path = path;
	of->e[victim].f = *out;
	of->e[victim].used = ++of->tick;
	return 0;
}

static void close_cached(struct pf_open_files *of)
{
	for (int k = 0; k < PF_OPEN_FILES; k++)
		if (of->e[k].f)
			loom_close(of->e[k].f);
}

/* Opens item's file (kept open in of for a ranged item, when of is given) and works out how many
 * bytes it covers. */
static int item_open(loom_fs *fs, const struct loom_prefetch_item *it, struct pf_open_files *of,
		     loom_file **f, size_t *len)
{
	struct stat st;
	int rc;

	rc = (of && it->length >= 0) ? cached_open(of, fs, it->path, f) : loom_open(fs, it->path, O_RDONLY, 0, f);
	if (rc)
		return rc;
	if (it->length >= 0) {
		*len = (size_t)it->length;
		return 0;
	}
	/* The size the open returned (close-to-open), not a round trip more. */
	loom_file_attr(*f, &st);
	*len = (uint64_t)st.st_size > it->offset ? (size_t)((uint64_t)st.st_size - it->offset) : 0;
	return 0;
}

static void item_close(const struct loom_prefetch_item *it, struct pf_open_files *of, loom_file *f)
{
	if (f && !(of && it->length >= 0))
		loom_close(f);
}

/* Reads up to len bytes of the item into buf; returns the count (short at end of file). */
static ssize_t item_read(loom_file *f, const struct loom_prefetch_item *it, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t r = loom_pread(f, (char *)buf + got, len - got, (off_t)(it->offset + got));

		if (r < 0)
			return r;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

/* Reads one item in the caller's thread, outside the prefetcher's memory. */
static ssize_t read_direct(loom_fs *fs, const struct loom_prefetch_item *it, void **out)
{
	loom_file *f = NULL;
	size_t len = 0;
	ssize_t r;
	void *buf;
	int rc;

	rc = item_open(fs, it, NULL, &f, &len);
	if (rc) {
		item_close(it, NULL, f);
		return rc;
	}
	buf = malloc(len ? len : 1);
	r = buf ? item_read(f, it, buf, len) : -ENOMEM;
	item_close(it, NULL, f);
	if (r < 0) {
		free(buf);
		return r;
	}
	*out = buf;
	return r;
}

/* A thread's part of item k: open, reserve memory in item order, read, hand over. */
static void fetch_item(loom_prefetch *pf, size_t k, struct pf_open_files *of)
{
	const struct loom_prefetch_item *it = &pf->items[k];
	struct pf_slot *s = &pf->slots[k];
	loom_file *f = NULL;
	size_t len = 0;
	void *buf = NULL;
	ssize_t got;
	bool gone;
	int rc;

	rc = item_open(pf->fs, it, of, &f, &len);
	if (rc)
		len = 0;
	pthread_mutex_lock(&pf->lock);
	while (!pf->stopping && k >= pf->take_pos &&
	       !(pf->next_reserve == k && (pf->held == 0 || pf->held + len <= pf->max_bytes - pf->block_budget))) {
		pf->reserve_waiters++;
		pthread_cond_wait(&pf->work, &pf->lock);
		pf->reserve_waiters--;
	}
	gone = pf->stopping || k < pf->take_pos;
	if (!gone) {
		pf->held += len;
		if (pf->held + pf->block_held > pf->st.peak_bytes)
			pf->st.peak_bytes = pf->held + pf->block_held;
		pf->next_reserve = pf_plain_from(pf, k + 1);
		wake(pf);
	} else {
		s->state = SLOT_GONE;
	}
	pthread_mutex_unlock(&pf->lock);
	if (gone) {
		item_close(it, of, f);
		return;
	}

	got = rc;
	if (rc == 0) {
		buf = malloc(len ? len : 1);
		got = buf ? item_read(f, it, buf, len) : -ENOMEM;
	}
	item_close(it, of, f);

	pthread_mutex_lock(&pf->lock);
	pf->st.fetched++;
	pf->held -= len; /* what was reserved; what is kept is added back below */
	if (k < pf->take_pos || pf->stopping) {
		s->state = SLOT_GONE;
		pf->st.dropped++;
		free(buf);
	} else {
		if (got < 0) {
			free(buf);
			buf = NULL;
		}
		s->state = SLOT_READY;
		s->err = got < 0 ? (int)got : 0;
		s->len = got < 0 ? 0 : (size_t)got;
		s->buf = buf;
		pf->held += s->len;
		pf->st.bytes_fetched += s->len;
		pthread_cond_broadcast(&pf->ready);
	}
	wake(pf);
	pthread_mutex_unlock(&pf->lock);
}

static void *prefetch_thread(void *arg)
{
	loom_prefetch *pf = arg;
	struct pf_open_files of = { 0 };
	struct jobtag_scope js;

	/* What it reads ahead is for the job that asked for it: its starter's, not the process's
	 * (loom-mount runs prefetchers for door sessions, each for another process). The thread
	 * serves this prefetcher only, so the scope spans its life. */
	jobtag_enter(&js, pf->jobid);
	pthread_mutex_lock(&pf->lock);
	for (;;) {
		struct pf_block *b;
		size_t k;

		if (pf->cursor < pf->take_pos)
			pf->cursor = pf->take_pos;
		while (!pf->stopping && pf->cursor < pf->n && pf->cursor >= pf->take_pos + pf->max_ahead) {
			pf->window_waiters++;
			pthread_cond_wait(&pf->window, &pf->lock);
			pf->window_waiters--;
			if (pf->cursor < pf->take_pos)
				pf->cursor = pf->take_pos;
		}
		/* Every item claimed (the cursor never goes back): nothing is left for this thread. */
		if (pf->stopping || pf->cursor >= pf->n)
			break;
		k = pf->cursor++;
		b = pf_block_of(pf, k);
		if (b) {
			/* The first of a block's items to come reads the block; the others pass. */
			if (pf_block_claim(pf, b)) {
				loom_file *f = NULL;

				pthread_mutex_unlock(&pf->lock);
				if (cached_open(&of, pf->fs, b->path, &f))
					f = NULL;
				pf_block_fill(pf, b, f);
				pthread_mutex_lock(&pf->lock);
			}
			continue;
		}
		pf->slots[k].state = SLOT_CLAIMED;
		pthread_mutex_unlock(&pf->lock);
		fetch_item(pf, k, &of);
		pthread_mutex_lock(&pf->lock);
	}
	pthread_mutex_unlock(&pf->lock);
	close_cached(&of);
	jobtag_leave(&js);
	return NULL;
}

/* A prefetcher whose locks and threads were never made. */
static void free_unstarted(loom_prefetch *pf)
{
	pf_blocks_free(pf);
	free(pf->items);
	free(pf->names);
	free(pf->slots);
	free(pf->threads);
	free(pf);
}

int loom_prefetch_start(loom_fs *fs, const struct loom_prefetch_item *items, size_t n,
			const struct loom_prefetch_opts *opts, loom_prefetch **out)
{
	struct loom_prefetch_opts o = opts ? *opts : (struct loom_prefetch_opts){ 0 };
	loom_prefetch *pf;
	size_t names_len = 0, ranged = 0;
	char *p;

	if (!fs || !items || n == 0 || !out)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (!items[i].path)
			return -EINVAL;
		names_len += strlen(items[i].path) + 1;
		ranged += items[i].length >= 0;
	}
	/* Through a mount's door, files are read ahead by loom-mount (a take is then one request,
	 * where an open, a read and a close would be three); ranges of shards here, by the block. */
	if (pf_via_door(fs) && ranged * 2 < n)
		return door_prefetch_start(fs, items, n, opts, out);
	pf = calloc(1, sizeof(*pf));
	if (!pf)
		return -ENOMEM;
	pf->fs = fs;
	pf->n = n;
	jobtag_current(fs, pf->jobid);
	pf->max_bytes = o.max_bytes ? o.max_bytes : PF_DEFAULT_BYTES;
	pf->max_ahead = o.max_ahead ? o.max_ahead : PF_DEFAULT_AHEAD;
	pf->items = malloc(n * sizeof(*pf->items));
	pf->names = malloc(names_len);
	pf->slots = calloc(n, sizeof(*pf->slots));
	o.threads = o.threads ? o.threads : PF_DEFAULT_THREADS;
	if (o.threads > PF_MAX_THREADS)
		o.threads = PF_MAX_THREADS;
	pf->threads = calloc(o.threads, sizeof(*pf->threads));
	if (!pf->items || !pf->names || !pf->slots || !pf->threads) {
		free_unstarted(pf);
		return -ENOMEM;
	}
	p = pf->names;
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(items[i].path) + 1;

		memcpy(p, items[i].path, len);
		pf->items[i] = items[i];
		pf->items[i].path = p;
		p += len;
	}
	if (pf_blocks_plan(pf)) {
		free_unstarted(pf);
		return -ENOMEM;
	}
	pf->next_reserve = pf_plain_from(pf, 0);
	pthread_mutex_init(&pf->lock, NULL);
	pthread_cond_init(&pf->work, NULL);
	pthread_cond_init(&pf->ready, NULL);
	pthread_cond_init(&pf->block_done, NULL);
	pthread_cond_init(&pf->window, NULL);
	for (unsigned t = 0; t < o.threads; t++) {
		if (pthread_create(&pf->threads[pf->nthreads], NULL, prefetch_thread, pf) != 0)
			break;
		pf->nthreads++;
	}
	if (pf->nthreads == 0) {
		loom_prefetch_stop(pf);
		return -EAGAIN;
	}
	*out = pf;
	return 0;
}

ssize_t loom_prefetch_take(loom_prefetch *pf, size_t i, void **buf)
{
	struct pf_slot *s;
	ssize_t rc;

	if (!pf || !buf || i >= pf->n)
		return -EINVAL;
	if (pf->door_fh)
		return door_prefetch_take(pf, i, buf);
	pthread_mutex_lock(&pf->lock);
	if (i < pf->take_pos) {
		pf->st.direct++;
		cstat_add(CSTAT_PREFETCH_MISS);
		pthread_mutex_unlock(&pf->lock);
		return read_direct(pf->fs, &pf->items[i], buf);
	}
	/* Everything between the last item taken and i is given up. */
	for (size_t j = pf->take_pos; j < i; j++) {
		pf_block_unref(pf, j);
		if (pf->slots[j].state == SLOT_READY) {
			pf->held -= pf->slots[j].len;
			free(pf->slots[j].buf);
			pf->slots[j].buf = NULL;
			pf->slots[j].state = SLOT_GONE;
			pf->st.dropped++;
		}
	}
	pf->take_pos = i;
	if (pf->next_reserve < i)
		pf->next_reserve = pf_plain_from(pf, i);
	if (pf_block_of(pf, i)) {
		/* Copied out of its block here (read here first if no thread has come to it). */
		pf->take_pos = i + 1;
		if (pf->next_reserve <= i)
			pf->next_reserve = pf_plain_from(pf, i + 1);
		wake(pf);
		rc = pf_block_take(pf, i, buf);
		if (rc != -EAGAIN) {
			pf->st.ready++;
			cstat_add(CSTAT_PREFETCH_HIT);
			pthread_mutex_unlock(&pf->lock);
			return rc;
		}
		pf->st.direct++;
		cstat_add(CSTAT_PREFETCH_MISS);
		pthread_mutex_unlock(&pf->lock);
		return read_direct(pf->fs, &pf->items[i], buf);
	}
	s = &pf->slots[i];
	if (s->state == SLOT_WAITING) {
		/* The prefetcher has not reached i: the threads go on after it. */
		pf->take_pos = i + 1;
		if (pf->cursor <= i)
			pf->cursor = i + 1;
		if (pf->next_reserve <= i)
			pf->next_reserve = pf_plain_from(pf, i + 1);
		s->state = SLOT_GONE;
		pf->st.direct++;
		cstat_add(CSTAT_PREFETCH_MISS);
		wake(pf);
		pthread_mutex_unlock(&pf->lock);
		return read_direct(pf->fs, &pf->items[i], buf);
	}
	wake(pf);
	if (s->state == SLOT_CLAIMED) {
		pf->st.waited++;
		cstat_add(CSTAT_PREFETCH_WAIT);
		while (s->state == SLOT_CLAIMED)
			pthread_cond_wait(&pf->ready, &pf->lock);
	} else if (s->state == SLOT_READY) {
		pf->st.ready++;
		cstat_add(CSTAT_PREFETCH_HIT);
	}
	if (s->state != SLOT_READY) { /* stopped meanwhile */
		pthread_mutex_unlock(&pf->lock);
		return -ECANCELED;
	}
	rc = s->err ? s->err : (ssize_t)s->len;
	*buf = s->buf;
	pf->held -= s->len;
	s->buf = NULL;
	s->state = SLOT_GONE;
	pf->take_pos = i + 1;
	wake(pf);
	pthread_mutex_unlock(&pf->lock);
	return rc;
}

void loom_prefetch_free(void *buf)
{
	free(buf);
}

void loom_prefetch_get_stats(loom_prefetch *pf, struct loom_prefetch_stats *st)
{
	if (pf->door_fh) {
		door_prefetch_get_stats(pf, st);
		return;
	}
	pthread_mutex_lock(&pf->lock);
	*st = pf->st;
	st->bytes_held = pf->held + pf->block_held;
	pthread_mutex_unlock(&pf->lock);
}

void loom_prefetch_stop(loom_prefetch *pf)
{
	if (!pf)
		return;
	if (pf->door_fh) {
		door_prefetch_stop(pf);
		return;
	}
	pthread_mutex_lock(&pf->lock);
	pf->stopping = true;
	pthread_cond_broadcast(&pf->window);
	pthread_cond_broadcast(&pf->ready);
	pthread_cond_broadcast(&pf->work);
	pthread_mutex_unlock(&pf->lock);
	for (unsigned t = 0; t < pf->nthreads; t++)
		pthread_join(pf->threads[t], NULL);
	for (size_t i = 0; i < pf->n; i++)
		free(pf->slots[i].buf);
	pf_blocks_free(pf);
	pthread_cond_destroy(&pf->block_done);
	pthread_cond_destroy(&pf->window);
	pthread_cond_destroy(&pf->ready);
	pthread_cond_destroy(&pf->work);
	pthread_mutex_destroy(&pf->lock);
	free(pf->threads);
	free(pf->slots);
	free(pf->names);
	free(pf->items);
	free(pf);
}
