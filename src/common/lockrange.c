/* fcntl(2) lock ranges: merge, split, conflict (see lockrange.h). */
#include "common/lockrange.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>

static bool same_owner(const struct lock_range *l, const struct lock_op *op)
{
	return l->sid == op->sid && l->owner == op->owner && l->flock == op->flock;
}

static struct lock_range *range_new(const struct lock_op *op, uint64_t start, uint64_t end,
				    uint32_t type)
{
	struct lock_range *l = calloc(1, sizeof(*l));

	if (l) {
		l->sid = op->sid;
		l->owner = op->owner;
		l->start = start;
		l->end = end;
		l->type = type;
		l->pid = op->pid;
		l->flock = op->flock;
	}
	return l;
}

/* Whether l touches or overlaps [start, end] (end + 1 == l->start touches; no wrap at the top). */
static bool touches(const struct lock_range *l, uint64_t start, uint64_t end)
{
	return !(l->end != UINT64_MAX && l->end + 1 < start) && !(end != UINT64_MAX && l->start > end + 1);
}

int lock_ranges_apply(struct lock_range **head, const struct lock_op *op)
{
	uint64_t start = op->start, end = op->end;
	struct lock_range *fresh = NULL, *split = NULL, **pp;

	/* Allocate first, so that a failure leaves the list as it was. */
	if (op->type != F_UNLCK && !(fresh = range_new(op, start, end, op->type)))
		return -ENOMEM;
	for (struct lock_range *l = *head; l && !split; l = l->next) {
		if (same_owner(l, op) && l->start < start && l->end > end &&
		    !(fresh && l->type == fresh->type) && !(split = range_new(op, 0, 0, l->type))) {
			free(fresh);
			return -ENOMEM;
		}
	}

	for (pp = head; *pp;) {
		struct lock_range *l = *pp;

		if (!same_owner(l, op)) {
			pp = &l->next;
			continue;
		}
		/* Same type and touching: absorbed into the new lock. */
		if (fresh && l->type == fresh->type && touches(l, start, end)) {
			if (l->start < fresh->start)
				fresh->start = l->start;
			if (l->end > fresh->end)
				fresh->end = l->end;
			*pp = l->next;
			free(l);
			continue;
		}
		if (l->end < start || l->start > end) {
			pp = &l->next;
			continue;
		}
		if (l->start < start && l->end > end) {
			/* Sticks out on both sides: the head stays here, the tail goes in `split`. */
			split->start = end + 1;
			split->end = l->end;
			split->pid = l->pid;
			split->next = l->next;
			l->end = start - 1;
			l->next = split;
			split = NULL;
			pp = &l->next->next;
		} else if (l->start < start) {
			l->end = start - 1;
			pp = &l->next;
		} else if (l->end > end) {
			l->start = end + 1;
			pp = &l->next;
		} else {
			*pp = l->next;
			free(l);
		}
	}
	free(split); /* not needed after all */
	if (fresh) {
		fresh->next = *head;
		*head = fresh;
	}
	return 0;
}

const struct lock_range *lock_ranges_conflict(const struct lock_range *head, const struct lock_op *op)
{
	for (const struct lock_range *l = head; l; l = l->next) {
		if (l->flock != op->flock || (l->sid == op->sid && l->owner == op->owner))
			continue;
		if (l->end < op->start || l->start > op->end)
			continue;
		if (l->type == F_WRLCK || op->type == F_WRLCK)
			return l;
	}
	return NULL;
}

bool lock_ranges_holds(const struct lock_range *head, const struct lock_op *op)
{
	for (const struct lock_range *l = head; l; l = l->next)
		if (same_owner(l, op) && l->type == op->type && l->start <= op->start && l->end >= op->end)
			return true;
	return false;
}

void lock_ranges_free(struct lock_range **head)
{
	while (*head) {
		struct lock_range *l = *head;

		*head = l->next;
		free(l);
	}
}
