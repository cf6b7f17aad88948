/*
 * src/common/u64map.c, the hash map every server and the client keep their tables in: insert,
 * replace, get and delete, growth (when, to what, and that every entry is found after it),
 * iteration, the extreme keys, and a long random run against a plain model.
 */
#include <stdbool.h>
#include <stdlib.h>

#include "check.h"
#include "common/u64map.h"

int check_failures;
const char *check_current = "";

/* A value that names its key (never NULL for the keys used here). */
static void *val_of(uint64_t key)
{
	return (void *)(uintptr_t)(key * 2 + 1);
}

/* The number of entries in the buckets, counted by walking them (not m->count). */
static size_t walk_count(const struct u64map *m, size_t *longest)
{
	size_t n = 0;

	*longest = 0;
	for (size_t i = 0; i < m->nbuckets; i++) {
		size_t chain = 0;
		for (const struct u64map_ent *e = m->buckets[i]; e; e = e->next)
			chain++;
		n += chain;
		if (chain > *longest)
			*longest = chain;
	}
	return n;
}

struct each_log {
	uint64_t keys[64];
	void *vals[64];
	size_t n;
	uint64_t sum;  /* of all keys, for maps too big to log */
	size_t calls;
	int bad;       /* entries whose value does not name their key */
};

static void log_entry(uint64_t key, void *val, void *arg)
{
	struct each_log *lg = arg;

	if (lg->n < 64) {
		lg->keys[lg->n] = key;
		lg->vals[lg->n] = val;
		lg->n++;
	}
	lg->sum += key;
	lg->calls++;
	if (val != val_of(key))
		lg->bad++;
}

static void test_empty(void)
{
	struct u64map m;
	struct each_log lg = { 0 };

	u64map_init(&m);
	CHECK(u64map_get(&m, 0) == NULL);
	CHECK(u64map_get(&m, 12345) == NULL);
	CHECK(u64map_del(&m, 0) == NULL);
	u64map_each(&m, log_entry, &lg);
	CHECK_EQ(lg.calls, 0);
	CHECK_EQ(m.count, 0);
	CHECK_EQ(m.nbuckets, 0); /* nothing allocated before the first insert */
	u64map_destroy(&m);
	/* A destroyed map is an empty one, ready for use. */
	CHECK_EQ(m.nbuckets, 0);
	CHECK(m.buckets == NULL);
	CHECK_RC(u64map_put(&m, 1, val_of(1)), 0);
	CHECK(u64map_get(&m, 1) == val_of(1));
	u64map_destroy(&m);
}

static void test_put_get_replace_del(void)
{
	struct u64map m;

	u64map_init(&m);
	CHECK_RC(u64map_put(&m, 5, val_of(5)), 0);
	CHECK_RC(u64map_put(&m, 6, val_of(6)), 0);
	CHECK_EQ(m.count, 2);
	CHECK(u64map_get(&m, 5) == val_of(5));
	CHECK(u64map_get(&m, 6) == val_of(6));
	CHECK(u64map_get(&m, 7) == NULL);
	/* Replacing keeps one entry, with the new value. */
	CHECK_RC(u64map_put(&m, 5, val_of(500)), 0);
	CHECK_EQ(m.count, 2);
	CHECK(u64map_get(&m, 5) == val_of(500));
	/* Delete returns the value once; a second delete finds nothing. */
	CHECK(u64map_del(&m, 5) == val_of(500));
	CHECK(u64map_del(&m, 5) == NULL);
	CHECK_EQ(m.count, 1);
	CHECK(u64map_get(&m, 5) == NULL);
	CHECK(u64map_get(&m, 6) == val_of(6));
	CHECK(u64map_del(&m, 99) == NULL); /* absent, map not empty */
	CHECK_EQ(m.count, 1);
	/* A NULL value is an entry (counted) that get cannot tell from none. */
	CHECK_RC(u64map_put(&m, 8, NULL), 0);
	CHECK_EQ(m.count, 2);
	CHECK(u64map_get(&m, 8) == NULL);
	CHECK(u64map_del(&m, 8) == NULL);
	CHECK_EQ(m.count, 1);
	u64map_destroy(&m);
	CHECK_EQ(m.count, 0);
}

