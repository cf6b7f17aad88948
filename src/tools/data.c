/*
 * Data and namespace verbs for use without a mount: put, get, cat, ls, mkdir, rm, mv, stat.
 * Their paths are file system paths (/dir/f). A path under a Loom mount of this node names that
 * mount's file: get, cat, ls and stat read it through libloom (as the file system path it is) when
 * the user has the key, else through the mount itself, with the user's own rights.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "tools/tool.h"

/* Big enough that one call spans every stripe of a wide file several times over, so all of its
 * OSSs work at once. */
#define COPY_BUF (64u << 20)

static int copy_in(loom_fs *fs, int in, const char *path)
{
	loom_file *f;
	char *buf;
	off_t off = 0;
	int rc;

	rc = loom_open(fs, path, O_WRONLY | O_CREAT | O_TRUNC, 0644, &f);
	if (rc)
		return rc;
	buf = malloc(COPY_BUF);
	if (!buf) {
		loom_close(f);
		return -ENOMEM;
	}
	for (;;) {
		size_t got = 0;
		ssize_t n = 0, w;

		/* Fill the buffer (pipes give little at a time). */
		while (got < COPY_BUF && (n = read(in, buf + got, COPY_BUF - got)) > 0)
			got += (size_t)n;
		if (n < 0) {
			rc = -errno;
			break;
		}
		if (got == 0)
			break;
		w = loom_pwrite(f, buf, got, off);
		if (w < 0) {
			rc = (int)w;
			break;
		}
		off += w;
		if (n == 0)
			break;
	}
	free(buf);
	if (rc == 0)
		rc = loom_close(f);
	else
		loom_close(f);
	return rc;
}

static int copy_out(loom_fs *fs, const char *path, int out)
{
	loom_file *f;
	char *buf;
	int rc;

	rc = loom_open(fs, path, O_RDONLY, 0, &f);
	if (rc)
		return rc;
	buf = malloc(COPY_BUF);
	if (!buf) {
		loom_close(f);
		return -ENOMEM;
	}
	for (;;) {
		ssize_t n = loom_read(f, buf, COPY_BUF);
		if (n <= 0) {
			rc = (int)n;
			break;
		}
		rc = write_full(out, buf, (size_t)n);
		if (rc)
			break;
	}
	free(buf);
	loom_close(f);
	return rc;
}

/* Where a path argument is read. */
struct src {
	struct tool_ctx *ctx;
	loom_fs *fs;  /* connected at the first path that needs it */
	bool mounted; /* this path: through its mount (path as given), not libloom */
	const char *path;  /* this path as libloom or the mount takes it */
	const char *lpath; /* the same, a symlink at its end not followed (for lstat) */
	char buf[4096], lbuf[4096];
};

/* Decides how to read arg; 0, or 1 when the connection failed (the error was printed). */
static int src_pick(struct src *s, const char *arg)
{
	struct tool_mount mnt;

	s->mounted = false;
	s->path = s->lpath = arg;
	if (tool_mount_of(arg, &mnt) == 0) {
		if (!tool_key_usable(s->ctx)) {
			s->mounted = true;
			return 0;
		}
		s->path = tool_fs_path(s->ctx, arg, true, s->buf, sizeof(s->buf));
		s->lpath = tool_fs_path(s->ctx, arg, false, s->lbuf, sizeof(s->lbuf));
	}
	if (!s->fs && !(s->fs = tool_connect(s->ctx)))
		return 1;
	return 0;
}

static void src_done(struct src *s)
{
	if (s->fs)
		loom_disconnect(s->fs);
}

static int copy_out_mounted(const char *path, int out)
{
	int in = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY), rc = 0;
	struct stat st;
	char *buf;

	if (in < 0)
		return -errno;
	if (fstat(in, &st) == 0 && S_ISDIR(st.st_mode)) {
		close(in);
		return -EISDIR; /* as libloom's open of a directory for reading data */
	}
	buf = malloc(COPY_BUF);
	if (!buf) {
		close(in);
		return -ENOMEM;
	}
	for (;;) {
		ssize_t n = read(in, buf, COPY_BUF);
		if (n <= 0) {
			rc = n < 0 ? -errno : 0;
			break;
		}
		rc = write_full(out, buf, (size_t)n);
		if (rc)
			break;
	}
	free(buf);
	close(in);
	return rc;
}

