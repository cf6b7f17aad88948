/*
 * Mirrored files, the calls `loom mirror` makes (docs/architecture.md, "Mirrors"): a resync asked
 * of the MDS, which copies stale copies again in the background, waited for here; and a verify
 * that reads every in-sync copy of every stripe and compares them, byte for byte.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/io_job.h"
#include "client/path.h"
#include "common/ec.h"
#include "common/stripe.h"
#include "common/util.h"

#define VERIFY_CHUNK (4u << 20)

static int mirror_req(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, uint32_t cmd,
		      const struct loom_ostobj *obj)
{
	struct lw_mirror_req req = { .ino = ino, .cmd = cmd, .count = obj ? 1 : 0 };
	struct lw_ostobj o = { .ost_idx = obj ? obj->ost_idx : 0, .objid = obj ? obj->objid : 0 };
	struct mdc_body b = { { &req, &o }, { sizeof(req), obj ? sizeof(o) : 0 } };
	struct rpc_call call;
	int rc = mdc_call(fs, cr, LW_OP_MDS_MIRROR, &b, &call);

	if (rc == 0)
		rpc_call_release(&call);
	return rc;
}

static bool has_stale(const struct loom_layout *l)
{
	for (uint32_t i = 0; i < l->nobjs; i++)
		if (l->objs[i].flags & LOOM_OBJ_STALE)
			return true;
	return false;
}

int loom_mirror_resync(loom_fs *fs, const char *path, unsigned timeout_s)
{
	uint64_t deadline = clock_mono_ns() + (uint64_t)timeout_s * 1000000000ull;
	struct loom_layout *l = NULL;
	struct loom_cred cr;
	struct lw_attr attr;
	int rc;

	if (fs->door)
		return -EOPNOTSUPP;
	fs_cred(fs, &cr);
	rc = path_resolve(fs, &cr, path, true, &attr);
	if (rc)
		return rc;
	rc = mirror_req(fs, &cr, attr.ino, LW_MIRROR_RESYNC, NULL);
	while (rc == 0) {
		rc = mdc_getlayout(fs, &cr, attr.ino, &l);
		if (rc)
			break;
		if (!has_stale(l))
			break;
		free(l);
		l = NULL;
		if (timeout_s && clock_mono_ns() >= deadline) {
			rc = -ETIMEDOUT;
			break;
		}
		sleep_ms(100);
	}
	free(l);
	return rc;
}

int loom_mirror_extend(loom_fs *fs, const char *path)
{
	struct loom_cred cr;
	struct lw_attr attr;
	int rc;

	if (fs->door)
		return -EOPNOTSUPP;
	fs_cred(fs, &cr);
	rc = path_resolve(fs, &cr, path, true, &attr);
	return rc ? rc : mirror_req(fs, &cr, attr.ino, LW_MIRROR_EXTEND, NULL);
}

int loom_mirror_split(loom_fs *fs, const char *path, uint32_t mirror_id)
{
	struct loom_layout *l = NULL;
	struct loom_cred cr;
	struct lw_attr attr;
	int rc;

	if (fs->door)
		return -EOPNOTSUPP;
	fs_cred(fs, &cr);
	rc = path_resolve(fs, &cr, path, true, &attr);
	if (rc == 0)
		rc = mdc_getlayout(fs, &cr, attr.ino, &l);
	if (rc)
		return rc;
	if (layout_copies(l) < 2)
		rc = -EINVAL;
	else if (mirror_id < 1 || mirror_id > layout_copies(l))
		rc = -ENOENT;
	else
		rc = mirror_req(fs, &cr, attr.ino, LW_MIRROR_SPLIT, &l->objs[(mirror_id - 1) * layout_per_copy(l)]);
	free(l);
	return rc;
}

/* Object o of l alone, as a one-stripe layout: its bytes at file offsets = object offsets. */
static struct loom_layout *one_object(const struct loom_layout *l, uint32_t o)
{
	struct loom_layout *one = calloc(1, sizeof(*one) + sizeof(one->objs[0]));

	if (!one)
		return NULL;
	one->pattern = LOOM_PATTERN_RAID0;
	one->stripe_size = l->stripe_size;
	one->stripe_count = 1;
	one->mirror_count = 1;
	one->layout_gen = l->layout_gen;
	one->nobjs = 1;
	one->objs[0] = l->objs[o];
	one->objs[0].flags = 0;
	return one;
}

/* Reads [off, off + len) of object o of l into buf (past its end: zeros). */
static int read_object(loom_fs *fs, uint64_t ino, const struct loom_layout *l, uint32_t o, uint8_t *buf,
		       uint64_t len, uint64_t off)
{
	struct loom_layout *one = one_object(l, o);
	struct io_job job;
	int rc;

	if (!one)
		return -ENOMEM;
	rc = io_job_start(fs, ino, one, NULL, buf, len, off, false, 0, 0, &job);
	if (rc == 0)
		rc = io_job_finish(&job, NULL, NULL);
	free(one);
	return rc;
}

/* An erasure-coded file: the first stripe_count in-sync objects give the others, which must
 * hold what the code makes of them; diff->mirror_b names the first object (from 1) that does
 * not, diff->offset the file offset of its row's byte there. */
