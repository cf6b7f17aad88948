/* loom setstripe / loom getstripe, in the syntax and output format of Lustre's lfs. */
#include <dirent.h>
#include <fcntl.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <sys/xattr.h>
#include <unistd.h>

#include "common/util.h"
#include "loom/loom_ll.h"
#include "common/stripe.h"
#include "tools/tool.h"

static int parse_int(const char *s, long lo, long hi, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 0);
	if (errno || *end || end == s || v < lo || v > hi)
		return -EINVAL;
	*out = v;
	return 0;
}

/* Through a mount, layouts travel in the virtual xattr loom.lov, as Lustre's lustre.lov. */
#define LOV_XATTR "loom.lov"
#define LOV_MAX   (64u << 10)

static int set_via_mount(const char *path, const struct loom_layout *l)
{
	char buf[256];
	size_t len;
	int rc = loom_layout_to_xattr(l, buf, sizeof(buf), &len);

	if (rc)
		return rc;
	if (access(path, F_OK) != 0) {
		/* `lfs setstripe FILE` on a new name creates the file with that layout. */
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
		if (fd < 0)
			return -errno;
		close(fd);
	}
	return setxattr(path, LOV_XATTR, buf, len, 0) < 0 ? -errno : 0;
}

static int del_via_mount(const char *path)
{
	return removexattr(path, LOV_XATTR) < 0 ? -errno : 0;
}

/*
 * Components, as lfs spells them: `-E END [OPTIONS]` starts one, the options after it describe it.
 * Loom has two shapes: `-E END -L mdt -E -1 [OPTIONS]` (Data-on-MDT: the first END bytes on the
 * MDS, then RAID-0 to EOF) and `-E -1 [OPTIONS]` (RAID-0 only). Without -E the options describe the
 * RAID-0 layout and the Data-on-MDT size is inherited.
 */
#define COMP_EOF   UINT64_MAX
#define COMPS_MAX  2

#define GIVEN_COUNT 0x1u
#define GIVEN_SIZE  0x2u
#define GIVEN_INDEX 0x4u
#define GIVEN_POOL  0x8u

struct comp {
	uint64_t end;        /* COMP_EOF for -E -1 */
	const char *end_arg; /* as typed, for messages */
	bool mdt;            /* -L mdt */
	unsigned given;      /* GIVEN_*: options given in this component */
	int32_t count;
	uint32_t size;
	int32_t index;
	char pool[LOOM_POOL_NAME_MAX + 1];
};

#define SETSTRIPE_USAGE \
	"usage: loom setstripe [-N COPIES | --ec K+M] [-c COUNT] [-S SIZE] [-i IDX] [-p POOL] PATH...\n" \
	"       loom setstripe -E END -L mdt -E -1 [-c COUNT] [-S SIZE] [-i IDX] [-p POOL] PATH...\n" \
	"       loom setstripe -E -1 [-c COUNT] [-S SIZE] [-i IDX] [-p POOL] PATH...\n" \
	"       loom setstripe -d DIR...\n"

static const char PFL_UNSUPPORTED[] =
	"Loom supports only an optional Data-on-MDT component then one RAID-0 component to EOF:\n"
	"  -E END -L mdt -E -1 [OPTIONS]   or   -E -1 [OPTIONS]\n";

/* -E's argument: -1 or eof for the end of the file, else a size (k, M, G). */
static int parse_end(const char *s, uint64_t *out)
{
	if (!strcmp(s, "-1") || !strcasecmp(s, "eof")) {
		*out = COMP_EOF;
		return 0;
	}
	if (size_parse(s, out) || *out == 0)
		return -EINVAL;
	return 0;
}

/* One of -c -S -i -p into the current component; 0 or -EINVAL (message printed). */
static int comp_option(struct comp *c, int opt, const char *arg)
{
	uint64_t size;
	long v;

	switch (opt) {
	case 'c':
		if (parse_int(arg, -1, LOOM_MAX_STRIPES, &v)) {
			fprintf(stderr, "loom setstripe: invalid stripe count '%s' (-1 for every OST, up to %d)\n",
				arg, LOOM_MAX_STRIPES);
			return -EINVAL;
		}
		c->count = (int32_t)v;
		c->given |= GIVEN_COUNT;
		return 0;
	case 'S':
		if (size_parse(arg, &size) || size % LOOM_STRIPE_UNIT || size > LOOM_MAX_STRIPE_SIZE) {
			fprintf(stderr, "loom setstripe: invalid stripe size '%s': must be a multiple of 64 KiB, "
					"at most 4 GiB - 64 KiB (suffixes k, M, G)\n", arg);
			return -EINVAL;
		}
		c->size = (uint32_t)size;
		c->given |= GIVEN_SIZE;
		return 0;
	case 'i':
		if (parse_int(arg, -1, 65535, &v)) {
			fprintf(stderr, "loom setstripe: invalid stripe index '%s'\n", arg);
			return -EINVAL;
		}
		c->index = (int32_t)v;
		c->given |= GIVEN_INDEX;
		return 0;
	default: /* 'p' */
		if (strlen(arg) > LOOM_POOL_NAME_MAX) {
			fprintf(stderr, "loom setstripe: pool name '%s' longer than %d characters\n", arg,
				LOOM_POOL_NAME_MAX);
			return -EINVAL;
		}
		snprintf(c->pool, sizeof(c->pool), "%s", arg);
		c->given |= GIVEN_POOL;
		return 0;
	}
}

