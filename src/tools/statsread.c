/*
 * The servers' statistics text (lctl's format, as src/net/stats_render.c writes it) into counters:
 *
 *   ost.lfs01-OST0002.stats=                        <- a block's head: NAME=, value lines below
 *   write                     7 samples [usecs] 31 3306 5120
 *   write_bytes               7 samples [bytes] 4096 1048576 2934464
 *   ost.lfs01-OST0002.job_stats=
 *   job_stats:
 *   - job_id:          train.1000
 *     write_bytes:     { samples: 7, unit: bytes, min: 4096, max: 1048576, sum: 2934464 }
 *     write:           { samples: 7, unit: usecs, min: 31, max: 3306, sum: 5120 }
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/statsread.h"

bool stats_admin_op(const char *name)
{
	static const char *const skip[] = { "get_param", "set_param", "ost_heartbeat", "auth_challenge",
					    "auth_prove", "ping", "ost_register", "repl_pull", NULL };

	for (int i = 0; skip[i]; i++)
		if (!strcmp(name, skip[i]))
			return true;
	return false;
}

/* "ost.lfs01-OST0002.stats=" -> "OST0002": the last '-'-separated part of the name's middle. */
static struct stats_target *target_of(struct stats_reading *r, const char *head, const char *eq)
{
	const char *dot1 = memchr(head, '.', (size_t)(eq - head)), *dot2 = NULL, *dash = NULL;
	char name[48];

	for (const char *p = dot1 ? dot1 + 1 : eq; p < eq; p++) {
		if (*p == '.')
			dot2 = p;
	}
	for (const char *p = dot1 ? dot1 + 1 : eq; dot2 && p < dot2; p++) {
		if (*p == '-')
			dash = p;
	}
	if (!dash || dot2 - dash - 1 <= 0 || dot2 - dash - 1 >= (int)sizeof(name))
		return NULL;
	snprintf(name, sizeof(name), "%.*s", (int)(dot2 - dash - 1), dash + 1);
	for (int i = 0; i < r->nt; i++)
		if (!strcmp(r->t[i].name, name))
			return &r->t[i];
	if (r->nt == STATS_MAX_TARGETS)
		return NULL;
	memset(&r->t[r->nt], 0, sizeof(r->t[0]));
	snprintf(r->t[r->nt].name, sizeof(r->t[0].name), "%s", name);
	return &r->t[r->nt++];
}

static struct stats_job *job_of(struct stats_reading *r, int target, const char *id)
{
	for (int i = 0; i < r->nj; i++)
		if (r->j[i].target == target && !strcmp(r->j[i].id, id))
			return &r->j[i];
	if (r->nj == STATS_MAX_JOBS)
		return NULL;
	memset(&r->j[r->nj], 0, sizeof(r->j[0]));
	snprintf(r->j[r->nj].id, sizeof(r->j[0].id), "%s", id);
	r->j[r->nj].target = target;
	return &r->j[r->nj++];
}

/* A block's head, as `loom get_param` tells them apart: "mdt.X.NAME=" or "ost.X.NAME=" at the
 * start of a line, no space before the '='. Returns the '=' or NULL. */
static const char *block_head(const char *line)
{
	const char *eq = strchr(line, '=');

	if (!eq || eq == line || (line[0] != 'm' && line[0] != 'o'))
		return NULL;
	for (const char *p = line; p < eq; p++)
		if (*p == ' ')
			return NULL;
	return eq;
}

static bool ends_with(const char *s, const char *end, const char *suffix)
{
	size_t n = strlen(suffix);

	return (size_t)(end - s) >= n && !memcmp(end - n, suffix, n);
}

static void stats_line(struct stats_target *t, const char *line)
{
	char name[64], unit[16];
	unsigned long long n, mn, mx, sum;

	if (sscanf(line, "%63s %llu samples [%15[a-z]] %llu %llu %llu", name, &n, unit, &mn, &mx, &sum) != 6)
		return;
	if (!strcmp(name, "read_bytes")) {
		t->rd = sum;
	} else if (!strcmp(name, "write_bytes")) {
		t->wr = sum;
	} else if (!stats_admin_op(name)) {
		t->ops += n;
		if (!strcmp(unit, "usecs")) {
			t->lat_n += n;
			t->lat_us += sum;
		}
	}
}

static void job_line(struct stats_job *j, const char *line)
{
	char what[64];
	unsigned long long n, sum;

	if (sscanf(line, " %63[a-z_]: { samples: %llu, unit: %*[a-z], min: %*u, max: %*u, sum: %llu",
		   what, &n, &sum) != 3)
		return;
	if (!strcmp(what, "read_bytes"))
		j->rd += sum;
	else if (!strcmp(what, "write_bytes"))
		j->wr += sum;
	else
		j->ops += n;
}

void stats_parse(char *text, struct stats_reading *r)
{
	enum { OTHER, STATS, JOBS } in = OTHER;
	struct stats_target *t = NULL;
	struct stats_job *j = NULL;
	char *line, *save = NULL;

	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		const char *eq = block_head(line);
		char id[32];

		if (eq) {
			in = ends_with(line, eq, ".job_stats") ? JOBS : ends_with(line, eq, ".stats") ? STATS : OTHER;
			t = in == OTHER ? NULL : target_of(r, line, eq);
			j = NULL;
			continue;
		}
		if (!t)
			continue;
		if (in == STATS)
			stats_line(t, line);
		else if (sscanf(line, "- job_id: %31s", id) == 1)
			j = job_of(r, (int)(t - r->t), id);
		else if (j)
			job_line(j, line);
	}
}

int stats_read(loom_fs *fs, struct stats_reading *r)
{
	char *text;
	size_t len;
	int rc;

	memset(r, 0, sizeof(*r));
	rc = loom_get_param(fs, "*.stats", &text, &len);
	if (rc)
		return rc;
	stats_parse(text, r);
	free(text);
	rc = loom_get_param(fs, "*.job_stats", &text, &len);
	if (rc)
		return rc == -ENOENT ? 0 : rc;
	stats_parse(text, r);
	free(text);
	return 0;
}

int stats_job_totals(const struct stats_reading *r, struct stats_job *out)
{
	int n = 0;

	for (int i = 0; i < r->nj; i++) {
		int k = 0;

		while (k < n && strcmp(out[k].id, r->j[i].id))
			k++;
		if (k == n) {
			out[n] = r->j[i];
			out[n++].target = -1;
			continue;
		}
		out[k].rd += r->j[i].rd;
		out[k].wr += r->j[i].wr;
		out[k].ops += r->j[i].ops;
	}
	return n;
}

const struct stats_target *stats_target_find(const struct stats_reading *r, const char *name)
{
	for (int i = 0; i < r->nt; i++)
		if (!strcmp(r->t[i].name, name))
			return &r->t[i];
	return NULL;
}
