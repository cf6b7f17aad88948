#include "common/stripe.h"

uint64_t stripe_obj_size(const struct stripe_geom *g, uint32_t k, uint64_t file_size)
{
	uint64_t row, full, rem, start, tail;

	if (__builtin_mul_overflow(g->size, (uint64_t)g->count, &row)) {
		/* A row longer than 2^64 (only a corrupt layout has one): every byte a file can
		 * hold is in its first row. */
		start = (uint64_t)k * g->size;
		tail = file_size > start ? file_size - start : 0;
		return tail < g->size ? tail : g->size;
	}
	full = file_size / row;
	rem = file_size % row;
	start = (uint64_t)k * g->size; /* where object k's unit begins within a row */
	tail = rem > start ? rem - start : 0;
	if (tail > g->size)
		tail = g->size;
	return full * g->size + tail;
}

/*
 * Object k holds the stripe units k, k+C, k+2C, ... back to back:
 *
 *   object k:  | unit k | unit k+C | unit k+2C | ...     object offset of unit k+rC is r*S
 *
 * Its last byte, at object offset n-1, is in its row r = (n-1)/S at o = (n-1)%S: file unit
 * r*C + k, file offset (r*C + k)*S + o. The file is at least one byte longer than that.
 */
uint64_t stripe_file_end(const struct stripe_geom *g, uint32_t k, uint64_t n)
{
	uint64_t r, o, unit, off;

	if (n == 0)
		return 0;
	r = (n - 1) / g->size;
	o = (n - 1) % g->size;
	if (__builtin_mul_overflow(r, (uint64_t)g->count, &unit) ||
	    __builtin_add_overflow(unit, (uint64_t)k, &unit) ||
	    __builtin_mul_overflow(unit, g->size, &off) ||
	    __builtin_add_overflow(off, o + 1, &off))
		return UINT64_MAX;
	return off;
}

uint32_t stripe_map(const struct stripe_geom *g, uint64_t off, uint64_t len, struct stripe_run *runs,
		    struct stripe_seg *segs, uint32_t *nsegs)
{
	uint64_t first_unit = off / g->size, units = stripe_max_segs(g, off, len), end = off + len;
	uint32_t nruns = units < g->count ? (uint32_t)units : g->count, s = 0;

	/* Run i holds units i, i + C, i + 2C, ... of the request: all on one object, and adjacent
	 * in object space, because each object holds every C-th unit back to back. */
	for (uint32_t i = 0; i < nruns; i++) {
		struct stripe_run *r = &runs[i];

		r->first_seg = s;
		r->nsegs = 0;
		r->len = 0;
		for (uint64_t j = i; j < units; j += g->count) {
			uint64_t unit = first_unit + j;
			uint64_t a = unit * g->size, b = a + g->size;

			if (a < off)
				a = off;
			if (b > end)
				b = end;
			if (r->nsegs == 0)
				stripe_locate(g, a, &r->obj, &r->obj_off);
			segs[s].buf_off = a - off;
			segs[s].len = (uint32_t)(b - a);
			r->len += b - a;
			r->nsegs++;
			s++;
		}
	}
	*nsegs = s;
	return nruns;
}