/* The Data-on-MDT component's own rules; 0 or -EINVAL (message printed). */
static int check_dom_comp(const struct comp *c)
{
	if (c->end % LOOM_STRIPE_UNIT && c->end != COMP_EOF) {
		fprintf(stderr, "loom setstripe: Data-on-MDT END '%s' is not a multiple of 64 KiB "
				"(suffixes k, M)\n", c->end_arg);
		return -EINVAL;
	}
	if (c->end > LOOM_DOM_MAX) {
		fprintf(stderr, "loom setstripe: Data-on-MDT END '%s' too large: Loom keeps at most 1 MiB "
				"of a file on the MDT\n", c->end_arg);
		return -EINVAL;
	}
	if (c->given & (GIVEN_COUNT | GIVEN_INDEX | GIVEN_POOL)) {
		fprintf(stderr, "loom setstripe: -c, -i and -p describe the RAID-0 component: put them "
				"after -E -1, not on the -L mdt component\n");
		return -EINVAL;
	}
	if ((c->given & GIVEN_SIZE) && c->size != c->end) {
		fprintf(stderr, "loom setstripe: -S on the -L mdt component must equal its END (%s)\n",
			c->end_arg);
		return -EINVAL;
	}
	return 0;
}

/*
 * The request the components describe: comps[0] holds the options given before any -E, comps[1..n]
 * the -E components. 0 or -EINVAL (message printed).
 */
static int comps_to_layout(const struct comp *comps, int n, struct loom_layout *l)
{
	const struct comp *raid0 = &comps[n];

	if (n == 1 && comps[1].mdt) {
		fprintf(stderr, "loom setstripe: a -L mdt component needs a RAID-0 component after it "
				"(-E -1).\n%s", PFL_UNSUPPORTED);
		return -EINVAL;
	}
	if (n >= 1 && (raid0->end != COMP_EOF || (n == 2 && !comps[1].mdt))) {
		fprintf(stderr, "loom setstripe: %s", PFL_UNSUPPORTED);
		return -EINVAL;
	}
	if (n == 2 && check_dom_comp(&comps[1]))
		return -EINVAL;
	l->dom_size = n == 0 ? 0 : n == 1 ? LOOM_DOM_NONE : (uint32_t)comps[1].end;
	if (raid0->given & GIVEN_COUNT)
		l->stripe_count = raid0->count;
	if (raid0->given & GIVEN_SIZE)
		l->stripe_size = raid0->size;
	if (raid0->given & GIVEN_INDEX)
		l->stripe_offset = raid0->index;
	memcpy(l->pool, raid0->pool, sizeof(l->pool));
	return 0;
}

static int parse_ec(const char *arg, long *k, long *m);

