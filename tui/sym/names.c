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

const char *frames_label(const struct sym_frame *f, char *buf, size_t len)
{
	char fb[128];
	const char *name = frames_name(f, fb, sizeof fb);
	if (f->file && f->line > 0) {
		const char *base = strrchr(f->file, '/');
		snprintf(buf, len, "%s (%s:%d)", name, base ? base + 1 : f->file,
			 f->line);
	} else {
		snprintf(buf, len, "%s", name);
	}
	return buf;
}
