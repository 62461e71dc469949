/*
 * names: function names as ymtop prints them (see names.h): the bare name
 * the rules of frames.c match, the folded name of flame graphs, the short
 * name of the screen, the label of reports.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "names.h"

/* "operator" at s, as a word: length of the operator token after it
 * (" new", "<<", "()", " new[]", ...) including the keyword, else 0. */
size_t name_operator_token(const char *s, const char *start)
{
	if (!name_starts(s, "operator"))
		return 0;
	if (s > start && (isalnum((unsigned char)s[-1]) || s[-1] == '_'))
		return 0;
	const char *p = s + 8;
	if (isalnum((unsigned char)*p) || *p == '_')
		return 0;      /* "operator_x": an identifier */
	while (*p == ' ')
		p++;
	if (isalpha((unsigned char)*p) || *p == '_') {
		/* new, delete, a conversion ("operator bool"), new[] */
		while (isalnum((unsigned char)*p) || *p == '_')
			p++;
		if (p[0] == '[' && p[1] == ']')
			p += 2;
		return (size_t)(p - s);
	}
	if (p[0] == '(' && p[1] == ')')
		return (size_t)(p + 2 - s);
	if (p[0] == '[' && p[1] == ']')
		return (size_t)(p + 2 - s);
	/* Symbol operators, the longest that matches ("operator+<char, ...>"
	 * is operator+ with template arguments); the space the demangler puts
	 * before template arguments ("operator<< <char>") belongs to the
	 * name. */
	static const char *const ops[] = {
		"->*", "<=>", "<<=", ">>=", "->", "<<", ">>", "<=", ">=", "==",
		"!=", "&&", "||", "++", "--", "+=", "-=", "*=", "/=", "%=", "^=",
		"&=", "|=", "+", "-", "*", "/", "%", "^", "&", "|", "~", "!", "=",
		"<", ">", ",",
	};
	size_t k = 0;
	for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
		if (name_starts(p, ops[i])) {
			k = strlen(ops[i]);
			break;
		}
	}
	p += k;
	if (k && p[0] == ' ' && p[1] == '<')
		p++;
	return (size_t)(p - s);
}

/* The bare name of a demangled function name into buf: a leading C++
 * return type and the trailing parameter list (and cv/ref qualifiers)
 * removed.  Brackets <>, (), [] and {} nest; "->" and the operator
 * tokens do not count; "(anonymous namespace)" is part of a name. */
const char *name_bare(const char *fn, char *buf, size_t len)
{
	size_t n = strlen(fn);
	size_t begin = 0, end = n;
	int depth = 0;
	for (size_t i = 0; i < n; i++) {
		const char *p = fn + i;
		size_t op = *p == 'o' ? name_operator_token(p, fn) : 0;
		if (op) {
			i += op - 1;
			continue;
		}
		if (*p == '(' && name_starts(p, "(anonymous namespace)")) {
			i += strlen("(anonymous namespace)") - 1;
			continue;
		}
		switch (*p) {
		case '<': case '[': case '{':
			depth++;
			break;
		case '>':
			if (i > 0 && fn[i - 1] == '-')
				break;          /* "->" in a Rust fn type */
			/* fall through */
		case ']': case '}': case ')':
			if (depth > 0)
				depth--;
			break;
		case '(':
			if (depth == 0) {
				end = i;        /* the parameter list */
				goto done;
			}
			depth++;
			break;
		case ' ':
			if (depth == 0)
				begin = i + 1;  /* what came before: a return type */
			break;
		default:
			break;
		}
	}
done:
	if (begin > end)
		begin = end;
	size_t k = end - begin;
	if (k >= len)
		k = len - 1;
	memcpy(buf, fn + begin, k);
	buf[k] = '\0';
	return buf;
}

/* Closure components in Rust names: legacy "{{closure}}", v0
 * "{closure#0}", and the coroutine forms newer rustc may print. */
size_t name_closure_at(const char *p)
{
	static const char *const forms[] = {
		"::{{closure}}", "::{closure#", "::{async_fn#",
		"::{async_block#", "::{coroutine#",
	};
	for (size_t i = 0; i < sizeof forms / sizeof *forms; i++) {
		if (!name_starts(p, forms[i]))
			continue;
		const char *e = strchr(p + 3, '}');
		if (!e)
			return 0;
		if (i == 0)
			e++;   /* the second brace of {{closure}} */
		return (size_t)(e + 1 - p);
	}
	return 0;
}