/* Parses setstripe's options into l (*del: -d, *help: --help); 0 or -EINVAL (message printed). */
static int parse_setstripe(int argc, char **argv, struct loom_layout *l, bool *del, bool *help)
{
	static const struct option opts[] = {
		{ "stripe-count", required_argument, NULL, 'c' }, { "stripe-size", required_argument, NULL, 'S' },
		{ "stripe-index", required_argument, NULL, 'i' }, { "pool", required_argument, NULL, 'p' },
		{ "component-end", required_argument, NULL, 'E' }, { "comp-end", required_argument, NULL, 'E' },
		{ "layout", required_argument, NULL, 'L' },       { "delete", no_argument, NULL, 'd' },
		{ "mirror-count", required_argument, NULL, 'N' }, { "help", no_argument, NULL, 'h' },
		{ "ec", required_argument, NULL, 'e' }, { NULL, 0, NULL, 0 },
	};
	struct comp comps[COMPS_MAX + 1] = { { 0 } };
	int n = 0, c, rc;
	bool any = false;
	long copies, ec_k = 0, ec_m = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "c:S:i:p:E:L:N:dh", opts, NULL)) != -1) {
		switch (c) {
		case 'e':
			if (parse_ec(optarg, &ec_k, &ec_m))
				return -EINVAL;
			any = true;
			break;
		case 'N':
			if (parse_int(optarg, 1, LOOM_MAX_MIRRORS, &copies)) {
				fprintf(stderr, "loom setstripe: invalid mirror count '%s' (1 to %d copies)\n", optarg,
					LOOM_MAX_MIRRORS);
				return -EINVAL;
			}
			l->mirror_count = (uint16_t)copies;
			any = true;
			break;
		case 'c': case 'S': case 'i': case 'p':
			if (comp_option(&comps[n], c, optarg))
				return -EINVAL;
			any = true;
			break;
		case 'E':
			if (n == 0 && comps[0].given) {
				fprintf(stderr, "loom setstripe: options before the first -E: put each after the "
						"-E of the component it describes\n");
				return -EINVAL;
			}
			if (n == COMPS_MAX) {
				fprintf(stderr, "loom setstripe: more than 2 components.\n%s", PFL_UNSUPPORTED);
				return -EINVAL;
			}
			n++;
			if (parse_end(optarg, &comps[n].end)) {
				fprintf(stderr, "loom setstripe: invalid component END '%s' (a size with k, M, G, "
						"or -1 for the end of the file)\n", optarg);
				return -EINVAL;
			}
			comps[n].end_arg = optarg;
			any = true;
			break;
		case 'L':
			if (strcmp(optarg, "mdt") && strcmp(optarg, "raid0")) {
				fprintf(stderr, "loom setstripe: invalid layout '%s' (-L takes raid0 or mdt)\n", optarg);
				return -EINVAL;
			}
			if (!strcmp(optarg, "mdt") && n == 0) {
				fprintf(stderr, "loom setstripe: -L mdt describes a component: it needs -E END "
						"before it (-E END -L mdt -E -1 ...)\n");
				return -EINVAL;
			}
			if (!strcmp(optarg, "mdt") && n > 1) {
				fprintf(stderr, "loom setstripe: only the first component may be -L mdt.\n%s",
					PFL_UNSUPPORTED);
				return -EINVAL;
			}
			comps[n].mdt = !strcmp(optarg, "mdt");
			any = true;
			break;
		case 'd': *del = true; break;
		case 'h': *help = true; return 0;
		default: return -EINVAL;
		}
	}
	if (optind >= argc || (*del && any)) {
		fprintf(stderr, SETSTRIPE_USAGE);
		return -EINVAL;
	}
	if (*del)
		return 0;
	rc = comps_to_layout(comps, n, l);
	if (rc || !ec_m)
		return rc;
	/* K+M: K data stripes and M parity objects; -c says the same K or nothing. */
	if (l->mirror_count > 1) {
		fprintf(stderr, "loom setstripe: --ec and -N: a file is mirrored or erasure-coded, not both\n");
		return -EINVAL;
	}
	if (l->stripe_count && l->stripe_count != ec_k) {
		fprintf(stderr, "loom setstripe: -c %d and --ec %ld+%ld: the data stripes are K\n",
			l->stripe_count, ec_k, ec_m);
		return -EINVAL;
	}
	l->stripe_count = (int32_t)ec_k;
	l->ec_parity = (uint16_t)ec_m;
	l->mirror_count = 1;
	return 0;
}

/* --ec K+M: K data stripes, M parity objects (Reed-Solomon: any K of the K + M give the data). */
static int parse_ec(const char *arg, long *k, long *m)
{
	char *plus = strchr(arg, '+'), kbuf[16];

	if (plus && (size_t)(plus - arg) < sizeof(kbuf)) {
		memcpy(kbuf, arg, (size_t)(plus - arg));
		kbuf[plus - arg] = '\0';
		if (parse_int(kbuf, 1, LOOM_EC_MAX_WIDTH - 1, k) == 0 &&
		    parse_int(plus + 1, 1, LOOM_EC_MAX_PARITY, m) == 0 && *k + *m <= LOOM_EC_MAX_WIDTH)
			return 0;
	}
	fprintf(stderr, "loom setstripe: invalid --ec '%s' (K+M: K data stripes, 1 to %d parity objects, "
			"K + M at most %d; e.g. 4+2)\n", arg, LOOM_EC_MAX_PARITY, LOOM_EC_MAX_WIDTH);
	return -EINVAL;
}