static int ec_verify(loom_fs *fs, uint64_t ino, const struct loom_layout *l, uint64_t size,
		     struct loom_mirror_diff *diff)
{
	uint32_t k = layout_per_copy(l), n = l->nobjs, nh = 0, nw = 0;
	uint64_t chunk = MAX(1u, VERIFY_CHUNK / l->stripe_size) * (uint64_t)l->stripe_size;
	uint64_t end = layout_obj_size(l, 0, size);
	uint32_t *have = calloc(n, sizeof(uint32_t)), *want = calloc(n, sizeof(uint32_t));
	uint8_t **src = calloc(n, sizeof(uint8_t *)), **dst = calloc(n, sizeof(uint8_t *));
	uint8_t *held = malloc((size_t)n * chunk), *made = malloc((size_t)n * chunk);
	struct ec_codec *c = NULL;
	int rc = have && want && src && dst && held && made ? ec_codec_new(k, l->ec_parity, &c) : -ENOMEM;

	for (uint32_t o = 0; rc == 0 && o < n; o++) {
		if (l->objs[o].flags & LOOM_OBJ_STALE)
			continue;
		if (nh < k) {
			have[nh] = o;
			src[nh++] = held + (size_t)o * chunk;
		} else {
			want[nw] = o;
			dst[nw] = made + (size_t)nw * chunk;
			nw++;
		}
	}
	for (uint64_t x = 0; rc == 0 && nh == k && nw && x < end && !diff->differ; x += chunk) {
		uint64_t len = MIN(chunk, end - x);

		for (uint32_t o = 0; rc == 0 && o < n; o++)
			if (!(l->objs[o].flags & LOOM_OBJ_STALE))
				rc = read_object(fs, ino, l, o, held + (size_t)o * chunk, len, x);
		if (rc == 0)
			rc = ec_decode(c, len, have, src, want, nw, dst);
		for (uint32_t w = 0; rc == 0 && w < nw && !diff->differ; w++) {
			const uint8_t *got = held + (size_t)want[w] * chunk;

			for (uint64_t i = 0; i < len; i++)
				if (got[i] != dst[w][i]) {
					uint64_t at = x + i;

					diff->differ = true;
					diff->mirror_b = want[w] + 1;
					diff->offset = at / l->stripe_size * l->stripe_size * k + at % l->stripe_size;
					break;
				}
		}
		diff->compared += len;
	}
	ec_codec_free(c);
	free(have);
	free(want);
	free(src);
	free(dst);
	free(held);
	free(made);
	return rc;
}

int loom_mirror_verify(loom_fs *fs, const char *path, struct loom_mirror_diff *diff)
{
	struct loom_layout *l = NULL;
	struct loom_cred cr;
	struct lw_attr attr;
	uint8_t *a = NULL, *b = NULL;
	int rc;

	memset(diff, 0, sizeof(*diff));
	if (fs->door)
		return -EOPNOTSUPP;
	fs_cred(fs, &cr);
	rc = path_resolve(fs, &cr, path, true, &attr);
	if (rc == 0)
		rc = mdc_getlayout(fs, &cr, attr.ino, &l);
	if (rc)
		return rc;
	if (l->ec_parity && l->nobjs) {
		rc = ec_verify(fs, attr.ino, l, attr.size, diff);
		free(l);
		return rc;
	}
	if (layout_copies(l) < 2 || l->nobjs == 0) {
		free(l);
		return -EINVAL;
	}
	a = malloc(VERIFY_CHUNK);
	b = malloc(VERIFY_CHUNK);
	if (!a || !b) {
		rc = -ENOMEM;
		goto out;
	}
	{
		struct stripe_geom g = stripe_geom_of(l);
		uint32_t per = g.count, copies = layout_copies(l);

		for (uint32_t k = 0; rc == 0 && k < per && !diff->differ; k++) {
			/* The object bytes the file's size reaches (the Data-on-MDT part is a hole). */
			uint64_t end = stripe_obj_size(&g, k, attr.size);
			int32_t first = -1;

			for (uint32_t m = 0; m < copies; m++)
				if (!(l->objs[m * per + k].flags & LOOM_OBJ_STALE)) {
					first = (int32_t)m;
					break;
				}
			for (uint32_t m = (uint32_t)first + 1; first >= 0 && rc == 0 && m < copies && !diff->differ; m++) {
				if (l->objs[m * per + k].flags & LOOM_OBJ_STALE)
					continue;
				for (uint64_t x = 0; rc == 0 && x < end; x += VERIFY_CHUNK) {
					uint64_t n = MIN((uint64_t)VERIFY_CHUNK, end - x);

					rc = read_object(fs, attr.ino, l, (uint32_t)first * per + k, a, n, x);
					if (rc == 0)
						rc = read_object(fs, attr.ino, l, m * per + k, b, n, x);
					if (rc || memcmp(a, b, n) == 0)
						continue;
					for (uint64_t i = 0; i < n; i++)
						if (a[i] != b[i]) {
							diff->differ = true;
							diff->offset = stripe_file_offset(&g, k, x + i);
							diff->mirror_a = (uint32_t)first + 1;
							diff->mirror_b = m + 1;
							break;
						}
					break;
				}
			}
			diff->compared += end;
		}
	}
out:
	free(a);
	free(b);
	free(l);
	return rc;
}
