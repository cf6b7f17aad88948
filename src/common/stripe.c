#include "common/stripe.h"

uint64_t stripe_obj_size(const struct stripe_geom *g, uint32_t k, uint64_t file_size)
{
	uint64_t row = g->size * g->count;
	uint64_t full = file_size / row, rem = file_size % row;
	uint64_t start = (uint64_t)k * g->size; /* where object k's unit begins within a row */
	uint64_t tail = rem > start ? rem - start : 0;

	if (tail > g->size)
		tail = g->size;
	return full * g->size + tail;
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
