/*
 * teardown.c - the lists of what a generation or the app stops at its end
 * (teardown.h). Kept apart from vm.c so that the APIs which register call
 * a file that calls none of them back.
 */
#include <stddef.h>

#include "app/teardown.h"

void teardown_add(teardown_list *list, teardown *entry, teardown_fn run) {
  entry->run = run;
  entry->list = list;
  entry->prev = NULL;
  entry->next = list->head;
  if (entry->next) entry->next->prev = entry;
  list->head = entry;
}

void teardown_remove(teardown *entry) {
  teardown_list *list = entry->list;
  if (!list) return;
  if (entry->prev) entry->prev->next = entry->next;
  else list->head = entry->next;
  if (entry->next) entry->next->prev = entry->prev;
  entry->next = entry->prev = NULL;
  entry->list = NULL;
}

/* A loop that pops the head, not a walk: a run frees its entry and may
 * take others off the list (a connection that closes with its last
 * holder), so no pointer into the list is kept across a run. */
void teardown_run_all(teardown_list *list) {
  while (list->head) {
    teardown *entry = list->head;
    teardown_remove(entry);
    entry->run(entry);
  }
}