static int src_copy_out(struct src *s, int out)
{
	return s->mounted ? copy_out_mounted(s->path, out) : copy_out(s->fs, s->path, out);
}

static int src_lstat(struct src *s, const char *path, struct stat *st)
{
	if (s->mounted)
		return lstat(path, st) < 0 ? -errno : 0;
	return loom_lstat(s->fs, path, st);
}

static int src_readlink(struct src *s, const char *path, char *buf, size_t cap, size_t *len)
{
	ssize_t n;

	if (!s->mounted)
		return loom_readlink(s->fs, path, buf, cap, len);
	n = readlink(path, buf, cap);
	if (n < 0)
		return -errno;
	*len = (size_t)n;
	return 0;
}

int cmd_put(struct tool_ctx *ctx, int argc, char **argv)
{
	char target[4096];
	struct stat st;
	loom_fs *fs;
	int in, rc;

	if (argc != 3) {
		fprintf(stderr, "usage: loom put LOCAL PATH   (LOCAL '-' reads stdin)\n");
		return 2;
	}
	in = strcmp(argv[1], "-") ? open(argv[1], O_RDONLY | O_CLOEXEC) : STDIN_FILENO;
	if (in < 0)
		return tool_fail("put", argv[1], errno);
	fs = tool_connect(ctx);
	if (!fs)
		return 1;
	snprintf(target, sizeof(target), "%s", argv[2]);
	if (loom_stat(fs, argv[2], &st) == 0 && S_ISDIR(st.st_mode)) {
		const char *base = strrchr(argv[1], '/');
		snprintf(target, sizeof(target), "%s/%s", argv[2], base ? base + 1 : argv[1]);
	}
	rc = copy_in(fs, in, target);
	if (in != STDIN_FILENO)
		close(in);
	loom_disconnect(fs);
	return rc ? tool_fail("put", target, rc) : 0;
}

int cmd_get(struct tool_ctx *ctx, int argc, char **argv)
{
	struct src s = { .ctx = ctx };
	int out, rc;

	if (argc != 3) {
		fprintf(stderr, "usage: loom get PATH LOCAL   (LOCAL '-' writes stdout)\n");
		return 2;
	}
	if (src_pick(&s, argv[1]))
		return 1;
	out = strcmp(argv[2], "-") ? open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)
				   : STDOUT_FILENO;
	if (out < 0) {
		src_done(&s);
		return tool_fail("get", argv[2], errno);
	}
	rc = src_copy_out(&s, out);
	if (out != STDOUT_FILENO && close(out) < 0 && rc == 0)
		rc = -errno;
	src_done(&s);
	return rc ? tool_fail("get", argv[1], rc) : 0;
}

int cmd_cat(struct tool_ctx *ctx, int argc, char **argv)
{
	struct src s = { .ctx = ctx };
	int ret = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: loom cat PATH...\n");
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		int rc;

		if (src_pick(&s, argv[i])) {
			src_done(&s);
			return 1;
		}
		rc = src_copy_out(&s, STDOUT_FILENO);
		if (rc)
			ret = tool_fail("cat", argv[i], rc);
	}
	src_done(&s);
	return ret;
}

