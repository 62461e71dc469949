/* err: see err.h. */
#include <stdarg.h>
#include <stdio.h>

#include "err.h"

int ym_err_set(struct ym_err *e, int code, const char *fmt, ...)
{
	va_list ap;
	e->code = code;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof e->msg, fmt, ap);
	va_end(ap);
	return -1;
}