static void setstripe_help(void)
{
	printf(SETSTRIPE_USAGE
	       "On a directory: the default layout of files created in it. On a new path: creates\n"
	       "an empty file with that layout. -c -1 stripes over every OST; -i -1 lets the MDS\n"
	       "choose; SIZE takes k, M, G suffixes and is a multiple of 64 KiB (default 4M).\n"
	       "\n"
	       "Data-on-MDT (DoM): -E END -L mdt keeps the first END bytes of each file on the MDS,\n"
	       "the rest on the stripes at their usual offsets. END is a multiple of 64 KiB, at most\n"
	       "1 MiB; the options after -E -1 describe the RAID-0 part. New files get 64 KiB on the\n"
	       "MDT unless a directory says otherwise. `-E -1 [OPTIONS]` alone means no DoM; without\n"
	       "-E the DoM size is inherited (from the directory, then the file system default).\n"
	       "Unlike lfs, Loom takes only these two shapes: no PFL with more components.\n"
	       "\n"
	       "Mirrors: -N COPIES keeps that many copies of the data, each striped as the other\n"
	       "options say, every object on an OST of its own (copies of a stripe on different\n"
	       "OSSs where there are enough). Writes go to every copy at once; a copy that misses one\n"
	       "is marked stale until `loom mirror resync`. The Data-on-MDT part is the MDT's.\n"
	       "\n"
	       "Erasure coding: --ec K+M stripes the data over K objects and keeps M parity objects\n"
	       "(Reed-Solomon), each object on an OST of its own: any M of them may be lost. Whole\n"
	       "rows (K stripes) written in order get their parity at once; a write to part of a\n"
	       "row marks the parity stale until the MDS makes it again (`loom ec rebuild`).\n");
}

int cmd_setstripe(struct tool_ctx *ctx, int argc, char **argv)
{
	struct loom_layout l = { .pattern = LOOM_PATTERN_RAID0, .stripe_offset = -1 };
	bool del = false, help = false;
	loom_fs *fs;
	int rc, ret = 0;

	if (parse_setstripe(argc, argv, &l, &del, &help))
		return 2;
	if (help) {
		setstripe_help();
		return 0;
	}
	fs = NULL;
	for (int i = optind; i < argc; i++) {
		struct tool_mount mnt;

		if (tool_mount_of(argv[i], &mnt) == 0) {
			rc = del ? del_via_mount(argv[i]) : set_via_mount(argv[i], &l);
		} else {
			if (!fs && !(fs = tool_connect(ctx)))
				return 1;
			rc = del ? loom_dellayout(fs, argv[i]) : loom_setlayout(fs, argv[i], &l);
		}
		if (rc == -EEXIST) {
			fprintf(stderr, "loom setstripe: '%s': stripe already set (the file holds data)\n", argv[i]);
			ret = 1;
		} else if (rc == -EINVAL && l.ec_parity) {
			fprintf(stderr, "loom setstripe: '%s': --ec %d+%u needs %d OSTs of its own (each object "
					"on its own OST), and the file system or pool has fewer\n",
				argv[i], l.stripe_count, l.ec_parity, l.stripe_count + l.ec_parity);
			ret = 1;
		} else if (rc == -ENOSPC && l.ec_parity) {
			fprintf(stderr, "loom setstripe: '%s': --ec %d+%u: more than %u of its OSTs are away "
					"now (`loom df` shows)\n", argv[i], l.stripe_count, l.ec_parity, l.ec_parity);
			ret = 1;
		} else if (rc == -EINVAL && l.mirror_count > 1) {
			fprintf(stderr, "loom setstripe: '%s': %u copies need %u OSTs of their own (each copy "
					"of a stripe on its own OST), and the file system or pool has fewer\n",
				argv[i], l.mirror_count, l.mirror_count);
			ret = 1;
		} else if (rc) {
			ret = tool_fail("setstripe", argv[i], rc);
		}
	}
	if (fs)
		loom_disconnect(fs);
	return ret;
}

enum gs_field { GS_ALL, GS_COUNT, GS_SIZE, GS_INDEX, GS_POOL };

/* A Data-on-MDT part to show: a file's dom_size, or a directory default's other than inherit/none. */
static bool has_dom(const struct loom_layout *l)
{
	return l->dom_size != 0 && l->dom_size != LOOM_DOM_NONE;
}

/* lfs's one-line directory fields; ind "" for a plain default, 6 spaces inside a component. */
static void print_dir_fields(const char *ind, int count, uint32_t size, const char *pattern, int offset,
			     const char *pool)
{
	printf("%sstripe_count:  %d %sstripe_size:   %u %spattern:       %s %sstripe_offset: %d", ind, count,
	       ind, size, ind, pattern, ind, offset);
	if (pool[0])
		printf(" %spool:          %s", ind, pool);
	printf("\n");
}

