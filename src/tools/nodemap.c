/*
 * Keys and the nodemap, as Lustre's `lctl nodemap_*`:
 * - loom key new FILE: a new random file system key.
 * - loom key new --node NAME FILE: a key of node NAME's own, derived from the file system key.
 *   A node not yet in the nodemap joins it (generation 1); one in it is revoked first (a new
 *   generation), so that a key handed out before stops working.
 * - loom nodemap list|add|modify|revoke|del: what each node may claim (root squash, id ranges,
 *   read-only), printed as `lctl get_param nodemap.*` prints it.
 * Arguments are checked before connecting; a usage error exits 2, as every command's.
 */
#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/auth.h"
#include "tools/tool.h"

#define NODE_NAME_RULE "1-31 letters, digits, '.', '_' or '-'"

/* Defaults of a node added without options: root squashed to nobody, every id its own. */
static const struct loom_node node_defaults = {
	.squash_uid = 65534, .squash_gid = 65534,
	.uid_min = 0, .uid_max = UINT32_MAX, .gid_min = 0, .gid_max = UINT32_MAX,
};

static void key_usage(FILE *f)
{
	fprintf(f, "usage: loom key new FILE\n"
		   "       loom key new --node NAME FILE\n"
		   "The first writes a new random file system key to FILE (mode 0600). The second writes a\n"
		   "key of client node NAME's own, made from the file system key this command connects\n"
		   "with: NAME joins the nodemap if it is not in it, else its key is revoked first (the\n"
		   "node's earlier key stops working). Mount with key=FILE on that node.\n"
		   "NAME: " NODE_NAME_RULE ". FILE must not exist.\n");
}

static void nodemap_usage(FILE *f)
{
	fprintf(f, "usage: loom nodemap list [NAME]\n"
		   "       loom nodemap add NAME [--admin] [--trusted] [--readonly] [--squash-uid N]\n"
		   "                             [--squash-gid N] [--uid-range A-B] [--gid-range A-B]\n"
		   "       loom nodemap modify NAME --property P --value V\n"
		   "       loom nodemap revoke NAME\n"
		   "       loom nodemap del NAME\n"
		   "What each client node with a key of its own (`loom key new --node`) may claim, as\n"
		   "Lustre's nodemap. Unless admin, its root becomes squash_uid/squash_gid (65534); unless\n"
		   "trusted, so do its ids outside uid_range/gid_range (0-4294967295). A readonly node may\n"
		   "only read. revoke: a new key generation (the node's key stops working); del: the node\n"
		   "leaves the nodemap. P: admin, trusted, readonly_mount (V 0 or 1), squash_uid,\n"
		   "squash_gid (V a number), uid_range, gid_range (V A-B).\n"
		   "NAME: " NODE_NAME_RULE ".\n"
		   "Every command needs root and the file system key.\n");
}

/* 0, or a message and -EINVAL for a name no node can have. */
static int check_name(const char *cmd, const char *name)
{
	if (loom_node_name_check(name) == 0)
		return 0;
	fprintf(stderr, "loom %s: '%s' is not a node name (" NODE_NAME_RULE ")\n", cmd, name);
	return -EINVAL;
}