static void mode_string(mode_t m, char *s)
{
	const char *rwx = "rwxrwxrwx";

	s[0] = S_ISDIR(m) ? 'd' : S_ISLNK(m) ? 'l' : S_ISFIFO(m) ? 'p' : S_ISSOCK(m) ? 's' :
	       S_ISCHR(m) ? 'c' : S_ISBLK(m) ? 'b' : '-';
	for (int i = 0; i < 9; i++)
		s[i + 1] = (m & (0400 >> i)) ? rwx[i] : '-';
	if (m & S_ISUID)
		s[3] = (m & S_IXUSR) ? 's' : 'S';
	if (m & S_ISGID)
		s[6] = (m & S_IXGRP) ? 's' : 'S';
	if (m & S_ISVTX)
		s[9] = (m & S_IXOTH) ? 't' : 'T';
	s[10] = '\0';
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void print_long(struct src *s, const char *path, const char *name)
{
	struct stat st;
	char mode[11], when[32], link[LOOM_SYMLINK_MAX + 1];
	struct tm tm;
	size_t llen;

	if (src_lstat(s, path, &st) != 0) {
		printf("?????????? ? ? ? ? ? %s\n", name);
		return;
	}
	mode_string(st.st_mode, mode);
	localtime_r(&st.st_mtime, &tm);
	strftime(when, sizeof(when), "%b %e %H:%M", &tm);
	printf("%s %3lu %5u %5u %10lld %s %s", mode, (unsigned long)st.st_nlink, st.st_uid, st.st_gid,
	       (long long)st.st_size, when, name);
	if (S_ISLNK(st.st_mode) && src_readlink(s, path, link, sizeof(link) - 1, &llen) == 0) {
		link[MIN(llen, sizeof(link) - 1)] = '\0';
		printf(" -> %s", link);
	}
	printf("\n");
}

/* A list of names, grown as a directory is read. */
struct names {
	char **v;
	size_t n, cap;
};

static int names_add(struct names *l, const char *name)
{
	if (l->n == l->cap) {
		size_t ncap = l->cap ? l->cap * 2 : 256;
		char **p = realloc(l->v, ncap * sizeof(*l->v));
		if (!p)
			return -ENOMEM;
		l->v = p;
		l->cap = ncap;
	}
	if (!(l->v[l->n] = strdup(name)))
		return -ENOMEM;
	l->n++;
	return 0;
}

/* The names in directory path (without dot files unless all); -ENOTDIR for a non-directory. */
static int src_list(struct src *s, const char *path, bool all, struct names *l)
{
	int rc = 0;

	if (s->mounted) {
		DIR *d = opendir(path);
		struct dirent *e;

		if (!d)
			return -errno;
		errno = 0;
		while (rc == 0 && (e = readdir(d)) != NULL) {
			if (all || e->d_name[0] != '.')
				rc = names_add(l, e->d_name);
			errno = 0;
		}
		if (rc == 0 && errno)
			rc = -errno;
		closedir(d);
		return rc;
	}
	{
		struct loom_dirent ent;
		loom_dir *d;

		rc = loom_opendir(s->fs, path, &d);
		if (rc)
			return rc;
		while ((rc = loom_readdir(d, &ent)) == 1) {
			if (!all && ent.name[0] == '.')
				continue;
			if ((rc = names_add(l, ent.name)) != 0)
				break;
		}
		loom_closedir(d);
		return rc < 0 ? rc : 0;
	}
}

int cmd_ls(struct tool_ctx *ctx, int argc, char **argv)
{
	const char *arg = "/";
	bool lng = false, all = false;
	struct src s = { .ctx = ctx };
	struct names l = { 0 };
	int c, rc;

	optind = 1;
	while ((c = getopt(argc, argv, "la")) != -1) {
		if (c == 'l')
			lng = true;
		else if (c == 'a')
			all = true;
		else
			return 2;
	}
	if (optind < argc)
		arg = argv[optind];
	if (src_pick(&s, arg))
		return 1;
	rc = src_list(&s, s.path, all, &l);
	if (rc == -ENOTDIR) {
		/* ls FILE: the file itself, under the name given */
		if (lng)
			print_long(&s, s.lpath, arg);
		else
			printf("%s\n", arg);
		src_done(&s);
		return 0;
	}
	if (l.n)
		qsort(l.v, l.n, sizeof(*l.v), name_cmp);
	for (size_t i = 0; i < l.n; i++) {
		if (lng) {
			char full[4096];
			snprintf(full, sizeof(full), "%s/%s", strcmp(s.path, "/") ? s.path : "", l.v[i]);
			print_long(&s, full, l.v[i]);
		} else {
			printf("%s\n", l.v[i]);
		}
	}
	for (size_t i = 0; i < l.n; i++)
		free(l.v[i]);
	free(l.v);
	src_done(&s);
	return rc < 0 ? tool_fail("ls", arg, rc) : 0;
}

static int mkdir_parents(loom_fs *fs, const char *path)
{
	char buf[4096];
	size_t len = strlen(path);
	int rc;

	if (len == 0)
		return -ENOENT;
	if (len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	for (char *p = buf + 1; ; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char saved = *p;
		*p = '\0';
		rc = loom_mkdir(fs, buf, 0755);
		if (rc == -EEXIST) {
			struct stat st;
			rc = loom_stat(fs, buf, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : -EEXIST;
		}
		*p = saved;
		if (rc)
			return rc;
		if (saved == '\0')
			return 0;
	}
}

int cmd_mkdir(struct tool_ctx *ctx, int argc, char **argv)
{
	bool parents = false;
	loom_fs *fs;
	int c, ret = 0;

	optind = 1;
	while ((c = getopt(argc, argv, "p")) != -1) {
		if (c == 'p')
			parents = true;
		else
			return 2;
	}
	if (optind >= argc) {
		fprintf(stderr, "usage: loom mkdir [-p] PATH...\n");
		return 2;
	}
	fs = tool_connect(ctx);
	if (!fs)
		return 1;
	for (int i = optind; i < argc; i++) {
		int rc = parents ? mkdir_parents(fs, argv[i]) : loom_mkdir(fs, argv[i], 0755);
		if (rc)
			ret = tool_fail("mkdir", argv[i], rc);
	}
	loom_disconnect(fs);
	return ret;
}

static int remove_tree(loom_fs *fs, const char *path)
{
	struct loom_dirent ent;
	struct stat st;
	loom_dir *d;
	int rc;

	rc = loom_lstat(fs, path, &st);
	if (rc)
		return rc;
	if (!S_ISDIR(st.st_mode))
		return loom_unlink(fs, path);
	rc = loom_opendir(fs, path, &d);
	if (rc)
		return rc;
	/* Removing while reading is safe: the readdir cookie skips nothing that remains. */
	while ((rc = loom_readdir(d, &ent)) == 1) {
		char child[4096];
		if (!strcmp(ent.name, ".") || !strcmp(ent.name, ".."))
			continue;
		if (snprintf(child, sizeof(child), "%s/%s", path, ent.name) >= (int)sizeof(child)) {
			rc = -ENAMETOOLONG; /* never act on a cut-off path: it may name another file */
			break;
		}
		rc = remove_tree(fs, child);
		if (rc)
			break;
	}
	loom_closedir(d);
	return rc < 0 ? rc : loom_rmdir(fs, path);
}

int cmd_rm(struct tool_ctx *ctx, int argc, char **argv)
{
	bool recursive = false;
	loom_fs *fs;
	int c, ret = 0;

	optind = 1;
	while ((c = getopt(argc, argv, "rRf")) != -1) {
		if (c == 'r' || c == 'R')
			recursive = true;
		else if (c != 'f')
			return 2;
	}
	if (optind >= argc) {
		fprintf(stderr, "usage: loom rm [-r] PATH...\n");
		return 2;
	}
	fs = tool_connect(ctx);
	if (!fs)
		return 1;
	for (int i = optind; i < argc; i++) {
		int rc = recursive ? remove_tree(fs, argv[i]) : loom_unlink(fs, argv[i]);
		if (rc)
			ret = tool_fail("rm", argv[i], rc);
	}
	loom_disconnect(fs);
	return ret;
}

int cmd_mv(struct tool_ctx *ctx, int argc, char **argv)
{
	loom_fs *fs;
	int rc;

	if (argc != 3) {
		fprintf(stderr, "usage: loom mv FROM TO\n");
		return 2;
	}
	fs = tool_connect(ctx);
	if (!fs)
		return 1;
	rc = loom_rename(fs, argv[1], argv[2], 0);
	loom_disconnect(fs);
	return rc ? tool_fail("mv", argv[1], rc) : 0;
}

int cmd_stat(struct tool_ctx *ctx, int argc, char **argv)
{
	struct src s = { .ctx = ctx };
	int ret = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: loom stat PATH...\n");
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		struct stat st;
		char mode[11];
		int rc;

		if (src_pick(&s, argv[i])) {
			src_done(&s);
			return 1;
		}
		rc = src_lstat(&s, s.lpath, &st);
		if (rc) {
			ret = tool_fail("stat", argv[i], rc);
			continue;
		}
		mode_string(st.st_mode, mode);
		printf("  File: %s\n  Size: %-15lld Blocks: %-10lld IO Block: %-6ld\n"
		       "Inode: %-15llu Links: %lu\nAccess: (%04o/%s)  Uid: %5u   Gid: %5u\n"
		       "Access: %lld.%09ld\nModify: %lld.%09ld\nChange: %lld.%09ld\n",
		       argv[i], (long long)st.st_size, (long long)st.st_blocks, (long)st.st_blksize,
		       (unsigned long long)st.st_ino, (unsigned long)st.st_nlink, st.st_mode & 07777, mode,
		       st.st_uid, st.st_gid, (long long)st.st_atim.tv_sec, st.st_atim.tv_nsec,
		       (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec, (long long)st.st_ctim.tv_sec,
		       st.st_ctim.tv_nsec);
	}
	src_done(&s);
	return ret;
}
