/*
 * Where new stripes go, as an administrator steers it.
 * - loom ost deactivate|activate IDX...: takes OSTs out of (or back into) the placement of new
 *   stripes, as Lustre's `lctl --device ... deactivate` on the MDS. Files already on them stay
 *   readable and writable, so an OST can be drained before it is retired. The MDS keeps the
 *   state across restarts; `loom df` marks such an OST with N.
 * - loom ost remove [--force] [--dryrun] IDX: retires an OST for good, as Lustre's `lctl --device
 *   MGS del_ost --target FSNAME-OSTxxxx [--dryrun]`, but only once no file has objects there
 *   (EBUSY, with the count and how to drain it) unless --force. Replacing a failed disk is
 *   loom-oss's: `loom-oss --format --index N --replace` (mkfs.lustre --replace).
 * - loom pool new|destroy|add|remove|list: OST pools, as Lustre's `lctl pool_*`; `setstripe -p
 *   POOL` stripes a directory's new files over the pool's OSTs only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/tool.h"

/* An OST named by its index (2) or as Lustre prints it (OST0002, hex). */
static int parse_ost(const char *arg, uint32_t *idx)
{
	const char *p = arg;
	int base = 10;
	char *end;
	unsigned long v;

	if (!strncmp(p, "OST", 3)) {
		p += 3;
		base = 16;
	}
	if (!*p || *p == '-' || *p == '+')
		return -EINVAL;
	v = strtoul(p, &end, base);
	if (*end || v > 0xFFFF)
		return -EINVAL;
	*idx = (uint32_t)v;
	return 0;
}

static void ost_usage(FILE *f)
{
	fprintf(f, "usage: loom ost deactivate|activate IDX...   (IDX: 2 or OST0002)\n"
		   "       loom ost remove [--dryrun] [--force] IDX\n"
		   "  remove retires an OST for good (lctl del_ost): it leaves loom df, and its index\n"
		   "  goes to no new OST but one formatted with loom-oss --format --index IDX --replace.\n"
		   "  Refused (EBUSY) while files have objects there: drain it first with\n"
		   "  loom find MOUNT --ost IDX -t f | xargs loom migrate. --force removes it anyway\n"
		   "  (their objects there are lost: reads of them give EIO); --dryrun only counts.\n");
}

static int ost_remove(struct tool_ctx *ctx, int argc, char **argv)
{
	uint32_t flags = 0, idx = 0;
	uint64_t files = 0, objects = 0;
	const char *arg = NULL;
	loom_fs *fs;
	int rc;

	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--force") || !strcmp(argv[i], "-f"))
			flags |= LOOM_OST_REMOVE_FORCE;
		else if (!strcmp(argv[i], "--dryrun") || !strcmp(argv[i], "-n"))
			flags |= LOOM_OST_REMOVE_DRYRUN;
		else if (arg || argv[i][0] == '-') {
			ost_usage(stderr);
			return 2;
		} else
			arg = argv[i];
	}
	if (!arg) {
		ost_usage(stderr);
		return 2;
	}
	if (parse_ost(arg, &idx)) {
		fprintf(stderr, "loom ost: '%s' is not an OST index\n", arg);
		return 2;
	}
	fs = tool_connect(ctx);
	if (!fs)
		return 1;
	rc = loom_ost_remove(fs, idx, flags, &files, &objects);
	loom_disconnect(fs);
	if (rc == -EBUSY) {
		fprintf(stderr, "loom ost remove: OST%04x: %s: %llu file%s still %s %llu object%s there; drain it "
			"first: loom find MOUNT --ost %u -t f | xargs loom migrate (or remove it with --force: "
			"their objects there are lost)\n", idx, strerror(EBUSY), (unsigned long long)files,
			files == 1 ? "" : "s", files == 1 ? "has" : "have", (unsigned long long)objects,
			objects == 1 ? "" : "s", idx);
		return 1;
	}
	if (rc == -ENOENT) {
		fprintf(stderr, "loom ost remove: no OST has index %u (or it was removed already)\n", idx);
		return 1;
	}
	if (rc == -EPERM) {
		fprintf(stderr, "loom ost remove: OST%04x: only root with the file system key may remove an OST\n", idx);
		return 1;
	}
	if (rc)
		return tool_fail("ost remove", arg, rc);
	if (flags & LOOM_OST_REMOVE_DRYRUN)
		printf("OST%04x: %llu file%s %s %llu object%s there%s\n", idx, (unsigned long long)files,
		       files == 1 ? "" : "s", files == 1 ? "has" : "have", (unsigned long long)objects,
		       objects == 1 ? "" : "s", files ? ": drain it before removing it" : ": it can be removed");
	else if (files)
		printf("OST%04x removed: %llu object%s of %llu file%s there %s lost\n", idx, (unsigned long long)objects,
		       objects == 1 ? "" : "s", (unsigned long long)files, files == 1 ? "" : "s",
		       objects == 1 ? "is" : "are");
	else
		printf("OST%04x removed: its index is retired\n", idx);
	return 0;
}

