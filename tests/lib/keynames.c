/* Test helper: the keys a line of help text names (keynames.h). */
#include <stdio.h>
#include <string.h>

#include "keynames.h"
#include "screen/view.h"

static int key_of_name(const char *w)
{
	static const struct { const char *name; int key; } names[] = {
		{ "Enter", VK_ENTER }, { "Esc", VK_ESC }, { "Tab", VK_TAB },
		{ "S-Tab", VK_BTAB }, { "Up", VK_UP }, { "Down", VK_DOWN },
		{ "PgUp", VK_PGUP }, { "PgDn", VK_PGDN }, { "Home", VK_HOME },
		{ "End", VK_END }, { "Left", VK_LEFT }, { "Right", VK_RIGHT },
		{ "F6", VK_F6 }, { "space", ' ' }, { "^L", VK_REDRAW },
	};
	if (w[0] && !w[1])
		return (unsigned char)w[0];
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (!strcmp(w, names[i].name))
			return names[i].key;
	return 0;
}

int keynames_check(const char *line, int colon_pairs, int (*known)(int key))
{
	char buf[512], *save = NULL;
	int named = 0, word = 0;
	snprintf(buf, sizeof buf, "%s", line);
	for (char *w = strtok_r(buf, " ", &save); w; w = strtok_r(NULL, " ", &save), word++) {
		if (colon_pairs) {
			char *c = strrchr(w, ':');
			if (!c || c == w)
				continue;
			*c = 0;
			int key = key_of_name(w);
			if (key) {
				named++;
				if (!known(key))
					return -(1 + word);
				continue;
			}
			for (const char *k = w; *k; k++) {
				named++;
				if (!known((unsigned char)*k))
					return -(1 + word);
			}
			continue;
		}
		while (*w == '(')
			w++;
		size_t n = strlen(w);
		while (n > 1 && strchr("):,;", w[n - 1]))
			w[--n] = 0;
		char *parts = w, *psave = NULL;
		if (!strcmp(w, "/")) {   /* the key /, not a separator */
			named++;
			if (!known('/'))
				return -(1 + word);
			continue;
		}
		for (char *p = strtok_r(parts, "/", &psave); p; p = strtok_r(NULL, "/", &psave)) {
			int key = key_of_name(p);
			if (!key)
				continue;
			named++;
			if (!known(key))
				return -(1 + word);
		}
	}
	return named;
}