static void print_dir_raid0(const struct loom_layout *l, const char *ind)
{
	print_dir_fields(ind, l->stripe_count ? l->stripe_count : 1,
			 l->stripe_size ? l->stripe_size : LOOM_DEFAULT_STRIPE_SIZE, "raid0", l->stripe_offset,
			 l->pool);
}

/* A plain file layout's lmm_* lines, as lfs prints them. */
static void print_lmm_fields(const struct loom_layout *l)
{
	printf("lmm_stripe_count:  %d\n", l->stripe_count);
	printf("lmm_stripe_size:   %u\n", l->stripe_size);
	printf("lmm_pattern:       raid0\n");
	printf("lmm_layout_gen:    %u\n", l->layout_gen);
	printf("lmm_stripe_offset: %d\n", l->nobjs ? (int)l->objs[0].ost_idx : l->stripe_offset);
	if (l->pool[0])
		printf("lmm_pool:          %s\n", l->pool);
}

/* -y: lfs's YAML form, one field a line and the objects as a list. */
static void print_yaml(const struct loom_layout *l)
{
	if (l->flags & LOOM_LAYOUT_DEFAULT) {
		printf("stripe_count:  %d\n", l->stripe_count ? l->stripe_count : 1);
		printf("stripe_size:   %u\n", l->stripe_size ? l->stripe_size : LOOM_DEFAULT_STRIPE_SIZE);
		printf("pattern:       raid0\n");
		printf("stripe_offset: %d\n", l->stripe_offset);
		if (l->pool[0])
			printf("pool:          %s\n", l->pool);
		return;
	}
	print_lmm_fields(l);
	printf("lmm_objects:\n");
	for (uint32_t i = 0; i < l->nobjs; i++) {
		const struct loom_ostobj *o = &l->objs[i];
		unsigned long long seq = 0x100000000ull | (unsigned long long)o->ost_idx << 16 |
					 ((o->objid >> 32) & 0xFFFF);

		printf("      - l_ost_idx: %u\n", o->ost_idx);
		printf("        l_fid:     0x%llx:0x%x:0x%x\n", seq, (unsigned)(o->objid & 0xFFFFFFFFu),
		       (unsigned)(o->objid >> 48));
	}
}

static void print_file_layout(const struct loom_layout *l)
{
	print_lmm_fields(l);
	printf("\tobdidx\t\t objid\t\t objid\t\t group\n");
	for (uint32_t i = 0; i < l->nobjs; i++)
		printf("\t%6u\t%14llu\t%#13llx\t%14llu\n", l->objs[i].ost_idx,
		       (unsigned long long)l->objs[i].objid, (unsigned long long)l->objs[i].objid, 0ull);
}

/*
 * Lustre's composite format: per copy of the data (a mirror, lcme_mirror_id 1, 2, ...; 0 for a
 * file with one copy), the Data-on-MDT part [0, dom_size) if any, then RAID-0 to EOF. A file's
 * components are instantiated ("init", ids as FLR numbers them: mirror << 16 | entry; 1, 2 for one
 * copy); a directory's default has none ("N/A", flags 0) and prints each component's fields on
 * one line, as lfs does. A copy with a stale object is "init,stale".
 */
static void print_comp_header(bool dir, uint32_t mirror_id, int id, bool stale, uint64_t start, uint32_t end)
{
	if (dir) {
		printf("    lcme_id:             N/A\n");
		printf("    lcme_mirror_id:      N/A\n");
		printf("    lcme_flags:          0\n");
	} else {
		printf("    lcme_id:             %d\n", id);
		printf("    lcme_mirror_id:      %u\n", mirror_id);
		printf("    lcme_flags:          %s\n", stale ? "init,stale" : "init");
	}
	printf("    lcme_extent.e_start: %llu\n", (unsigned long long)start);
	if (end)
		printf("    lcme_extent.e_end:   %u\n", end);
	else
		printf("    lcme_extent.e_end:   EOF\n");
}

/*
 * An object as lfs prints it in a component: its OST and its FID. Loom's objects have no FID;
 * this is the IDIF FID Lustre gives an OST object (sequence 0x1 << 32 | ost_idx << 16 | objid
 * bits 32-47, oid the low 32 bits, version bits 48-63), so the object id can be read back.
 */
static void print_comp_object(uint32_t i, const struct loom_ostobj *o)
{
	unsigned long long seq = 0x100000000ull | (unsigned long long)o->ost_idx << 16 |
				 ((o->objid >> 32) & 0xFFFF);

	printf("      - %u: { l_ost_idx: %u, l_fid: [0x%llx:0x%x:0x%x] }\n", i, o->ost_idx, seq,
	       (unsigned)(o->objid & 0xFFFFFFFFu), (unsigned)(o->objid >> 48));
}

