/* The log's rate limiter (struct log_limit): one line a second of a kind, and the count of the
 * rest told once that second is over, folded into the next line or on its own. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "common/log.h"

int check_failures;
const char *check_current = "";

#define SEC 1000000000ull

static FILE *captured;

/* What was logged since the last call, stderr being a temporary file. */
static void take_log(char *buf, size_t cap)
{
	size_t n;

	fflush(stderr);
	rewind(captured);
	n = fread(buf, 1, cap - 1, captured);
	buf[n] = '\0';
	rewind(captured);
	if (ftruncate(fileno(captured), 0) != 0)
		CHECK_FAIL_("ftruncate: %s", strerror(errno));
}

static int count(const char *text, const char *what)
{
	int n = 0;

	for (const char *p = text; (p = strstr(p, what)); p += strlen(what))
		n++;
	return n;
}

static void test_limit(void)
{
	struct log_limit l;
	uint64_t t0 = 5 * SEC;
	char out[8192];

	log_limit_init(&l, LOG_WARN, "test: refusals");
	CHECK_EQ(log_limit_flush(&l, t0), 0); /* nothing held: nothing to wake for */

	/* 1000 in one burst: one line, then the count once the second is over. */
	for (int i = 0; i < 1000; i++)
		log_limited(&l, t0 + (uint64_t)i * 1000, "refused %d", i);
	take_log(out, sizeof(out));
	CHECK_EQ(count(out, "\n"), 1);
	CHECK(strstr(out, "WARN: refused 0\n"));
	CHECK_EQ(log_limit_flush(&l, t0 + SEC / 2), t0 + SEC);
	take_log(out, sizeof(out));
	CHECK_EQ(out[0], '\0');
	CHECK_EQ(log_limit_flush(&l, t0 + SEC), 0);
	take_log(out, sizeof(out));
	CHECK(strstr(out, "WARN: test: refusals: 999 more like it in the last second\n"));
	CHECK_EQ(count(out, "\n"), 1);

	/* The summary was that second's line: the next one within it is held, and folded into
	 * the line after it. */
	log_limited(&l, t0 + SEC + SEC / 5, "refused again");
	take_log(out, sizeof(out));
	CHECK_EQ(out[0], '\0');
	log_limited(&l, t0 + 3 * SEC, "refused later");
	take_log(out, sizeof(out));
	CHECK(strstr(out, "WARN: refused later (and 1 more like it in the last second)\n"));
	CHECK_EQ(count(out, "\n"), 1);
	CHECK_EQ(log_limit_flush(&l, t0 + 10 * SEC), 0);

	/* At exit, what is held is told whatever the time. */
	log_limited(&l, t0 + 10 * SEC, "x");
	log_limited(&l, t0 + 10 * SEC, "y");
	log_limit_flush(&l, UINT64_MAX);
	take_log(out, sizeof(out));
	CHECK(strstr(out, "refusals: 1 more like it"));

	/* Below the log level: nothing, and nothing held. */
	log_limit_init(&l, LOG_DEBUG, "test: quiet");
	log_limited(&l, t0, "hidden");
	log_limited(&l, t0, "hidden");
	CHECK_EQ(log_limit_flush(&l, t0 + 2 * SEC), 0);
	take_log(out, sizeof(out));
	CHECK_EQ(out[0], '\0');
}

int main(void)
{
	int saved = dup(STDERR_FILENO);

	log_init("test_log", LOG_INFO);
	captured = tmpfile();
	REQUIRE(captured && saved >= 0);
	REQUIRE(dup2(fileno(captured), STDERR_FILENO) == STDERR_FILENO);
	test_limit();
	dup2(saved, STDERR_FILENO);
	fprintf(stderr, "%s test_limit\n", check_failures ? "FAIL" : "ok  ");
	return check_report();
}
