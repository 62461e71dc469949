#include <math.h>

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

void fmt_json_string(FILE *f, const char *s)
{
	if (!s) {
		fputs("null", f);
		return;
	}
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '"':  fputs("\\\"", f); break;
		case '\\': fputs("\\\\", f); break;
		case '\n': fputs("\\n", f); break;
		case '\t': fputs("\\t", f); break;
		case '\r': fputs("\\r", f); break;
		default:
			if (*p < 0x20 || *p == 0x7f)
				fprintf(f, "\\u%04x", *p);
			else
				fputc(*p, f);
		}
	}
	fputc('"', f);
}
