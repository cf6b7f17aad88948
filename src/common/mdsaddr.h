/*
 * Where an MDS is, as admins write it: for `mount -t loom`, `loom --fs`, a config file's
 * `mds =`, $LOOM_FS and loom.connect. One grammar for all of them, parsed here:
 *
 *   LIST    := ADDR ( ("," | ":") ADDR )*     a failover list, tried in turn
 *   ADDR    := HOST [ "@" NET ] [ ":" PORT ]   HOST a name (getaddrinfo: DNS, /etc/hosts) or IPv4
 *   NET     := "tcp" [ DIGITS ]                Lustre's LNet network (tcp0, tcp1: all TCP here)
 *   SOURCE  := LIST ":/" FSNAME                what mount takes, and what /proc/mounts shows
 *
 * ":" is both the port separator and Lustre's failover separator (mds1@tcp:mds2@tcp:/fs): what
 * follows a ":" is a port when it is all digits, another address when it is a NID (has "@").
 * Lustre's NIDs carry no port; HOST@tcp:PORT gives one (the default is LW_DEFAULT_MDS_PORT).
 * Other LNet networks (o2ib, gni, ...) are refused: Loom speaks TCP only.
 */
#ifndef LOOM_COMMON_MDSADDR_H
#define LOOM_COMMON_MDSADDR_H

#include <stddef.h>
#include <stdint.h>

#define MDS_ADDRS_MAX 8   /* addresses in one failover list */
#define MDS_HOST_MAX  64  /* a host's bytes with its NUL (a connection's host buffer) */

struct mds_addr {
	char host[MDS_HOST_MAX];
	uint16_t port;
};

struct mds_addrs {
	unsigned count;
	struct mds_addr addr[MDS_ADDRS_MAX];
};

/* Parses LIST (ports default to default_port). 0, or -EINVAL with a sentence in why saying
 * what is wrong ("empty host in 'mds1,,mds2'", "loom supports TCP only: ..."). */
int mds_addrs_parse(const char *list, uint16_t default_port, struct mds_addrs *out, char *why,
		    size_t cap);

/* Splits SOURCE at its ":/": the list (not parsed) into list, the file system's name (checked:
 * 1 to LOOM_FSNAME_MAX of [A-Za-z0-9_-]) into fsname. 0, or -EINVAL with why. */
int mount_source_split(const char *source, char *list, size_t lcap, char *fsname, size_t fcap,
		       char *why, size_t cap);

/* "HOST:PORT" of one address, as messages name it. */
const char *mds_addr_str(const struct mds_addr *a, char *buf, size_t cap);

#endif
