/* The `loom` command: shared helpers of its subcommands. */
#ifndef LOOM_TOOLS_TOOL_H
#define LOOM_TOOLS_TOOL_H

#include <stdbool.h>
#include <stdio.h>

#include "loom/loom.h"

/* Global options, parsed before the subcommand. */
struct tool_ctx {
	const char *prog;     /* "loom" */
	const char *fs_addr;  /* --fs, $LOOM_FS or the config file's mds = */
	const char *config;   /* --config */
	const char *key_file; /* --key, or the config file's key = */
	bool encrypt;         /* --encrypt */
	char addr_buf[512];
	char key_buf[4096];
};

/* A Loom mount on this node. */
struct tool_mount {
	char mountpoint[4096];
	char source[512];   /* LIST:/FSNAME, as mounted (common/mdsaddr.h) */
	char mds_addr[512]; /* what loom_connect takes: the source itself */
};

/* The Loom mount holding path (or, for a path that does not exist yet, its directory).
 * -ENOENT when it is not under one. */
int tool_mount_of(const char *path, struct tool_mount *out);
/* Any Loom mount of this node (the first listed). */
int tool_first_mount(struct tool_mount *out);

/* The layout of a path under a Loom mount, from its loom.lov xattr; without follow, a symlink's
 * own (none). */
int tool_layout_of_mounted(const char *path, bool follow, struct loom_layout **out);

/* Connects to the file system the context names; prints the error and returns NULL on failure. */
loom_fs *tool_connect(struct tool_ctx *ctx);
/* Prints "loom CMD: WHAT: strerror" to stderr; returns 1 (the exit code). */
int tool_fail(const char *cmd, const char *what, int err);

int cmd_setstripe(struct tool_ctx *ctx, int argc, char **argv);
int cmd_getstripe(struct tool_ctx *ctx, int argc, char **argv);
int cmd_df(struct tool_ctx *ctx, int argc, char **argv);
int cmd_cluster(struct tool_ctx *ctx, int argc, char **argv);
int cmd_put(struct tool_ctx *ctx, int argc, char **argv);
int cmd_get(struct tool_ctx *ctx, int argc, char **argv);
int cmd_cat(struct tool_ctx *ctx, int argc, char **argv);
int cmd_ls(struct tool_ctx *ctx, int argc, char **argv);
int cmd_mkdir(struct tool_ctx *ctx, int argc, char **argv);
int cmd_rm(struct tool_ctx *ctx, int argc, char **argv);
int cmd_stat(struct tool_ctx *ctx, int argc, char **argv);
int cmd_mv(struct tool_ctx *ctx, int argc, char **argv);
int cmd_scrub(struct tool_ctx *ctx, int argc, char **argv);
int cmd_fsck(struct tool_ctx *ctx, int argc, char **argv);
int cmd_ost(struct tool_ctx *ctx, int argc, char **argv);
int cmd_find(struct tool_ctx *ctx, int argc, char **argv);
int cmd_pool(struct tool_ctx *ctx, int argc, char **argv);
int cmd_migrate(struct tool_ctx *ctx, int argc, char **argv);
/* nodemap.c */
int cmd_key(struct tool_ctx *ctx, int argc, char **argv);
int cmd_nodemap(struct tool_ctx *ctx, int argc, char **argv);

#endif
