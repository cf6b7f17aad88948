/* loom df: the space (or with -i the inodes) of the MDT and of every OST, in the format of
 * `lfs df`. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "tools/tool.h"

struct df_row {
	uint64_t total, used, avail; /* bytes */
};

static void df_row_of(const struct statvfs *st, struct df_row *r, bool inodes)
{
	if (inodes) {
		/* lfs df -i: Inodes, IUsed, IFree. */
		r->total = st->f_files;
		r->used = st->f_files > st->f_ffree ? st->f_files - st->f_ffree : 0;
		r->avail = st->f_ffree;
		return;
	}
	r->total = (uint64_t)st->f_blocks * st->f_frsize;
	r->used = (uint64_t)(st->f_blocks - st->f_bfree) * st->f_frsize;
	r->avail = (uint64_t)st->f_bavail * st->f_frsize;
}

/* lfs df's flags at a row's end: N no new objects (an OSS's no-create, or deactivated by an
 * administrator), R read-only, S out of space, I out of inodes. "" for none. */
static void df_flags(const struct loom_target *t, char *out, size_t cap)
{
	size_t n = 0;

	out[0] = '\0';
	if (t->flags & (LOOM_TGTF_NOCREATE | LOOM_TGTF_DEACTIVATED))
		out[n++] = 'N';
	if (t->flags & LOOM_TGTF_READONLY)
		out[n++] = 'R';
	if (t->st.f_blocks && t->st.f_bavail == 0)
		out[n++] = 'S';
	if (t->st.f_files && t->st.f_ffree == 0)
		out[n++] = 'I';
	if (n && n + 2 <= cap) {
		memmove(out + 1, out, n);
		out[0] = ' ';
		out[n + 1] = '\0';
	} else {
		out[0] = '\0';
	}
}

static void df_print_inodes(const char *uuid, const struct df_row *r, const char *mnt, const char *flags)
{
	uint64_t p = r->total ? (r->used * 100 + r->total - 1) / r->total : 0;
	char pct[8];

	snprintf(pct, sizeof(pct), "%u%%", (unsigned)p);
	printf("%-20s%12" PRIu64 "%12" PRIu64 "%12" PRIu64 "%6s %s%s\n", uuid, r->total, r->used, r->avail, pct,
	       mnt, flags);
}

static void df_print(const char *uuid, const struct df_row *r, bool human, const char *mnt, const char *flags)
{
	char t[32], u[32], a[32], pct[8];
	uint64_t denom = r->used + r->avail;
	/* df rounds the percentage up */
	unsigned p = denom ? (unsigned)((r->used * 100 + denom - 1) / denom) : 0;

	if (human) {
		size_human(r->total, t, sizeof(t));
		size_human(r->used, u, sizeof(u));
		size_human(r->avail, a, sizeof(a));
	} else {
		snprintf(t, sizeof(t), "%" PRIu64, r->total >> 10);
		snprintf(u, sizeof(u), "%" PRIu64, r->used >> 10);
		snprintf(a, sizeof(a), "%" PRIu64, r->avail >> 10);
	}
	snprintf(pct, sizeof(pct), "%u%%", p);
	printf("%-20s%12s%12s%12s%5s %s%s\n", uuid, t, u, a, pct, mnt, flags);
}

/* What df shows, from the MDS (keyed) or from a mount. */
struct df_data {
	struct loom_target *t;
	uint32_t n;
	struct loom_pool *pools; /* --pool: the pool, else NULL */
	uint32_t npools;
	char fsname[16];
};

static void df_data_free(struct df_data *d)
{
	free(d->t);
	loom_pool_list_free(d->pools);
}

/* "no pool" is the one error worded for the user; the others name what failed. */
static int df_fail(const char *pool, const char *what, int rc)
{
	if (rc == -ENOENT && pool) {
		fprintf(stderr, "loom df: no pool %s\n", pool);
		return 1;
	}
	return tool_fail("df", what, rc);
}

static int df_gather_keyed(struct tool_ctx *ctx, const char *pool, struct df_data *d)
{
	loom_fs *fs = tool_connect(ctx);
	int rc;

	if (!fs)
		return 1;
	snprintf(d->fsname, sizeof(d->fsname), "%s", loom_fsname(fs));
	/* lfs df --pool: the MDT and the pool's OSTs only. */
	rc = pool ? loom_pool_list(fs, pool, &d->pools, &d->npools) : 0;
	if (rc) {
		loom_disconnect(fs);
		return df_fail(pool, "cannot list the pool", rc);
	}
	rc = loom_targets(fs, &d->t, &d->n);
	loom_disconnect(fs);
	return rc ? df_fail(NULL, "cannot list targets", rc) : 0;
}

/* The same through loom-mount's ioctls, for a user without the key. */
static int df_gather_mounted(const char *path, const struct tool_mount *mnt, const char *pool,
			     struct df_data *d)
{
	char fsname[16];
	int rc = pool ? tool_mount_pools(mnt, pool, &d->pools, &d->npools, fsname, sizeof(fsname)) : 0;

