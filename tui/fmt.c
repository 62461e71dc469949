/*
 * fmt: numbers as people read them and strings escaped for terminals,
 * JSON and XML; pure functions into caller buffers (see fmt.h).
 */
#include <math.h>
#include <string.h>

/* The NetBSD prototypes of <bsd/vis.h> (which warns without a choice);
 * only vis() is used, which both have alike. */
#define LIBBSD_NETBSD_VIS
#include <bsd/vis.h>

#include "fmt.h"

const char *fmt_bytes(double b, char *buf, size_t len)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	int u = 0;
	if (!(b >= 0))   /* also NaN */
		b = 0;
	while (b >= 1024.0 && u < 5) {
		b /= 1024.0;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%.0f B", b);
	else if (b < 10)
		snprintf(buf, len, "%.2f %s", b, unit[u]);
	else if (b < 100)
		snprintf(buf, len, "%.1f %s", b, unit[u]);
	else
		snprintf(buf, len, "%.0f %s", b, unit[u]);
	return buf;
}

const char *fmt_sbytes(double b, char *buf, size_t len)
{
	char tmp[32];
	if (fabs(b) < 0.5) {
		snprintf(buf, len, "0 B");
		return buf;
	}
	fmt_bytes(fabs(b), tmp, sizeof tmp);
	snprintf(buf, len, "%c%s", b < 0 ? '-' : '+', tmp);
	return buf;
}

const char *fmt_count(double n, char *buf, size_t len)
{
	if (!(n >= 0))
		n = 0;
	if (n < 1000)
		snprintf(buf, len, "%.0f", n);
	else if (n < 1e6)
		snprintf(buf, len, "%.*fk", n < 1e4 ? 2 : n < 1e5 ? 1 : 0, n / 1e3);
	else if (n < 1e9)
		snprintf(buf, len, "%.*fM", n < 1e7 ? 2 : n < 1e8 ? 1 : 0, n / 1e6);
	else
		snprintf(buf, len, "%.2fG", n / 1e9);
	return buf;
}

const char *fmt_duration(double s, char *buf, size_t len)
{
	if (!(s >= 0))
		s = 0;
	if (s < 1e-6)
		snprintf(buf, len, "%.0fns", s * 1e9);
	else if (s < 1e-3)
		snprintf(buf, len, "%.1fus", s * 1e6);
	else if (s < 1)
		snprintf(buf, len, "%.1fms", s * 1e3);
	else if (s < 60)
		snprintf(buf, len, "%.1fs", s);
	else if (s < 3600)
		snprintf(buf, len, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
	else if (s < 86400)
		snprintf(buf, len, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
	else
		snprintf(buf, len, "%dd%02dh", (int)(s / 86400), (int)fmod(s / 3600, 24));
	return buf;
}

/* Length of the valid UTF-8 sequence at p (1..4), or 0 (also for
 * overlong forms, surrogates and code points above U+10FFFF). */
static int utf8_len(const unsigned char *p)
{
	unsigned c = p[0];
	int n;
	unsigned min;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2; min = 0x80; c &= 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3; min = 0x800; c &= 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4; min = 0x10000; c &= 0x07;
	} else {
		return 0;
	}
	for (int i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (p[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	return n;
}

/* The walk JSON and XML escaping share: a byte with an entry in map goes
 * as that entry; another control character or DEL as ctl (JSON: \u00XX;
 * XML: '?'); a byte that does not start a valid UTF-8 sequence as bad;
 * valid UTF-8 as it is (names and paths come from files we do not
 * control, and both formats must be valid UTF-8). */
static void escape_utf8(FILE *f, const char *s, const char *const map[128],
			int json_ctl, const char *bad)
{
	for (const unsigned char *p = (const unsigned char *)s; *p;) {
		if (*p < 128 && map[*p]) {
			fputs(map[*p], f);
			p++;
			continue;
		}
		if (*p < 0x20 || *p == 0x7f) {
			if (json_ctl)
				fprintf(f, "\\u%04x", *p);
			else
				fputc('?', f);
			p++;
			continue;
		}
		int n = utf8_len(p);
		if (n == 0) {
			fputs(bad, f);
			p++;
			continue;
		}
		fwrite(p, 1, (size_t)n, f);
		p += n;
	}
}

void fmt_json_string(FILE *f, const char *s)
{
	static const char *const map[128] = {
		['"'] = "\\\"", ['\\'] = "\\\\", ['\n'] = "\\n", ['\t'] = "\\t",
		['\r'] = "\\r",
	};
	if (!s) {
		fputs("null", f);
		return;
	}
	fputc('"', f);
	escape_utf8(f, s, map, 1, "\\ufffd");
	fputc('"', f);
}

void fmt_xml_string(FILE *f, const char *s)
{
	static const char *const map[128] = {
		['&'] = "&amp;", ['<'] = "&lt;", ['>'] = "&gt;", ['"'] = "&quot;",
		['\''] = "&apos;",
	};
	if (s)
		escape_utf8(f, s, map, 0, "?");
}

/* VIS_NOLOCALE: the same escapes whatever the locale (the screen sets
 * the user's, batch mode keeps "C"); multibyte text is judged here. */
#define VIS_FLAGS (VIS_CSTYLE | VIS_OCTAL | VIS_TAB | VIS_NL | VIS_NOLOCALE)

/* The encoding of the character at p into one (at most 4 bytes and a
 * NUL): *out points at it, or at p itself when it is kept; returns how
 * many bytes of p it takes, *n how many it writes. */
static int vis_char(const unsigned char *p, char one[8], const char **out,
		    size_t *n)
{
	int u = *p >= 0x80 ? utf8_len(p) : 0;
	/* U+0080..U+009F (c2 80..c2 9f) are C1 controls: 0x9b is CSI on
	 * terminals that take 8-bit controls. */
	if (u > 1 && !(p[0] == 0xc2 && p[1] < 0xa0)) {
		*out = (const char *)p;
		*n = (size_t)u;
		return u;
	}
	vis(one, *p, VIS_FLAGS, p[1]);
	*out = one;
	*n = strlen(one);
	return 1;
}

const char *fmt_vis(const char *s, char *buf, size_t len)
{
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p;) {
		char one[8];
		const char *out;
		size_t n;
		int u = vis_char(p, one, &out, &n);
		if (o + n >= len)
			break;
		memcpy(buf + o, out, n);
		o += n;
		p += u;
	}
	buf[o] = '\0';
	return buf;
}

void fmt_vis_fputs(FILE *f, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p;) {
		char one[8];
		const char *out;
		size_t n;
		p += vis_char(p, one, &out, &n);
		fwrite(out, 1, n, f);
	}
}

int fmt_parse_bytes(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	static const struct { const char *name; unsigned shift; } units[] = {
		{ "", 0 }, { "k", 10 }, { "K", 10 }, { "KiB", 10 }, { "m", 20 },
		{ "M", 20 }, { "MiB", 20 }, { "g", 30 }, { "G", 30 }, { "GiB", 30 },
	};
	uint64_t v = 0;
	const char *p = s;
	if (!s || *p < '0' || *p > '9')
		return -1;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - 9) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	for (size_t i = 0; i < sizeof units / sizeof *units; i++) {
		if (strcmp(p, units[i].name) != 0)
			continue;
		if (v > (UINT64_MAX >> units[i].shift))
			return -1;
		v <<= units[i].shift;
		if (v < lo || v > hi)
			return -1;
		*out = v;
		return 0;
	}
	return -1;
}
