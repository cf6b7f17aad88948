/*
 * loom: the admin and user tool, with Lustre's `lfs` verbs where Loom has the same concept.
 * Until a mount exists, it reaches the file system through libloom: --fs HOST[:PORT] (or a
 * failover list, or a mount's source: common/mdsaddr.h), $LOOM_FS, or the `mds = ` line of a
 * config file (--config, $LOOM_CONFIG, /etc/loom/loom.conf);
 * the file system key from --key, $LOOM_KEY_FILE, that file's `key = FILE` or /etc/loom/loom.key.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/auth.h"
#include "proto/wire.h"
#include "tools/tool.h"

struct command {
	const char *name;
	int (*fn)(struct tool_ctx *, int, char **);
	const char *help;
};

static const struct command commands[] = {
	{ "setstripe", cmd_setstripe, "[-N COPIES | --ec K+M] [-E END -L mdt] [-E -1] [-c COUNT] [-S SIZE] [-i IDX] [-p POOL] | -d  PATH   set a layout" },
	{ "getstripe", cmd_getstripe, "[-c|-S|-i|-p] [-d] [-r] [-y] PATH...   show layouts (lfs getstripe format)" },
	{ "find", cmd_find, "PATH... [[!] --type|--name|--size|--mtime|--stripe-count|--stripe-size|--ost|--pool ARG]...   lfs find" },
	{ "df", cmd_df, "[-h] [-i] [--pool POOL] [PATH]   space (-i: inodes) of the MDT and every OST (lfs df format)" },
	{ "cluster", cmd_cluster, "up|down|status --dir DIR [--osts N]   a local file system" },
	{ "put", cmd_put, "LOCAL PATH   copy a local file in" },
	{ "get", cmd_get, "PATH LOCAL   copy a file out" },
	{ "cat", cmd_cat, "PATH...   print files" },
	{ "ls", cmd_ls, "[-l] [PATH]   list a directory" },
	{ "mkdir", cmd_mkdir, "[-p] PATH...   make directories" },
	{ "rm", cmd_rm, "[-r] PATH...   remove files (and trees with -r)" },
	{ "mv", cmd_mv, "FROM TO   rename" },
	{ "stat", cmd_stat, "PATH...   show attributes" },
	{ "scrub", cmd_scrub, "[--wait] [--status] [--paths] OST_INDEX... | --all   verify objects against their checksums" },
	{ "fsck", cmd_fsck, "--dir DIR | ...   check and repair the namespace against the objects" },
	{ "mirror", cmd_mirror, "create -N COPIES [...] FILE | resync [--timeout SEC] | verify [-v] | extend [-N COUNT] | split -d --mirror-id ID  FILE...   mirrored files (lfs mirror)" },
	{ "ec", cmd_ec, "rebuild [--timeout SEC] | verify  FILE...   erasure-coded files: make stale objects again, check parity" },
	{ "migrate", cmd_migrate, "[-c COUNT] [-S SIZE] [-i IDX | -p POOL] [-r] FILE|DIR...   re-stripe files online" },
	{ "pool", cmd_pool, "new|destroy NAME | add|remove NAME OST... | list [NAME] [PATH]   OST pools (lctl pool_*)" },
	{ "ost", cmd_ost, "deactivate|activate IDX... | remove [--force] IDX   no new stripes on an OST, or again; retire it" },
	{ "key", cmd_key, "new [--node NAME] FILE   a new file system key, or a key of client node NAME's own" },
	{ "get_param", cmd_get_param, "[-n|-N] PATTERN...   servers' parameters and statistics (lctl get_param)" },
	{ "set_param", cmd_set_param, "NAME=VALUE...   set servers' parameters (lctl set_param)" },
	{ "stats", cmd_stats, "[--mdt|--ost|--mount PATH] [clear]   requests per operation and data bytes, per target or mount" },
	{ "jobstats", cmd_stats, "[--mdt|--ost] [-j JOBID] [clear]   per-job statistics (Lustre's job_stats)" },
	{ "top", cmd_top, "[-i SEC] [-n COUNT] [-t TOP]   live: requests/s, MiB/s, the busiest jobs and targets" },
	{ "dashboard", cmd_dashboard, "[--http HOST:PORT] [-i SEC]   a web page of it all, live (targets, MiB/s, latency, jobs)" },
	{ "nodemap", cmd_nodemap, "list [NAME] | add|modify|revoke|del NAME ...   what each node may claim (lctl nodemap_*)" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: loom [--fs HOST[:PORT][,HOST[:PORT]...]] [--config FILE] [--key FILE] [--encrypt] COMMAND [ARGS]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
	fprintf(f, "\nThe file system is found from --fs, then $LOOM_FS, then the 'mds = HOST:PORT' line of\n"
		   "--config FILE, $LOOM_CONFIG or /etc/loom/loom.conf, then a Loom mount of this node.\n"
		   "`loom cluster up` prints it. A failover list (mds1,mds2:9901), Lustre's NIDs\n"
		   "(mds1@tcp:mds2@tcp) and a mount's source (mds1@tcp:/lfs01) are accepted too.\n"
		   "The file system key is read from --key, $LOOM_KEY_FILE, the config file's\n"
		   "'key = FILE' line, or /etc/loom/loom.key. Frames are authenticated with it;\n"
		   "--encrypt encrypts them too (servers started with --encrypt require it, and get it).\n"
		   "Without a key this user may read, df, pool list, getstripe, setstripe, find, stat,\n"
		   "ls, cat and get on a path under a Loom mount ask the mount, with this user's rights.\n");
}

int tool_fail(const char *cmd, const char *what, int err)
{
	fprintf(stderr, "loom %s: %s: %s\n", cmd, what, strerror(err < 0 ? -err : err));
	return 1;
}

/* Reads `NAME = VALUE` from a config file. */
static int config_value(const char *path, const char *name, char *buf, size_t cap)
{
	FILE *f = fopen(path, "r");
	char line[4200];
	int rc = -ENOENT;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char key[32], val[4096];
		if (sscanf(line, " %31[a-z_] = %4095s", key, val) == 2 && !strcmp(key, name)) {
			snprintf(buf, cap, "%s", val);
			rc = 0;
			break;
		}
	}
	fclose(f);
	return rc;
}

