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
	bool key_given;       /* --key: key_file is the user's choice, not the config's */
	bool resolved;        /* the config file was read (tool_resolve) */
	const char *verb;     /* the subcommand, for messages */
	const char *mount_hint; /* said after "needs the file system key", e.g. what the mount offers */
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
/* A path under a Loom mount as the file system path libloom takes (the context then names
 * that mount's MDS); others as given. Without follow a last component that is a symlink stays
 * one (for lstat). */
const char *tool_fs_path(struct tool_ctx *ctx, const char *arg, bool follow, char *buf, size_t cap);

/* via_mount.c: what the MDS would say, asked of loom-mount by ioctl (no key needed). path picks
 * the file to ask on (NULL: the mount point). The results are as loom_targets and
 * loom_pool_list give them (with fsname, the mount's file system); -ENOTTY from a loom-mount
 * that does not answer these. */
int tool_mount_targets(const char *path, const struct tool_mount *mnt, struct loom_target **out,
		       uint32_t *count, char *fsname, size_t cap);
int tool_mount_pools(const struct tool_mount *mnt, const char *name, struct loom_pool **out,
		     uint32_t *count, char *fsname, size_t cap);

/* The layout of a path under a Loom mount, from its loom.lov xattr; without follow, a symlink's
 * own (none). */
int tool_layout_of_mounted(const char *path, bool follow, struct loom_layout **out);

/* Whether this user has a key to offer: --key, or a key file ($LOOM_KEY_FILE, the config's
 * `key =`, /etc/loom/loom.key) it may read. Without one, read-only verbs on a path under a
 * mount ask the mount instead (via_mount.c). */
bool tool_key_usable(struct tool_ctx *ctx);

/* Connects to the file system the context names; prints the error and returns NULL on failure. */
loom_fs *tool_connect(struct tool_ctx *ctx);
/* As tool_connect, for the verbs that look at the statistics (get_param, stats, top,
 * dashboard): their requests carry no job id, so that a monitor that polls does not show up as a
 * job (libloom reads LOOM_JOBID_VAR at connect). */
loom_fs *tool_connect_untagged(struct tool_ctx *ctx);
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
int cmd_mirror(struct tool_ctx *ctx, int argc, char **argv);
int cmd_ec(struct tool_ctx *ctx, int argc, char **argv);
/* params.c */
int cmd_get_param(struct tool_ctx *ctx, int argc, char **argv);
int cmd_set_param(struct tool_ctx *ctx, int argc, char **argv);
int cmd_stats(struct tool_ctx *ctx, int argc, char **argv);
/* top.c */
int cmd_top(struct tool_ctx *ctx, int argc, char **argv);
/* dashboard.c */
int cmd_dashboard(struct tool_ctx *ctx, int argc, char **argv);
/* nodemap.c */
int cmd_key(struct tool_ctx *ctx, int argc, char **argv);
int cmd_nodemap(struct tool_ctx *ctx, int argc, char **argv);

#endif
