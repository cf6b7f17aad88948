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

/* Objects a copy has: every copy is striped alike, object k of each holding the same bytes. */
static inline uint32_t layout_per_copy(const struct loom_layout *l)
{
	return l->nobjs / layout_copies(l);
}

/* A file's stripe geometry (one copy's). */
static inline struct stripe_geom stripe_geom_of(const struct loom_layout *l)
{
	return (struct stripe_geom){ .size = l->stripe_size, .count = layout_per_copy(l) };
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
