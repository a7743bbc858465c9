/*
 * proc_windows.c - os/proc.h on Windows. Each child goes into a Job object
 * of its own, made with JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE: this process
 * keeps the job's only handle, so when it ends in any way (an exit, a
 * crash, TerminateProcess) Windows closes the handle and kills everything
 * in the job. The processes the child starts join its job by default, so
 * the job is the child's process group: TerminateJobObject is the signal
 * to the group.
 *
 * uv_spawn starts the child running, and it is put in the job just after:
 * a process it starts in that instant escapes the job. (Starting it
 * suspended would close the gap, and libuv does not offer it.)
 *
 * No loader variables to drop: Windows has no variable through which its
 * loader runs a caller's code inside any program (LD_PRELOAD's kind), and
 * its programs are never confined anyway (os/confine.h).
 */
#include "os/proc.h"

#include <windows.h>
#include <stdlib.h>

/* Owner: this file; one per child with a job, from os_proc_spawn to
 * os_proc_release. Used on the loop's thread only. */
typedef struct child_job {
  uv_process_t *process;
  HANDLE job;
  struct child_job *next;
} child_job;

static child_job *jobs;

static child_job **find(uv_process_t *process) {
  child_job **p = &jobs;
  while (*p && (*p)->process != process) p = &(*p)->next;
  return p;
}

/* A job that kills what is in it once its last handle closes; NULL when
 * Windows refuses one. */
static HANDLE new_job(void) {
  HANDLE job = CreateJobObjectW(NULL, NULL);
  if (!job) return NULL;
  JOBOBJECT_EXTENDED_LIMIT_INFORMATION limits;
  ZeroMemory(&limits, sizeof limits);
  limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
  if (!SetInformationJobObject(job, JobObjectExtendedLimitInformation, &limits, sizeof limits)) {
    CloseHandle(job);
    return NULL;
  }
  return job;
}

int os_proc_spawn(uv_loop_t *loop, uv_process_t *process, const uv_process_options_t *options) {
  uv_process_options_t own = *options;
  /* DETACHED would give it a console of its own; a server's children
   * never open a console window either (a server started by a desktop
   * client has none to share). */
  own.flags &= ~(unsigned)UV_PROCESS_DETACHED;
  own.flags |= UV_PROCESS_WINDOWS_HIDE_CONSOLE;
  int rc = uv_spawn(loop, process, &own);
  if (rc != 0) return rc;
  HANDLE job = new_job();
  if (job && !AssignProcessToJobObject(job, process->process_handle)) {
    /* Only when this process's own job forbids it (a job that disallows
     * nested jobs, before Windows 8): the child runs, killed alone. */
    CloseHandle(job);
    job = NULL;
  }
  if (job) {
    child_job *j = malloc(sizeof *j);
    if (!j) abort();
    j->process = process;
    j->job = job;
    j->next = jobs;
    jobs = j;
  }
  return 0;
}

int os_proc_kill(uv_process_t *process, int signum) {
  child_job *j = *find(process);
  if (!j) return uv_process_kill(process, signum);
  /* The exit code a process killed by libuv gets (uv_process_kill uses 1). */
  return TerminateJobObject(j->job, 1) ? 0 : uv_translate_sys_error((int)GetLastError());
}

void os_proc_release(uv_process_t *process) {
  child_job **p = find(process);
  child_job *j = *p;
  if (!j) return;
  *p = j->next;
  CloseHandle(j->job); /* the last handle: what is left in the job ends */
  free(j);
}

/* os_proc_spawn starts the program itself: there is no go-between. */
void os_proc_child_main(int argc, char **argv) {
  (void)argc;
  (void)argv;
}

void os_proc_drop_loader_variables(void) {}

bool os_proc_drops_variable(const char *name) {
  (void)name;
  return false;
}
