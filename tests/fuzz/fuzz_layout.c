/*
 * Layouts: lw_layout_decode (MDS replies, layouts stored in the MDT, the loom.lov xattr) and
 * lw_layout_req_check, then what a client does with a decoded layout. Input: the layout's bytes.
 *
 * Properties:
 *  - lw_layout_decode and lw_layout_req_check agree: a layout decodes exactly when its fixed
 *    part passes the check and its objects are all there; it reads 48 (version 1) or 56
 *    (version 2) + 16 * nobjs bytes, no more, and gives back the fields as sent, with a
 *    NUL-terminated pool name (and dom_size 0 for version 1);
 *  - round trip: a version-2 layout that decodes encodes back to the same bytes (a version-1 one
 *    encodes as version 2, 8 bytes longer);
 *  - loom_layout_from_xattr takes exactly the layouts that decode with nothing after them,
 *    leaves *out alone when it fails (its callers free it), and loom_layout_to_xattr gives the
 *    bytes back;
 *  - a file's layout (nobjs > 0) is fit for the stripe math the client runs on it (io.c): the
 *    object sizes of a file add up to the file's size.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/stripe.h"
#include "fuzz.h"
#include "loom/loom_ll.h"
#include "proto/codec.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_quiet();
	return 0;
}

/* What wire.h asks of a layout with objects beyond lw_layout_req_check: a stripe size to
 * divide offsets by, a mirrored file's copies x stripes objects, an erasure-coded file's data
 * and parity objects, and each lw_ostobj's flags (stale, in a mirrored or erasure-coded layout
 * only). The input holds all nobjs objects. */
static bool file_layout_sound(const struct lw_layout *fixed, size_t fixed_len, const uint8_t *data)
{
	bool mirrored = fixed->mirror_count > 1 || fixed->ec_parity;

	if (fixed->nobjs && fixed->stripe_size == 0)
		return false;
	if (fixed->nobjs && fixed->dom_size == LOOM_DOM_NONE)
		return false; /* a file's Data-on-MDT part is a size, not "none" */
	if (fixed->nobjs && fixed->mirror_count > 1 &&
	    (uint64_t)fixed->stripe_count * fixed->mirror_count != fixed->nobjs)
		return false;
	if (fixed->nobjs && fixed->ec_parity &&
	    (fixed->stripe_count < 1 || (uint64_t)fixed->stripe_count + fixed->ec_parity != fixed->nobjs))
		return false;
	for (uint32_t i = 0; i < fixed->nobjs; i++) {
		struct lw_ostobj o;

		memcpy(&o, data + fixed_len + (size_t)i * sizeof(o), sizeof(o));
		if (o.flags & ~(mirrored ? LW_OBJ_STALE : 0u))
			return false;
	}
	return true;
}

/* Encoded bytes equal the input's: one layout, one byte image (reserved pads included). */
static void check_same_image(const uint8_t *enc, const uint8_t *in, uint32_t nobjs)
{
	FUZZ_CHECK(!memcmp(enc, in, lw_layout_size(nobjs)));
}

