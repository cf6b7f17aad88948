/*
 * A tiny test harness: CHECK* record a failure and go on, REQUIRE* stop the program (for checks
 * the rest of a test depends on). A test binary runs its tests with RUN() and ends with
 * check_report(), which gives main's exit status.
 */
#ifndef LOOM_TEST_CHECK_H
#define LOOM_TEST_CHECK_H

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern int check_failures;
extern const char *check_current;

static inline const char *check_errname(long long rc)
{
	static char buf[64];

	if (rc == 0)
		return "0";
	if (rc < 0 && rc > -4096)
		snprintf(buf, sizeof(buf), "%lld (%s)", rc, strerror((int)-rc));
	else
		snprintf(buf, sizeof(buf), "%lld", rc);
	return buf;
}

#define CHECK_FAIL_(...)                                                                   \
	do {                                                                                \
		fprintf(stderr, "%s:%d: [%s] ", __FILE__, __LINE__, check_current);        \
		fprintf(stderr, __VA_ARGS__);                                               \
		fputc('\n', stderr);                                                        \
		check_failures++;                                                           \
	} while (0)

#define CHECK(cond)                                                                        \
	do {                                                                                \
		if (!(cond))                                                                \
			CHECK_FAIL_("CHECK(%s) failed", #cond);                             \
	} while (0)

/* Integers of any signedness, compared as 64-bit values. */
#define CHECK_EQ(a, b)                                                                     \
	do {                                                                                \
		long long va_ = (long long)(a), vb_ = (long long)(b);                      \
		if (va_ != vb_)                                                             \
			CHECK_FAIL_("%s == %s: %lld != %lld", #a, #b, va_, vb_);           \
	} while (0)

/* A call's return code against the one expected, errno names printed on a mismatch. */
#define CHECK_RC(expr, want)                                                               \
	do {                                                                                \
		long long rc_ = (long long)(expr), want_ = (long long)(want);              \
		if (rc_ != want_) {                                                         \
			char got_[64];                                                      \
			snprintf(got_, sizeof(got_), "%s", check_errname(rc_));            \
			CHECK_FAIL_("%s: got %s, want %s", #expr, got_, check_errname(want_)); \
		}                                                                           \
	} while (0)

#define REQUIRE(cond)                                                                      \
	do {                                                                                \
		if (!(cond)) {                                                              \
			CHECK_FAIL_("REQUIRE(%s) failed", #cond);                           \
			exit(1);                                                            \
		}                                                                           \
	} while (0)

#define REQUIRE_RC(expr, want)                                                             \
	do {                                                                                \
		int before_ = check_failures;                                               \
		CHECK_RC(expr, want);                                                       \
		if (check_failures != before_)                                              \
			exit(1);                                                            \
	} while (0)

#define RUN(fn)                                                                            \
	do {                                                                                \
		int before_ = check_failures;                                               \
		check_current = #fn;                                                        \
		fn();                                                                       \
		fprintf(stderr, "%-4s %s\n", check_failures == before_ ? "ok" : "FAIL", #fn); \
	} while (0)

/* n bytes from the 2n hex digits at s (a test's vectors). */
static inline void check_unhex(const char *s, uint8_t *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned v = 0;

		sscanf(s + 2 * i, "%2x", &v);
		out[i] = (uint8_t)v;
	}
}

static inline int check_report(void)
{
	if (check_failures)
		fprintf(stderr, "%d check(s) failed\n", check_failures);
	return check_failures ? 1 : 0;
}

#endif