	if (rc == 0)
		rc = tool_mount_targets(path, mnt, &d->t, &d->n, d->fsname, sizeof(d->fsname));
	if (rc == -ENOTTY) {
		fprintf(stderr, "loom df: the loom-mount of %s does not answer the tool's ioctls (older than "
				"this tool?), and without the file system key (--key FILE) df cannot ask the MDS\n",
			mnt->mountpoint);
		return 1;
	}
	if (rc)
		return df_fail(pool, d->t || !pool ? "cannot list targets" : "cannot list the pool", rc);
	return 0;
}

int cmd_df(struct tool_ctx *ctx, int argc, char **argv)
{
	struct df_data d = { 0 };
	struct loom_target *t;
	struct df_row sum = { 0 }, r;
	bool human = false, inodes = false;
	const char *pool = NULL;
	struct loom_pool *pools;
	uint32_t npools;
	uint32_t n;
	char uuid[64], row[4200], where[4096], flags[8];
	int c, rc;

	struct tool_mount mnt;
	bool mounted = false;

	optind = 1;
	static const struct option opts[] = {
		{ "human-readable", no_argument, NULL, 'h' }, { "inodes", no_argument, NULL, 'i' },
		{ "pool", required_argument, NULL, 'p' },     { NULL, 0, NULL, 0 },
	};
	while ((c = getopt_long(argc, argv, "hip:", opts, NULL)) != -1) {
		if (c == 'h')
			human = true;
		else if (c == 'i')
			inodes = true;
		else if (c == 'p')
			pool = strchr(optarg, '.') ? strchr(optarg, '.') + 1 : optarg; /* FSNAME.POOL or POOL */
		else
			return 2;
	}
	if (optind < argc) {
		/* `lfs df /mnt/lustre`: the file system mounted there. */
		if (tool_mount_of(argv[optind], &mnt) != 0) {
			fprintf(stderr, "loom df: %s is not on a Loom mount\n", argv[optind]);
			return 1;
		}
		ctx->fs_addr = mnt.mds_addr;
		mounted = true;
	} else if (!ctx->fs_addr && !getenv("LOOM_FS") && tool_first_mount(&mnt) == 0) {
		mounted = true;
	}
	/* Without the key, the mount the path is on answers instead (as `lfs df` asks the mount). */
	if (mounted && !tool_key_usable(ctx))
		rc = df_gather_mounted(optind < argc ? argv[optind] : NULL, &mnt, pool, &d);
	else
		rc = df_gather_keyed(ctx, pool, &d);
	if (rc) {
		df_data_free(&d);
		return rc;
	}
	t = d.t;
	n = d.n;
	pools = d.pools;
	npools = d.npools;
	/* "Mounted on": the mount point, or without a mount the file system as a mount source. */
	if (mounted)
		snprintf(where, sizeof(where), "%s", mnt.mountpoint);
	else
		snprintf(where, sizeof(where), "%s:/%s", t[0].addr, d.fsname);
	if (inodes)
		printf("%-20s%12s%12s%12s%6s %s\n", "UUID", "Inodes", "IUsed", "IFree", "IUse%", "Mounted on");
	else
		printf("%-20s%12s%12s%12s%5s %s\n", "UUID", human ? "bytes" : "1K-blocks", "Used", "Available",
		       "Use%", "Mounted on");
	for (uint32_t i = 0; i < n; i++) {
		bool mdt = t[i].kind == LOOM_TGT_MDT;

		if (pool && !mdt) {
			bool member = false;
			for (uint32_t k = 0; npools && k < pools[0].nosts; k++)
				member |= pools[0].osts[k] == t[i].idx;
			if (!member)
				continue;
		}

		snprintf(uuid, sizeof(uuid), "%s-%s%04x_UUID", d.fsname, mdt ? "MDT" : "OST", t[i].idx);
		if (t[i].flags & LOOM_TGTF_INACTIVE) {
			char name[16];
			snprintf(name, sizeof(name), "%s%04x", mdt ? "MDT" : "OST", t[i].idx);
			printf("%-20s: inactive device\n", name);
			continue;
		}
		df_row_of(&t[i].st, &r, inodes);
		snprintf(row, sizeof(row), "%s[%s:%u]", where, mdt ? "MDT" : "OST", t[i].idx);
		df_flags(&t[i], flags, sizeof(flags));
		if (inodes)
			df_print_inodes(uuid, &r, row, flags);
		else
			df_print(uuid, &r, human, row, flags);
		/* Space sums the OSTs; files are counted by the MDT, which holds one inode each. */
		if (mdt == inodes) {
			sum.total += r.total;
			sum.used += r.used;
			sum.avail += r.avail;
		}
	}
	printf("\n");
	if (inodes)
		df_print_inodes("filesystem_summary:", &sum, where, "");
	else
		df_print("filesystem_summary:", &sum, human, where, "");
	df_data_free(&d);
	return 0;
}
