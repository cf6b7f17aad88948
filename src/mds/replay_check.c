/*
 * What a replay may claim. A replay names the numbers its first run handed out (its transno,
 * the inode of a create, a create's objects) and the MDS hands them out again: a client could
 * otherwise name any number, take over another file's inode or objects, or wrap a counter. So a
 * replay is taken only within what a crash can have lost: numbers in the window the start
 * skipped the counters over (replay.c: LOST_NUMBERS_MAX above what the disk held), each once,
 * and an inode that does not exist. A client's key lets it change what its credentials allow,
 * and no more through a replay than through the request itself.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "mds/dispatch.h"

struct replay_bits {
	uint64_t base;                        /* the first number of the window */
	uint8_t taken[LOST_NUMBERS_MAX / 8];  /* bit k: base + k was taken by a replay */
};

struct mds_replay_bounds {
	struct replay_bits transnos;  /* base: the disk's last_committed + 1 */
	struct replay_bits inos;      /* base: the disk's next_ino */
	struct u64map objs;           /* OST index -> struct replay_bits (base: its next_objid) */
};

static void bits_init(struct replay_bits *b, uint64_t base)
{
	memset(b, 0, sizeof(*b));
	b->base = base;
}

/* Whether n is in b's window and not taken yet. */
static bool bits_free(const struct replay_bits *b, uint64_t n)
{
	uint64_t k = n - b->base;

	return n >= b->base && k < LOST_NUMBERS_MAX && !(b->taken[k / 8] & (1u << (k % 8)));
}

static void bits_take(struct replay_bits *b, uint64_t n)
{
	uint64_t k = n - b->base;

	b->taken[k / 8] |= (uint8_t)(1u << (k % 8));
}

struct objid_note {
	struct mds_replay_bounds *b;
	int rc;
};

static void note_objid(void *arg, uint32_t ost, uint64_t next_objid)
{
	struct objid_note *n = arg;
	struct replay_bits *bits = malloc(sizeof(*bits));

	if (!bits || u64map_put(&n->b->objs, ost, bits) != 0) {
		free(bits);
		n->rc = -ENOMEM;
		return;
	}
	bits_init(bits, next_objid);
}

int mds_replay_bounds_new(struct mdt_txn *t, uint64_t last_committed, struct mds_replay_bounds **out)
{
	struct mds_replay_bounds *b = calloc(1, sizeof(*b));
	struct objid_note n = { .b = b };
	uint64_t next_ino = 0;
	int rc;

	if (!b)
		return -ENOMEM;
	u64map_init(&b->objs);
	bits_init(&b->transnos, last_committed + 1);
	rc = mdt_numbers_skip(t, LOST_NUMBERS_MAX, &next_ino, note_objid, &n);
	if (rc == 0)
		rc = n.rc;
	if (rc) {
		mds_replay_bounds_free(b);
		return rc;
	}
	bits_init(&b->inos, next_ino);
	*out = b;
	return 0;
}

void mds_replay_bounds_free(struct mds_replay_bounds *b)
{
	if (!b)
		return;
	u64map_destroy_free(&b->objs);
	free(b);
}

uint64_t mds_replay_bounds_end(const struct mds_replay_bounds *b)
{
	return b->transnos.base + LOST_NUMBERS_MAX - 1;
}

int mds_replay_bounds_check(struct mds_replay_bounds *b, struct mdt_txn *t, const struct mds_replayed *rd,
			    const char **why)
{
	struct lw_attr attr;

	if (!bits_free(&b->transnos, rd->transno)) {
		*why = "its transno is not one a crash can have lost, or was replayed already";
		return -EINVAL;
	}
	if (rd->want_ino) {
		if (!bits_free(&b->inos, rd->want_ino)) {
			*why = "its inode number is not one a crash can have lost, or was made again already";
			return -EINVAL;
		}
		if (mdt_getattr(t, rd->want_ino, &attr) != -ENOENT) {
			*why = "its inode number is in use";
			return -EEXIST;
		}
	}
	for (uint32_t i = 0; i < rd->nobjs; i++) {
		struct replay_bits *bits = u64map_get(&b->objs, rd->objs[i].ost_idx);

		if (!bits || !bits_free(bits, rd->objs[i].objid)) {
			*why = "an object it names is not one a crash can have lost, or was made again already";
			return -EINVAL;
		}
		for (uint32_t j = 0; j < i; j++)
			if (rd->objs[j].ost_idx == rd->objs[i].ost_idx && rd->objs[j].objid == rd->objs[i].objid) {
				*why = "it names an object twice";
				return -EINVAL;
			}
	}
	return 0;
}

void mds_replay_bounds_take(struct mds_replay_bounds *b, const struct mds_replayed *rd)
{
	bits_take(&b->transnos, rd->transno);
	if (rd->want_ino)
		bits_take(&b->inos, rd->want_ino);
	for (uint32_t i = 0; i < rd->nobjs; i++)
		bits_take(u64map_get(&b->objs, rd->objs[i].ost_idx), rd->objs[i].objid);
}
