/*
 * report: the registry.  One row per format; the writers know nothing of
 * it nor of each other (see common.h for the layering).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "folded.h"
#include "json.h"
#include "outfile.h"
#include "pprof.h"
#include "prometheus.h"
#include "report.h"
#include "sqlout.h"
#include "svg.h"
#include "text.h"

/* A format: its name on the command line, its usual file extension, and
 * exactly one of write (to a stream: standard output or a report file)
 * and fill (a database file of its own, by path).  needs_file: never
 * written to standard output (binary, or a file a browser opens). */
struct report_format_row {
	const char *name, *ext;
	int needs_file;
	int replaces;    /* -o replaces the file (outfile_begin_replace) */
	report_write_fn write;
	report_fill_fn fill;
};

static const struct report_format_row formats[REPORT_NFORMATS] = {
	[REPORT_TEXT]   = { "text",   "txt",    0, 0, text_write,   NULL },
	[REPORT_JSON]   = { "json",   "json",   0, 0, json_write,   NULL },
	[REPORT_FOLDED] = { "folded", "folded", 0, 0, folded_write, NULL },
	[REPORT_PPROF]  = { "pprof",  "pb.gz",  1, 0, pprof_write,  NULL },
	[REPORT_SQLITE] = { "sqlite", "db",     1, 0, NULL,         sqlout_write },
	[REPORT_SVG]    = { "svg",    "svg",    1, 0, svg_write,    NULL },
	[REPORT_PROMETHEUS] = { "prometheus", "prom", 0, 1, prometheus_write, NULL },
};

static const struct report_format_row *row_of(enum report_format f)
{
	return (unsigned)f < REPORT_NFORMATS ? &formats[f] : NULL;
}

int report_format_parse(const char *s, enum report_format *out)
{
	for (int i = 0; i < REPORT_NFORMATS; i++)
		if (!strcmp(s, formats[i].name)) {
			*out = (enum report_format)i;
			return 0;
		}
	return -1;
}

const char *report_format_name(enum report_format f)
{
	return row_of(f) ? row_of(f)->name : "?";
}

const char *report_format_ext(enum report_format f)
{
	return row_of(f) ? row_of(f)->ext : "out";
}

int report_format_needs_file(enum report_format f)
{
	return row_of(f) && row_of(f)->needs_file;
}

int report_write(FILE *f, struct model *m, struct sym *s,
		 const struct report_opts *o)
{
	const struct report_format_row *r = row_of(o->format);
	if (!r || !r->write) {
		errno = EINVAL;
		return -1;
	}
	return r->write(f, m, s, o);
}

/* A fill writer (sqlite) writes through its own file handle: the
 * database is built in the temporary file outfile created (empty, which
 * SQLite takes for a new database), then synced and linked like any
 * report. */
static int save_filled(struct outfile *of, report_fill_fn fill, struct model *m,
		       struct sym *s, const struct report_opts *o, char *err,
		       size_t errlen)
{
	fclose(of->f);
	of->f = NULL;
	char why[512];
	if (fill(of->tmp, m, s, o, why, sizeof why) != 0) {
		snprintf(err, errlen, "cannot write %s: %s", of->path, why);
		outfile_abort(of);
		return -1;
	}
	int fd = open(of->tmp, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	of->f = fd >= 0 ? fdopen(fd, "r+") : NULL;
	if (!of->f) {
		snprintf(err, errlen, "cannot write %s: %s", of->path, strerror(errno));
		if (fd >= 0)
			close(fd);
		outfile_abort(of);
		return -1;
	}
	return 0;
}

int report_save(const char *path, struct model *m, struct sym *s,
		const struct report_opts *o, char *err, size_t errlen)
{
	struct outfile of;
	const struct report_format_row *r = row_of(o->format);
	if ((r && r->replaces ? outfile_begin_replace(&of, path, err, errlen) :
	     outfile_begin(&of, path, err, errlen)) != 0)
		return -1;
	if (r && r->fill) {
		if (save_filled(&of, r->fill, m, s, o, err, errlen) != 0)
			return -1;
	} else if (report_write(of.f, m, s, o) != 0) {
		int e = errno;
		outfile_abort(&of);
		snprintf(err, errlen, "writing %s failed: %s", path, strerror(e));
		return -1;
	}
	return outfile_commit(&of, err, errlen);
}
