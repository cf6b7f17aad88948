/*
 * Multi-mount protection (MMP), as ldiskfs's for Lustre targets on shared storage: a target (an
 * MDT, an OST) that two hosts can reach is served by one at a time. The server holding it keeps a
 * heartbeat in the target (the file `mmp`: a sequence number bumped every interval, and who holds
 * it). A server that starts waits two intervals: a sequence that moved means another live server
 * holds the target, and the start is refused. It then writes its own heartbeat and waits again, so
 * that two servers starting at once cannot both win. A holder that finds someone else's heartbeat
 * in the file has lost the target (a failover took it while this server hung): it must stop
 * serving at once, writing nothing more (mmp_acquire's on_lost).
 *
 * A clean stop leaves the file "clean": the next start waits only for its own check. A flock on
 * the MDT (and the OSS's own) still refuses a second server on the same host at once; MMP is what
 * protects a target from another host, which no lock on a shared disk reliably does.
 */
#ifndef LOOM_COMMON_MMP_H
#define LOOM_COMMON_MMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MMP_FILE          "mmp"
#define MMP_INTERVAL_MIN  100u       /* ms */
#define MMP_INTERVAL_MAX  60000u

struct mmp;

/* Who holds a target, as its heartbeat says. */
struct mmp_holder {
	char node[64];    /* host name */
	char server[64];  /* "loom-mds pid 1234" */
	uint32_t interval_ms;
	bool clean;       /* released by a clean stop */
};

/* Takes the target in dir for `server` (its description), heartbeat every interval_ms: waits
 * about two intervals (the holder's, if longer) to see whether another server is alive.
 * -EBUSY (holder filled) when one is; 0 with *out holding the target, its heartbeat running;
 * on_lost(arg) is called from the heartbeat's thread if the target is ever taken from it, or
 * the heartbeat cannot be written (the caller stops serving: it must not return). */
int mmp_acquire(const char *dir, const char *server, uint32_t interval_ms, void (*on_lost)(void *arg, const char *why),
		void *arg, struct mmp_holder *holder, struct mmp **out);
/* Before a write to the target (the MDS's commits, the OSS's writes): 0 while the target is this
 * server's. When the last beat is older than an interval (the process may have been frozen while
 * its partner took over), the block is read again first: another server's calls on_lost (which
 * does not return), one that cannot be read is -EIO. Thread-safe; m NULL: 0. */
int mmp_check(struct mmp *m);
/* A clean stop: the heartbeat ends and the file says "clean". */
void mmp_release(struct mmp *m);
/* For a server (prog: "loom-mds"): takes its kind ("MDT", "OST") of target in dir, logging why
 * not (-EBUSY: another server's heartbeat is alive); a server that later loses it logs so and
 * exits at once (status 3). interval_ms 0: only if the target has protection on already (it has a
 * heartbeat file: a server once served it with protection), with the interval the file says;
 * without, 0 and *out NULL. */
int mmp_take(const char *dir, const char *kind, const char *prog, uint32_t interval_ms, struct mmp **out);
/* Who holds the target in dir now (0), -ENOENT without a heartbeat file, -EINVAL for one that is
 * not one. */
int mmp_read_holder(const char *dir, struct mmp_holder *out);

#endif
