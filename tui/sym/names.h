/*
 * names: function names as ymtop prints them, and the name surgery the
 * frame rules (frames.c) are built on.  Pure string code: no state, no
 * allocation; every result is written into the caller's buffer and
 * truncated to it.
 */
#ifndef YMTOP_SYM_NAMES_H
#define YMTOP_SYM_NAMES_H

#include <stddef.h>
#include <string.h>

#include "sym.h"

/* Bounded copy: every name the rules build fits one of these. */
#define FRAMES_NAME_MAX 2048

/* Does s start with p? */
static inline int name_starts(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

/* "operator" at s (inside the name that begins at start), as a word: the
 * length of the operator token after it (" new", "<<", "()", " new[]",
 * ...) including the keyword, else 0. */
size_t name_operator_token(const char *s, const char *start);

/* The bare name of a demangled function name into buf: a leading C++
 * return type and the trailing parameter list (and cv/ref qualifiers)
 * removed.  Returns buf. */
const char *name_bare(const char *fn, char *buf, size_t len);

/* Length of the Rust closure component at p ("::{{closure}}",
 * "::{closure#0}", the coroutine forms), else 0. */
size_t name_closure_at(const char *p);

/* Short function name: the function, or the fallback "[module+0x...]"
 * into buf. */
const char *frames_name(const struct sym_frame *f, char *buf, size_t len);

/* "function (file:line)" or the fallback "[module+0x...]" into buf. */
const char *frames_label(const struct sym_frame *f, char *buf, size_t len);
/* The Functions view's group of a display frame: frames_label, but a
 * Python frame's without its line ("load_users (db.py)"), so that the
 * lines of one Python function make one group. */
const char *frames_group_label(const struct sym_frame *f, char *buf, size_t len);

/* The name for folded stacks: frames_name without Rust closure
 * components ("app::serve::{{closure}}" -> "app::serve").  Returns buf
 * (when buf is NULL or len 0: the unfolded function name, or "?"). */
const char *frames_fold_name(const struct sym_frame *f, char *buf, size_t len);

/* name for the screen: template argument lists nested deeper than depth
 * replaced by "<" ellipsis ">" ("std::vector<std::pair<int, long> >::
 * push_back" at depth 1: "std::vector<std::pair<...> >::push_back");
 * depth 0 elides every template argument list.  A Rust qualified path
 * "<X as T>::m" is not a template list: its brackets stay.  Truncated to
 * len; returns buf (or name when buf is NULL or len 0). */
#define FRAMES_SHORT_DEPTH 1
const char *frames_short_name(const char *name, int depth, const char *ellipsis,
			      char *buf, size_t len);

/* A list row's label (frames_label: "function (file:line)") fitted into
 * width columns with the function's own name in view: while it does not
 * fit, template argument lists are elided ("<" ellipsis ">"), then the
 * return type and parameter list ("(" ellipsis ")"), then the scopes
 * between the first and the last two, then all but the last
 * ("std::…::_Hashtable_alloc<…>::_M_allocate_node(…) (file:line)"); the
 * location goes only when even that does not fit beside it, and what
 * still does not fit is cut.  Columns count UTF-8 characters.  Returns
 * buf (truncated to len). */
const char *frames_fit_label(const char *label, int width, const char *ellipsis,
			     char *buf, size_t len);

#endif
