/*
 * Data-on-MDT on the client: the bytes [0, dom_size) of a file whose layout has a dom_size.
 *
 * Every handle of one inode in this client shares one cache of them (struct dom_cache), so that
 * what one handle wrote another reads at once, as with a local page cache:
 *  - an open fills it from the MDS_OPEN reply, which carries the bytes: reading a small file then
 *    costs no request beyond the open;
 *  - writes go into it and are sent with the next size report (flush at close(2), fsync, the
 *    release of a lock), in the same MDS transaction as the size: no request of their own.
 *    Exactly the bytes written are sent, as a list of extents, never the bytes between them:
 *    another client may be writing those (two nodes filling disjoint slots of one small file).
 *    They stay dirty until a report that carried them succeeded with no write in between, so a
 *    failed report loses nothing (the next one sends them again);
 *  - a truncation cuts it; a lock granted drops what is not dirty, so the lock holder reads what
 *    the previous holder wrote (MDS_DOM_READ fetches it again).
 * Close-to-open holds: an open refreshes the bytes that are not dirty here.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client/cstats.h"
#include "client/internal.h"
#include "proto/wire.h"

/* Bytes [lo, hi) written here and not known to have reached the MDS. */
struct dom_extent {
	uint32_t lo, hi;
};

struct dom_cache {
	pthread_mutex_t lock;
	unsigned refs;         /* handles sharing it; under fs->files_lock */
	uint32_t cap;          /* the layout's dom_size */
	bool valid;            /* the bytes outside the dirty extents are known */
	uint32_t len;          /* bytes [0, len) are data; past len, zeros (up to the file's size) */
	struct dom_extent *dirty; /* ascending, disjoint, none touching another */
	uint32_t ndirty, dirty_cap;
	uint64_t wgen;         /* bumped by every write and cut: a report clears the extents it sent
	                        * only if nothing changed them while the report was on its way */
	uint32_t alloc;        /* bytes of data allocated: >= len, and cap once written to */
	uint8_t *data;
	/* The job that wrote the oldest dirty bytes (jobtag.h): the report that carries them goes in
	 * its name, whoever closes. Bytes of several writers travel in one report, charged to it. */
	char jobid[LOOM_JOBID_LEN];
};

int dom_new(uint32_t cap, void *data, uint32_t len, bool known, struct dom_cache **out)
{
	struct dom_cache *c = calloc(1, sizeof(*c));

	if (!c) {
		free(data);
		return -ENOMEM;
	}
	pthread_mutex_init(&c->lock, NULL);
	c->refs = 1;
	c->cap = cap;
	c->valid = known;
	c->data = data;
	c->len = data ? len : 0;
	c->alloc = c->len;
	*out = c;
	return 0;
}

static void dom_free(struct dom_cache *c)
{
	pthread_mutex_destroy(&c->lock);
	free(c->dirty);
	free(c->data);
	free(c);
}

/* Under c->lock: room for every byte up to cap. */
static int dom_grow(struct dom_cache *c)
{
	uint8_t *p;

	if (c->alloc == c->cap)
		return 0;
	p = realloc(c->data, c->cap);
	if (!p)
		return -ENOMEM;
	memset(p + c->alloc, 0, c->cap - c->alloc);
	c->data = p;
	c->alloc = c->cap;
	return 0;
}

/* Under c->lock: the MDS's bytes (fresh from an open or a read) under what is dirty here. Takes
 * ownership of data. */
static int dom_refresh(struct dom_cache *c, uint8_t *data, uint32_t len)
{
	if (len > c->cap)
		len = c->cap;
	if (c->ndirty) {
		/* Our unsent writes win over what the MDS has. */
		uint8_t *p = realloc(data, c->cap);
		if (!p) {
			free(data);
			return -ENOMEM;
		}
		memset(p + len, 0, c->cap - len);
		for (uint32_t i = 0; i < c->ndirty; i++)
			memcpy(p + c->dirty[i].lo, c->data + c->dirty[i].lo, c->dirty[i].hi - c->dirty[i].lo);
		data = p;
		if (c->dirty[c->ndirty - 1].hi > len)
			len = c->dirty[c->ndirty - 1].hi;
		c->alloc = c->cap;
	} else {
		c->alloc = len;
	}
	free(c->data);
	c->data = data;
	c->len = len;
	c->valid = true;
	return 0;
}