/* A decimal number that fits 32 bits, nothing else around it. */
static int parse_u32(const char *s, uint32_t *out)
{
	unsigned long long v;
	char *end;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (*end || errno || v > UINT32_MAX)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

/* "A-B" with A <= B. */
static int parse_range(const char *s, uint32_t *lo, uint32_t *hi)
{
	const char *dash = strchr(s, '-');
	char first[16];

	if (!dash || (size_t)(dash - s) >= sizeof(first))
		return -EINVAL;
	memcpy(first, s, (size_t)(dash - s));
	first[dash - s] = '\0';
	if (parse_u32(first, lo) || parse_u32(dash + 1, hi) || *lo > *hi)
		return -EINVAL;
	return 0;
}

/* An argument that is wrong: the message names it; the exit code is 2. */
static int bad_arg(const char *cmd, const char *what, const char *arg)
{
	fprintf(stderr, "loom %s: invalid %s '%s'\n", cmd, what, arg);
	return 2;
}

/* getopt_long over argv from the verb on, its messages naming the command ("loom nodemap add:
 * unrecognized option"), not the verb alone. */
static void name_verb(char **argv, const char *cmd, char *buf, size_t cap)
{
	snprintf(buf, cap, "loom %s %s", cmd, argv[0]);
	argv[0] = buf;
	optind = 1;
}

/* The exit code of a nodemap request that failed, after a line saying why. */
static int nodemap_fail(const char *cmd, const char *name, const char *what, int rc)
{
	if (rc == -EPERM)
		fprintf(stderr, "loom %s: %s: needs root and the file system key\n", cmd, what);
	else if (rc == -ENOENT)
		fprintf(stderr, "loom %s: no node %s in the nodemap\n", cmd, name ? name : "");
	else if (rc == -EEXIST)
		fprintf(stderr, "loom %s: node %s is in the nodemap already\n", cmd, name);
	else if (rc == -EOPNOTSUPP)
		fprintf(stderr, "loom %s: %s: the MDS has no nodemap (it predates it)\n", cmd, what);
	else
		return tool_fail(cmd, what, rc);
	return 1;
}

static void node_print(const struct loom_node *n)
{
	printf("nodemap.%s.generation=%u\n", n->name, n->generation);
	printf("nodemap.%s.admin_nodemap=%d\n", n->name, !!(n->flags & LOOM_NODE_ADMIN));
	printf("nodemap.%s.trusted_nodemap=%d\n", n->name, !!(n->flags & LOOM_NODE_TRUSTED));
	printf("nodemap.%s.readonly_mount=%d\n", n->name, !!(n->flags & LOOM_NODE_READONLY));
	printf("nodemap.%s.squash_uid=%u\n", n->name, n->squash_uid);
	printf("nodemap.%s.squash_gid=%u\n", n->name, n->squash_gid);
	printf("nodemap.%s.uid_range=%u-%u\n", n->name, n->uid_min, n->uid_max);
	printf("nodemap.%s.gid_range=%u-%u\n", n->name, n->gid_min, n->gid_max);
}

/* Whether the key this tool connected with is the file system key, which a node's is made from.
 * Asked before the nodemap changes, so that a node is not revoked for a key that cannot be
 * written. The file is read as libloom read it. */
static bool holds_fs_key(const struct tool_ctx *ctx)
{
	const char *path = loom_key_file_choose(ctx->key_file);
	uint8_t key[LOOM_KEY_MAX];
	struct loom_key_id id;
	size_t len = 0;
	bool fs_key;

	if (!path || !*path)
		return false;
	fs_key = loom_key_load(path, key, &len, &id) == 0 && !id.node[0];
	explicit_bzero(key, sizeof(key));
	return fs_key;
}

/* key new --node NAME FILE */
static int key_new_node(struct tool_ctx *ctx, const char *name, const char *file)
{
	struct loom_node *cur = NULL, node;
	struct stat st;
	uint32_t n = 0;
	loom_fs *fs;
	int rc, ret = 0;

	if (check_name("key", name))
		return 2;
	/* Before anything changes: a key that cannot be written must not cost the node its key. */
	if (lstat(file, &st) == 0)
		return tool_fail("key", file, -EEXIST);
	if (errno != ENOENT)
		return tool_fail("key", file, -errno);
	fs = tool_connect(ctx);
	if (!fs)
		return 1;
	if (!holds_fs_key(ctx)) {
		fprintf(stderr, "loom key: a node's key is made from the file system key: connect with it "
				"(--key FILE, $LOOM_KEY_FILE or the config file's 'key = FILE')\n");
		loom_disconnect(fs);
		return 1;
	}
	rc = loom_nodemap_list(fs, name, &cur, &n);
	if (rc == -ENOENT) {
		node = node_defaults;
		memcpy(node.name, name, strlen(name) + 1);
		rc = loom_nodemap_ctl(fs, LOOM_NODEMAP_ADD, &node, &node);
		if (rc)
			ret = nodemap_fail("key", name, "cannot add the node to the nodemap", rc);
	} else if (rc) {
		ret = nodemap_fail("key", name, "cannot read the nodemap", rc);
	} else {
		rc = loom_nodemap_ctl(fs, LOOM_NODEMAP_REVOKE, &cur[0], &node);
		if (rc)
			ret = nodemap_fail("key", name, "cannot revoke the node's key", rc);
	}
	free(cur);
	if (ret == 0) {
		rc = loom_node_key_write_file(fs, file, name, node.generation);
		if (rc) {
			ret = tool_fail("key", file, rc);
			fprintf(stderr, "loom key: node %s is at key generation %u now, with no key file: "
					"run this again\n", name, node.generation);
		} else {
			printf("node %s: key generation %u written to %s\n", name, node.generation, file);
		}
	}
	loom_disconnect(fs);
	return ret;
}

int cmd_key(struct tool_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "node", required_argument, NULL, 'n' }, { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *node = NULL;
	char prog[64];
	int c, rc;

	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		key_usage(stdout);
		return 0;
	}
	if (argc < 2 || strcmp(argv[1], "new")) {
		key_usage(stderr);
		return 2;
	}
	/* Options after the verb: argv + 1 starts at "new". */
	name_verb(argv + 1, "key", prog, sizeof(prog));
	while ((c = getopt_long(argc - 1, argv + 1, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'n': node = optarg; break;
		case 'h': key_usage(stdout); return 0;
		default: key_usage(stderr); return 2;
		}
	}
	if (argc - 1 - optind != 1) {
		key_usage(stderr);
		return 2;
	}
	if (node)
		return key_new_node(ctx, node, argv[1 + optind]);
	rc = loom_key_create(argv[1 + optind]);
	return rc ? tool_fail("key", argv[1 + optind], rc) : 0;
}

static int nodemap_list(loom_fs *fs, const char *name)
{
	struct loom_node *nodes;
	uint32_t n;
	int rc = loom_nodemap_list(fs, name, &nodes, &n);

	if (rc)
		return nodemap_fail("nodemap", name, "cannot list the nodemap", rc);
	for (uint32_t i = 0; i < n; i++)
		node_print(&nodes[i]);
	free(nodes);
	return 0;
}

/* add's options into *node; 0, 2 after a message, or -1 for --help (printed). */
static int parse_add(int argc, char **argv, struct loom_node *node)
{
	static const struct option opts[] = {
		{ "admin", no_argument, NULL, 'a' },            { "trusted", no_argument, NULL, 't' },
		{ "readonly", no_argument, NULL, 'r' },         { "squash-uid", required_argument, NULL, 'u' },
		{ "squash-gid", required_argument, NULL, 'g' }, { "uid-range", required_argument, NULL, 'U' },
		{ "gid-range", required_argument, NULL, 'G' },  { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char prog[64];
	int c;

	name_verb(argv, "nodemap", prog, sizeof(prog));
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'a': node->flags |= LOOM_NODE_ADMIN; break;
		case 't': node->flags |= LOOM_NODE_TRUSTED; break;
		case 'r': node->flags |= LOOM_NODE_READONLY; break;
		case 'u':
			if (parse_u32(optarg, &node->squash_uid))
				return bad_arg("nodemap", "squash uid", optarg);
			break;
		case 'g':
			if (parse_u32(optarg, &node->squash_gid))
				return bad_arg("nodemap", "squash gid", optarg);
			break;
		case 'U':
			if (parse_range(optarg, &node->uid_min, &node->uid_max))
				return bad_arg("nodemap", "uid range (A-B with A <= B)", optarg);
			break;
		case 'G':
			if (parse_range(optarg, &node->gid_min, &node->gid_max))
				return bad_arg("nodemap", "gid range (A-B with A <= B)", optarg);
			break;
		case 'h': nodemap_usage(stdout); return -1;
		default: nodemap_usage(stderr); return 2;
		}
	}
	if (argc - optind != 1) {
		nodemap_usage(stderr);
		return 2;
	}
	if (check_name("nodemap", argv[optind]))
		return 2;
	memcpy(node->name, argv[optind], strlen(argv[optind]) + 1);
	return 0;
}

/* A property of nodemap_modify and what it sets. */
struct node_prop {
	const char *name;
	enum { PROP_FLAG, PROP_ID, PROP_RANGE } kind;
	uint32_t flag;
	size_t off, off2; /* of the field(s) in struct loom_node */
};

static const struct node_prop node_props[] = {
	{ "admin", PROP_FLAG, LOOM_NODE_ADMIN, 0, 0 },
	{ "trusted", PROP_FLAG, LOOM_NODE_TRUSTED, 0, 0 },
	{ "readonly_mount", PROP_FLAG, LOOM_NODE_READONLY, 0, 0 },
	{ "squash_uid", PROP_ID, 0, offsetof(struct loom_node, squash_uid), 0 },
	{ "squash_gid", PROP_ID, 0, offsetof(struct loom_node, squash_gid), 0 },
	{ "uid_range", PROP_RANGE, 0, offsetof(struct loom_node, uid_min), offsetof(struct loom_node, uid_max) },
	{ "gid_range", PROP_RANGE, 0, offsetof(struct loom_node, gid_min), offsetof(struct loom_node, gid_max) },
};

/* A property's value, parsed; it is applied to the node as read from the MDS. */
struct prop_value {
	const struct node_prop *p;
	uint32_t a, b;
};

static void prop_apply(const struct prop_value *v, struct loom_node *node)
{
	switch (v->p->kind) {
	case PROP_FLAG:
		node->flags = v->a ? node->flags | v->p->flag : node->flags & ~v->p->flag;
		break;
	case PROP_ID:
		memcpy((char *)node + v->p->off, &v->a, sizeof(v->a));
		break;
	case PROP_RANGE:
		memcpy((char *)node + v->p->off, &v->a, sizeof(v->a));
		memcpy((char *)node + v->p->off2, &v->b, sizeof(v->b));
		break;
	}
}

/* modify's options; 0, 2 after a message, or -1 for --help (printed). */
static int parse_modify(int argc, char **argv, const char **name, struct prop_value *v)
{
	static const struct option opts[] = {
		{ "property", required_argument, NULL, 'p' }, { "value", required_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },           { NULL, 0, NULL, 0 },
	};
	const char *prop = NULL, *value = NULL;
	char prog[64];
	int c;

	name_verb(argv, "nodemap", prog, sizeof(prog));
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'p': prop = optarg; break;
		case 'v': value = optarg; break;
		case 'h': nodemap_usage(stdout); return -1;
		default: nodemap_usage(stderr); return 2;
		}
	}
	if (argc - optind != 1 || !prop || !value) {
		nodemap_usage(stderr);
		return 2;
	}
	*name = argv[optind];
	if (check_name("nodemap", *name))
		return 2;
	v->p = NULL;
	for (size_t i = 0; i < sizeof(node_props) / sizeof(node_props[0]); i++)
		if (!strcmp(prop, node_props[i].name))
			v->p = &node_props[i];
	if (!v->p) {
		fprintf(stderr, "loom nodemap: unknown property '%s' (admin, trusted, readonly_mount, "
				"squash_uid, squash_gid, uid_range or gid_range)\n", prop);
		return 2;
	}
	switch (v->p->kind) {
	case PROP_FLAG:
		if (strcmp(value, "0") && strcmp(value, "1"))
			return bad_arg("nodemap", "value (0 or 1) of admin, trusted or readonly_mount", value);
		v->a = value[0] == '1';
		break;
	case PROP_ID:
		if (parse_u32(value, &v->a))
			return bad_arg("nodemap", "id", value);
		break;
	case PROP_RANGE:
		if (parse_range(value, &v->a, &v->b))
			return bad_arg("nodemap", "range (A-B with A <= B)", value);
		break;
	}
	return 0;
}

