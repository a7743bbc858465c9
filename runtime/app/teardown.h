/*
 * teardown.h - what must be stopped when a generation or the app ends,
 * registered by whoever started it. A Lua API that holds child processes,
 * transfers or connections adds an entry (embedded in what it holds) when
 * it opens one, and removes it when that is done; the owner runs every
 * entry still there at its end without knowing what they are, the way
 * libuv's loop closes every handle it has without knowing their kinds. So
 * vm.c and reload.c name no API, and an API that holds something new adds
 * no line to them.
 */
#ifndef LUAMCP_TEARDOWN_H
#define LUAMCP_TEARDOWN_H

#include <stdbool.h>

typedef struct teardown teardown;
typedef struct teardown_list teardown_list;

/* Stop what the entry stands for. Called once, with the entry already off
 * its list; it may free the memory the entry is in, and add or remove
 * other entries. */
typedef void (*teardown_fn)(teardown *entry);

/* One registration. Owner: whoever embeds it; listed from teardown_add
 * until teardown_remove or its run. */
struct teardown {
  teardown_fn run;
  teardown *next, *prev;
  teardown_list *list; /* NULL: not listed */
};

/* The entries of an owner (a vm, the app), newest first. */
struct teardown_list {
  teardown *head;
};

/* List an entry that is on no list (its memory need not be zeroed). */
void teardown_add(teardown_list *list, teardown *entry, teardown_fn run);
/* Take the entry off its list (nothing if it is on none): what it stood
 * for ended by itself. */
void teardown_remove(teardown *entry);
/* Run every entry, newest first, each taken off the list before it runs;
 * entries added meanwhile run too. */
void teardown_run_all(teardown_list *list);

#endif