static void check_stripe_math(const struct loom_layout *l, uint64_t file_size)
{
	struct stripe_geom g = stripe_geom_of(l);
	uint64_t sum = 0;

	if (l->nobjs == 0)
		return;
	/* A file's layout is concrete (wire.h): the decoder refuses a stripe size of 0, which
	 * would divide by zero in stripe_obj_size (io_punch). */
	FUZZ_CHECK(l->stripe_size != 0);
	file_size %= (uint64_t)l->stripe_size * g.count * 3 + 1;
	for (uint32_t k = 0; k < g.count; k++)
		sum += stripe_obj_size(&g, k, file_size);
	FUZZ_CHECK(sum == file_size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct loom_layout *l = NULL, *x = NULL;
	struct lw_layout fixed;
	struct lw_rd r;
	size_t need = 0, fixed_len = 0;
	int rc, req = -1, xrc;

	lw_rd_init(&r, data, size);
	rc = lw_layout_decode(&r, &l);
	FUZZ_CHECK(rc == 0 || rc == -EPROTO || rc == -ENOMEM);
	/* The fixed part as wire.h describes it: 48 bytes, then 8 more for version 2. */
	memset(&fixed, 0, sizeof(fixed));
	if (size >= LW_LAYOUT_V1_SIZE) {
		memcpy(&fixed, data, LW_LAYOUT_V1_SIZE);
		fixed_len = fixed.version >= LW_LAYOUT_V2 ? sizeof(fixed) : LW_LAYOUT_V1_SIZE;
	}
	if (fixed_len && size >= fixed_len) {
		memcpy(&fixed, data, fixed_len);
		req = lw_layout_req_check(&fixed);
		need = fixed_len + (size_t)fixed.nobjs * sizeof(struct lw_ostobj);
		if (rc == 0)
			FUZZ_CHECK(req == 0);
		if (req == 0 && size >= need && file_layout_sound(&fixed, fixed_len, data))
			FUZZ_CHECK(rc == 0);
		if (rc == 0)
			FUZZ_CHECK(file_layout_sound(&fixed, fixed_len, data));
	} else {
		FUZZ_CHECK(rc == -EPROTO);
	}

	if (rc == 0) {
		struct lw_wr w;
		uint8_t *enc;

		FUZZ_CHECK(l != NULL && l->nobjs == fixed.nobjs && l->nobjs <= LOOM_MAX_STRIPES);
		FUZZ_CHECK(need <= size && lw_rd_left(&r) == size - need);
		FUZZ_CHECK(l->pattern == fixed.pattern && l->stripe_size == fixed.stripe_size &&
			   l->stripe_count == fixed.stripe_count && l->stripe_offset == fixed.stripe_offset &&
			   l->layout_gen == fixed.layout_gen && l->flags == fixed.flags &&
			   l->dom_size == fixed.dom_size);
		FUZZ_CHECK(l->mirror_count == (l->nobjs && fixed.mirror_count == 0 ? 1 : fixed.mirror_count));
		FUZZ_CHECK(l->ec_parity == fixed.ec_parity);
		FUZZ_CHECK(memchr(l->pool, '\0', sizeof(l->pool)) != NULL);
		FUZZ_CHECK(!strncmp(l->pool, fixed.pool, sizeof(l->pool)));
		for (uint32_t i = 0; i < l->nobjs; i++) {
			struct lw_ostobj o;

			memcpy(&o, data + fixed_len + (size_t)i * sizeof(o), sizeof(o));
			FUZZ_CHECK(l->objs[i].ost_idx == o.ost_idx && l->objs[i].objid == o.objid &&
				   l->objs[i].flags == o.flags);
		}
		enc = malloc(lw_layout_size(l->nobjs));
		FUZZ_CHECK(enc != NULL);
		lw_wr_init(&w, enc, lw_layout_size(l->nobjs));
		lw_layout_encode(&w, l);
		FUZZ_CHECK(w.err == 0 && w.len == lw_layout_size(l->nobjs));
		if (fixed_len == sizeof(fixed))
			check_same_image(enc, data, l->nobjs);
		free(enc);
		check_stripe_math(l, size > need ? data[need] * 1000003ull : 12345);
		free(l);
	}

	/* The xattr face of the same decoder, as the FUSE mount's setxattr uses it: *out is freed
	 * whatever the result, so a failure must leave it alone. */
	xrc = loom_layout_from_xattr(data, size, &x);
	FUZZ_CHECK(xrc == 0 || xrc == -EINVAL || xrc == -ENOMEM);
	if (rc == 0 && need == size)
		FUZZ_CHECK(xrc == 0);
	else if (rc != -ENOMEM)
		FUZZ_CHECK(xrc != 0);
	if (xrc == 0) {
		size_t len = 0;
		uint8_t *buf;

		size_t want = lw_layout_size(x->nobjs); /* always written as version 2 */

		FUZZ_CHECK(loom_layout_to_xattr(x, NULL, 0, &len) == 0 && len == want);
		buf = malloc(len);
		FUZZ_CHECK(buf != NULL);
		if (len > 1)
			FUZZ_CHECK(loom_layout_to_xattr(x, buf, len - 1, &len) == -ERANGE);
		FUZZ_CHECK(loom_layout_to_xattr(x, buf, want, &len) == 0 && len == want);
		if (fixed_len == sizeof(fixed))
			check_same_image(buf, data, x->nobjs);
		free(buf);
		loom_layout_free(x);
	} else {
		/* What lm_setxattr does (src/fuse/ops_xattr.c): a failure leaves *out NULL. */
		loom_layout_free(x);
	}
	return 0;
}
