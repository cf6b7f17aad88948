/*
 * Prefetchers run by loom-mount for a door session (src/common/door.h, PF_*): the caller's
 * loom_prefetch_* through the door. The daemon's prefetch threads read ahead with the session's
 * connection, and each take is one round trip with the item's bytes in the slot, where a
 * prefetcher in the caller would open, read and close every item through the door.
 *
 * What a prefetcher may hold is charged to its uid before it exists (lm_door_pf_charge: what is
 * left of the uid's share, if less than asked), and the items it is given are counted too: a
 * caller cannot make the daemon hold more than DOOR_PF_BYTES_UID, whatever it asks for, and the
 * last of many workers still reads ahead, with less.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuse/door_srv.h"

#define PF_DEFAULT_BYTES (256u << 20) /* libloom's default, charged as such */

struct door_pf {
	loom_prefetch *pf;         /* NULL until PF_START */
	struct loom_prefetch_opts opts;
	size_t charged;            /* bytes charged to the uid */
	/* The items until PF_START: paths as offsets into names (which grows). */
	struct loom_prefetch_item *items;
	size_t *path_at;
	size_t n, cap, pcap;
	char *names;
	size_t names_len, names_cap;
	/* The item being handed over in pieces (larger than the slot). */
	void *taken;
	ssize_t taken_len;
	uint64_t taken_i;
};

static void drop_taken(struct door_pf *p)
{
	loom_prefetch_free(p->taken);
	p->taken = NULL;
	p->taken_len = 0;
}

void door_pf_free(struct door_session *s, struct door_pf *p)
{
	if (!p)
		return;
	drop_taken(p);
	loom_prefetch_stop(p->pf);
	lm_door_pf_uncharge(s->door, s, p->charged);
	free(p->items);
	free(p->path_at);
	free(p->names);
	free(p);
}

int door_pf_new(struct door_session *s, const struct door_req *rq, struct door_pf **out, uint64_t *granted)
{
	struct door_pf *p;

	if (rq->arg > DOOR_PF_BYTES_UID || rq->flags > 256)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->opts.threads = rq->flags;
	p->opts.max_ahead = rq->mode;
	p->charged = lm_door_pf_charge(s->door, s, rq->arg ? (size_t)rq->arg : PF_DEFAULT_BYTES);
	if (!p->charged) {
		free(p);
		return -ENOMEM; /* this uid's prefetchers hold their share already */
	}
	p->opts.max_bytes = p->charged;
	*granted = p->charged;
	*out = p;
	return 0;
}

static int grow(void **buf, size_t *cap, size_t want, size_t elem)
{
	size_t n = *cap ? *cap : 64;
	void *b;

	if (want <= *cap)
		return 0;
	while (n < want)
		n *= 2;
	b = realloc(*buf, n * elem);
	if (!b)
		return -ENOMEM;
	*buf = b;
	*cap = n;
	return 0;
}

/* PF_ITEMS: the slot's items, copied out of it first (the caller may change it meanwhile). */
static int add_items(struct door_pf *p, const void *slot, size_t len)
{
	char *copy;
	size_t at = 0;
	int rc = 0;

	if (p->pf)
		return -EBUSY; /* started: its items are fixed */
	if (p->names_len + len > DOOR_PF_ITEM_BYTES)
		return -E2BIG;
	copy = malloc(len ? len : 1);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, slot, len);
	while (rc == 0 && at < len) {
		struct door_pf_item it;

		if (len - at < sizeof(it)) {
			rc = -EINVAL;
			break;
		}
		memcpy(&it, copy + at, sizeof(it));
		at += sizeof(it);
		if (it.pathlen == 0 || it.pathlen >= DOOR_PATH_MAX || it.pathlen > len - at ||
		    memchr(copy + at, '\0', it.pathlen) || it.length < -1) {
			rc = -EINVAL;
			break;
		}
		rc = grow((void **)&p->items, &p->cap, p->n + 1, sizeof(*p->items));
		if (rc == 0)
			rc = grow((void **)&p->path_at, &p->pcap, p->n + 1, sizeof(*p->path_at));
		if (rc == 0)
			rc = grow((void **)&p->names, &p->names_cap, p->names_len + it.pathlen + 1, 1);
		if (rc)
			break;
		p->items[p->n] = (struct loom_prefetch_item){ .offset = it.offset, .length = it.length };
		p->path_at[p->n] = p->names_len;
		memcpy(p->names + p->names_len, copy + at, it.pathlen);
		p->names[p->names_len + it.pathlen] = '\0';
		p->names_len += it.pathlen + 1;
		p->n++;
		at += (it.pathlen + 7) & ~(size_t)7;
	}
	free(copy);
	return rc;
}

static int start(struct door_session *s, struct door_pf *p)
{
	int rc;

	if (p->pf)
		return -EBUSY;
	if (p->n == 0)
		return -EINVAL;
	for (size_t k = 0; k < p->n; k++)
		p->items[k].path = p->names + p->path_at[k];
	rc = loom_prefetch_start(s->fs, p->items, p->n, &p->opts, &p->pf);
	if (rc == 0) {
		/* libloom copied them. */
		free(p->items);
		free(p->path_at);
		free(p->names);
		p->items = NULL;
		p->path_at = NULL;
		p->names = NULL;
	}
	return rc;
}

/* PF_TAKE: item rq->off's length, and its bytes from rq->arg on, as many as the slot holds. */
static int64_t take(struct door_pf *p, const struct door_req *rq, void *slot, struct door_rep *rep)
{
	size_t room;

	if (!p->pf)
		return -EINVAL;
	if (!p->taken || p->taken_i != (uint64_t)rq->off) {
		void *buf = NULL;
		ssize_t n;

		drop_taken(p);
		if (rq->off < 0 || rq->arg != 0)
			return -EINVAL; /* an item's first piece first */
		n = loom_prefetch_take(p->pf, (size_t)rq->off, &buf);
		if (n < 0)
			return n;
		p->taken = buf;
		p->taken_len = n;
		p->taken_i = (uint64_t)rq->off;
	}
	if (rq->arg > (uint64_t)p->taken_len)
		return -EINVAL;
	room = (size_t)p->taken_len - (size_t)rq->arg;
	if (room > DOOR_SLOT_BYTES)
		room = DOOR_SLOT_BYTES;
	if (rq->len < room)
		room = (size_t)rq->len;
	memcpy(slot, (char *)p->taken + rq->arg, room);
	rep->len = room;
	if (rq->arg + room == (uint64_t)p->taken_len) {
		int64_t len = p->taken_len;

		drop_taken(p); /* handed over whole */
		return len;
	}
	return p->taken_len;
}

int64_t door_pf_do(struct door_session *s, struct door_pf *p, const struct door_req *rq, void *slot,
		   struct door_rep *rep)
{
	switch (rq->op) {
	case DOOR_OP_PF_ITEMS: return add_items(p, slot, rq->len);
	case DOOR_OP_PF_START: return start(s, p);
	case DOOR_OP_PF_TAKE: return take(p, rq, slot, rep);
	case DOOR_OP_PF_STATS:
		if (!p->pf)
			return -EINVAL;
		loom_prefetch_get_stats(p->pf, slot);
		rep->len = sizeof(struct loom_prefetch_stats);
		return 0;
	}
	return -EOPNOTSUPP;
}
