/*
 * Reed-Solomon with ISA-L (ec.h). The encode matrix is (k + m) x k: the identity on top (data
 * units are themselves), Cauchy rows below (the parity). To decode, the rows of the units held
 * form a k x k matrix B with B x data = held; its inverse gives every data unit, and a parity
 * unit's row times that inverse gives the parity from what is held.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <isa-l/erasure_code.h>

#include "common/ec.h"

/* ISA-L takes lengths as int: longer units (stripes up to 4 GiB) go in pieces of this. */
#define EC_PIECE (1u << 30)

struct ec_codec {
	uint32_t k, m;
	uint8_t *matrix;   /* (k + m) x k */
	uint8_t *tables;   /* ec_init_tables of the parity rows: 32 * k * m */
};

int ec_codec_new(uint32_t k, uint32_t m, struct ec_codec **out)
{
	struct ec_codec *c;

	*out = NULL;
	if (k < 1 || m < 1 || k + m > 255)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->k = k;
	c->m = m;
	c->matrix = malloc((size_t)(k + m) * k);
	c->tables = malloc((size_t)32 * k * m);
	if (!c->matrix || !c->tables) {
		ec_codec_free(c);
		return -ENOMEM;
	}
	gf_gen_cauchy1_matrix(c->matrix, (int)(k + m), (int)k);
	ec_init_tables((int)k, (int)m, c->matrix + (size_t)k * k, c->tables);
	*out = c;
	return 0;
}

void ec_codec_free(struct ec_codec *c)
{
	if (!c)
		return;
	free(c->matrix);
	free(c->tables);
	free(c);
}

/* rows x k tables applied to len bytes of src into dst, in pieces ISA-L's int lengths take. */
static void apply(int k, int rows, uint8_t *tables, size_t len, uint8_t *const *src, uint8_t *const *dst)
{
	uint8_t *s[255], *d[255];

	for (size_t done = 0; done < len; done += EC_PIECE) {
		size_t n = len - done < EC_PIECE ? len - done : EC_PIECE;

		for (int i = 0; i < k; i++)
			s[i] = src[i] + done;
		for (int i = 0; i < rows; i++)
			d[i] = dst[i] + done;
		ec_encode_data((int)n, k, rows, tables, s, d);
	}
}

void ec_encode(const struct ec_codec *c, size_t len, uint8_t *const *data, uint8_t *const *parity)
{
	apply((int)c->k, (int)c->m, c->tables, len, data, parity);
}

int ec_decode(const struct ec_codec *c, size_t len, const uint32_t *have, uint8_t *const *src,
	      const uint32_t *want, uint32_t nwant, uint8_t *const *dst)
{
	uint32_t k = c->k, n = c->k + c->m;
	uint8_t *b = malloc((size_t)k * k), *inv = malloc((size_t)k * k);
	uint8_t *rows = malloc((size_t)k * (nwant ? nwant : 1)), *tables = malloc((size_t)32 * k * (nwant ? nwant : 1));
	uint8_t *seen = calloc(n, 1);
	int rc = 0;

	if (!b || !inv || !rows || !tables || !seen) {
		rc = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < k; i++) {
		if (have[i] >= n || seen[have[i]]) {
			rc = -EINVAL;
			goto out;
		}
		seen[have[i]] = 1;
		memcpy(b + (size_t)i * k, c->matrix + (size_t)have[i] * k, k);
	}
	for (uint32_t w = 0; w < nwant; w++)
		if (want[w] >= n) {
			rc = -EINVAL;
			goto out;
		}
	if (gf_invert_matrix(b, inv, (int)k) != 0) {
		rc = -EINVAL; /* cannot be with a Cauchy matrix and distinct units */
		goto out;
	}
	for (uint32_t w = 0; w < nwant; w++) {
		uint8_t *row = rows + (size_t)w * k;

		if (want[w] < k) {
			memcpy(row, inv + (size_t)want[w] * k, k);
			continue;
		}
		/* A parity unit: its encode row times the inverse. */
		for (uint32_t i = 0; i < k; i++) {
			uint8_t s = 0;

			for (uint32_t j = 0; j < k; j++)
				s ^= gf_mul(c->matrix[(size_t)want[w] * k + j], inv[(size_t)j * k + i]);
			row[i] = s;
		}
	}
	if (nwant) {
		ec_init_tables((int)k, (int)nwant, rows, tables);
		apply((int)k, (int)nwant, tables, len, src, dst);
	}
out:
	free(b);
	free(inv);
	free(rows);
	free(tables);
	free(seen);
	return rc;
}