void dom_share(struct dom_cache *shared, struct dom_cache *mine)
{
	shared->refs++;
	pthread_mutex_lock(&shared->lock);
	if (mine->valid) {
		uint8_t *data = mine->data;
		mine->data = NULL;
		if (dom_refresh(shared, data, mine->len) != 0 && shared->ndirty == 0)
			shared->valid = false; /* out of memory: fetched again when read */
	}
	pthread_mutex_unlock(&shared->lock);
	dom_free(mine);
}

void dom_put(struct dom_cache *c)
{
	if (c && --c->refs == 0)
		dom_free(c);
}

/* Fetches the bytes from the MDS when they are not known here (*fetched, unless NULL: whether
 * it had to). */
static int dom_fetch(loom_file *f, bool *fetched)
{
	struct dom_cache *c = f->dom;
	void *data = NULL;
	uint32_t len = 0;
	bool valid;
	int rc;

	pthread_mutex_lock(&c->lock);
	valid = c->valid;
	pthread_mutex_unlock(&c->lock);
	if (valid)
		return 0;
	if (fetched)
		*fetched = true;
	rc = mdc_dom_read(f->fs, &f->cred, f->ino, &data, &len);
	if (rc)
		return rc;
	pthread_mutex_lock(&c->lock);
	if (c->valid) {
		free(data); /* another reader was first */
		rc = 0;
	} else {
		rc = dom_refresh(c, data, len);
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* Under c->lock: [lo, hi) is dirty too, merged with the extents it overlaps or touches (all of
 * them written here). */
static int dirty_add(struct dom_cache *c, uint32_t lo, uint32_t hi)
{
	uint32_t first = 0, last;

	while (first < c->ndirty && c->dirty[first].hi < lo)
		first++;
	last = first;
	while (last < c->ndirty && c->dirty[last].lo <= hi)
		last++;
	/* [first, last) touch [lo, hi): they become one extent. */
	if (first < last) {
		if (c->dirty[first].lo < lo)
			lo = c->dirty[first].lo;
		if (c->dirty[last - 1].hi > hi)
			hi = c->dirty[last - 1].hi;
		c->dirty[first] = (struct dom_extent){ lo, hi };
		memmove(c->dirty + first + 1, c->dirty + last, (c->ndirty - last) * sizeof(*c->dirty));
		c->ndirty -= last - first - 1;
		return 0;
	}
	if (c->ndirty == c->dirty_cap) {
		uint32_t cap = c->dirty_cap ? c->dirty_cap * 2 : 8;
		struct dom_extent *p = realloc(c->dirty, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		c->dirty = p;
		c->dirty_cap = cap;
	}
	memmove(c->dirty + first + 1, c->dirty + first, (c->ndirty - first) * sizeof(*c->dirty));
	c->dirty[first] = (struct dom_extent){ lo, hi };
	c->ndirty++;
	return 0;
}

int dom_read(loom_file *f, void *buf, size_t len, uint64_t off)
{
	struct dom_cache *c = f->dom;
	bool fetched = false;
	int rc = dom_fetch(f, &fetched);
	size_t have = 0;

	if (rc)
		return rc;
	cstat_add(fetched ? CSTAT_DOM_MISS : CSTAT_DOM_HIT);
	pthread_mutex_lock(&c->lock);
	if (off < c->len) {
		have = c->len - off < len ? c->len - off : len;
		memcpy(buf, c->data + off, have);
	}
	pthread_mutex_unlock(&c->lock);
	memset((uint8_t *)buf + have, 0, len - have); /* a hole up to the file's size */
	return 0;
}

/* Under c->lock: bytes [lo, hi) become buf's (zeros when buf is NULL), dirty, written for job
 * jobid. */
static int dom_put_bytes(struct dom_cache *c, const void *buf, uint32_t lo, uint32_t hi,
			 const char *jobid)
{
	int rc = dom_grow(c);

	if (rc == 0 && c->ndirty == 0)
		memcpy(c->jobid, jobid, LOOM_JOBID_LEN);
	if (rc == 0)
		rc = dirty_add(c, lo, hi);
	if (rc == 0) {
		if (buf)
			memcpy(c->data + lo, buf, hi - lo);
		else
			memset(c->data + lo, 0, hi - lo);
		c->wgen++;
		if (hi > c->len)
			c->len = hi;
	}
	return rc;
}

int dom_write(loom_file *f, const void *buf, size_t len, uint64_t off)
{
	struct dom_cache *c = f->dom;
	char jobid[LOOM_JOBID_LEN];
	int rc;

	if (len == 0)
		return 0;
	jobtag_current(f->fs, jobid);
	pthread_mutex_lock(&c->lock);
	rc = dom_put_bytes(c, buf, (uint32_t)off, (uint32_t)(off + len), jobid);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int dom_zero(loom_file *f, uint64_t off, uint64_t len)
{
	struct dom_cache *c = f->dom;
	char jobid[LOOM_JOBID_LEN];
	int rc = dom_fetch(f, NULL);

	if (rc || len == 0)
		return rc;
	jobtag_current(f->fs, jobid);
	pthread_mutex_lock(&c->lock);
	/* Zeros are written only where data is: past its end the bytes are a hole, zeros already,
	 * and another client's writes there are not ours to undo. */
	if (off < c->len)
		rc = dom_put_bytes(c, NULL, (uint32_t)off, (uint32_t)(off + len < c->len ? off + len : c->len),
				   jobid);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int dom_data_end(loom_file *f, uint64_t *end)
{
	struct dom_cache *c = f->dom;
	int rc = dom_fetch(f, NULL);

	if (rc)
		return rc;
	pthread_mutex_lock(&c->lock);
	*end = c->len;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

int dom_take(struct dom_cache *c, size_t budget, struct dom_parts *out)
{
	size_t need = 0;
	uint32_t n = 0;
	uint8_t *p;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&c->lock);
	out->gen = c->wgen;
	/* As many extents as fit in budget, and always the first (one is at most a dom_size). */
	while (n < c->ndirty) {
		size_t one = sizeof(struct lw_dom_part) + (c->dirty[n].hi - c->dirty[n].lo);

		if (n > 0 && need + one > budget)
			break;
		need += one;
		n++;
	}
	if (n == 0) {
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	out->buf = p = malloc(need);
	if (!p) {
		pthread_mutex_unlock(&c->lock);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct lw_dom_part part = { .offset = c->dirty[i].lo, .len = c->dirty[i].hi - c->dirty[i].lo };

		memcpy(p, &part, sizeof(part));
		memcpy(p + sizeof(part), c->data + part.offset, part.len);
		p += sizeof(part) + part.len;
	}
	out->len = (uint32_t)need;
	out->n = n;
	out->end = c->dirty[n - 1].hi;
	out->more = n < c->ndirty;
	memcpy(out->jobid, c->jobid, LOOM_JOBID_LEN);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

void dom_sent(struct dom_cache *c, const struct dom_parts *sent)
{
	pthread_mutex_lock(&c->lock);
	/* The first sent->n extents are the ones taken, unless anything was written or cut since:
	 * then they are all sent again with the next report (our own bytes: harmless). */
	if (c->wgen == sent->gen && sent->n <= c->ndirty) {
		memmove(c->dirty, c->dirty + sent->n, (c->ndirty - sent->n) * sizeof(*c->dirty));
		c->ndirty -= sent->n;
	}
	pthread_mutex_unlock(&c->lock);
}

void dom_truncate(struct dom_cache *c, uint64_t size)
{
	pthread_mutex_lock(&c->lock);
	if (size < c->len) {
		memset(c->data + size, 0, c->len - size);
		c->len = (uint32_t)size;
	}
	/* Nothing past the new end is sent. */
	while (c->ndirty && c->dirty[c->ndirty - 1].lo >= c->len)
		c->ndirty--;
	if (c->ndirty && c->dirty[c->ndirty - 1].hi > c->len)
		c->dirty[c->ndirty - 1].hi = c->len;
	c->wgen++;
	pthread_mutex_unlock(&c->lock);
}

void dom_forget(struct dom_cache *c)
{
	pthread_mutex_lock(&c->lock);
	if (c->ndirty == 0)
		c->valid = false;
	pthread_mutex_unlock(&c->lock);
}

uint64_t dom_blocks(struct dom_cache *c)
{
	uint64_t len;

	pthread_mutex_lock(&c->lock);
	len = c->len;
	pthread_mutex_unlock(&c->lock);
	return (len + 4095) / 4096 * 8; /* 4 KiB pages, as the MDT's file system stores them */
}
