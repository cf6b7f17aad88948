/*
 * Erasure coding: Reed-Solomon over GF(2^8) with ISA-L (libisal). A row of k data units gives m
 * parity units, and any k of the k + m units give back the others. The code is the systematic
 * Cauchy one (gf_gen_cauchy1_matrix): every k x k submatrix of it can be inverted, so every
 * choice of k units decodes.
 */
#ifndef LOOM_COMMON_EC_H
#define LOOM_COMMON_EC_H

#include <stddef.h>
#include <stdint.h>

struct ec_codec;

/* A codec for k data and m parity units: -EINVAL unless 1 <= k, 1 <= m, k + m <= 255. */
int ec_codec_new(uint32_t k, uint32_t m, struct ec_codec **out);
void ec_codec_free(struct ec_codec *c);

/* The m parity units of one row: data[0..k) and parity[0..m) are len bytes each. */
void ec_encode(const struct ec_codec *c, size_t len, uint8_t *const *data, uint8_t *const *parity);

/* Makes units want[0..nwant) (indexes 0..k+m, data first) from the k units have[0..k), held in
 * src[0..k), into dst[0..nwant); every buffer len bytes. -EINVAL for a unit named twice or out of
 * range, -ENOMEM. */
int ec_decode(const struct ec_codec *c, size_t len, const uint32_t *have, uint8_t *const *src,
	      const uint32_t *want, uint32_t nwant, uint8_t *const *dst);

#endif