int cmd_nodemap(struct tool_ctx *ctx, int argc, char **argv)
{
	static const struct { const char *verb; int cmd; } simple[] = {
		{ "revoke", LOOM_NODEMAP_REVOKE }, { "del", LOOM_NODEMAP_DEL },
	};
	struct loom_node node = node_defaults, *cur = NULL, after;
	struct prop_value pv = { 0 };
	const char *verb = argc >= 2 ? argv[1] : "", *name = NULL;
	int cmd = 0, ret = 0, rc;
	uint32_t n;
	loom_fs *fs;

	if (!strcmp(verb, "--help") || !strcmp(verb, "-h")) {
		nodemap_usage(stdout);
		return 0;
	}
	if (!strcmp(verb, "list")) {
		if (argc == 3 && (!strcmp(argv[2], "--help") || !strcmp(argv[2], "-h"))) {
			nodemap_usage(stdout);
			return 0;
		}
		if (argc > 3) {
			nodemap_usage(stderr);
			return 2;
		}
		name = argc == 3 ? argv[2] : NULL;
		if (name && check_name("nodemap", name))
			return 2;
	} else if (!strcmp(verb, "add")) {
		rc = parse_add(argc - 1, argv + 1, &node);
		if (rc)
			return rc < 0 ? 0 : rc;
		name = node.name;
		cmd = LOOM_NODEMAP_ADD;
	} else if (!strcmp(verb, "modify")) {
		rc = parse_modify(argc - 1, argv + 1, &name, &pv);
		if (rc)
			return rc < 0 ? 0 : rc;
		cmd = LOOM_NODEMAP_MODIFY;
	} else {
		for (size_t i = 0; i < sizeof(simple) / sizeof(simple[0]); i++)
			if (!strcmp(verb, simple[i].verb))
				cmd = simple[i].cmd;
		if (argc == 3 && cmd && (!strcmp(argv[2], "--help") || !strcmp(argv[2], "-h"))) {
			nodemap_usage(stdout);
			return 0;
		}
		if (!cmd || argc != 3) {
			nodemap_usage(stderr);
			return 2;
		}
		name = argv[2];
		if (check_name("nodemap", name))
			return 2;
		memcpy(node.name, name, strlen(name) + 1);
	}

	fs = tool_connect(ctx);
	if (!fs)
		return 1;
	if (!cmd) {
		ret = nodemap_list(fs, name);
		loom_disconnect(fs);
		return ret;
	}
	if (cmd == LOOM_NODEMAP_MODIFY) {
		/* Lustre's nodemap_modify: one property changes, the others stay as they are. */
		rc = loom_nodemap_list(fs, name, &cur, &n);
		if (rc) {
			loom_disconnect(fs);
			return nodemap_fail("nodemap", name, "cannot read the node", rc);
		}
		node = cur[0];
		free(cur);
		prop_apply(&pv, &node);
	}
	rc = loom_nodemap_ctl(fs, cmd, &node, &after);
	if (rc)
		ret = nodemap_fail("nodemap", name, verb, rc);
	else if (cmd == LOOM_NODEMAP_REVOKE)
		printf("node %s: key revoked, now generation %u (`loom key new --node %s FILE` makes a "
		       "new key)\n", name, after.generation, name);
	loom_disconnect(fs);
	return ret;
}