int cmd_ost(struct tool_ctx *ctx, int argc, char **argv)
{
	bool active;
	loom_fs *fs;
	int ret = 0;

	if (argc >= 2 && !strcmp(argv[1], "remove"))
		return ost_remove(ctx, argc, argv);
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		ost_usage(stdout);
		return 0;
	}
	if (argc < 3 || (strcmp(argv[1], "deactivate") && strcmp(argv[1], "activate"))) {
		ost_usage(stderr);
		return 2;
	}
	active = !strcmp(argv[1], "activate");
	for (int i = 2; i < argc; i++) {
		uint32_t idx;
		if (parse_ost(argv[i], &idx)) {
			fprintf(stderr, "loom ost: '%s' is not an OST index\n", argv[i]);
			return 2;
		}
	}
	fs = tool_connect(ctx);
	if (!fs)
		return 1;
	for (int i = 2; i < argc; i++) {
		uint32_t idx = 0; /* parsed above */
		int rc;

		parse_ost(argv[i], &idx);
		rc = loom_ost_set_active(fs, idx, active);
		if (rc == -ENOENT)
			fprintf(stderr, "loom ost: no OST has index %u\n", idx);
		else if (rc == -EPERM)
			fprintf(stderr, "loom ost: OST%04x: only root may %s an OST\n", idx, argv[1]);
		else if (rc)
			tool_fail("ost", argv[i], rc);
		else
			printf("OST%04x %s\n", idx, active ? "activated" : "deactivated: no new stripes go there");
		if (rc)
			ret = 1;
	}
	loom_disconnect(fs);
	return ret;
}

/* A pool named as Lustre does (FSNAME.POOL) or alone; NULL (after a message) for another file
 * system's. */
static const char *pool_name(const char *fsname, const char *arg)
{
	const char *dot = strchr(arg, '.');

	if (!dot)
		return arg;
	if ((size_t)(dot - arg) != strlen(fsname) || strncmp(arg, fsname, (size_t)(dot - arg))) {
		fprintf(stderr, "loom pool: %s is not a pool of file system %s\n", arg, fsname);
		return NULL;
	}
	return dot + 1;
}

/* Prints what loom_pool_list (or the mount, for it) answered: rc, pools and n. */
static int pool_print(const char *fsname, const char *name, int rc, struct loom_pool *pools, uint32_t n)
{
	if (rc == -ENOENT) {
		fprintf(stderr, "loom pool: no pool %s.%s\n", fsname, name);
		return 1;
	}
	if (rc)
		return tool_fail("pool", "list", rc);
	if (!name) {
		/* lctl pool_list FSNAME */
		printf("Pools from %s:\n", fsname);
		for (uint32_t i = 0; i < n; i++)
			printf("%s.%s\n", fsname, pools[i].name);
	} else {
		/* lctl pool_list FSNAME.POOL */
		printf("Pool: %s.%s\n", fsname, name);
		for (uint32_t i = 0; i < n; i++)
			for (uint32_t k = 0; k < pools[i].nosts; k++)
				printf("%s-OST%04x_UUID\n", fsname, pools[i].osts[k]);
	}
	loom_pool_list_free(pools);
	return 0;
}

static int pool_list(loom_fs *fs, const char *name)
{
	struct loom_pool *pools = NULL;
	uint32_t n = 0;
	int rc = loom_pool_list(fs, name, &pools, &n);

	return pool_print(loom_fsname(fs), name, rc, pools, n);
}

/* `loom pool list` without the key: the first Loom mount answers, as `lfs pool_list /mnt`. */
static int pool_list_mounted(const struct tool_mount *mnt, const char *arg)
{
	struct loom_pool *pools = NULL;
	char fsname[16] = "";
	uint32_t n = 0;
	const char *name = NULL;
	int rc;

	if (arg) {
		/* The fsname to check FSNAME.POOL against: the mount's, from its source. */
		const char *sep = strstr(mnt->source, ":/");

		snprintf(fsname, sizeof(fsname), "%s", sep ? sep + 2 : "");
		if (!(name = pool_name(fsname, arg)))
			return 1;
	}
	rc = tool_mount_pools(mnt, name, &pools, &n, fsname, sizeof(fsname));
	if (rc == -ENOTTY) {
		fprintf(stderr, "loom pool: the loom-mount of %s does not answer the tool's ioctls (older "
				"than this tool?), and without the file system key (--key FILE) pool list cannot "
				"ask the MDS\n", mnt->mountpoint);
		return 1;
	}
	return pool_print(fsname, name, rc, pools, n);
}

