/*
 * An OST's instance: a number that changes when writes an OSS acknowledged may have been lost.
 *
 * An OSS acknowledges a write once it is in the page cache. When its process dies, the kernel
 * keeps those pages and writes them, and the next server on this host finds them (kill -9 loses
 * nothing); when its host dies or reboots, or a failover partner on another host takes the OST,
 * what the dead host had not written back is gone. Clients that wrote since their last fsync
 * must hear of it at their next fsync (EIO), as a local file system reports a writeback error:
 * they learn the instance on every connection (OST_CONNECT) and compare.
 *
 * The file `server` in the OST says who served it last: host name, the kernel's boot id, the
 * instance, and whether it stopped cleanly (everything synced). A start keeps the instance after
 * a clean stop or when the last server ran under this kernel since its boot (the boot id says
 * so, whatever the host name), syncing the file system first; otherwise it takes a new one.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "oss/ost_impl.h"

#define SERVER_FILE "server"

struct served_by {
	uint64_t instance;
	int clean;
	char host[64];
	char boot[40];
};

/* This host's name and the kernel's boot id (changes with every boot). */
static void this_host(struct served_by *s)
{
	char buf[64] = "";
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);

	if (gethostname(s->host, sizeof(s->host) - 1) != 0)
		snprintf(s->host, sizeof(s->host), "?");
	if (fd >= 0) {
		ssize_t n = read(fd, buf, sizeof(buf) - 1);

		close(fd);
		buf[n > 0 ? n : 0] = '\0';
		buf[strcspn(buf, "\n")] = '\0';
	}
	snprintf(s->boot, sizeof(s->boot), "%s", buf[0] ? buf : "?");
}

/* 0 with *s read; -ENOENT without the file (a new OST, or one an older loom-oss served). */
static int read_served(struct ost *o, struct served_by *s)
{
	char path[PATH_MAX + 16], line[256];
	FILE *f;
	int fields = 0;

	snprintf(path, sizeof(path), "%s/%s", o->dir, SERVER_FILE);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	memset(s, 0, sizeof(*s));
	while (fgets(line, sizeof(line), f)) {
		unsigned long long v;

		line[strcspn(line, "\n")] = '\0';
		if (sscanf(line, "instance=%llx", &v) == 1) {
			s->instance = v;
			fields++;
		} else if (sscanf(line, "clean=%d", &s->clean) == 1) {
			fields++;
		} else if (!strncmp(line, "host=", 5)) {
			snprintf(s->host, sizeof(s->host), "%s", line + 5);
			fields++;
		} else if (!strncmp(line, "boot=", 5)) {
			snprintf(s->boot, sizeof(s->boot), "%s", line + 5);
			fields++;
		}
	}
	fclose(f);
	return fields == 4 && s->instance ? 0 : -EINVAL;
}

static int write_served(struct ost *o, const struct served_by *s)
{
	char path[PATH_MAX + 16], buf[256];
	int n;

	snprintf(path, sizeof(path), "%s/%s", o->dir, SERVER_FILE);
	n = snprintf(buf, sizeof(buf), "instance=%016llx\nclean=%d\nhost=%s\nboot=%s\n",
		     (unsigned long long)s->instance, s->clean, s->host, s->boot);
	return file_write_atomic(path, buf, (size_t)n);
}

int ost_instance_start(struct ost *o)
{
	struct served_by prev, now = { 0 };
	int rc = read_served(o, &prev);

	this_host(&now);
	if (rc == 0 && (prev.clean || !strcmp(prev.boot, now.boot))) {
		/* Nothing was lost: a clean stop, or a server under this very kernel (whatever host
		 * name its container had), whose pages the kernel kept. Those are made durable now,
		 * before anyone is told they are. */
		if (!prev.clean && syncfs(o->dirfd) != 0)
			return -errno;
		now.instance = prev.instance;
	} else {
		if (rc == 0)
			log_warn("OST %s: the last server (on %s) did not stop cleanly, under another kernel "
				 "than this one (another host, or before a reboot): writes it acknowledged that "
				 "nobody fsynced may be lost; the clients that made them are told at their next "
				 "fsync", o->dir, prev.host);
		do {
			if (random_bytes(&now.instance, sizeof(now.instance)) != 0)
				now.instance = clock_mono_ns() ^ ((uint64_t)getpid() << 32);
		} while (now.instance == 0 || (rc == 0 && now.instance == prev.instance));
	}
	rc = write_served(o, &now);
	if (rc == 0)
		o->instance = now.instance;
	return rc;
}

void ost_instance_stop(struct ost *o)
{
	struct served_by now = { .instance = o->instance, .clean = 1 };

	if (!o->instance)
		return;
	this_host(&now);
	/* Everything acknowledged is on disk first: the next server, on any host, keeps the
	 * instance. */
	if (syncfs(o->dirfd) == 0)
		write_served(o, &now);
}

uint64_t ost_instance(const struct ost *o)
{
	return o->instance;
}
