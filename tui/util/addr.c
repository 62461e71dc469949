/* addr: see addr.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addr.h"

int addr_parse(const char *s, struct sockaddr_storage *ss, char *err, size_t len)
{
	char host[64];
	const char *port = s;
	memset(ss, 0, sizeof *ss);
	snprintf(host, sizeof host, "127.0.0.1");
	if (s[0] == '[') {
		const char *close = strchr(s, ']');
		if (!close || close[1] != ':' || close - s - 1 >= (long)sizeof host) {
			snprintf(err, len, "--serve: bad address '%s' (use [ADDR]:PORT for IPv6)", s);
			return -1;
		}
		snprintf(host, sizeof host, "%.*s", (int)(close - s - 1), s + 1);
		port = close + 2;
	} else if (strchr(s, ':')) {
		const char *colon = strrchr(s, ':');
		if (colon - s >= (long)sizeof host) {
			snprintf(err, len, "--serve: bad address '%s'", s);
			return -1;
		}
		snprintf(host, sizeof host, "%.*s", (int)(colon - s), s);
		port = colon + 1;
	}
	char *end;
	errno = 0;
	long p = strtol(port, &end, 10);
	if (!*port || *end || errno || p < 0 || p > 65535 || *port == '-' ||
	    *port == '+' || *port == ' ') {
		snprintf(err, len, "--serve: the port must be a number from 0 to 65535, "
			 "not '%s'", port);
		return -1;
	}
	struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
	if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
		v4->sin_family = AF_INET;
		v4->sin_port = htons((uint16_t)p);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
		v6->sin6_family = AF_INET6;
		v6->sin6_port = htons((uint16_t)p);
		return 0;
	}
	snprintf(err, len, "--serve: '%s' is not a numeric IPv4 or [IPv6] address", host);
	return -1;
}
