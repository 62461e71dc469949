/*
 * addr: the address --serve listens on, parsed where both the command
 * line's check (cli.c) and the server (serve.c) reach it.
 */
#ifndef YMTOP_UTIL_ADDR_H
#define YMTOP_UTIL_ADDR_H

#include <stddef.h>
#include <sys/socket.h>

/* Parse "[ADDR:]PORT" (ADDR a numeric IPv4 address or [IPv6]; default
 * 127.0.0.1; PORT 0 to 65535, 0: any free port) into ss.  0, or -1 with
 * one line in err (it names --serve). */
int addr_parse(const char *s, struct sockaddr_storage *ss, char *err, size_t len);

#endif