/* One copy's components: m counts from 0; copies 1 prints Lustre's plain composite ids. */
static void print_copy(const struct loom_layout *l, bool dir, uint32_t copies, uint32_t m)
{
	uint32_t per = dir ? 0 : layout_per_copy(l), mirror_id = copies > 1 ? m + 1 : 0;
	int id = copies > 1 ? (int)((m + 1) << 16) + 1 : 1;
	bool stale = false;

	for (uint32_t i = 0; i < per; i++)
		stale |= l->objs[m * per + i].flags & LOOM_OBJ_STALE;
	if (has_dom(l)) {
		print_comp_header(dir, mirror_id, id++, false, 0, l->dom_size);
		if (dir) {
			print_dir_fields("      ", 0, l->dom_size, "mdt", -1, "");
		} else {
			printf("      lmm_stripe_count:  0\n");
			printf("      lmm_stripe_size:   %u\n", l->dom_size);
			printf("      lmm_pattern:       mdt\n");
			printf("      lmm_layout_gen:    0\n");
			printf("      lmm_stripe_offset: 0\n"); /* the MDT's index: Loom has one */
		}
		printf("\n");
	}
	print_comp_header(dir, mirror_id, id, stale, has_dom(l) ? l->dom_size : 0, 0);
	if (dir) {
		print_dir_raid0(l, "      ");
		return;
	}
	printf("      lmm_stripe_count:  %d\n", l->stripe_count);
	printf("      lmm_stripe_size:   %u\n", l->stripe_size);
	printf("      lmm_pattern:       raid0\n");
	printf("      lmm_layout_gen:    0\n");
	printf("      lmm_stripe_offset: %d\n", per ? (int)l->objs[m * per].ost_idx : l->stripe_offset);
	if (l->pool[0])
		printf("      lmm_pool:          %s\n", l->pool);
	printf("      lmm_objects:\n");
	for (uint32_t i = 0; i < per; i++)
		print_comp_object(i, &l->objs[m * per + i]);
}

/*
 * An erasure-coded layout: a data component (raid0, the K data objects) and a parity component
 * (pattern "parity", the M parity objects, lcme_flags "init,parity"), as Lustre's erasure-coded
 * files show a parity component beside the data; a component with a stale object is "stale".
 */
static void print_ec(const struct loom_layout *l)
{
	bool dir = l->flags & LOOM_LAYOUT_DEFAULT;
	uint32_t k = dir ? 0 : layout_per_copy(l);
	bool stale[2] = { false, false };

	for (uint32_t i = 0; !dir && i < l->nobjs; i++)
		stale[i >= k] |= (l->objs[i].flags & LOOM_OBJ_STALE) != 0;
	printf("  lcm_layout_gen:    %u\n", dir ? 0 : l->layout_gen);
	printf("  lcm_mirror_count:  1\n");
	printf("  lcm_entry_count:   2\n");
	printf("  lcm_ec:            %d+%u\n", dir || !k ? l->stripe_count : (int)k, l->ec_parity);
	if (!dir)
		printf("  lcm_flags:         %s\n", stale[0] || stale[1] ? "degraded" : "ok");
	for (int c = 0; c < 2; c++) {
		if (c)
			printf("\n");
		if (dir) {
			printf("    lcme_id:             N/A\n");
			printf("    lcme_flags:          %s\n", c ? "parity" : "0");
		} else {
			printf("    lcme_id:             %d\n", c + 1);
			printf("    lcme_flags:          init%s%s\n", c ? ",parity" : "", stale[c] ? ",stale" : "");
		}
		printf("    lcme_extent.e_start: 0\n");
		printf("    lcme_extent.e_end:   EOF\n");
		if (dir) {
			print_dir_fields("      ", c ? (int)l->ec_parity : (l->stripe_count ? l->stripe_count : 1),
					 l->stripe_size ? l->stripe_size : LOOM_DEFAULT_STRIPE_SIZE,
					 c ? "parity" : "raid0", c ? -1 : l->stripe_offset, l->pool);
			continue;
		}
		printf("      lmm_stripe_count:  %u\n", c ? (uint32_t)l->ec_parity : k);
		printf("      lmm_stripe_size:   %u\n", l->stripe_size);
		printf("      lmm_pattern:       %s\n", c ? "parity" : "raid0");
		printf("      lmm_layout_gen:    0\n");
		printf("      lmm_stripe_offset: %d\n", l->nobjs ? (int)l->objs[c ? k : 0].ost_idx : -1);
		if (l->pool[0])
			printf("      lmm_pool:          %s\n", l->pool);
		printf("      lmm_objects:\n");
		for (uint32_t i = c ? k : 0; i < (c ? l->nobjs : k); i++)
			print_comp_object(i - (c ? k : 0), &l->objs[i]);
	}
}

