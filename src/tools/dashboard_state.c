/*
 * loom dashboard: one poll's text (loom_get_param of "*": every parameter of the MDS and of every
 * OST that answered) into the dashboard's state: the targets with their space and state, a sample
 * of rates for the charts, the jobs, the MDS's recovery.
 *
 * Rates are differences between this reading and the previous one, per target, over the targets
 * that answered both times: a server that stops answering takes its counters out of the sums,
 * and one that comes back brings them all in again; summed over whoever answered, either would
 * show as a spike (a fall read as a counter cleared, a return as everything at once). A job's
 * totals, though, keep a silent target's last figures (merge_known).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/dashboard.h"

int dash_state_init(struct dash_state *s, double interval, const char *fsname, const char *mds)
{
	memset(s, 0, sizeof(*s));
	s->interval = interval;
	s->cap = (unsigned)ceil(DASH_WINDOW_S / interval);
	if (s->cap < 2)
		s->cap = 2;
	s->ring = calloc(s->cap, sizeof(*s->ring));
	s->jobs = calloc(2 * DASH_MAX_JOBS, sizeof(*s->jobs)); /* the second half: the next poll's */
	s->prev = calloc(1, sizeof(*s->prev));
	s->cur = calloc(1, sizeof(*s->cur));
	s->known = calloc(1, sizeof(*s->known));
	s->merge = calloc(1, sizeof(*s->merge));
	if (!s->ring || !s->jobs || !s->prev || !s->cur || !s->known || !s->merge) {
		dash_state_free(s);
		return -ENOMEM;
	}
	pthread_mutex_init(&s->lock, NULL);
	snprintf(s->fsname, sizeof(s->fsname), "%s", fsname);
	snprintf(s->mds, sizeof(s->mds), "%s", mds);
	s->clients = -1;
	/* The MDT is there from the start: DOWN until its server answers. */
	snprintf(s->t[0].name, sizeof(s->t[0].name), "MDT0000");
	s->t[0].listed = true;
	s->t[0].rd_Bps = s->t[0].wr_Bps = s->t[0].ops_s = NAN;
	s->nt = 1;
	return 0;
}

void dash_state_free(struct dash_state *s)
{
	if (s->ring)
		pthread_mutex_destroy(&s->lock);
	free(s->ring);
	free(s->jobs);
	free(s->prev);
	free(s->cur);
	free(s->known);
	free(s->merge);
	memset(s, 0, sizeof(*s));
}

static void push_sample(struct dash_state *s, const struct dash_sample *x)
{
	s->ring[(s->head + s->n) % s->cap] = *x;
	if (s->n < s->cap)
		s->n++;
	else
		s->head = (s->head + 1) % s->cap;
}

static struct dash_target *target_get(struct dash_state *s, const char *name)
{
	struct dash_target *t;

	for (int i = 0; i < s->nt; i++)
		if (!strcmp(s->t[i].name, name))
			return &s->t[i];
	if (s->nt == STATS_MAX_TARGETS || strlen(name) != 7 ||
	    (strncmp(name, "OST", 3) && strncmp(name, "MDT", 3)))
		return NULL;
	t = &s->t[s->nt++];
	memset(t, 0, sizeof(*t));
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->ost = name[0] == 'O';
	t->idx = (uint32_t)strtoul(name + 3, NULL, 16);
	t->rd_Bps = t->wr_Bps = t->ops_s = NAN;
	return t;
}

/* "ost.lfs01-OST0002.kbytesfree=123": the target ("OST0002") and the parameter ("kbytesfree");
 * false for a line that is not a parameter's head. */
