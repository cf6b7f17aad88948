/*
 * RAID-0 stripe math: where the bytes of a file live.
 *
 * A file with stripe size S and count C is cut into stripe units of S bytes, dealt round-robin
 * to its C objects. Object k holds units k, k+C, k+2C, ... back to back:
 *
 *   file:    | u0 | u1 | u2 | u3 | u4 | u5 | u6 | ...      (each u is S bytes)
 *   C = 3:     o0   o1   o2   o0   o1   o2   o0
 *   object 0: | u0 | u3 | u6 | ...    object offset of u3 is S, of u6 is 2S
 *
 *   unit(f)       = f / S
 *   object(f)     = unit(f) % C
 *   obj_offset(f) = (unit(f) / C) * S + f % S
 *
 * So a contiguous file range touches each object in one contiguous object range: a request
 * becomes at most one run per object (cut into RPC-sized pieces), whatever its length.
 */
#ifndef LOOM_COMMON_STRIPE_H
#define LOOM_COMMON_STRIPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loom/types.h"

struct stripe_geom {
	uint64_t size;  /* stripe size S, > 0 */
	uint32_t count; /* stripe count C, > 0 */
};

/* Copies of a file's data: 1 for a plain layout. */
static inline uint32_t layout_copies(const struct loom_layout *l)
{
	return l->mirror_count > 1 ? l->mirror_count : 1;
}

/* Data objects a copy has: every copy is striped alike, object k of each holding the same bytes.
 * An erasure-coded file's parity objects follow its data objects. */
static inline uint32_t layout_per_copy(const struct loom_layout *l)
{
	return l->nobjs / layout_copies(l) - l->ec_parity;
}

/* Whether a file's bytes survive the loss of an object: copies, or parity. */
static inline bool layout_redundant(const struct loom_layout *l)
{
	return layout_copies(l) > 1 || l->ec_parity > 0;
}

/* Whether object obj of a redundant layout, in sync now, may be marked stale: its bytes stay
 * readable from the others. A mirrored file keeps an in-sync copy of every stripe; an
 * erasure-coded one at most ec_parity stale objects (any stripe_count of its objects give every
 * byte). */
static inline bool layout_can_stale(const struct loom_layout *l, uint32_t obj)
{
	uint32_t n = 0;

	if (l->ec_parity) {
		for (uint32_t i = 0; i < l->nobjs; i++)
			n += (l->objs[i].flags & LOOM_OBJ_STALE) != 0;
		return n < l->ec_parity;
	}
	for (uint32_t m = 0, per = layout_per_copy(l); m < layout_copies(l); m++)
		n += !(l->objs[m * per + obj % per].flags & LOOM_OBJ_STALE);
	return layout_copies(l) > 1 && n >= 2;
}

/* A file's stripe geometry (one copy's, or an erasure-coded file's data objects). */
static inline struct stripe_geom stripe_geom_of(const struct loom_layout *l)
{
	return (struct stripe_geom){ .size = l->stripe_size, .count = layout_per_copy(l) };
}

/*
 * Erasure coding: a row is the stripe_count data units at one object offset (S bytes each, in
 * file order) and the ec_parity parity units computed from them, at that same object offset of
 * the parity objects. Parity unit bytes past the data are computed with zeros there; a parity
 * object is as long as data object 0 (the first of every row).
 */
uint64_t stripe_obj_size(const struct stripe_geom *g, uint32_t k, uint64_t file_size);

/* The size object k of l (any copy's, data or parity) has when the file is file_size long. */
static inline uint64_t layout_obj_size(const struct loom_layout *l, uint32_t k, uint64_t file_size)
{
	struct stripe_geom g = stripe_geom_of(l);
	uint32_t per = layout_per_copy(l);

	if (l->ec_parity && k >= per)
		return stripe_obj_size(&g, 0, file_size);
	return stripe_obj_size(&g, k % per, file_size);
}

/* Where file offset `off` lives. */
static inline void stripe_locate(const struct stripe_geom *g, uint64_t off, uint32_t *obj,
				 uint64_t *obj_off)
{
	uint64_t unit = off / g->size;

	*obj = (uint32_t)(unit % g->count);
	*obj_off = (unit / g->count) * g->size + off % g->size;
}

/* The size object k has when the file is file_size bytes long. Also: the object offset where
 * object k's bytes at or past file offset file_size begin, so object k's part of file range
 * [a, b) is object range [stripe_obj_size(a), stripe_obj_size(b)). */
uint64_t stripe_obj_size(const struct stripe_geom *g, uint32_t k, uint64_t file_size);

/* The inverse: the file size implied by object k holding n bytes, i.e. the file offset just past
 * the object's last byte. 0 for n == 0; UINT64_MAX if it does not fit in 64 bits. (fsck finds
 * sizes from objects with it.) */
uint64_t stripe_file_end(const struct stripe_geom *g, uint32_t k, uint64_t n);

/* The file offset of byte obj_off of object k: stripe_locate backwards. The caller keeps obj_off
 * within what a file can hold (below stripe_obj_size(g, k, largest file size)). */
static inline uint64_t stripe_file_offset(const struct stripe_geom *g, uint32_t k, uint64_t obj_off)
{
	return (obj_off / g->size * g->count + k) * g->size + obj_off % g->size;
}

/* One contiguous piece of a run: buf_off is relative to the request's buffer. */
struct stripe_seg {
	uint64_t buf_off;
	uint32_t len;
};

/* The bytes of one object within a request: object range [obj_off, obj_off + len). */
struct stripe_run {
	uint32_t obj;
	uint64_t obj_off;
	uint64_t len;
	uint32_t nsegs;
	uint32_t first_seg; /* index into the segment array */
};

/*
 * Maps file range [off, off + len) onto objects: fills runs (at most min(C, units) of them, in
 * object order starting at the object of `off`) and their segments (one per stripe unit
 * touched). Returns the number of runs; *nsegs gets the number of segments. segs must hold
 * stripe_max_segs(g, off, len) entries and runs min(C, that) entries.
 */
uint32_t stripe_map(const struct stripe_geom *g, uint64_t off, uint64_t len, struct stripe_run *runs,
		    struct stripe_seg *segs, uint32_t *nsegs);

/* Segments a range touches: the number of stripe units it overlaps. */
static inline uint64_t stripe_max_segs(const struct stripe_geom *g, uint64_t off, uint64_t len)
{
	if (len == 0)
		return 0;
	return (off + len - 1) / g->size - off / g->size + 1;
}

#endif
