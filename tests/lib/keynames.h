/*
 * Test helper: the keys a line of help text names, for tests that every
 * key a screen's help or key line names is a row of its key table.
 */
#ifndef YM_TEST_KEYNAMES_H
#define YM_TEST_KEYNAMES_H

/* Calls known(key) for each key line names and returns how many it names,
 * or -(1 + the index of the first word naming a key known() refuses).
 * A key is a word of one character, or a key's name (Enter, Esc, Tab,
 * S-Tab, Up, Down, PgUp, PgDn, Home, End, Left, Right, F6, space, ^L);
 * words joined by '/' ("Up/Down") name each; "(" before and "):,;" after
 * a word are not part of it.  With colon_pairs, a word is "KEYS:what"
 * (the status line's "?:help", "<>:sort") and each character of KEYS
 * names a key unless KEYS is a name. */
int keynames_check(const char *line, int colon_pairs, int (*known)(int key));

#endif