const char *frames_fold_name(const struct sym_frame *f, char *buf, size_t len)
{
	if (!buf || len == 0)
		return f->function ? f->function : "?";
	char fb[128];
	const char *name = frames_name(f, fb, sizeof fb);
	size_t k = 0;
	for (const char *p = name; *p && k + 1 < len;) {
		size_t c = name_closure_at(p);
		if (c) {
			p += c;
			continue;
		}
		buf[k++] = *p++;
	}
	buf[k] = '\0';
	return buf;
}


const char *frames_short_name(const char *name, int depth, const char *ellipsis,
			      char *buf, size_t len)
{
	if (!buf || len == 0)
		return name ? name : "";
	size_t k = 0;
	/* Append n bytes of p to buf, truncating. */
#define PUT(p, n) do { \
		size_t n_ = (n); \
		if (n_ > len - 1 - k) \
			n_ = len - 1 - k; \
		memcpy(buf + k, (p), n_); \
		k += n_; \
	} while (0)
	if (!name)
		name = "";
	/* kinds[i]: 1 for a template argument list, 0 for another '<' (a Rust
	 * qualified path "<X as T>::m"); deeper than the array: templates. */
	unsigned char kinds[64];
	int open = 0, tdepth = 0, after_op = 0;
	const char *p = name;
	while (*p && k + 1 < len) {
		size_t op = *p == 'o' ? name_operator_token(p, name) : 0;
		if (op) {
			PUT(p, op);
			p += op;
			after_op = 1;
			continue;
		}
		char prev = p > name ? p[-1] : '\0';
		if (*p == '<') {
			int templ = after_op || isalnum((unsigned char)prev) ||
				    prev == '_' || prev == ':' || prev == '>';
			if (templ && tdepth >= depth) {
				/* Elide the whole argument list. */
				int d = 0;
				const char *q = p;
				for (; *q; q++) {
					if (*q == '<') {
						d++;
					} else if (*q == '>' && q[-1] != '-') {
						if (--d == 0)
							break;
					}
				}
				PUT("<", 1);
				PUT(ellipsis, strlen(ellipsis));
				PUT(">", 1);
				p = *q ? q + 1 : q;
				after_op = 0;
				continue;
			}
			if (open < (int)sizeof kinds)
				kinds[open] = (unsigned char)templ;
			open++;
			tdepth += templ;
		} else if (*p == '>' && prev != '-' && open > 0) {
			open--;
			if (open >= (int)sizeof kinds || kinds[open])
				tdepth--;
		}
		after_op = 0;
		PUT(p, 1);
		p++;
	}
#undef PUT
	buf[k] = '\0';
	return buf;
}

const char *frames_name(const struct sym_frame *f, char *buf, size_t len)
{
	if (f->function)
		return f->function;
	sym_fallback(f, buf, len);
	return buf;
}

/* A Python file as its label shows it: its directory and name
 * ("app/db.py"), which tell apart the many __init__.py and main.py of a
 * program; a native file by its name alone. */
static const char *label_file(const struct sym_frame *f)
{
	const char *base = strrchr(f->file, '/');
	if (!base)
		return f->file;
	if (!f->python)
		return base + 1;
	const char *dir = base;
	while (dir > f->file && dir[-1] != '/')
		dir--;
	return dir;
}

const char *frames_label(const struct sym_frame *f, char *buf, size_t len)
{
	char fb[128];
	const char *name = frames_name(f, fb, sizeof fb);
	if (f->file && f->line > 0 && f->python) {
		snprintf(buf, len, "%s (%s:%d)", name, label_file(f), f->line);
	} else if (f->file && f->line > 0) {
		const char *base = strrchr(f->file, '/');
		snprintf(buf, len, "%s (%s:%d)", name, base ? base + 1 : f->file,
			 f->line);
	} else {
		snprintf(buf, len, "%s", name);
	}
	return buf;
}

const char *frames_group_label(const struct sym_frame *f, char *buf, size_t len)
{
	if (!f->python || !f->file)
		return frames_label(f, buf, len);
	char fb[128];
	snprintf(buf, len, "%s (%s)", frames_name(f, fb, sizeof fb), label_file(f));
	return buf;
}

