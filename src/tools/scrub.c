/*
 * loom scrub: have OSSs check their objects against the checksums stored with them.
 *
 *   loom scrub [--wait] [--status] [--paths] OST_INDEX... | --all
 *
 * Each OSS scrubs in the background at a bounded rate (loom-oss --scrub-rate); this command
 * starts the scrubs and reports. Exit status 1 when a bad block was found, or when an OST could
 * not be asked (its objects are not known to be good).
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "tools/tool.h"

#define POLL_MS 200

struct scrub_target {
	uint32_t idx;
	int rc;                        /* of the last call */
	struct loom_scrub_status st;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: loom scrub [--wait] [--status] [--paths] OST_INDEX... | --all\n"
		"Starts a scrub of each OST given (of every OST with --all): its OSS reads every\n"
		"object in the background, at a bounded rate, and checks each 64 KiB block against\n"
		"the checksum stored when it was written. Then prints each OST's scrub status.\n\n"
		"  --all        every OST of the file system\n"
		"  --wait       wait until the scrubs have finished, then report\n"
		"  --status     only report the running or last scrub (start none)\n"
		"  --paths      name the file of each bad object (walks the whole namespace)\n\n"
		"OST_INDEX is a number (3, 0x3) or an OST name (OST0003). Exit status 1 when a bad\n"
		"block was found or an OST could not be asked.\n");
}

