/* Stripe math against a plain reference model: deal the file's stripe units to objects one by
 * one and follow every byte. */
#include <stdlib.h>

#include "check.h"
#include "common/stripe.h"
#include "loom/types.h"

int check_failures;
const char *check_current = "";

/* The model: unit u of the file is the (u / C)-th unit of object u % C. Computed by walking the
 * units and counting per object, not by the formula under test. */
static void model_locate(uint64_t S, uint32_t C, uint64_t f, uint32_t *obj, uint64_t *obj_off)
{
	uint64_t unit = f / S, seen[64] = { 0 };

	for (uint64_t u = 0; u < unit; u++)
		seen[u % C]++;
	*obj = (uint32_t)(unit % C);
	*obj_off = seen[*obj] * S + f % S;
}

static uint64_t model_obj_size(uint64_t S, uint32_t C, uint32_t k, uint64_t L)
{
	uint64_t n = 0;

	for (uint64_t u = 0; u * S < L; u++) {
		if (u % C != k)
			continue;
		n += (u + 1) * S <= L ? S : L - u * S;
	}
	return n;
}

static uint64_t rnd(uint64_t n)
{
	return n ? ((uint64_t)rand() << 31 ^ (uint64_t)rand()) % n : 0;
}

static void test_locate(void)
{
	for (int i = 0; i < 20000; i++) {
		struct stripe_geom g = { .size = 65536ull * (1 + rnd(8)), .count = 1 + (uint32_t)rnd(12) };
		uint64_t f = rnd(g.size * g.count * 40), o1, o2;
		uint32_t k1, k2;

		stripe_locate(&g, f, &k1, &o1);
		model_locate(g.size, g.count, f, &k2, &o2);
		CHECK_EQ(k1, k2);
		CHECK_EQ(o1, o2);
	}
}

static void test_obj_size(void)
{
	for (int i = 0; i < 5000; i++) {
		struct stripe_geom g = { .size = 65536ull * (1 + rnd(4)), .count = 1 + (uint32_t)rnd(9) };
		uint64_t L = rnd(g.size * g.count * 6);
		uint64_t total = 0;

		for (uint32_t k = 0; k < g.count; k++) {
			uint64_t s = stripe_obj_size(&g, k, L);
			CHECK_EQ(s, model_obj_size(g.size, g.count, k, L));
			total += s;
		}
		CHECK_EQ(total, L);
	}
}

/* stripe_file_offset undoes stripe_locate, and an object's part of a file range is the range
 * between its sizes at either end: every byte of it maps into the file range, on that object. */
static void test_file_offset_and_obj_ranges(void)
{
	for (int i = 0; i < 20000; i++) {
		struct stripe_geom g = { .size = 65536ull * (1 + rnd(8)), .count = 1 + (uint32_t)rnd(12) };
		uint64_t f = rnd(g.size * g.count * 40), o, a, b;
		uint32_t k;

		stripe_locate(&g, f, &k, &o);
		CHECK_EQ(stripe_file_offset(&g, k, o), f);
		a = rnd(g.size * g.count * 5);
		b = a + rnd(g.size * g.count * 3);
		k = (uint32_t)rnd(g.count);
		/* The bytes just outside the object range lie outside the file range. */
		if (stripe_obj_size(&g, k, a) > 0)
			CHECK(stripe_file_offset(&g, k, stripe_obj_size(&g, k, a) - 1) < a);
		CHECK(stripe_file_offset(&g, k, stripe_obj_size(&g, k, b)) >= b);
		for (uint64_t x = stripe_obj_size(&g, k, a), end = stripe_obj_size(&g, k, b); x < end;
		     x += 1 + rnd(g.size)) {
			uint64_t fx = stripe_file_offset(&g, k, x);
			uint32_t kk;
			uint64_t oo;

			CHECK(fx >= a && fx < b);
			model_locate(g.size, g.count, fx, &kk, &oo);
			CHECK_EQ(kk, k);
			CHECK_EQ(oo, x);
		}
	}
}

/* Every byte of the range is covered exactly once, by a segment of the run of the object that
 * the model says holds it, at the object offset the model says, and runs are contiguous. */