static bool param_head(const char *line, char *target, size_t tcap, char *param, size_t pcap,
		       const char **value)
{
	const char *eq = strchr(line, '='), *dot1, *dot2 = NULL, *dash = NULL;

	if (!eq || (line[0] != 'm' && line[0] != 'o') || memchr(line, ' ', (size_t)(eq - line)))
		return false;
	dot1 = memchr(line, '.', (size_t)(eq - line));
	for (const char *p = dot1 ? dot1 + 1 : eq; p < eq; p++)
		if (*p == '.')
			dot2 = p;
	for (const char *p = dot1 ? dot1 + 1 : eq; dot2 && p < dot2; p++)
		if (*p == '-')
			dash = p;
	if (!dash)
		return false;
	snprintf(target, tcap, "%.*s", (int)(dot2 - dash - 1), dash + 1);
	snprintf(param, pcap, "%.*s", (int)(eq - dot2 - 1), dot2 + 1);
	*value = eq + 1;
	return true;
}

static void recovery_line(struct dash_state *s, const char *line)
{
	char key[32], val[64];

	if (s->nrec < DASH_RECOVERY_KEYS && sscanf(line, " %31[a-z_]: %63[^\n]", key, val) == 2) {
		snprintf(s->rec_key[s->nrec], sizeof(s->rec_key[0]), "%s", key);
		snprintf(s->rec_val[s->nrec], sizeof(s->rec_val[0]), "%s", val);
		s->nrec++;
		s->have_recovery = true;
	}
}

/* The parameters other than the statistics: space, the MDS's OST table, recovery, clients. */
static void read_params(struct dash_state *s, char *text)
{
	enum { OTHER, OSTS, RECOVERY } in = OTHER;
	char *line, *save = NULL;

	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char tname[16], param[48];
		const char *val;
		struct dash_target *t;
		unsigned idx;
		char uuid[40], state[16];

		if (!param_head(line, tname, sizeof(tname), param, sizeof(param), &val)) {
			if (in == OSTS && sscanf(line, "%u: %39s %15s", &idx, uuid, state) == 3) {
				char name[16];

				snprintf(name, sizeof(name), "OST%04x", idx);
				t = target_get(s, name);
				if (t) {
					t->listed = true;
					t->inactive = !strcmp(state, "INACTIVE");
					snprintf(t->uuid, sizeof(t->uuid), "%s", uuid);
				}
			} else if (in == RECOVERY) {
				recovery_line(s, line);
			}
			continue;
		}
		in = OTHER;
		t = target_get(s, tname);
		if (!t)
			continue;
		t->answered = true;
		if (!strcmp(param, "target_obd")) {
			in = OSTS;
		} else if (!strcmp(param, "recovery_status")) {
			in = RECOVERY;
			recovery_line(s, val);
		} else if (!strcmp(param, "num_exports")) {
			s->clients = strtoll(val, NULL, 10);
		} else if (!strcmp(param, "uuid")) {
			snprintf(t->uuid, sizeof(t->uuid), "%s", val);
		} else if (!strcmp(param, "kbytestotal")) {
			t->kb_total = strtoull(val, NULL, 10);
			t->have_space = true;
		} else if (!strcmp(param, "kbytesfree")) {
			t->kb_free = strtoull(val, NULL, 10);
		} else if (!strcmp(param, "kbytesavail")) {
			t->kb_avail = strtoull(val, NULL, 10);
		} else if (!strcmp(param, "filestotal")) {
			t->files_total = strtoull(val, NULL, 10);
		} else if (!strcmp(param, "filesfree")) {
			t->files_free = strtoull(val, NULL, 10);
		}
	}
}

