/*
 * loom_prefetch_* on a connection through a mount's door: the prefetcher runs in loom-mount, for
 * this session (src/fuse/door_pf.c), and each take is one request whose answer carries the
 * item's bytes (in pieces of the slot for a larger item).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client/door.h"
#include "client/prefetch.h"

bool pf_via_door(loom_fs *fs)
{
	return fs->door != NULL;
}

static int64_t call(loom_fs *fs, struct door_req *rq, const void *in, size_t in_len, void *out, size_t cap,
		    struct door_rep *rep)
{
	int rc = door_call(fs, rq, NULL, NULL, in, in_len, out, cap, rep);

	return rc ? rc : rep->rc;
}

/* The items in slot-sized messages of struct door_pf_item and path. */
static int send_items(loom_fs *fs, uint64_t fh, const struct loom_prefetch_item *items, size_t n)
{
	char *buf = malloc(DOOR_SLOT_BYTES);
	size_t used = 0;
	int64_t rc = 0;

	if (!buf)
		return -ENOMEM;
	for (size_t k = 0; rc >= 0 && k <= n; k++) {
		size_t plen = k < n ? strlen(items[k].path) : 0;
		size_t need = sizeof(struct door_pf_item) + ((plen + 7) & ~(size_t)7);

		if (k < n && (plen == 0 || plen >= DOOR_PATH_MAX)) {
			rc = -EINVAL;
			break;
		}
		if (used && (k == n || used + need > DOOR_SLOT_BYTES)) {
			struct door_req rq = { .op = DOOR_OP_PF_ITEMS, .fh = fh, .len = used };
			struct door_rep rep;

			rc = call(fs, &rq, buf, used, NULL, 0, &rep);
			used = 0;
		}
		if (k < n && rc >= 0) {
			struct door_pf_item it = { .offset = items[k].offset, .length = items[k].length,
						   .pathlen = (uint32_t)plen };

			memcpy(buf + used, &it, sizeof(it));
			memcpy(buf + used + sizeof(it), items[k].path, plen);
			memset(buf + used + sizeof(it) + plen, 0, need - sizeof(it) - plen);
			used += need;
		}
	}
	free(buf);
	return rc < 0 ? (int)rc : 0;
}

int door_prefetch_start(loom_fs *fs, const struct loom_prefetch_item *items, size_t n,
			const struct loom_prefetch_opts *opts, loom_prefetch **out)
{
	struct door_req rq = { .op = DOOR_OP_PF_NEW };
	struct door_rep rep;
	loom_prefetch *pf = calloc(1, sizeof(*pf));
	int64_t fh;
	int rc;

	if (!pf)
		return -ENOMEM;
	if (opts) {
		rq.arg = opts->max_bytes;
		rq.flags = opts->threads;
		rq.mode = opts->max_ahead;
	}
	fh = call(fs, &rq, NULL, 0, NULL, 0, &rep);
	if (fh < 0) {
		free(pf);
		return (int)fh;
	}
	pf->fs = fs;
	pf->n = n;
	pf->door_fh = (uint64_t)fh;
	rc = send_items(fs, pf->door_fh, items, n);
	if (rc == 0) {
		rq = (struct door_req){ .op = DOOR_OP_PF_START, .fh = pf->door_fh };
		rc = (int)call(fs, &rq, NULL, 0, NULL, 0, &rep);
	}
	if (rc) {
		door_prefetch_stop(pf);
		return rc;
	}
	*out = pf;
	return 0;
}

#define FIRST_PIECE (64u << 10) /* asked first: a small item's whole, and the length of any */

ssize_t door_prefetch_take(loom_prefetch *pf, size_t i, void **buf)
{
	/* The first piece lands in a buffer of its size, made the item's size once the answer
	 * says it (shrunk in place for a small item): no copy beyond the slot's. */
	char *data = malloc(FIRST_PIECE);
	size_t got = 0, cap = FIRST_PIECE;
	int64_t total = -1;
	int rc = data ? 0 : -ENOMEM;

	while (rc == 0 && (total < 0 || got < (uint64_t)total)) {
		struct door_req rq = { .op = DOOR_OP_PF_TAKE, .fh = pf->door_fh, .off = (int64_t)i, .arg = got,
				       .len = total < 0 ? FIRST_PIECE : DOOR_SLOT_BYTES };
		struct door_rep rep;

		rc = door_call(pf->fs, &rq, NULL, NULL, NULL, 0, data + got, cap - got, &rep);
		if (rc == 0 && rep.rc < 0)
			rc = (int)rep.rc;
		if (rc == 0 && ((total >= 0 && rep.rc != total) || got + rep.len > (uint64_t)rep.rc ||
				(rep.len == 0 && got < (uint64_t)rep.rc)))
			rc = -EPROTO;
		if (rc == 0 && total < 0) {
			char *sized = realloc(data, rep.rc ? (size_t)rep.rc : 1);

			total = rep.rc;
			if (sized) {
				data = sized;
				cap = total ? (size_t)total : 1;
			} else {
				rc = -ENOMEM;
			}
		}
		if (rc == 0)
			got += rep.len;
	}
	if (rc) {
		free(data);
		return rc;
	}
	*buf = data;
	return (ssize_t)total;
}

void door_prefetch_get_stats(loom_prefetch *pf, struct loom_prefetch_stats *st)
{
	struct door_req rq = { .op = DOOR_OP_PF_STATS, .fh = pf->door_fh };
	struct door_rep rep;

	memset(st, 0, sizeof(*st));
	if (call(pf->fs, &rq, NULL, 0, st, sizeof(*st), &rep) < 0 || rep.len != sizeof(*st))
		memset(st, 0, sizeof(*st));
}

void door_prefetch_stop(loom_prefetch *pf)
{
	struct door_req rq = { .op = DOOR_OP_PF_STOP, .fh = pf->door_fh };
	struct door_rep rep;

	(void)call(pf->fs, &rq, NULL, 0, NULL, 0, &rep);
	free(pf);
}
