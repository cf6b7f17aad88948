/*
 * loom dashboard: a web page of the file system, live. Every interval, one loom_get_param of "*"
 * (every parameter of the MDS and of every OST: statistics, job statistics, space, the MDS's OST
 * table, recovery) goes into the state of dashboard_state.c, which keeps the last 10 minutes;
 * an HTTP server (net/http.c) answers with the page and /api/status (dashboard_json.c).
 *
 * Two threads: this one polls (the only user of the loom_fs), libmicrohttpd's answers; they
 * share the state under its lock, held while a reading is applied or the JSON written, never
 * across a request to the servers. A server that hangs stalls the polls, not the page: it shows
 * the last reading, with its time.
 *
 * The page's files are compiled in (dashboard_assets.c, made by scripts/web_embed.py from web/
 * when the build found npm: meson's -Ddashboard option); the installed loom needs no files and
 * the page fetches nothing from elsewhere. A loom built without them says so and exits 1.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "net/http.h"
#include "tools/dashboard.h"
#include "tools/tool.h"

static volatile sig_atomic_t dash_stop;

static void on_stop(int sig)
{
	(void)sig;
	dash_stop = 1;
}

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const struct dash_asset *asset_of(const char *path)
{
	if (!strcmp(path, "/"))
		path = "/index.html";
	for (size_t i = 0; i < dash_nassets; i++)
		if (!strcmp(dash_assets[i].path, path))
			return &dash_assets[i];
	return NULL;
}

static int dash_handler(const char *path, void *conn_ctx, struct http_answer *ans, void *arg)
{
	struct dash_state *s = arg;
	const struct dash_asset *a;
	int rc;

	(void)conn_ctx;
	if (!strcmp(path, "/api/status")) {
		rc = dash_status_json(s, wall_ms(), &ans->body, &ans->len);
		if (rc)
			return rc;
		ans->status = 200;
		ans->content_type = "application/json";
		return 0;
	}
	a = asset_of(path);
	if (!a) {
		static const char nf[] = "not found: the dashboard serves /, its files and /api/status\n";

		ans->status = 404;
		ans->body = strdup(nf);
		ans->len = ans->body ? sizeof(nf) - 1 : 0;
		return 0;
	}
	/* The module frees the body: a copy (the asset is static). */
	ans->body = malloc(a->len ? a->len : 1);
	if (!ans->body)
		return -ENOMEM;
	memcpy(ans->body, a->data, a->len);
	ans->len = a->len;
	ans->status = 200;
	ans->content_type = a->type;
	return 0;
}

/* Sleeps until `until` (CLOCK_MONOTONIC seconds) or a signal to stop. */
static void nap_until(double until)
{
	for (double left = until - mono_s(); left > 0 && !dash_stop; left = until - mono_s()) {
		struct timespec ts = { (time_t)left, (long)((left - (double)(time_t)left) * 1e9) };

		nanosleep(&ts, NULL);
	}
}

static void dash_poll(loom_fs *fs, struct dash_state *s)
{
	double next = mono_s();

	while (!dash_stop) {
		char *text = NULL;
		size_t len;
		int rc = loom_get_param(fs, "*", &text, &len);

		dash_state_update(s, rc ? NULL : text, rc, wall_ms(), mono_s());
		free(text);
		/* On the interval's grid; a poll that took longer than one starts the next at once. */
		next += s->interval;
		if (next < mono_s())
			next = mono_s();
		nap_until(next);
	}
}

static void dash_usage(FILE *f)
{
	fprintf(f, "usage: loom dashboard [--http HOST:PORT] [-i SECONDS]\n"
		   "A web page of the file system, live: every target's fill and state, read and write\n"
		   "MiB/s, requests/s and mean latency over the last 10 minutes, the busiest jobs, the\n"
		   "MDS's recovery; /api/status the same as JSON. Polls the servers every SECONDS (1),\n"
		   "serves on HOST:PORT (127.0.0.1:8080; port 0: any free one) until interrupted, and\n"
		   "says where on its first line.\n");
}

int cmd_dashboard(struct tool_ctx *ctx, int argc, char **argv)
{
	static const struct option longs[] = {
		{ "http", required_argument, NULL, 'H' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *listen = "127.0.0.1:8080", *mds;
	struct dash_state *s = NULL;
	struct http_srv *srv = NULL;
	double interval = 1.0;
	char host[64], *end;
	uint16_t port;
	loom_fs *fs;
	int c, rc;

	optind = 1;
	while ((c = getopt_long(argc, argv, "i:h", longs, NULL)) != -1) {
		switch (c) {
		case 'H': listen = optarg; break;
		case 'i':
			interval = strtod(optarg, &end);
			if (end == optarg || *end)
				interval = -1;
			break;
		case 'h': dash_usage(stdout); return 0;
		default: dash_usage(stderr); return 2;
		}
	}
	if (!(interval >= 0.1 && interval <= 60) || optind != argc) {
		dash_usage(stderr);
		return 2;
	}
	if (http_addr_parse(listen, host, sizeof(host), &port)) {
		fprintf(stderr, "loom dashboard: --http %s: not HOST:PORT with a numeric IPv4 host\n", listen);
		return 2;
	}
	if (!dash_nassets) {
		fprintf(stderr, "loom dashboard: this loom was built without the dashboard's web front end: "
				"%s. Build Loom with Node.js and npm installed (meson -Ddashboard=enabled; "
				"scripts/deps.sh installs them).\n", dash_assets_missing);
		return 1;
	}
	fs = tool_connect_untagged(ctx);
	if (!fs)
		return 1;
	mds = ctx->fs_addr ? ctx->fs_addr : getenv("LOOM_FS") ? getenv("LOOM_FS") : ctx->addr_buf;
	s = malloc(sizeof(*s));
	rc = s ? dash_state_init(s, interval, loom_fsname(fs), mds) : -ENOMEM;
	if (rc) {
		free(s);
		loom_disconnect(fs);
		return tool_fail("dashboard", "starting", rc);
	}
	s->started_ms = wall_ms();
	/* The first reading before the port opens: the page never starts with nothing known. */
	{
		char *text = NULL;
		size_t len;
		int grc = loom_get_param(fs, "*", &text, &len);

		dash_state_update(s, grc ? NULL : text, grc, wall_ms(), mono_s());
		free(text);
	}
	rc = http_start("dashboard", host, port, dash_handler, s, &srv);
	if (rc) {
		fprintf(stderr, "loom dashboard: cannot serve on %s: %s\n", listen, strerror(-rc));
		rc = 1;
		goto out;
	}
	signal(SIGINT, on_stop);
	signal(SIGTERM, on_stop);
	printf("dashboard on http://%s:%u/\n", host, http_port(srv));
	fflush(stdout);
	nap_until(mono_s() + interval);
	dash_poll(fs, s);
	rc = 0;
out:
	http_stop(srv); /* before the state goes: a request may be reading it */
	loom_disconnect(fs);
	dash_state_free(s);
	free(s);
	return rc;
}
