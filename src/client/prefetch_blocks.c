/*
 * Blocks of the prefetcher: the ranged items of an epoch (records of shards, each a few KiB) that
 * lie in one aligned block of a file are read as that block, once, and copied out of it, so a
 * shuffled epoch over a shard costs one request per MiB, not one per record. This is what the
 * kernel's page cache gives a local folder (and the mount) for free.
 *
 * Only blocks with at least two items qualify, and only as many as fit alive at once in half of
 * the memory bound, alive meaning from the block's first item in the epoch's order to its last
 * (planned by walking the order once); the others' items read their own ranges. The most alive
 * at once is the blocks' share of the memory (block_budget); items reserve in the rest. A block
 * is read by the first thread that comes to one of its items (or by the reader, if it gets there
 * first), and freed when its last item has had its copy or was given up. The reader copies items
 * out itself: a thread per item would only pass a lock around.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "client/prefetch.h"

struct blk_key {
	const char *path;
	uint64_t blockno;
	size_t item;
};

static int key_cmp(const void *a, const void *b)
{
	const struct blk_key *x = a, *y = b;
	int c = strcmp(x->path, y->path);

	if (c)
		return c;
	if (x->blockno != y->blockno)
		return x->blockno < y->blockno ? -1 : 1;
	return x->item < y->item ? -1 : x->item > y->item;
}

int pf_blocks_plan(loom_prefetch *pf)
{
	struct blk_key *keys;
	size_t nkeys = 0, *first, *last, alive = 0;
	uint32_t *candidate;
	bool *enabled;
	int rc = -ENOMEM;

	pf->item_block = calloc(pf->n, sizeof(*pf->item_block));
	pf->next_plain = malloc((pf->n + 1) * sizeof(*pf->next_plain));
	keys = malloc(pf->n * sizeof(*keys));
	if (!pf->item_block || !pf->next_plain || !keys) {
		free(keys);
		return -ENOMEM;
	}
	for (size_t k = 0; k < pf->n; k++) {
		const struct loom_prefetch_item *it = &pf->items[k];

		if (it->length <= 0 || it->length > PF_BLOCK / 2 ||
		    it->offset / PF_BLOCK != (it->offset + (uint64_t)it->length - 1) / PF_BLOCK)
			continue; /* whole files, large ranges, ranges across a block's end */
		keys[nkeys++] = (struct blk_key){ it->path, it->offset / PF_BLOCK, k };
	}
	qsort(keys, nkeys, sizeof(*keys), key_cmp);
	/* Groups of at least two items in one block: the candidates, by first and last item. */
	first = malloc((nkeys / 2 + 1) * sizeof(*first));
	last = malloc((nkeys / 2 + 1) * sizeof(*last));
	candidate = calloc(pf->n, sizeof(*candidate));
	pf->blocks = calloc(nkeys / 2 + 1, sizeof(*pf->blocks));
	enabled = calloc(nkeys / 2 + 1, sizeof(*enabled));
	if (!first || !last || !candidate || !pf->blocks || !enabled)
		goto out;
	for (size_t i = 0, j; i < nkeys; i = j) {
		for (j = i + 1; j < nkeys && keys[j].blockno == keys[i].blockno && !strcmp(keys[j].path, keys[i].path); j++)
			;
		if (j - i < 2)
			continue;
		pf->blocks[pf->nblocks] = (struct pf_block){ .path = keys[i].path,
							     .start = keys[i].blockno * PF_BLOCK,
							     .refs = (unsigned)(j - i) };
		first[pf->nblocks] = keys[i].item; /* sorted by item within the group */
		last[pf->nblocks] = keys[j - 1].item;
		for (size_t g = i; g < j; g++)
			candidate[keys[g].item] = (uint32_t)(pf->nblocks + 1);
		pf->nblocks++;
	}
	/* Walk the epoch's order: a block is read whole only if it fits beside those alive then. */
	for (size_t k = 0; k < pf->n; k++) {
		size_t b = candidate[k];

		if (!b--)
			continue;
		if (first[b] == k && alive + PF_BLOCK <= pf->max_bytes / 2) {
			enabled[b] = true;
			alive += PF_BLOCK;
			if (alive > pf->block_budget)
				pf->block_budget = alive;
		}
		if (enabled[b])
			pf->item_block[k] = (uint32_t)(b + 1);
		if (last[b] == k && enabled[b])
			alive -= PF_BLOCK;
	}
	pf->next_plain[pf->n] = pf->n;
	for (size_t k = pf->n; k-- > 0;)
		pf->next_plain[k] = pf->item_block[k] ? pf->next_plain[k + 1] : k;
	rc = 0;
