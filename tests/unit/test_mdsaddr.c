/*
 * src/common/mdsaddr.c: every form of MDS address and mount source that mount, `loom --fs`,
 * $LOOM_FS, a config file's `mds =` and loom.connect accept (plain hosts and ports, failover
 * lists with ',' and Lustre's NIDs with ':'), and every one refused, with the sentence it gets.
 */
#include <stdbool.h>

#include "check.h"
#include "common/mdsaddr.h"

int check_failures;
const char *check_current = "";

#define DEF 9900

/* list parses to the n addresses "host:port" given in want, in order. */
static void accepts(const char *list, int n, const char *const *want)
{
	struct mds_addrs a;
	char why[256] = "", buf[96];
	int rc = mds_addrs_parse(list, DEF, &a, why, sizeof(why));

	if (rc != 0) {
		CHECK_FAIL_("'%s' refused: %s", list, why);
		return;
	}
	if ((int)a.count != n) {
		CHECK_FAIL_("'%s': %u addresses, want %d", list, a.count, n);
		return;
	}
	for (int i = 0; i < n; i++)
		if (strcmp(mds_addr_str(&a.addr[i], buf, sizeof(buf)), want[i]))
			CHECK_FAIL_("'%s': address %d is %s, want %s", list, i, buf, want[i]);
}

#define ACCEPTS(list, ...)                                                                  \
	do {                                                                                \
		static const char *const want_[] = { __VA_ARGS__ };                         \
		accepts(list, (int)(sizeof(want_) / sizeof(want_[0])), want_);              \
	} while (0)

/* list is refused (-EINVAL) with exactly the sentence want. */
static void refuses(const char *list, const char *want)
{
	struct mds_addrs a;
	char why[256] = "";
	int rc = mds_addrs_parse(list, DEF, &a, why, sizeof(why));

	if (rc != -EINVAL)
		CHECK_FAIL_("'%s' gave %s, want -EINVAL (%s)", list ? list : "(null)", check_errname(rc), want);
	else if (strcmp(why, want))
		CHECK_FAIL_("'%s' said \"%s\", want \"%s\"", list ? list : "(null)", why, want);
}

static void test_plain_hosts_and_ports(void)
{
	ACCEPTS("mds1", "mds1:9900");
	ACCEPTS("mds1:9901", "mds1:9901");
	ACCEPTS("127.0.0.1", "127.0.0.1:9900");
	ACCEPTS("127.0.0.1:1", "127.0.0.1:1");
	ACCEPTS("localhost:65535", "localhost:65535");
	ACCEPTS("mds-1.example.com", "mds-1.example.com:9900");
	ACCEPTS("mds_1", "mds_1:9900");
	ACCEPTS("3com.example", "3com.example:9900"); /* a name may begin with a digit */
	ACCEPTS("mds1:09901", "mds1:9901");
}

static void test_failover_lists(void)
{
	ACCEPTS("mds1,mds2", "mds1:9900", "mds2:9900");
	ACCEPTS("mds1:9901,mds2:9902", "mds1:9901", "mds2:9902");
	ACCEPTS("mds1,mds2:9902", "mds1:9900", "mds2:9902");
	ACCEPTS("127.0.0.9:1,127.0.0.1:5000", "127.0.0.9:1", "127.0.0.1:5000");
	ACCEPTS("a,b,c,d,e,f,g,h", "a:9900", "b:9900", "c:9900", "d:9900", "e:9900", "f:9900", "g:9900",
		"h:9900");
	ACCEPTS("mds1,mds1", "mds1:9900", "mds1:9900");
}