/* What --config, $LOOM_CONFIG or /etc/loom/loom.conf adds to the flags and the environment:
 * the MDS's address (NULL if none is known yet) and, with it, its key. */
static const char *tool_resolve(struct tool_ctx *ctx)
{
	const char *addr = ctx->fs_addr;

	if (!addr)
		addr = getenv("LOOM_FS");
	if (!ctx->resolved && (!addr || !ctx->key_file)) {
		const char *cfg = ctx->config ? ctx->config : getenv("LOOM_CONFIG");
		if (!cfg)
			cfg = "/etc/loom/loom.conf";
		if (!addr && config_value(cfg, "mds", ctx->addr_buf, sizeof(ctx->addr_buf)) == 0)
			ctx->fs_addr = ctx->addr_buf;
		/* The file system's key goes with its address (a --key or $LOOM_KEY_FILE wins). */
		if (!ctx->key_file && !getenv("LOOM_KEY_FILE") &&
		    config_value(cfg, "key", ctx->key_buf, sizeof(ctx->key_buf)) == 0)
			ctx->key_file = ctx->key_buf;
	}
	ctx->resolved = true;
	return ctx->fs_addr ? ctx->fs_addr : addr;
}

bool tool_key_usable(struct tool_ctx *ctx)
{
	const char *f;
	int fd;

	tool_resolve(ctx);
	if (ctx->key_given)
		return true; /* --key: used as given, and its errors told */
	f = loom_key_file_choose(ctx->key_file);
	if (!f || !*f)
		return false;
	fd = open(f, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

loom_fs *tool_connect_untagged(struct tool_ctx *ctx)
{
	setenv("LOOM_JOBID_VAR", "disable", 1);
	return tool_connect(ctx);
}

loom_fs *tool_connect(struct tool_ctx *ctx)
{
	struct loom_connect_opts copts = { 0 };
	loom_fs *fs = NULL;
	const char *addr = tool_resolve(ctx), *key_file;
	char why[LOOM_KEY_REFUSAL_LEN];
	int rc;

	if (!addr) {
		/* As lfs: the file system mounted on this node. */
		struct tool_mount mnt;
		if (tool_first_mount(&mnt) == 0) {
			snprintf(ctx->addr_buf, sizeof(ctx->addr_buf), "%s", mnt.mds_addr);
			addr = ctx->addr_buf;
		}
	}
	if (!addr) {
		fprintf(stderr, "%s: no file system given: use --fs HOST[:PORT], $LOOM_FS, a config file, "
				"or mount one\n", ctx->prog);
		return NULL;
	}
	copts.key_file = ctx->key_file;
	copts.encrypt = ctx->encrypt;
	rc = loom_connect_with(addr, &copts, &fs);
	key_file = loom_key_file_choose(ctx->key_file);
	if (rc == -EPERM && key_file && *key_file && loom_key_refusal(key_file, why, sizeof(why)) == 0) {
		fprintf(stderr, "%s: %s\n", ctx->prog, why);
		return NULL;
	}
	if (rc == -EACCES) {
		bool keyless = !key_file || !*key_file;

		if (keyless && ctx->verb)
			fprintf(stderr, "%s: %s needs the file system key (--key FILE, $LOOM_KEY_FILE or the "
					"config file's 'key = FILE'): the servers at %s require the file system key, "
					"and none was given%s\n", ctx->prog, ctx->verb, addr, ctx->mount_hint ?
					ctx->mount_hint : "");
		else
			fprintf(stderr, "%s: the servers at %s %s (--key FILE, $LOOM_KEY_FILE or the config "
					"file's 'key = FILE')\n", ctx->prog, addr,
				keyless ? "require the file system key, and none was given" : "refused this client's key");
		return NULL;
	}
	if (rc) {
		if (rc == -EKEYREJECTED || rc == -ENOKEY)
			fprintf(stderr, "%s: cannot connect to the MDS at %s: %s\n", ctx->prog, addr,
				rc == -EKEYREJECTED ? "the key file holds no key" :
				"this user may not read the key file (use a copy of your own, mode 0600)");
		else if (key_file && *key_file && access(key_file, R_OK) != 0)
			/* The key was named (--key, $LOOM_KEY_FILE, the config) and is not there. */
			fprintf(stderr, "%s: cannot read the key file %s: %s\n", ctx->prog, key_file,
				strerror(errno));
		else /* libloom's sentence names the address that said what (a list has several) */
			fprintf(stderr, "%s: cannot connect to the MDS: %s\n", ctx->prog, loom_connect_error());
		return NULL;
	}
	return fs;
}

int main(int argc, char **argv)
{
	struct tool_ctx ctx = { .prog = "loom" };
	int i = 1;

	while (i < argc && argv[i][0] == '-') {
		if (!strcmp(argv[i], "--fs") && i + 1 < argc) {
			ctx.fs_addr = argv[i + 1];
			i += 2;
		} else if (!strncmp(argv[i], "--fs=", 5)) {
			ctx.fs_addr = argv[i++] + 5;
		} else if (!strcmp(argv[i], "--key") && i + 1 < argc) {
			ctx.key_file = argv[i + 1];
			ctx.key_given = true;
			i += 2;
		} else if (!strcmp(argv[i], "--encrypt")) {
			ctx.encrypt = true;
			i++;
		} else if (!strcmp(argv[i], "--config") && i + 1 < argc) {
			ctx.config = argv[i + 1];
			i += 2;
		} else if (!strcmp(argv[i], "--version")) {
			lw_print_version("loom");
			return 0;
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		} else {
			fprintf(stderr, "loom: unknown option '%s'\n", argv[i]);
			usage(stderr);
			return 2;
		}
	}
	if (i == argc) {
		usage(stderr);
		return 2;
	}
	for (size_t k = 0; k < sizeof(commands) / sizeof(commands[0]); k++)
		if (!strcmp(argv[i], commands[k].name)) {
			ctx.verb = commands[k].name;
			return commands[k].fn(&ctx, argc - i, argv + i);
		}
	fprintf(stderr, "loom: unknown command '%s'\n", argv[i]);
	usage(stderr);
	return 2;
}