static int target_cmp(const void *a, const void *b)
{
	const struct dash_target *x = a, *y = b;

	if (x->ost != y->ost)
		return x->ost ? 1 : -1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* The previous reading's pair (target, job) of cur's pair j, or NULL; *known: whether the
 * target answered then (without, nothing of it can be told apart from its whole history). */
static const struct stats_job *prev_pair(const struct stats_reading *prev, const struct stats_reading *cur,
					 const struct stats_job *j, bool *known)
{
	const struct stats_target *pt = stats_target_find(prev, cur->t[j->target].name);

	*known = pt != NULL;
	for (int k = 0; pt && k < prev->nj; k++)
		if (prev->j[k].target == (int)(pt - prev->t) && !strcmp(prev->j[k].id, j->id))
			return &prev->j[k];
	return NULL;
}

/*
 * known = this reading, and of every target the MDS still lists that did not answer, its last
 * known counters: a job's totals do not fall when an OSS dies (its bytes were moved all the
 * same). Its counters come back with it (from 0 if it restarted: then, as `loom jobstats`, the
 * totals no longer hold what it counted before).
 */
static void merge_known(struct dash_state *s)
{
	struct stats_reading *m = s->merge, *k = s->known;

	*m = *s->cur;
	for (int i = 0; i < k->nt; i++) {
		const struct dash_target *t = NULL;
		int ti = m->nt;

		for (int q = 0; q < s->nt && !t; q++)
			if (!strcmp(s->t[q].name, k->t[i].name))
				t = &s->t[q];
		if (!t || !t->listed || stats_target_find(m, k->t[i].name) || m->nt == STATS_MAX_TARGETS)
			continue;
		m->t[m->nt++] = k->t[i];
		for (int j = 0; j < k->nj && m->nj < STATS_MAX_JOBS; j++) {
			if (k->j[j].target == i) {
				m->j[m->nj] = k->j[j];
				m->j[m->nj++].target = ti;
			}
		}
	}
	s->merge = k;
	s->known = m;
}

static void minute_add(struct dash_job *j, long long sec, unsigned long long rd, unsigned long long wr)
{
	int k = (int)(sec % DASH_MINUTE);

	if (j->sec[k] != sec) {
		j->sec[k] = sec;
		j->min_rd[k] = j->min_wr[k] = 0;
	}
	j->min_rd[k] += rd;
	j->min_wr[k] += wr;
}

/* The jobs of this reading: totals, the interval's rates, the minute's bytes (kept per id). */
static void update_jobs(struct dash_state *s, double secs, int64_t now_ms)
{
	static struct stats_job tot[STATS_MAX_JOBS], moved[STATS_MAX_JOBS]; /* the poller's only */
	struct dash_job *old = s->jobs, *next = s->jobs + DASH_MAX_JOBS;
	int n = stats_job_totals(s->known, tot), nn = 0; /* every id of cur's is there */

	memset(moved, 0, sizeof(moved[0]) * (size_t)n);
	for (int i = 0; s->have_prev && i < s->cur->nj; i++) {
		const struct stats_job *j = &s->cur->j[i], *p;
		bool known;
		int k = 0;

		p = prev_pair(s->prev, s->cur, j, &known);
		if (!known)
			continue;
		while (k < n && strcmp(tot[k].id, j->id))
			k++;
		moved[k].rd += stats_delta(j->rd, p ? p->rd : 0);
		moved[k].wr += stats_delta(j->wr, p ? p->wr : 0);
		moved[k].ops += stats_delta(j->ops, p ? p->ops : 0);
	}
	for (int k = 0; k < n && nn < DASH_MAX_JOBS; k++) {
		struct dash_job *d = &next[nn++];
		int o = 0;

		while (o < s->nj && strcmp(old[o].id, tot[k].id))
			o++;
		if (o < s->nj) {
			*d = old[o];
		} else {
			memset(d, 0, sizeof(*d));
			for (int q = 0; q < DASH_MINUTE; q++)
				d->sec[q] = -1;
			snprintf(d->id, sizeof(d->id), "%s", tot[k].id);
		}
		d->rd = tot[k].rd;
		d->wr = tot[k].wr;
		d->ops = tot[k].ops;
		d->rd_Bps = s->have_prev ? (double)moved[k].rd / secs : NAN;
		d->wr_Bps = s->have_prev ? (double)moved[k].wr / secs : NAN;
		d->ops_s = s->have_prev ? (double)moved[k].ops / secs : NAN;
		minute_add(d, now_ms / 1000, moved[k].rd, moved[k].wr);
	}
	memcpy(old, next, sizeof(*old) * (size_t)nn);
	s->nj = nn;
}

void dash_state_update(struct dash_state *s, char *text, int err, int64_t now_ms, double mono)
{
	struct dash_sample x = { .t_ms = now_ms, .ops_s = NAN, .rd_Bps = NAN, .wr_Bps = NAN,
				 .lat_mdt_us = NAN, .lat_ost_us = NAN };
	char *copy = text ? strdup(text) : NULL;
	unsigned long long lat_n[2] = { 0, 0 }, lat_us[2] = { 0, 0 }, ops = 0, rd = 0, wr = 0;
	double secs = mono - s->prev_mono;

	pthread_mutex_lock(&s->lock);
	if (!text || !copy) {
		snprintf(s->error, sizeof(s->error), "reading the servers' parameters: %s",
			 strerror(text ? ENOMEM : (err < 0 ? -err : err)));
		for (int i = 0; i < s->nt; i++) {
			s->t[i].answered = false;
			s->t[i].rd_Bps = s->t[i].wr_Bps = s->t[i].ops_s = NAN;
		}
		push_sample(s, &x); /* a gap in the charts */
		goto out;
	}
	s->error[0] = '\0';
	memset(s->cur, 0, sizeof(*s->cur));
	stats_parse(copy, s->cur);
	for (int i = 0; i < s->nt; i++) {
		s->t[i].answered = false;
		s->t[i].listed = !s->t[i].ost; /* the OSTs: as the MDS's table says, below */
	}
	s->have_recovery = false;
	s->nrec = 0;
	s->clients = -1;
	read_params(s, text);
	/* An OST neither the MDS lists nor anyone answers for was removed: it leaves the page. */
	for (int i = 0; i < s->nt; i++) {
		if (s->t[i].ost && !s->t[i].listed && !s->t[i].answered)
			s->t[i--] = s->t[--s->nt];
	}
	qsort(s->t, (size_t)s->nt, sizeof(s->t[0]), target_cmp);

	for (int i = 0; i < s->nt; i++) {
		struct dash_target *t = &s->t[i];
		const struct stats_target *c = stats_target_find(s->cur, t->name);
		const struct stats_target *p = s->have_prev ? stats_target_find(s->prev, t->name) : NULL;
		unsigned long long dops, drd, dwr;

		t->rd_Bps = t->wr_Bps = t->ops_s = NAN;
		if (!c || !p || secs <= 0)
			continue;
		dops = stats_delta(c->ops, p->ops);
		drd = stats_delta(c->rd, p->rd);
		dwr = stats_delta(c->wr, p->wr);
		t->ops_s = (double)dops / secs;
		t->rd_Bps = (double)drd / secs;
		t->wr_Bps = (double)dwr / secs;
		ops += dops;
		rd += drd;
		wr += dwr;
		lat_n[t->ost] += stats_delta(c->lat_n, p->lat_n);
		lat_us[t->ost] += stats_delta(c->lat_us, p->lat_us);
	}
	if (s->have_prev && secs > 0) {
		x.ops_s = (double)ops / secs;
		x.rd_Bps = (double)rd / secs;
		x.wr_Bps = (double)wr / secs;
		x.lat_mdt_us = lat_n[0] ? (double)lat_us[0] / (double)lat_n[0] : NAN;
		x.lat_ost_us = lat_n[1] ? (double)lat_us[1] / (double)lat_n[1] : NAN;
		push_sample(s, &x);
	}
	merge_known(s);
	update_jobs(s, secs, now_ms);
	{
		struct stats_reading *r = s->prev;

		s->prev = s->cur;
		s->cur = r;
	}
	s->have_prev = true;
	s->prev_mono = mono;
	s->updated_ms = now_ms;
out:
	pthread_mutex_unlock(&s->lock);
	free(copy);
}