out:
	free(keys);
	free(first);
	free(last);
	free(candidate);
	free(enabled);
	return rc;
}

void pf_blocks_free(loom_prefetch *pf)
{
	for (size_t b = 0; b < pf->nblocks; b++)
		free(pf->blocks[b].buf);
	free(pf->blocks);
	free(pf->item_block);
	free(pf->next_plain);
}

struct pf_block *pf_block_of(loom_prefetch *pf, size_t k)
{
	return pf->item_block && pf->item_block[k] ? &pf->blocks[pf->item_block[k] - 1] : NULL;
}

size_t pf_plain_from(loom_prefetch *pf, size_t k)
{
	return pf->next_plain && k < pf->n ? pf->next_plain[k] : k;
}

bool pf_block_claim(loom_prefetch *pf, struct pf_block *b)
{
	if (b->state != BLK_NONE)
		return false;
	b->state = BLK_READING;
	b->charged = true;
	pf->block_held += PF_BLOCK;
	if (pf->held + pf->block_held > pf->st.peak_bytes)
		pf->st.peak_bytes = pf->held + pf->block_held;
	return true;
}

/* The last reference gone: the block's memory goes back (its reader frees it if still reading). */
static void block_release(loom_prefetch *pf, struct pf_block *b)
{
	if (b->refs || b->state == BLK_READING)
		return;
	free(b->buf);
	b->buf = NULL;
	if (b->charged) {
		pf->block_held -= PF_BLOCK;
		b->charged = false;
	}
	b->state = BLK_FAILED; /* nobody asks any more */
}

void pf_block_fill(loom_prefetch *pf, struct pf_block *b, loom_file *f)
{
	void *data = f ? malloc(PF_BLOCK) : NULL;
	size_t have = 0;

	while (data && have < PF_BLOCK) {
		ssize_t r = loom_pread(f, (char *)data + have, PF_BLOCK - have, (off_t)(b->start + have));

		if (r < 0) {
			free(data);
			data = NULL; /* its items read their own ranges, and meet the error themselves */
		}
		if (r <= 0)
			break;
		have += (size_t)r;
	}
	pthread_mutex_lock(&pf->lock);
	b->buf = data;
	b->len = have;
	b->state = data ? BLK_READY : BLK_FAILED;
	pthread_cond_broadcast(&pf->block_done);
	block_release(pf, b);
	pthread_mutex_unlock(&pf->lock);
}

void pf_block_unref(loom_prefetch *pf, size_t k)
{
	struct pf_block *b = pf_block_of(pf, k);

	if (!b)
		return;
	pf->item_block[k] = 0;
	b->refs--;
	block_release(pf, b);
}

ssize_t pf_block_take(loom_prefetch *pf, size_t i, void **buf)
{
	const struct loom_prefetch_item *it = &pf->items[i];
	struct pf_block *b = pf_block_of(pf, i);
	ssize_t got = -EAGAIN;
	void *copy;

	if (pf_block_claim(pf, b)) {
		loom_file *f = NULL;

		pthread_mutex_unlock(&pf->lock);
		if (loom_open(pf->fs, b->path, O_RDONLY, 0, &f))
			f = NULL;
		pf_block_fill(pf, b, f);
		if (f)
			loom_close(f);
		pthread_mutex_lock(&pf->lock);
	}
	while (b->state == BLK_READING)
		pthread_cond_wait(&pf->block_done, &pf->lock);
	if (b->state == BLK_READY) {
		size_t at = (size_t)(it->offset - b->start);
		size_t len = at < b->len ? b->len - at : 0;

		if (len > (size_t)it->length)
			len = (size_t)it->length;
		pthread_mutex_unlock(&pf->lock);
		copy = malloc(len ? len : 1); /* our reference keeps the block */
		if (copy)
			memcpy(copy, (char *)b->buf + at, len);
		pthread_mutex_lock(&pf->lock);
		got = copy ? (ssize_t)len : -ENOMEM;
		*buf = copy;
	}
	pf_block_unref(pf, i);
	return got;
}
