/*
 * ignore.h - .luamcpignore: the files of a script folder `luamcp build`
 * leaves out of the bundle (spec/, README.md, notes), in the spirit of
 * .gitignore:
 *
 *   # a comment             blank lines and lines starting with # are skipped
 *   spec/                   a trailing / matches folders only (and so all
 *                           they hold)
 *   README.md               no / inside: matches that name at any depth
 *   docs/img*.png           a / inside (or a leading one): matches the path
 *                           from the top of the folder
 *   *.tmp  ?  **            * any characters but /, ? one character but /,
 *                           ** any characters, / included ("**" "/": none or
 *                           more folders)
 *   !keep.md                ! puts back what an earlier line left out
 *
 * The last line that matches a path decides. A folder left out is not
 * looked into, so ! cannot put back a file inside it (as in git).
 */
#ifndef LUAMCP_IGNORE_H
#define LUAMCP_IGNORE_H

#include <stdbool.h>
#include <stddef.h>

#define IGNORE_FILE_NAME ".luamcpignore"

/* One line of the file. Owner: its ignore_list. */
typedef struct ignore_rule {
  char *pattern;  /* without !, the leading / and the trailing / */
  bool negated;   /* !pattern */
  bool dirs_only; /* pattern/ */
  bool anchored;  /* a / in it: matched against the whole path */
} ignore_rule;

/* Owner: whoever parsed it; ignore_list_free releases the rules. */
typedef struct ignore_list {
  ignore_rule *rules;
  size_t count;
} ignore_list;

/* Add the rules in text (the file's bytes) to list. */
void ignore_list_parse(ignore_list *list, const char *text, size_t len);
/* Does the list leave out path ('/' between parts, relative to the
 * folder), a folder when is_dir? */
bool ignore_list_match(const ignore_list *list, const char *path, bool is_dir);
void ignore_list_free(ignore_list *list);

#endif
