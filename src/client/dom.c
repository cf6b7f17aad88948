/*
 * Data-on-MDT on the client: the bytes [0, dom_size) of a file whose layout has a dom_size.
 *
 * Every handle of one inode in this client shares one cache of them (struct dom_cache), so that
 * what one handle wrote another reads at once, as with a local page cache:
 *  - an open fills it from the MDS_OPEN reply, which carries the bytes: reading a small file then
 *    costs no request beyond the open;
 *  - writes go into it and are sent with the next size report (flush at close(2), fsync, the
 *    release of a lock), in the same MDS transaction as the size: no request of their own. They
 *    stay dirty until a report that carried them succeeded with no write in between, so a failed
 *    report loses nothing (the next one sends them again);
 *  - a truncation cuts it; a lock granted drops what is not dirty, so the lock holder reads what
 *    the previous holder wrote (MDS_DOM_READ fetches it again).
 * Close-to-open holds: an open refreshes the bytes that are not dirty here.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client/internal.h"

struct dom_cache {
	pthread_mutex_t lock;
	unsigned refs;         /* handles sharing it; under fs->files_lock */
	uint32_t cap;          /* the layout's dom_size */
	bool valid;            /* the bytes outside the dirty range are known */
	uint32_t len;          /* bytes [0, len) are data; past len, zeros (up to the file's size) */
	uint32_t dirty_lo;     /* [dirty_lo, dirty_hi) written here and not known to have reached */
	uint32_t dirty_hi;     /* the MDS; empty when equal */
	uint64_t wgen;         /* bumped by every write and cut: a report clears the dirty range only
	                        * if nothing changed it while the report was on its way */
	uint32_t alloc;        /* bytes of data allocated: >= len, and cap once written to */
	uint8_t *data;
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
	uint32_t lo = c->dirty_lo, hi = c->dirty_hi;

	if (len > c->cap)
		len = c->cap;
	if (lo < hi) {
		/* Our unsent writes win over what the MDS has. */
		uint8_t *p = realloc(data, c->cap);
		if (!p) {
			free(data);
			return -ENOMEM;
		}
		memset(p + len, 0, c->cap - len);
		memcpy(p + lo, c->data + lo, hi - lo);
		data = p;
		if (hi > len)
			len = hi;
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
		if (dom_refresh(shared, data, mine->len) != 0 && shared->dirty_lo == shared->dirty_hi)
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

/* Fetches the bytes from the MDS when they are not known here. */
static int dom_fetch(loom_file *f)
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

/* Under c->lock: [lo, hi) is dirty too (one range covers both: what lies between is known). */
static void dirty_add(struct dom_cache *c, uint32_t lo, uint32_t hi)
{
	if (c->dirty_lo == c->dirty_hi) {
		c->dirty_lo = lo;
		c->dirty_hi = hi;
	} else {
		c->dirty_lo = lo < c->dirty_lo ? lo : c->dirty_lo;
		c->dirty_hi = hi > c->dirty_hi ? hi : c->dirty_hi;
	}
}

int dom_read(loom_file *f, void *buf, size_t len, uint64_t off)
{
	struct dom_cache *c = f->dom;
	int rc = dom_fetch(f);
	size_t have = 0;

	if (rc)
		return rc;
	pthread_mutex_lock(&c->lock);
	if (off < c->len) {
		have = c->len - off < len ? c->len - off : len;
		memcpy(buf, c->data + off, have);
	}
	pthread_mutex_unlock(&c->lock);
	memset((uint8_t *)buf + have, 0, len - have); /* a hole up to the file's size */
	return 0;
}

int dom_write(loom_file *f, const void *buf, size_t len, uint64_t off)
{
	struct dom_cache *c = f->dom;
	uint32_t lo = (uint32_t)off, hi = (uint32_t)(off + len);
	int rc;

	for (;;) {
		pthread_mutex_lock(&c->lock);
		/* Bytes not known here between two dirty ranges would be sent as zeros: learn them
		 * first. */
		if (c->valid || c->dirty_lo == c->dirty_hi || (hi >= c->dirty_lo && lo <= c->dirty_hi))
			break;
		pthread_mutex_unlock(&c->lock);
		rc = dom_fetch(f);
		if (rc)
			return rc;
	}
	rc = dom_grow(c);
	if (rc == 0) {
		memcpy(c->data + lo, buf, len);
		dirty_add(c, lo, hi);
		c->wgen++;
		if (hi > c->len)
			c->len = hi;
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int dom_take(struct dom_cache *c, void **data, uint64_t *off, uint32_t *len, uint64_t *gen)
{
	int rc = 0;

	*data = NULL;
	*off = 0;
	*len = 0;
	pthread_mutex_lock(&c->lock);
	*gen = c->wgen;
	if (c->dirty_lo < c->dirty_hi) {
		*len = c->dirty_hi - c->dirty_lo;
		*data = malloc(*len);
		if (*data) {
			memcpy(*data, c->data + c->dirty_lo, *len);
			*off = c->dirty_lo;
		} else {
			*len = 0;
			rc = -ENOMEM;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

void dom_sent(struct dom_cache *c, uint64_t gen)
{
	pthread_mutex_lock(&c->lock);
	if (c->wgen == gen)
		c->dirty_lo = c->dirty_hi = 0;
	pthread_mutex_unlock(&c->lock);
}

void dom_truncate(struct dom_cache *c, uint64_t size)
{
	pthread_mutex_lock(&c->lock);
	if (size < c->len) {
		memset(c->data + size, 0, c->len - size);
		c->len = (uint32_t)size;
	}
	if (c->dirty_hi > c->len)
		c->dirty_hi = c->len;
	if (c->dirty_lo > c->dirty_hi)
		c->dirty_lo = c->dirty_hi;
	c->wgen++;
	pthread_mutex_unlock(&c->lock);
}

void dom_forget(struct dom_cache *c)
{
	pthread_mutex_lock(&c->lock);
	if (c->dirty_lo == c->dirty_hi)
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