static void test_lustre_nids(void)
{
	ACCEPTS("mds1@tcp", "mds1:9900");
	ACCEPTS("192.168.1.5@tcp", "192.168.1.5:9900");
	ACCEPTS("192.168.1.5@tcp1", "192.168.1.5:9900");
	ACCEPTS("192.168.1.5@tcp0", "192.168.1.5:9900");
	ACCEPTS("mds1@TCP", "mds1:9900");
	ACCEPTS("mds1@tcp,mds2@tcp", "mds1:9900", "mds2:9900");
	/* Lustre's failover form: NIDs after ':' */
	ACCEPTS("mds1@tcp:mds2@tcp", "mds1:9900", "mds2:9900");
	ACCEPTS("mds1@tcp:mds2@tcp:mds3@tcp1", "mds1:9900", "mds2:9900", "mds3:9900");
	ACCEPTS("mds1:mds2@tcp", "mds1:9900", "mds2:9900");
	/* a NID with a port (Lustre's have none; the test MDSs listen on random ports) */
	ACCEPTS("127.0.0.1@tcp:9901", "127.0.0.1:9901");
	ACCEPTS("mds1@tcp:9901:mds2@tcp:9902", "mds1:9901", "mds2:9902");
	ACCEPTS("mds1@tcp:9901,mds2@tcp", "mds1:9901", "mds2:9900");
	ACCEPTS("mds1@tcp,mds2:9902", "mds1:9900", "mds2:9902");
	ACCEPTS("mds1:9901:mds2@tcp", "mds1:9901", "mds2:9900");
}

static void test_refused(void)
{
	refuses(NULL, "no MDS address given");
	refuses("", "no MDS address given");
	refuses(":9900", "empty host in ':9900'");
	refuses("mds1,,mds2", "empty host in 'mds1,,mds2'");
	refuses("mds1,", "empty host in 'mds1,'");
	refuses(",mds1", "empty host in ',mds1'");
	refuses("@tcp", "empty host in '@tcp'");
	refuses("mds1:", "empty port in 'mds1:'");
	refuses("mds1:,mds2", "empty port in 'mds1:,mds2'");
	refuses("mds1:0", "bad port '0' in 'mds1:0' (1 to 65535)");
	refuses("mds1:65536", "bad port '65536' in 'mds1:65536' (1 to 65535)");
	refuses("mds1:99999999999999999999", "bad port '99999999999999999999' in 'mds1:99999999999999999999' (1 to 65535)");
	refuses("mds1:abc", "bad port 'abc' in 'mds1:abc' (1 to 65535; failover MDSs go after ',', or as "
			    "NIDs after ':': mds1@tcp:mds2@tcp)");
	refuses("mds1:mds2", "bad port 'mds2' in 'mds1:mds2' (1 to 65535; failover MDSs go after ',', or as "
			     "NIDs after ':': mds1@tcp:mds2@tcp)");
	refuses("mds1:99x", "bad port '99x' in 'mds1:99x' (1 to 65535; failover MDSs go after ',', or as "
			    "NIDs after ':': mds1@tcp:mds2@tcp)");
	refuses("mds1:9900:mds2", "'mds2' after ':' in 'mds1:9900:mds2' is not a NID (failover MDSs go after "
				  "',', or as NIDs after ':': mds1@tcp:mds2@tcp)");
	refuses("mds1:9900:9901", "'9901' after ':' in 'mds1:9900:9901' is not a NID (failover MDSs go after "
				  "',', or as NIDs after ':': mds1@tcp:mds2@tcp)");
	refuses("mds1@o2ib", "loom supports TCP only: 'mds1@o2ib' is on LNet network o2ib (write mds1@tcp, or mds1)");
	refuses("10.0.0.1@o2ib1", "loom supports TCP only: '10.0.0.1@o2ib1' is on LNet network o2ib1 "
				  "(write 10.0.0.1@tcp, or 10.0.0.1)");
	refuses("mds1@gni", "loom supports TCP only: 'mds1@gni' is on LNet network gni (write mds1@tcp, or mds1)");
	refuses("mds1@tcp,mds2@o2ib", "loom supports TCP only: 'mds2@o2ib' is on LNet network o2ib (write "
				      "mds2@tcp, or mds2)");
	refuses("mds1@tcpx", "loom supports TCP only: 'mds1@tcpx' is on LNet network tcpx (write mds1@tcp, or mds1)");
	refuses("mds1@", "empty LNet network in 'mds1@' (HOST@tcp)");
	refuses("mds1@tcp@tcp", "bad NID 'mds1@tcp@tcp' in 'mds1@tcp@tcp' (one '@': HOST@tcp)");
	refuses("9900@tcp", "'9900' in '9900@tcp' is a number, not a host (a port goes after the host: "
			    "HOST:PORT, HOST@tcp:PORT)");
	refuses("mds1,9900", "'9900' in 'mds1,9900' is a number, not a host (a port goes after the host: "
			     "HOST:PORT, HOST@tcp:PORT)");
	refuses("mds1:9900@tcp", "'9900' in 'mds1:9900@tcp' is a number, not a host (a port goes after the "
				 "host: HOST:PORT, HOST@tcp:PORT)");
	refuses("mds 1", "bad character ' ' in host 'mds 1' (a name or an IPv4 address)");
	refuses("mds1/x", "bad character '/' in host 'mds1/x' (a name or an IPv4 address)");
	refuses("[::1]:9900", "IPv6 addresses are not supported: '[::1]:9900' (a name or an IPv4 address)");
	refuses("a,b,c,d,e,f,g,h,i", "more than 8 MDS addresses in 'a,b,c,d,e,f,g,h,i'");
	refuses("h234567890123456789012345678901234567890123456789012345678901234",
		"host name 'h234567890123456789012345678901234567890123456789012345678901234' is too long "
		"(at most 63 characters)");
	/* 63 characters are fine */
	ACCEPTS("h23456789012345678901234567890123456789012345678901234567890123",
		"h23456789012345678901234567890123456789012345678901234567890123:9900");
}