static void pool_usage(FILE *f)
{
	fprintf(f, "usage: loom pool new|destroy NAME\n"
		   "       loom pool add|remove NAME OST...   (OST: 2 or OST0002)\n"
		   "       loom pool list [NAME] [PATH]   (PATH: on the mount of the file system)\n"
		   "NAME is POOL or FSNAME.POOL: 1-15 letters, digits, '_' or '-'.\n");
}

int cmd_pool(struct tool_ctx *ctx, int argc, char **argv)
{
	static const struct { const char *verb; int cmd; bool osts; } verbs[] = {
		{ "new", LOOM_POOL_NEW, false },   { "destroy", LOOM_POOL_DESTROY, false },
		{ "add", LOOM_POOL_ADD, true },    { "remove", LOOM_POOL_REMOVE, true },
	};
	const char *name, *list_name = NULL, *list_path = NULL;
	struct tool_mount list_mnt;
	int v = -1, ret = 0;
	loom_fs *fs;

	if (argc >= 2 && !strcmp(argv[1], "list")) {
		/* lfs pool_list takes FSNAME[.POOL] or a path: `list [NAME] [PATH]`, a path holding a
		 * '/', the mount it is on naming the file system. */
		for (int i = 2; i < argc; i++) {
			if (strchr(argv[i], '/') && !list_path)
				list_path = argv[i];
			else if (!strchr(argv[i], '/') && !list_name)
				list_name = argv[i];
			else
				argc = 0; /* two of a kind: usage */
		}
		if (argc == 0 || argc > 4) {
			pool_usage(stderr);
			return 2;
		}
		if (list_path) {
			if (tool_mount_of(list_path, &list_mnt) != 0) {
				fprintf(stderr, "loom pool: %s is not on a Loom mount\n", list_path);
				return 1;
			}
			snprintf(ctx->addr_buf, sizeof(ctx->addr_buf), "%s", list_mnt.mds_addr);
			ctx->fs_addr = ctx->addr_buf;
		}
	} else {
		for (int i = 0; i < (int)(sizeof(verbs) / sizeof(verbs[0])); i++)
			if (argc >= 2 && !strcmp(argv[1], verbs[i].verb))
				v = i;
		if (v < 0 || argc < 3 || (verbs[v].osts ? argc < 4 : argc != 3)) {
			pool_usage(stderr);
			return 2;
		}
		for (int i = 3; i < argc; i++) {
			uint32_t idx;
			if (parse_ost(argv[i], &idx)) {
				fprintf(stderr, "loom pool: '%s' is not an OST index\n", argv[i]);
				return 2;
			}
		}
	}
	/* Without the key, the mount answers: the path's, else (nothing else naming a file system)
	 * the first. */
	if (v < 0 && !tool_key_usable(ctx)) {
		if (list_path)
			return pool_list_mounted(&list_mnt, list_name);
		if (!ctx->fs_addr && !getenv("LOOM_FS") && tool_first_mount(&list_mnt) == 0)
			return pool_list_mounted(&list_mnt, list_name);
	}
	fs = tool_connect(ctx);
	if (!fs)
		return 1;
	if (v < 0) {
		name = list_name ? pool_name(loom_fsname(fs), list_name) : NULL;
		ret = list_name && !name ? 1 : pool_list(fs, name);
		loom_disconnect(fs);
		return ret;
	}
	name = pool_name(loom_fsname(fs), argv[2]);
	if (!name) {
		loom_disconnect(fs);
		return 1;
	}
	for (int i = verbs[v].osts ? 3 : 2; i < argc; i++) {
		uint32_t idx = 0;
		int rc;

		if (verbs[v].osts)
			parse_ost(argv[i], &idx);
		rc = loom_pool_ctl(fs, verbs[v].cmd, name, idx);
		if (rc == -EPERM)
			fprintf(stderr, "loom pool: only root may change pools\n");
		else if (rc == -ENOENT && verbs[v].cmd == LOOM_POOL_REMOVE)
			fprintf(stderr, "loom pool: OST%04x is not in pool %s (or there is no such pool)\n", idx, name);
		else if (rc == -ENOENT)
			fprintf(stderr, "loom pool: no pool %s\n", name);
		else if (rc == -ENODEV)
			fprintf(stderr, "loom pool: no OST has index %u\n", idx);
		else if (rc == -EEXIST && verbs[v].osts)
			fprintf(stderr, "loom pool: OST%04x is in pool %s already\n", idx, name);
		else if (rc == -EEXIST)
			fprintf(stderr, "loom pool: pool %s exists already\n", name);
		else if (rc == -ENOTEMPTY)
			fprintf(stderr, "loom pool: pool %s still has OSTs: remove them first\n", name);
		else if (rc == -EINVAL)
			fprintf(stderr, "loom pool: '%s' is not a pool name (1-15 letters, digits, '_', '-')\n", name);
		else if (rc)
			tool_fail("pool", argv[i], rc);
		if (rc) {
			ret = 1;
			break;
		}
	}
	loom_disconnect(fs);
	return ret;
}
