/* MDS addresses and mount sources, as mdsaddr.h describes them. */
#include "common/mdsaddr.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/util.h"
#include "loom/types.h"

static bool all_digits(const char *s, size_t n)
{
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

static bool host_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
	       c == '-' || c == '_';
}

/* One address's HOST[@NET] (n bytes at s) into a->host. */
static int parse_host(const char *s, size_t n, const char *list, struct mds_addr *a, char *why,
		      size_t cap)
{
	const char *at = memchr(s, '@', n);
	size_t hlen = at ? (size_t)(at - s) : n;

	if (hlen == 0)
		return refuse_why(why, cap, "empty host in '%s'", list);
	if (at) {
		const char *net = at + 1;
		size_t nlen = n - hlen - 1;

		if (memchr(net, '@', nlen))
			return refuse_why(why, cap, "bad NID '%.*s' in '%s' (one '@': HOST@tcp)", (int)n, s, list);
		if (nlen == 0)
			return refuse_why(why, cap, "empty LNet network in '%.*s' (HOST@tcp)", (int)n, s);
		/* tcp, or Lustre's numbered tcp networks (tcp1, ...): one TCP network here. */
		if (nlen < 3 || strncasecmp(net, "tcp", 3) || (nlen > 3 && !all_digits(net + 3, nlen - 3)))
			return refuse_why(why, cap, "loom supports TCP only: '%.*s' is on LNet network %.*s "
						"(write %.*s@tcp, or %.*s)", (int)n, s, (int)nlen, net,
				      (int)hlen, s, (int)hlen, s);
	}
	for (size_t i = 0; i < hlen; i++)
		if (!host_char(s[i]))
			return refuse_why(why, cap, "bad character '%c' in host '%.*s' (a name or an IPv4 "
						"address)", s[i], (int)hlen, s);
	if (all_digits(s, hlen))
		return refuse_why(why, cap, "'%.*s' in '%s' is a number, not a host (a port goes after the host: "
					"HOST:PORT, HOST@tcp:PORT)",
			      (int)hlen, s, list);
	if (hlen >= sizeof(a->host))
		return refuse_why(why, cap, "host name '%.*s' is too long (at most %zu characters)", (int)hlen,
			      s, sizeof(a->host) - 1);
	memcpy(a->host, s, hlen);
	a->host[hlen] = '\0';
	return 0;
}

int mds_addrs_parse(const char *list, uint16_t default_port, struct mds_addrs *out, char *why,
		    size_t cap)
{
	const char *p = list;

	memset(out, 0, sizeof(*out));
	if (!list || !*list)
		return refuse_why(why, cap, "no MDS address given");
	if (strchr(list, '[')) /* [::1]:9900; rpc_dial asks for IPv4 addresses only */
		return refuse_why(why, cap, "IPv6 addresses are not supported: '%s' (a name or an IPv4 address)",
			      list);
	for (;;) {
		size_t n = strcspn(p, ",:");
		struct mds_addr a = { .port = default_port };
		const char *q = p + n;
		int rc;

		rc = parse_host(p, n, list, &a, why, cap);
		if (rc)
			return rc;
		if (*q == ':') {
			const char *port = q + 1;
			size_t plen = strcspn(port, ",:");

			if (all_digits(port, plen)) {
				unsigned long v = 0;

				for (size_t i = 0; i < plen && v <= 65535; i++)
					v = v * 10 + (unsigned long)(port[i] - '0');
				if (v == 0 || v > 65535)
					return refuse_why(why, cap, "bad port '%.*s' in '%s' (1 to 65535)", (int)plen,
						      port, list);
				a.port = (uint16_t)v;
				q = port + plen;
			} else if (plen == 0) {
				return refuse_why(why, cap, "empty port in '%s'", list);
			} else if (!memchr(port, '@', plen)) {
				/* Not a NID either: as Lustre, a failover address after ':' is one. */
				return refuse_why(why, cap, "bad port '%.*s' in '%s' (1 to 65535; failover MDSs "
							"go after ',', or as NIDs after ':': mds1@tcp:mds2@tcp)",
					      (int)plen, port, list);
			}
		}
		if (out->count == MDS_ADDRS_MAX)
			return refuse_why(why, cap, "more than %d MDS addresses in '%s'", MDS_ADDRS_MAX, list);
		out->addr[out->count++] = a;
		if (!*q)
			return 0;
		/* ',' or ':' before the next address (after a port, ':' must lead to a NID too) */
		p = q + 1;
		if (*q == ':' && !memchr(p, '@', strcspn(p, ",:")))
			return refuse_why(why, cap, "'%.*s' after ':' in '%s' is not a NID (failover MDSs go after "
						"',', or as NIDs after ':': mds1@tcp:mds2@tcp)",
				      (int)strcspn(p, ",:"), p, list);
	}
}

int mount_source_split(const char *source, char *list, size_t lcap, char *fsname, size_t fcap,
		       char *why, size_t cap)
{
	const char *sep = source ? strstr(source, ":/") : NULL;
	const char *name;
	size_t llen, nlen;

	if (!sep)
		return refuse_why(why, cap, "'%s' is not HOST[:PORT][,HOST[:PORT]...]:/FSNAME",
			      source ? source : "");
	llen = (size_t)(sep - source);
	name = sep + 2;
	nlen = strlen(name);
	if (llen == 0)
		return refuse_why(why, cap, "no MDS address before ':/' in '%s'", source);
	if (llen >= lcap)
		return refuse_why(why, cap, "the MDS addresses in '%s' are too long", source);
	for (size_t i = 0; i < nlen; i++)
		if (!host_char(name[i]) || name[i] == '.')
			return refuse_why(why, cap, "bad file system name '%s' in '%s' (1 to %d of A-Z a-z 0-9 _ -%s)",
				      name, source, LOOM_FSNAME_MAX,
				      strchr(name, '/') ? "; a subdirectory cannot be mounted" : "");
	if (nlen == 0 || nlen > LOOM_FSNAME_MAX || nlen >= fcap)
		return refuse_why(why, cap, "bad file system name '%s' in '%s' (1 to %d of A-Z a-z 0-9 _ -)", name,
			      source, LOOM_FSNAME_MAX);
	memcpy(list, source, llen);
	list[llen] = '\0';
	memcpy(fsname, name, nlen + 1);
	return 0;
}

const char *mds_addr_str(const struct mds_addr *a, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s:%u", a->host, a->port);
	return buf;
}
