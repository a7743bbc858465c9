/*
 * proc.h - the platform seam for starting a child process that never
 * outlives its owner: whatever ends this process (an exit, a crash,
 * SIGKILL), the child is killed with it, and it leads a process group of
 * its own, so that one signal to the group reaches its children too. One
 * implementation file per OS: proc_linux.c (Linux's PR_SET_PDEATHSIG);
 * proc_windows.c puts the child in a Job object of its own instead, which
 * ends with the handle this process keeps to it.
 */
#ifndef LUAMCP_OS_PROC_H
#define LUAMCP_OS_PROC_H

#include <stdbool.h>
#include <uv.h>

/* uv_spawn with that guarantee. Same contract as uv_spawn: 0, or a
 * negative libuv error code when the program could not be run (ENOENT,
 * EACCES, ...), after which the handle is initialized all the same and
 * must be closed. UV_PROCESS_DETACHED is ignored: the child stays in this
 * process's session (so that whoever started us can still find it). */
int os_proc_spawn(uv_loop_t *loop, uv_process_t *process, const uv_process_options_t *options);

/* Send signum (SIGTERM or SIGKILL, which libuv defines on every OS) to
 * the child os_proc_spawn started and to every process of its group: 0,
 * or a negative libuv error code. On Windows both end the whole job at
 * once (TerminateJobObject): a program without a console of its own has
 * no polite way to be asked to stop there. */
int os_proc_kill(uv_process_t *process, int signum);

/* The caller is done with the child (it exited; the handle is about to be
 * closed): on Windows its job is closed, which ends whatever the child
 * left running in it; nothing on Linux, where the group lives on. */
void os_proc_release(uv_process_t *process);

/* The child's side, called first thing in main(): when argv says this
 * process is the go-between os_proc_spawn started, it never returns (it
 * becomes the program, or exits 127). Returns at once otherwise. */
void os_proc_child_main(int argc, char **argv);

/* From now on (the scripts are confined: confine.c), a child gets none of
 * the variables through which the OS's loader would run a caller's code
 * inside an allowed program (LD_PRELOAD, GCONV_PATH, ...). Irreversible. */
void os_proc_drop_loader_variables(void);

/* Whether mcp.exec leaves the variable name out of the environment a
 * script gives a child: a loader variable, once they are dropped. */
bool os_proc_drops_variable(const char *name);

#endif