/* Screen columns of s: its UTF-8 characters. */
static int name_cols(const char *s)
{
	int n = 0;
	for (; *s; s++)
		n += ((unsigned char)*s & 0xc0) != 0x80;
	return n;
}

/* The location part of a label, " (file:line)" at its end, or the end. */
static const char *label_location(const char *label)
{
	const char *at = strrchr(label, '(');
	size_t n = strlen(label);
	if (!at || at == label || at[-1] != ' ' || n < 2 || label[n - 1] != ')')
		return label + n;
	const char *colon = strrchr(at, ':');
	if (!colon || colon == at + 1 || colon[1] < '0' || colon[1] > '9')
		return label + n;
	for (const char *q = colon + 1; q < label + n - 1; q++)
		if (*q < '0' || *q > '9')
			return label + n;
	for (const char *q = at + 1; q < colon; q++)
		if (*q == ' ' || *q == '(' || *q == ')')
			return label + n;
	return at - 1;
}

/* Offsets just after each top-level "::" of name (outside brackets and
 * operator tokens) into cut[], at most max; their count. */
static int scope_cuts(const char *name, size_t *cut, int max)
{
	int n = 0, depth = 0;
	for (const char *p = name; *p; p++) {
		size_t op = *p == 'o' ? name_operator_token(p, name) : 0;
		if (op) {
			p += op - 1;
			continue;
		}
		if (*p == '<' || *p == '(' || *p == '[' || *p == '{')
			depth++;
		else if ((*p == ')' || *p == ']' || *p == '}' ||
			  (*p == '>' && (p == name || p[-1] != '-'))) && depth > 0)
			depth--;
		else if (depth == 0 && p[0] == ':' && p[1] == ':' && n < max) {
			cut[n++] = (size_t)(p + 2 - name);
			p++;
		}
	}
	return n;
}

const char *frames_fit_label(const char *label, int width, const char *ellipsis,
			     char *buf, size_t len)
{
	if (!buf || len == 0)
		return label;
	if (width < 1)
		width = 1;
	if (name_cols(label) <= width) {
		snprintf(buf, len, "%s", label);
		return buf;
	}
	const char *loc = label_location(label);
	char name[FRAMES_NAME_MAX], cand[5][FRAMES_NAME_MAX];
	snprintf(name, sizeof name, "%.*s", (int)(loc - label), label);
	/* 0: the name as given; 1: no template arguments; 2: nor return
	 * type and parameters; 3, 4: fewer scopes. */
	int nc = 0;
	snprintf(cand[nc++], sizeof cand[0], "%s", name);
	frames_short_name(name, 0, ellipsis, cand[nc++], sizeof cand[0]);
	char bare[FRAMES_NAME_MAX];
	name_bare(cand[1], bare, sizeof bare);
	const char *at = bare[0] ? strstr(cand[1], bare) : NULL;
	const char *after = at ? at + strlen(bare) : "";
	snprintf(cand[nc++], sizeof cand[0], "%s%s%s%s", bare,
		 *after == '(' ? "(" : "",
		 *after == '(' && after[1] != ')' ? ellipsis : "",
		 *after == '(' ? ")" : "");
	size_t cut[64];
	int ncut = scope_cuts(cand[2], cut, 64);
	if (ncut >= 3)   /* first :: ellipsis :: last two */
		snprintf(cand[nc++], sizeof cand[0], "%.*s%s::%s", (int)cut[0], cand[2],
			 ellipsis, cand[2] + cut[ncut - 2]);
	if (ncut >= 1)
		snprintf(cand[nc++], sizeof cand[0], "%s::%s", ellipsis,
			 cand[2] + cut[ncut - 1]);
	int lc = name_cols(loc);
	for (int i = 0; i < nc; i++)
		if (name_cols(cand[i]) + lc <= width) {
			snprintf(buf, len, "%s%s", cand[i], loc);
			return buf;
		}
	/* The location cannot stay: the shortest name, cut to the width. */
	const char *s = cand[nc - 1];
	size_t k = 0;
	for (int c = 0; s[k] && k + 1 < len; k++) {
		if (((unsigned char)s[k] & 0xc0) != 0x80 && ++c > width)
			break;
	}
	snprintf(buf, len, "%.*s", (int)k, s);
	return buf;
}