/* source splits into the list and the name given. */
static void splits(const char *source, const char *list, const char *fsname)
{
	char l[256], f[16], why[256] = "";
	int rc = mount_source_split(source, l, sizeof(l), f, sizeof(f), why, sizeof(why));

	if (rc)
		CHECK_FAIL_("'%s' refused: %s", source, why);
	else if (strcmp(l, list) || strcmp(f, fsname))
		CHECK_FAIL_("'%s' split to '%s' and '%s', want '%s' and '%s'", source, l, f, list, fsname);
}

static void split_refuses(const char *source, const char *want)
{
	char l[256], f[16], why[256] = "";
	int rc = mount_source_split(source, l, sizeof(l), f, sizeof(f), why, sizeof(why));

	if (rc != -EINVAL)
		CHECK_FAIL_("'%s' gave %s, want -EINVAL", source, check_errname(rc));
	else if (strcmp(why, want))
		CHECK_FAIL_("'%s' said \"%s\", want \"%s\"", source, why, want);
}

static void test_mount_sources(void)
{
	splits("127.0.0.1:9900:/loom", "127.0.0.1:9900", "loom");
	splits("mds1:/lfs01", "mds1", "lfs01");
	splits("mds1@tcp:/loom", "mds1@tcp", "loom");
	splits("mds1@tcp,mds2@tcp:/lfs01", "mds1@tcp,mds2@tcp", "lfs01");
	splits("mds1@tcp:mds2@tcp:/lfs01", "mds1@tcp:mds2@tcp", "lfs01");
	splits("127.0.0.1@tcp:5000:/a_b-C9", "127.0.0.1@tcp:5000", "a_b-C9");
	splits("m:/12345678", "m", "12345678");
	split_refuses("mds1", "'mds1' is not HOST[:PORT][,HOST[:PORT]...]:/FSNAME");
	split_refuses("mds1:9900", "'mds1:9900' is not HOST[:PORT][,HOST[:PORT]...]:/FSNAME");
	split_refuses(":/loom", "no MDS address before ':/' in ':/loom'");
	split_refuses("mds1:/", "bad file system name '' in 'mds1:/' (1 to 8 of A-Z a-z 0-9 _ -)");
	split_refuses("mds1:/123456789", "bad file system name '123456789' in 'mds1:/123456789' (1 to 8 of "
					 "A-Z a-z 0-9 _ -)");
	split_refuses("mds1:/lfs01/sub", "bad file system name 'lfs01/sub' in 'mds1:/lfs01/sub' (1 to 8 of "
					 "A-Z a-z 0-9 _ -; a subdirectory cannot be mounted)");
	split_refuses("mds1:/a.b", "bad file system name 'a.b' in 'mds1:/a.b' (1 to 8 of A-Z a-z 0-9 _ -)");
}

int main(void)
{
	RUN(test_plain_hosts_and_ports);
	RUN(test_failover_lists);
	RUN(test_lustre_nids);
	RUN(test_refused);
	RUN(test_mount_sources);
	return check_report();
}