static int parse_index(const char *s, uint32_t *out)
{
	unsigned long v;
	char *end;

	if (!strncmp(s, "OST", 3))
		v = strtoul(s + 3, &end, 16), s += 3;
	else
		v = strtoul(s, &end, 0);
	if (end == s || *end || v > UINT32_MAX)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

static const char *state_name(int state)
{
	switch (state) {
	case LOOM_SCRUB_IDLE: return "idle (no scrub since the OSS started)";
	case LOOM_SCRUB_RUNNING: return "running";
	case LOOM_SCRUB_DONE: return "done";
	default: return "unknown";
	}
}

/* A bad object's file, found by walking the namespace (layouts name each object). */
struct path_hunt {
	loom_fs *fs;
	uint32_t ost_idx;
	uint64_t objid;
	char found[4096];
};

static bool hunt(struct path_hunt *h, const char *dir, int depth)
{
	struct loom_dirent de;
	loom_dir *d;
	bool done = false;

	if (depth > 64 || loom_opendir(h->fs, dir, &d) != 0)
		return false;
	while (!done && loom_readdir(d, &de) == 1) {
		char path[4096];

		if (!strcmp(de.name, ".") || !strcmp(de.name, ".."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", strcmp(dir, "/") ? dir : "", de.name);
		if (de.type == DT_DIR) {
			done = hunt(h, path, depth + 1);
		} else if (de.type == DT_REG) {
			struct loom_layout *l;

			if (loom_getlayout(h->fs, path, &l) != 0)
				continue;
			for (uint32_t i = 0; i < l->nobjs && !done; i++)
				if (l->objs[i].ost_idx == h->ost_idx && l->objs[i].objid == h->objid) {
					snprintf(h->found, sizeof(h->found), "%s", path);
					done = true;
				}
			loom_layout_free(l);
		}
	}
	loom_closedir(d);
	return done;
}

static const char *plural(uint64_t n)
{
	return n == 1 ? "" : "s";
}

static void report(loom_fs *fs, const struct scrub_target *t, bool paths)
{
	const struct loom_scrub_status *st = &t->st;
	char bytes[32], took[32] = "";

	if (t->rc) {
		const char *why = strerror(-t->rc);

		if (t->rc == -EIO)
			why = "its OSS cannot be reached";
		else if (t->rc == -ECANCELED)
			why = "its OSS restarted during the scrub";
		printf("OST%04x: cannot scrub: %s\n", t->idx, why);
		return;
	}
	if (st->state == LOOM_SCRUB_IDLE) {
		printf("OST%04x: %s\n", t->idx, state_name(st->state));
		return;
	}
	size_human(st->bytes_checked, bytes, sizeof(bytes));
	if (st->state == LOOM_SCRUB_DONE && st->finish_time >= st->start_time)
		snprintf(took, sizeof(took), " in %llds", (long long)(st->finish_time - st->start_time));
	else if (st->state == LOOM_SCRUB_RUNNING)
		snprintf(took, sizeof(took), " for %llds", (long long)(time(NULL) - st->start_time));
	printf("OST%04x: %s%s: %" PRIu64 " object%s, %s (%" PRIu64 " block%s checked, %" PRIu64
	       " without checksums), %" PRIu64 " bad block%s in %" PRIu64 " object%s",
	       t->idx, state_name(st->state), took, st->objects_checked, plural(st->objects_checked),
	       bytes, st->blocks_checked, plural(st->blocks_checked), st->blocks_unchecked,
	       st->bad_blocks, plural(st->bad_blocks), st->bad_objects, plural(st->bad_objects));
	if (st->error)
		printf(", ended early: %s", strerror(-st->error));
	printf("\n");
	for (uint32_t i = 0; i < st->nbad; i++) {
		printf("OST%04x: bad object %#" PRIx64, t->idx, st->bad_objids[i]);
		if (paths) {
			struct path_hunt h = { .fs = fs, .ost_idx = t->idx, .objid = st->bad_objids[i] };
			if (hunt(&h, "/", 0))
				printf(" (file %s)", h.found);
			else
				printf(" (in no file)");
		}
		printf("\n");
	}
	if (st->bad_objects > st->nbad)
		printf("OST%04x: ... and %" PRIu64 " more bad objects (see the OSS's log)\n", t->idx,
		       st->bad_objects - st->nbad);
}

int cmd_scrub(struct tool_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "all", no_argument, NULL, 'a' },    { "wait", no_argument, NULL, 'w' },
		{ "status", no_argument, NULL, 's' }, { "paths", no_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },   { NULL, 0, NULL, 0 },
	};
	bool all = false, wait = false, status_only = false, paths = false, bad = false;
	struct scrub_target *t = NULL;
	uint32_t n = 0;
	loom_fs *fs;
	int c, rc = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'a': all = true; break;
		case 'w': wait = true; break;
		case 's': status_only = true; break;
		case 'p': paths = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (all == (optind < argc)) {
		usage(stderr);
		return 2;
	}
	if (!all) {
		t = calloc((size_t)(argc - optind), sizeof(*t));
		if (!t)
			return tool_fail("scrub", "out of memory", -ENOMEM);
		for (int i = optind; i < argc; i++, n++)
			if (parse_index(argv[i], &t[n].idx)) {
				fprintf(stderr, "loom scrub: '%s' is not an OST index\n", argv[i]);
				free(t);
				return 2;
			}
	}
	fs = tool_connect(ctx);
	if (!fs) {
		free(t);
		return 1;
	}
	if (all) {
		struct loom_target *tg;
		uint32_t ntg;

		rc = loom_targets(fs, &tg, &ntg);
		if (rc) {
			loom_disconnect(fs);
			return tool_fail("scrub", "cannot list the OSTs", rc);
		}
		t = calloc(ntg ? ntg : 1, sizeof(*t));
		for (uint32_t i = 0; t && i < ntg; i++)
			if (tg[i].kind == LOOM_TGT_OST)
				t[n++].idx = tg[i].idx;
		free(tg);
		if (!t) {
			loom_disconnect(fs);
			return tool_fail("scrub", "out of memory", -ENOMEM);
		}
	}

	for (uint32_t i = 0; i < n; i++)
		t[i].rc = loom_ost_scrub(fs, t[i].idx, status_only ? LOOM_SCRUB_STATUS : LOOM_SCRUB_START,
					 &t[i].st);
	for (bool running = wait; running;) {
		running = false;
		for (uint32_t i = 0; i < n; i++)
			if (t[i].rc == 0 && t[i].st.state == LOOM_SCRUB_RUNNING) {
				t[i].rc = loom_ost_scrub(fs, t[i].idx, LOOM_SCRUB_STATUS, &t[i].st);
				running |= t[i].rc == 0 && t[i].st.state == LOOM_SCRUB_RUNNING;
			}
		if (running)
			usleep(POLL_MS * 1000);
	}
	for (uint32_t i = 0; i < n; i++) {
		/* Started, then idle: the OSS restarted and the scrub is lost, nothing was verified. */
		if (!status_only && t[i].rc == 0 && t[i].st.state == LOOM_SCRUB_IDLE)
			t[i].rc = -ECANCELED;
		report(fs, &t[i], paths);
		bad |= t[i].rc != 0 || t[i].st.bad_blocks > 0 || t[i].st.bad_objects > 0;
	}
	free(t);
	loom_disconnect(fs);
	return bad ? 1 : 0;
}
