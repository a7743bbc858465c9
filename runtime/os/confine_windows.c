/*
 * confine_windows.c - os/confine.h on Windows: no confinement. Windows
 * has no unprivileged way for a running process to take rights away from
 * itself and from the children it starts (an AppContainer or a
 * restricted token applies only to a process started in one), so the
 * scripts' permissions are luamcp's own checks alone, and the log says so.
 */
#include "os/confine.h"

#include <stdio.h>

os_confinement *os_confine_begin(bool files, bool ports, os_confine_warn warn, void *arg, char *why, size_t why_size) {
  (void)files, (void)ports, (void)warn, (void)arg;
  snprintf(why, why_size, "process confinement is not available on Windows: only luamcp's own checks apply");
  return NULL;
}

/* Never called: os_confine_begin gives no confinement to add to. */
void os_confine_allow_path(os_confinement *c, const char *path, unsigned rights) { (void)c, (void)path, (void)rights; }

void os_confine_allow_port(os_confinement *c, unsigned port) { (void)c, (void)port; }

bool os_confine_apply(os_confinement *c, char *report, size_t report_size, char **notes) {
  (void)c;
  snprintf(report, report_size, "process confinement is not available on Windows: only luamcp's own checks apply");
  *notes = NULL;
  return false;
}
