/*
 * A server's parameters, as Lustre's `lctl get_param` / `set_param` show and set them: each is
 * named TARGET.NAME ("ost.lfs01-OST0002.job_stats", "mdt.lfs01-MDT0000.recovery_status"), read
 * as text, and some can be set at run time ("job_stats=clear", "job_cleanup_interval=300").
 * A server lists its targets and their parameters; GET_PARAM and SET_PARAM (wire.h) take a
 * pattern and are answered from here, and so are the HTTP endpoints that show the same values.
 */
#ifndef LOOM_NET_PARAMS_H
#define LOOM_NET_PARAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/textbuf.h"

struct param_def {
	const char *name;  /* "job_stats" */
	/* Appends the value (its text, a newline after each line). */
	void (*get)(void *ctx, uint32_t target, struct textbuf *tb);
	/* Checks value: 0 if it would be taken, or -EINVAL. NULL: cannot be set (-EACCES). */
	int (*check)(void *ctx, uint32_t target, const char *value);
	/* Takes a value check() accepted. */
	void (*set)(void *ctx, uint32_t target, const char *value);
	bool block; /* printed below its name even when one line (lctl's stats, job_stats) */
};

struct param_target {
	char prefix[64];               /* "ost.lfs01-OST0002" */
	uint32_t target;               /* handed to the defs' functions (an OST index, 0) */
	const struct param_def *defs;
	size_t ndefs;
	void *ctx;
};

/* The text of every parameter whose full name matches pattern (fnmatch), as lctl prints it,
 * appended to tb; *matched gets how many matched (0: nothing appended). */
void params_get(const struct param_target *t, size_t nt, const char *pattern, struct textbuf *tb,
		uint32_t *matched);
/* Sets value on every parameter that matches: 0, -ENOENT (none matched), -EACCES (one cannot be
 * set: none is), -EINVAL (one does not take the value: none is). *matched as params_get's. */
int params_set(const struct param_target *t, size_t nt, const char *pattern, const char *value,
	       uint32_t *matched);

/* The parameters every server has for each target, ctx its struct srv_stats (stats_params.c):
 * stats, job_stats, job_cleanup_interval. */
extern const struct param_def stats_param_defs[3];
/* A param_def check that takes only "clear" (the stats' reset). */
int param_check_clear(void *ctx, uint32_t target, const char *value);

/* Answers GET_PARAM or SET_PARAM req (its body not yet decoded) from the targets' parameters. */
struct srv_req;
void params_answer(struct srv_req *req, const struct param_target *t, size_t nt);

#endif