static void print_composite(const struct loom_layout *l)
{
	bool dir = l->flags & LOOM_LAYOUT_DEFAULT;
	uint32_t copies = dir ? (l->mirror_count > 1 ? l->mirror_count : 1) : layout_copies(l);
	bool stale = false;

	for (uint32_t i = 0; !dir && i < l->nobjs; i++)
		stale |= l->objs[i].flags & LOOM_OBJ_STALE;
	printf("  lcm_layout_gen:    %u\n", dir ? 0 : l->layout_gen);
	printf("  lcm_mirror_count:  %u\n", copies);
	printf("  lcm_entry_count:   %u\n", copies * (has_dom(l) ? 2 : 1));
	/* FLR's file state: ro, all copies in sync; wp, a copy is stale (or writes in flight). */
	if (copies > 1 && !dir)
		printf("  lcm_flags:         %s\n",
		       stale || (l->flags & LOOM_LAYOUT_WRITE_PENDING) ? "wp" : "ro");
	for (uint32_t m = 0; m < copies; m++) {
		if (m)
			printf("\n");
		print_copy(l, dir, copies, m);
	}
}

static int print_one_field(const struct loom_layout *l, enum gs_field field)
{
	bool dir = l->flags & LOOM_LAYOUT_DEFAULT;

	switch (field) {
	case GS_COUNT: printf("%d\n", l->stripe_count ? l->stripe_count : 1); break;
	case GS_SIZE: printf("%u\n", l->stripe_size ? l->stripe_size : LOOM_DEFAULT_STRIPE_SIZE); break;
	case GS_INDEX: printf("%d\n", !dir && l->nobjs ? (int)l->objs[0].ost_idx : l->stripe_offset); break;
	case GS_POOL: printf("%s\n", l->pool); break;
	case GS_ALL: break;
	}
	return 0;
}

/* Where getstripe looks: through libloom, or (fs NULL) through a mount's loom.lov xattr. */
struct gs_src {
	struct tool_ctx *ctx;
	loom_fs *fs;
	bool yaml;      /* -y */
	bool recursive; /* -r */
	int errors;     /* entries below the paths given that could not be shown (each told) */
};

int tool_layout_of_mounted(const char *path, bool follow, struct loom_layout **out)
{
	char *buf = malloc(LOV_MAX);
	ssize_t n;
	int rc;

	if (!buf)
		return -ENOMEM;
	n = follow ? getxattr(path, LOV_XATTR, buf, LOV_MAX) : lgetxattr(path, LOV_XATTR, buf, LOV_MAX);
	rc = n < 0 ? -errno : loom_layout_from_xattr(buf, (size_t)n, out);
	free(buf);
	return rc;
}

static int gs_layout(struct gs_src *src, const char *path, bool mounted, struct loom_layout **out)
{
	if (mounted)
		return tool_layout_of_mounted(path, true, out);
	if (!src->fs && !(src->fs = tool_connect(src->ctx)))
		return -ENOTCONN;
	return loom_getlayout(src->fs, path, out);
}

static int show(struct gs_src *src, const char *path, bool mounted, enum gs_field field, bool *first)
{
	struct loom_layout *l = NULL;
	int rc = gs_layout(src, path, mounted, &l);

	if (rc == -ENODATA) {
		if (field == GS_ALL) {
			printf("%s%s has no stripe info\n", *first ? "" : "\n", path);
			*first = false;
		}
		return 0;
	}
	if (rc)
		return rc;
	if (field != GS_ALL) {
		print_one_field(l, field);
	} else {
		printf("%s%s\n", *first ? "" : "\n", path);
		*first = false;
		if (l->ec_parity)
			print_ec(l);
		else if (has_dom(l) || l->mirror_count > 1)
			print_composite(l);
		else if (src->yaml)
			print_yaml(l);
		else if (l->flags & LOOM_LAYOUT_DEFAULT)
			print_dir_raid0(l, "");
		else
			print_file_layout(l);
	}
	loom_layout_free(l);
	return 0;
}

static int show_entries(struct gs_src *src, const char *dir, bool mounted, enum gs_field field,
			bool *first);

/* An entry of a directory being listed: a regular file's layout, and with -r a subdirectory's
 * default and then its entries. Other types have no layout to show. */
static int show_entry(struct gs_src *src, const char *path, unsigned type, bool mounted,
		      enum gs_field field, bool *first)
{
	int rc;

	if (type == DT_REG)
		return show(src, path, mounted, field, first);
	if (type != DT_DIR || !src->recursive)
		return 0;
	rc = show(src, path, mounted, field, first);
	return rc ? rc : show_entries(src, path, mounted, field, first);
}

