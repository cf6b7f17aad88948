/*
 * prefetch_check: drives libloom's prefetcher for tests (tests/integration/test_prefetch.py),
 * so that it runs under the sanitizers too.
 *
 *   prefetch_check MDS_ADDR MAX_BYTES THREADS [TAKE_ORDER|- [WAIT_FETCHED]] < ITEMS
 *
 * ITEMS: one "OFFSET LENGTH PATH" line per item (LENGTH -1: to the end of the file).
 * TAKE_ORDER: comma-separated item numbers to take, in that order (default, or "-": every item in
 * turn). WAIT_FETCHED: before the first take, wait until the prefetcher has read that many items
 * (so that what a test checks does not depend on who was faster, the reader or the threads).
 * Prints "take I LEN SHA256" or "take I ERR -ERRNO" per take, then
 * "stats fetched=.. ready=.. waited=.. direct=.. dropped=.. peak=.. held=..".
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

#include "loom/loom.h"

static void print_sha256(const void *p, size_t n)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len = 0;

	EVP_Digest(p, n, md, &len, EVP_sha256(), NULL);
	for (unsigned int k = 0; k < len; k++)
		printf("%02x", md[k]);
}

static int read_items(struct loom_prefetch_item **out, size_t *count)
{
	struct loom_prefetch_item *items = NULL;
	size_t n = 0, cap = 0;
	char line[4200];

	while (fgets(line, sizeof(line), stdin)) {
		unsigned long long off;
		long long len;
		int used = 0;

		line[strcspn(line, "\n")] = '\0';
		if (sscanf(line, "%llu %lld %n", &off, &len, &used) != 2 || !line[used])
			return -EINVAL;
		if (n == cap) {
			struct loom_prefetch_item *bigger;

			cap = cap ? cap * 2 : 64;
			bigger = realloc(items, cap * sizeof(*items));
			if (!bigger)
				return -ENOMEM;
			items = bigger;
		}
		items[n].path = strdup(line + used);
		items[n].offset = off;
		items[n].length = len;
		if (!items[n].path)
			return -ENOMEM;
		n++;
	}
	*out = items;
	*count = n;
	return 0;
}

static int take(loom_prefetch *pf, size_t i)
{
	void *buf = NULL;
	ssize_t n = loom_prefetch_take(pf, i, &buf);

	if (n < 0) {
		printf("take %zu ERR %zd\n", i, n);
		return n == -EINVAL ? -1 : 0;
	}
	printf("take %zu %zd ", i, n);
	print_sha256(buf, (size_t)n);
	printf("\n");
	loom_prefetch_free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	struct loom_prefetch_opts opts = { 0 };
	struct loom_prefetch_item *items = NULL;
	struct loom_prefetch_stats st;
	loom_prefetch *pf;
	loom_fs *fs;
	size_t n = 0;
	int rc;

	if (argc < 4 || argc > 6) {
		fprintf(stderr, "usage: %s MDS_ADDR MAX_BYTES THREADS [TAKE_ORDER|- [WAIT_FETCHED]] < ITEMS\n",
			argv[0]);
		return 2;
	}
	opts.max_bytes = strtoull(argv[2], NULL, 0);
	opts.threads = (unsigned)strtoul(argv[3], NULL, 0);
	rc = read_items(&items, &n);
	if (rc) {
		fprintf(stderr, "prefetch_check: bad items: %s\n", strerror(-rc));
		return 2;
	}
	rc = loom_connect_with(argv[1], NULL, &fs);
	if (rc) {
		fprintf(stderr, "prefetch_check: connect: %s\n", strerror(-rc));
		return 1;
	}
	rc = loom_prefetch_start(fs, items, n, &opts, &pf);
	if (rc) {
		fprintf(stderr, "prefetch_check: start: %s\n", strerror(-rc));
		loom_disconnect(fs);
		return 1;
	}
	if (argc == 6) {
		uint64_t want = strtoull(argv[5], NULL, 10);
		struct timespec nap = { 0, 1000000 };

		for (int ms = 0; ms < 60000; ms++) {
			loom_prefetch_get_stats(pf, &st);
			if (st.fetched >= want)
				break;
			nanosleep(&nap, NULL);
		}
	}
	if (argc >= 5 && strcmp(argv[4], "-") != 0) {
		for (char *p = argv[4]; *p;) {
			char *end;
			size_t i = strtoull(p, &end, 10);

			if (end == p || take(pf, i) < 0)
				break;
			p = *end == ',' ? end + 1 : end;
		}
	} else {
		for (size_t i = 0; i < n; i++)
			take(pf, i);
	}
	loom_prefetch_get_stats(pf, &st);
	printf("stats fetched=%" PRIu64 " ready=%" PRIu64 " waited=%" PRIu64 " direct=%" PRIu64
	       " dropped=%" PRIu64 " peak=%zu held=%zu\n", st.fetched, st.ready, st.waited, st.direct,
	       st.dropped, st.peak_bytes, st.bytes_held);
	loom_prefetch_stop(pf);
	loom_disconnect(fs);
	for (size_t i = 0; i < n; i++)
		free((void *)items[i].path);
	free(items);
	return 0;
}