static void check_map(const struct stripe_geom *g, uint64_t off, uint64_t len)
{
	uint64_t maxsegs = stripe_max_segs(g, off, len);
	struct stripe_run *runs = calloc(g->count, sizeof(*runs));
	struct stripe_seg *segs = calloc(maxsegs + 1, sizeof(*segs));
	unsigned char *seen = calloc(len + 1, 1);
	uint32_t nsegs, nruns;

	REQUIRE(runs && segs && seen);
	nruns = stripe_map(g, off, len, runs, segs, &nsegs);
	CHECK_EQ(nsegs, maxsegs);
	CHECK(nruns <= g->count);
	for (uint32_t r = 0; r < nruns; r++) {
		uint64_t obj_off = runs[r].obj_off, sum = 0;

		for (uint32_t s = 0; s < runs[r].nsegs; s++) {
			const struct stripe_seg *sg = &segs[runs[r].first_seg + s];
			/* Check the segment's first and last byte against the model, and mark all. */
			uint64_t ends[2] = { sg->buf_off, sg->buf_off + sg->len - 1 };

			CHECK(sg->len > 0);
			for (int e = 0; e < 2; e++) {
				uint32_t k;
				uint64_t o;
				model_locate(g->size, g->count, off + ends[e], &k, &o);
				CHECK_EQ(k, runs[r].obj);
				CHECK_EQ(o, obj_off + (ends[e] - sg->buf_off));
			}
			for (uint64_t b = sg->buf_off; b < sg->buf_off + sg->len && b < len; b++)
				seen[b]++;
			obj_off += sg->len;
			sum += sg->len;
		}
		CHECK_EQ(sum, runs[r].len);
	}
	for (uint64_t b = 0; b < len; b++) {
		if (seen[b] != 1) {
			CHECK_EQ(seen[b], 1);
			break;
		}
	}
	free(runs);
	free(segs);
	free(seen);
}

static void test_map_random(void)
{
	for (int i = 0; i < 3000; i++) {
		struct stripe_geom g = { .size = 65536ull * (1 + rnd(3)), .count = 1 + (uint32_t)rnd(8) };
		uint64_t off = rnd(g.size * g.count * 3);
		uint64_t len = 1 + rnd(g.size * g.count * 3);

		check_map(&g, off, len);
	}
}

static void test_map_edges(void)
{
	struct stripe_geom g = { .size = 65536, .count = 4 };

	check_map(&g, 0, 1);
	check_map(&g, 65535, 2);          /* straddles two units */
	check_map(&g, 0, 65536 * 4);      /* exactly one row */
	check_map(&g, 65536 * 4 - 1, 2);  /* straddles rows */
	check_map(&g, 3 * 65536, 65536 * 9 + 17);
	g.count = 1;
	check_map(&g, 12345, 65536 * 5);
	CHECK_EQ(stripe_max_segs(&g, 0, 0), 0);
}

/* ---- the inverse: file sizes from objects (fsck) ---- */

static void test_file_end_math(void)
{
	/* Exhaustive over small geometries, against the client's stripe_obj_size. */
	for (uint64_t s = 1; s <= 6; s++) {
		for (uint32_t c = 1; c <= 5; c++) {
			struct stripe_geom g = { .size = s, .count = c };
			for (uint64_t size = 0; size <= s * c * 4 + 3; size++) {
				uint64_t maxend = 0;
				for (uint32_t k = 0; k < c; k++) {
					uint64_t n = stripe_obj_size(&g, k, size);
					uint64_t end = stripe_file_end(&g, k, n);
					if (n == 0) {
						CHECK_EQ(end, 0);
						continue;
					}
					/* end is the shortest file in which object k holds n bytes */
					CHECK_EQ(stripe_obj_size(&g, k, end), n);
					CHECK_EQ(stripe_obj_size(&g, k, end - 1), n - 1);
					CHECK(end <= size);
					maxend = end > maxend ? end : maxend;
				}
				/* the objects of a file imply exactly its size */
				CHECK_EQ(maxend, size);
			}
		}
	}
	/* A real geometry, some large values. */
	{
		struct stripe_geom g = { .size = 4u << 20, .count = 7 };
		uint64_t sizes[] = { 1, 4u << 20, (4u << 20) + 1, 123456789012ull, 1ull << 40 };
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			uint64_t maxend = 0;
			for (uint32_t k = 0; k < 7; k++) {
				uint64_t n = stripe_obj_size(&g, k, sizes[i]);
				uint64_t e = stripe_file_end(&g, k, n);
				maxend = e > maxend ? e : maxend;
			}
			CHECK_EQ(maxend, sizes[i]);
		}
	}
	{
		struct stripe_geom big = { .size = LOOM_MAX_STRIPE_SIZE, .count = LOOM_MAX_STRIPES };
		struct stripe_geom one = { .size = 65536, .count = 1 };
		/* A row past 2^64 (a corrupt layout): object k holds only its part of the first. */
		struct stripe_geom huge = { .size = 1ull << 62, .count = 8 };

		CHECK_EQ(stripe_file_end(&big, 1999, UINT64_MAX), UINT64_MAX);
		CHECK_EQ(stripe_file_end(&one, 0, 0), 0);
		CHECK_EQ(stripe_obj_size(&huge, 1, (1ull << 62) + 5), 5);
		CHECK_EQ(stripe_obj_size(&huge, 0, (1ull << 62) + 5), 1ull << 62);
		CHECK_EQ(stripe_obj_size(&huge, 2, (1ull << 62) + 5), 0);
	}
}

int main(void)
{
	RUN(test_file_end_math);
	srand(12345);
	RUN(test_locate);
	RUN(test_obj_size);
	RUN(test_file_offset_and_obj_ranges);
	RUN(test_map_random);
	RUN(test_map_edges);
	return check_report();
}