static void test_extreme_keys(void)
{
	/* 0 and UINT64_MAX, and keys that differ only in their high bits or only in their low
	 * bit: every one is its own entry. */
	const uint64_t keys[] = { 0, UINT64_MAX, UINT64_MAX - 1, 1, 1ull << 63, (1ull << 63) | 1,
				  1ull << 32, 2ull << 32, 0xFFFFFFFFull, 0xFFFFFFFF00000000ull,
				  0x8000000000000000ull >> 1, 0x0123456789ABCDEFull };
	const size_t n = sizeof(keys) / sizeof(keys[0]);
	struct each_log lg = { 0 };
	struct u64map m;

	u64map_init(&m);
	for (size_t i = 0; i < n; i++)
		CHECK_RC(u64map_put(&m, keys[i], val_of(keys[i])), 0);
	CHECK_EQ(m.count, n);
	for (size_t i = 0; i < n; i++)
		CHECK(u64map_get(&m, keys[i]) == val_of(keys[i]));
	u64map_each(&m, log_entry, &lg);
	CHECK_EQ(lg.calls, n);
	CHECK_EQ(lg.bad, 0);
	/* Each key exactly once. */
	for (size_t i = 0; i < n; i++) {
		int seen = 0;
		for (size_t j = 0; j < lg.n; j++)
			seen += lg.keys[j] == keys[i];
		CHECK_EQ(seen, 1);
	}
	CHECK(u64map_del(&m, 0) == val_of(0));
	CHECK(u64map_get(&m, 0) == NULL);
	CHECK(u64map_get(&m, UINT64_MAX) == val_of(UINT64_MAX));
	CHECK(u64map_del(&m, UINT64_MAX) == val_of(UINT64_MAX));
	CHECK(u64map_get(&m, UINT64_MAX) == NULL);
	CHECK(u64map_get(&m, UINT64_MAX - 1) == val_of(UINT64_MAX - 1));
	CHECK_EQ(m.count, n - 2);
	u64map_destroy(&m);
}

/* The table doubles when an insert finds it as full as it has buckets: 64, 128, 256, ... */
static void test_growth(void)
{
	struct u64map m;
	size_t longest;

	u64map_init(&m);
	CHECK_RC(u64map_put(&m, 1000, val_of(1000)), 0);
	CHECK_EQ(m.nbuckets, 64);
	for (uint64_t k = 1; k < 64; k++)
		CHECK_RC(u64map_put(&m, 1000 + k, val_of(1000 + k)), 0);
	CHECK_EQ(m.count, 64);
	CHECK_EQ(m.nbuckets, 64);
	/* Replacing at the threshold is no insert: no growth. */
	CHECK_RC(u64map_put(&m, 1000, val_of(1000)), 0);
	CHECK_EQ(m.nbuckets, 64);
	/* The 65th key grows the table; every entry moved is found. */
	CHECK_RC(u64map_put(&m, 5000, val_of(5000)), 0);
	CHECK_EQ(m.nbuckets, 128);
	CHECK_EQ(m.count, 65);
	CHECK_EQ(walk_count(&m, &longest), 65);
	for (uint64_t k = 0; k < 64; k++)
		CHECK(u64map_get(&m, 1000 + k) == val_of(1000 + k));
	CHECK(u64map_get(&m, 5000) == val_of(5000));
	/* Deleting never shrinks; inserts after deletes reuse the room first. */
	for (uint64_t k = 0; k < 64; k++)
		CHECK(u64map_del(&m, 1000 + k) == val_of(1000 + k));
	CHECK_EQ(m.count, 1);
	CHECK_EQ(m.nbuckets, 128);
	for (uint64_t k = 0; k < 127; k++)
		CHECK_RC(u64map_put(&m, 7000 + k, val_of(7000 + k)), 0);
	CHECK_EQ(m.count, 128);
	CHECK_EQ(m.nbuckets, 128);
	CHECK_RC(u64map_put(&m, 9000, val_of(9000)), 0);
	CHECK_EQ(m.nbuckets, 256);
	CHECK_EQ(walk_count(&m, &longest), 129);
	u64map_destroy(&m);

	/* Up to a million sequential keys (inode numbers, handles): powers of two all the way,
	 * and the multiplicative hash keeps the chains short (10 at most, at 64 Ki buckets). */
	u64map_init(&m);
	for (uint64_t k = 1; k <= 1u << 20; k++) {
		REQUIRE_RC(u64map_put(&m, k, val_of(k)), 0);
		if ((k & (k - 1)) == 0 && k >= 64)
			CHECK_EQ(m.nbuckets, k);
	}
	CHECK_EQ(m.nbuckets, 1u << 20);
	CHECK_EQ(walk_count(&m, &longest), 1u << 20);
	CHECK(longest <= 16);
	u64map_destroy(&m);
}

/* Deletions between growths and right after them: entries rehashed into new buckets are found
 * and deleted there, and the ones deleted before a growth do not come back with it. */
