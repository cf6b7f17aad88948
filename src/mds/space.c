/*
 * The MDS's side of a full MDT: the map size and the reserve it gives the store (--map-size,
 * --reserve), what a batch whose commit found no room is answered, and the reply cache kept short
 * while room is short. The store decides what may grow (src/mdt/space.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "mds/dispatch.h"

int mds_reserve_parse(const char *arg, struct mds_reserve *out)
{
	size_t n = arg ? strlen(arg) : 0;

	memset(out, 0, sizeof(*out));
	if (n > 1 && arg[n - 1] == '%') {
		char num[16], *end;
		unsigned long pct;

		if (n - 1 >= sizeof(num))
			return -EINVAL;
		memcpy(num, arg, n - 1);
		num[n - 1] = '\0';
		errno = 0;
		pct = strtoul(num, &end, 10);
		if (errno || *end || end == num || pct > 50)
			return -EINVAL;
		out->percent = (uint32_t)pct;
		out->is_percent = true;
		return 0;
	}
	return size_parse(arg, &out->bytes);
}

/* The default reserve: 1% of the MDT's capacity (the smaller of the map and the file system under
 * it), at least 4 MiB and at most 256 MiB. */
#define RESERVE_DEFAULT_PCT 1u
#define RESERVE_MIN         (4ull << 20)
#define RESERVE_MAX         (256ull << 20)

int mds_space_setup(struct mds *m, uint64_t map_size, const struct mds_reserve *want)
{
	struct mdt_space sp;
	char a[32], b[32], c[32];
	uint64_t reserve, capacity;
	int rc;

	if (map_size) {
		rc = mdt_store_set_map_size(m->store, map_size);
		if (rc) {
			log_err("cannot set the MDT's map to %llu bytes: %s", (unsigned long long)map_size,
				strerror(-rc));
			return rc;
		}
	}
	rc = mdt_space(m->store, &sp);
	if (rc) {
		log_err("cannot read the MDT's space: %s", strerror(-rc));
		return rc;
	}
	capacity = sp.map_size < sp.disk_total ? sp.map_size : sp.disk_total;
	if (want && !want->is_percent) {
		reserve = want->bytes;
	} else {
		reserve = capacity / 100 * (want ? want->percent : RESERVE_DEFAULT_PCT);
		if (!want) {
			if (reserve < RESERVE_MIN)
				reserve = RESERVE_MIN;
			if (reserve > RESERVE_MAX)
				reserve = RESERVE_MAX;
		}
	}
	mdt_store_set_reserve(m->store, reserve);
	log_info("MDT space: map %s, file system under it %s, reserve %s for deletions", size_human(sp.map_size, a, sizeof(a)),
		 size_human(sp.disk_total, b, sizeof(b)), size_human(reserve, c, sizeof(c)));
	if (sp.room < reserve + (1u << 20))
		log_warn("the MDT is full (%s of room beyond its reserve): creates get ENOSPC, deletions "
			 "and truncations are served", size_human(sp.room > reserve ? sp.room - reserve : 0, a, sizeof(a)));
	return 0;
}

int mds_space_commit_failed(struct mds *m, int rc)
{
	struct mdt_space sp;

	if (rc == -ENOSPC || rc == -EDQUOT)
		return -ENOSPC;
	/* LMDB says EIO for a short write, which is what a full disk gives. */
	if (rc == -EIO && mdt_space(m->store, &sp) == 0 && sp.disk_left < (1u << 20))
		return -ENOSPC;
	return rc;
}

bool mds_space_short(struct mds *m)
{
	struct mdt_space sp;

	return mdt_space(m->store, &sp) == 0 && sp.room < 2 * sp.reserve;
}