/* One entry of a listing failed: told, and the listing goes on (as lfs and find(1) go on past a
 * directory they may not read). A lost connection ends everything. */
static int entry_failed(struct gs_src *src, const char *path, int rc)
{
	if (rc == -ENOTCONN)
		return rc;
	fprintf(stderr, "loom getstripe: %s: %s\n", path, strerror(-rc));
	src->errors++;
	return 0;
}

/* The regular files of a directory, each shown after it (as lfs getstripe DIR); with -r the
 * subdirectories too, depth first. */
static int show_entries(struct gs_src *src, const char *dir, bool mounted, enum gs_field field,
			bool *first)
{
	char child[4096];
	int rc = 0;

	if (mounted) {
		DIR *d = opendir(dir);
		struct dirent *e;

		if (!d)
			return -errno;
		while ((e = readdir(d)) != NULL && rc == 0) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			snprintf(child, sizeof(child), "%s/%s", dir, e->d_name);
			rc = show_entry(src, child, e->d_type, true, field, first);
			if (rc)
				rc = entry_failed(src, child, rc);
		}
		closedir(d);
		return rc;
	}
	{
		struct loom_dirent ent;
		loom_dir *d;

		rc = loom_opendir(src->fs, dir, &d);
		if (rc)
			return rc;
		while ((rc = loom_readdir(d, &ent)) == 1) {
			if (!strcmp(ent.name, ".") || !strcmp(ent.name, ".."))
				continue;
			snprintf(child, sizeof(child), "%s/%s", strcmp(dir, "/") ? dir : "", ent.name);
			rc = show_entry(src, child, ent.type, false, field, first);
			if (rc && (rc = entry_failed(src, child, rc)) != 0)
				break;
		}
		loom_closedir(d);
	}
	return rc;
}

int cmd_getstripe(struct tool_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "stripe-count", no_argument, NULL, 'c' }, { "stripe-size", no_argument, NULL, 'S' },
		{ "stripe-index", no_argument, NULL, 'i' }, { "pool", no_argument, NULL, 'p' },
		{ "directory", no_argument, NULL, 'd' },    { "help", no_argument, NULL, 'h' },
		{ "recursive", no_argument, NULL, 'r' },    { "yaml", no_argument, NULL, 'y' },
		{ NULL, 0, NULL, 0 },
	};
	enum gs_field field = GS_ALL;
	bool dir_only = false, first = true;
	struct gs_src src = { .ctx = ctx };
	int c, ret = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "cSipdhry", opts, NULL)) != -1) {
		switch (c) {
		case 'c': field = GS_COUNT; break;
		case 'S': field = GS_SIZE; break;
		case 'i': field = GS_INDEX; break;
		case 'p': field = GS_POOL; break;
		case 'd': dir_only = true; break;
		case 'r': src.recursive = true; break;
		case 'y': src.yaml = true; break;
		case 'h':
			printf("usage: loom getstripe [-c|-S|-i|-p] [-d] [-r] [-y] PATH...\n"
			       "Prints layouts as `lfs getstripe` does; a directory shows its default layout,\n"
			       "then (without -d) the layouts of the files in it, and with -r of everything\n"
			       "below it. -y prints YAML (one field a line, lmm_objects as a list). A layout\n"
			       "with a Data-on-MDT part prints in lfs's composite format (an mdt component,\n"
			       "then raid0 to EOF); -c, -S, -i and -p print the RAID-0 component's value.\n");
			return 0;
		default: return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "usage: loom getstripe [-c|-S|-i|-p] [-d] [-r] [-y] PATH...\n");
		return 2;
	}
	for (int i = optind; i < argc; i++) {
		struct tool_mount mnt;
		bool mounted = tool_mount_of(argv[i], &mnt) == 0;
		struct stat st;
		int rc;

		if (mounted) {
			rc = stat(argv[i], &st) < 0 ? -errno : 0;
		} else {
			if (!src.fs && !(src.fs = tool_connect(ctx)))
				return 1;
			rc = loom_stat(src.fs, argv[i], &st);
		}
		if (rc == 0)
			rc = show(&src, argv[i], mounted, field, &first);
		if (rc == 0 && S_ISDIR(st.st_mode) && !dir_only && field == GS_ALL)
			rc = show_entries(&src, argv[i], mounted, field, &first);
		if (rc == -ENOTCONN)
			return 1;
		if (rc < 0)
			ret = tool_fail("getstripe", argv[i], rc);
	}
	if (src.fs)
		loom_disconnect(src.fs);
	return ret || src.errors ? 1 : 0;
}