static void test_delete_around_growth(void)
{
	enum { MAXKEYS = 1 << 20 };
	bool *alive = calloc(MAXKEYS, sizeof(*alive));
	struct u64map m;
	size_t longest, live = 0;
	uint64_t next = 0, oldest = 0;

	REQUIRE(alive);
	u64map_init(&m);
	for (int round = 0; round < 13; round++) {
		size_t buckets = m.nbuckets;

		/* Insert until just past a growth, deleting the key before last every third. */
		while (m.nbuckets == buckets) {
			uint64_t k = next * 0x10001; /* strided, so keys share low bits */

			REQUIRE(next < MAXKEYS);
			REQUIRE_RC(u64map_put(&m, k, val_of(k)), 0);
			alive[next++] = true;
			live++;
			if (next % 3 == 0 && alive[next - 2]) {
				uint64_t d = (next - 2) * 0x10001;
				CHECK(u64map_del(&m, d) == val_of(d));
				alive[next - 2] = false;
				live--;
			}
		}
		/* Right after the growth: delete the oldest live key. */
		while (!alive[oldest])
			oldest++;
		CHECK(u64map_del(&m, oldest * 0x10001) == val_of(oldest * 0x10001));
		alive[oldest] = false;
		live--;
		CHECK_EQ(m.count, live);
		CHECK_EQ(walk_count(&m, &longest), live);
	}
	CHECK_EQ(m.nbuckets, 64u << 12);
	/* What is there is exactly what the sequence left. */
	for (uint64_t i = 0; i < next; i++) {
		void *v = u64map_get(&m, i * 0x10001);

		if (v != (alive[i] ? val_of(i * 0x10001) : NULL)) {
			CHECK_FAIL_("key %llu: %p", (unsigned long long)(i * 0x10001), v);
			break;
		}
	}
	u64map_destroy(&m);
	free(alive);
}

static void test_iteration(void)
{
	struct u64map m;
	struct each_log lg = { 0 };
	uint64_t sum = 0;

	u64map_init(&m);
	/* Enough to grow a few times; each entry visited once with its value. */
	for (uint64_t k = 0; k < 5000; k++) {
		uint64_t key = k * 0x9E3779B97F4A7C15ull; /* spread over all 64 bits */
		CHECK_RC(u64map_put(&m, key, val_of(key)), 0);
		sum += key;
	}
	for (uint64_t k = 0; k < 5000; k += 2) {
		uint64_t key = k * 0x9E3779B97F4A7C15ull;
		CHECK(u64map_del(&m, key) == val_of(key));
		sum -= key;
	}
	u64map_each(&m, log_entry, &lg);
	CHECK_EQ(lg.calls, 2500);
	CHECK_EQ(lg.bad, 0);
	CHECK_EQ(lg.sum, sum);
	u64map_destroy(&m);
}

static uint64_t rnd64(void)
{
	return (uint64_t)rand() << 42 ^ (uint64_t)rand() << 21 ^ (uint64_t)rand();
}

/* A long random run against a plain model: an array of keys and whether each is in. */
static void test_against_model(void)
{
	enum { NKEYS = 3000 };
	static uint64_t keys[NKEYS];
	static bool in[NKEYS];
	static uintptr_t vals[NKEYS];
	struct u64map m;
	size_t count = 0, longest;

	srand(64);
	for (int i = 0; i < NKEYS; i++) {
		/* Small keys, huge ones and the extremes, all distinct. */
		keys[i] = i == 0 ? 0 : i == 1 ? UINT64_MAX : i % 3 ? rnd64() : (uint64_t)i;
		for (int j = 0; j < i; j++)
			if (keys[j] == keys[i])
				keys[i] = (uint64_t)i + (1ull << 40);
	}
	u64map_init(&m);
	for (int step = 0; step < 200000; step++) {
		int i = rand() % NKEYS, op = rand() % 10;

		if (op < 5) {
			uintptr_t v = (uintptr_t)step * 2 + 1;
			REQUIRE_RC(u64map_put(&m, keys[i], (void *)v), 0);
			count += !in[i];
			in[i] = true;
			vals[i] = v;
		} else if (op < 8) {
			void *got = u64map_del(&m, keys[i]);
			if (got != (in[i] ? (void *)vals[i] : NULL))
				CHECK_FAIL_("step %d: del %llx gave %p", step, (unsigned long long)keys[i], got);
			count -= in[i];
			in[i] = false;
		} else {
			void *got = u64map_get(&m, keys[i]);
			if (got != (in[i] ? (void *)vals[i] : NULL))
				CHECK_FAIL_("step %d: get %llx gave %p", step, (unsigned long long)keys[i], got);
		}
		if (m.count != count) {
			CHECK_EQ(m.count, count);
			break;
		}
	}
	CHECK_EQ(walk_count(&m, &longest), count);
	for (int i = 0; i < NKEYS; i++)
		CHECK(u64map_get(&m, keys[i]) == (in[i] ? (void *)vals[i] : NULL));
	u64map_destroy(&m);
}

int main(void)
{
	RUN(test_empty);
	RUN(test_put_get_replace_del);
	RUN(test_extreme_keys);
	RUN(test_growth);
	RUN(test_delete_around_growth);
	RUN(test_iteration);
	RUN(test_against_model);
	return check_report();
}
