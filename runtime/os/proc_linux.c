/*
 * proc_linux.c - os/proc.h on Linux. A child is tied to its parent by
 * prctl(PR_SET_PDEATHSIG, SIGKILL), which only the child can ask for,
 * between fork and exec; uv_spawn runs no code of ours there. So the
 * child libuv starts is this same program again, as a go-between
 * (os_proc_child_main, before main does anything else): it asks for
 * SIGKILL on its parent's death, checks that the parent has not died
 * already, makes itself a process group, and executes the real program in
 * its place (the death signal survives execve, except into a set-user-ID
 * program). Whether that last exec worked comes back to the parent
 * through a close-on-exec pipe, as libuv does for its own exec, so that a
 * missing program is still an error of the spawn call, not a child that
 * exits 127.
 *
 * PR_SET_PDEATHSIG fires when the *thread* that forked the child ends,
 * not the process: libuv forks from the thread that runs the loop, which
 * in luamcp is the main thread (the only other one, the watchdog, never
 * starts a process), so it fires exactly when the process dies.
 */
#include "os/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* argv[1] of the go-between; argv[2] the parent's pid, argv[3] the fd of
 * the error pipe (or -1), argv[4] the file to run, argv[5...] its argv. */
#define CHILD_ARG "--luamcp-owned-child"
#define CHILD_FIXED_ARGS 5

void os_proc_child_main(int argc, char **argv) {
  if (argc < CHILD_FIXED_ARGS + 1 || strcmp(argv[1], CHILD_ARG) != 0) return;
  pid_t owner = (pid_t)strtol(argv[2], NULL, 10);
  int err_fd = (int)strtol(argv[3], NULL, 10);
  const char *file = argv[4];
  /* libuv gave us the pipe without close-on-exec: the program must not
   * hold it, or the parent would wait for the program's end. */
  if (err_fd >= 0) fcntl(err_fd, F_SETFD, FD_CLOEXEC);
  int err;
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) {
    err = errno;
  } else if (getppid() != owner) {
    err = ESRCH; /* the owner died before the death signal was armed: it will never come */
  } else {
    setpgid(0, 0);
    execvp(file, argv + CHILD_FIXED_ARGS);
    err = errno;
  }
  if (err_fd < 0 || write(err_fd, &err, sizeof err) != (ssize_t)sizeof err)
    fprintf(stderr, "luamcp: %s: %s\n", file, strerror(err));
  _exit(127);
}

int os_proc_spawn(uv_loop_t *loop, uv_process_t *process, const uv_process_options_t *options) {
  /* The error pipe, at the first fd after the child's stdio. Without one
   * (out of descriptors), the go-between reports a failed exec on stderr. */
  int pipe_fds[2] = {-1, -1};
  bool have_pipe = pipe2(pipe_fds, O_CLOEXEC) == 0;
  int err_fd = have_pipe ? options->stdio_count : -1;
  char owner[24], err_arg[16];
  snprintf(owner, sizeof owner, "%ld", (long)getpid());
  snprintf(err_arg, sizeof err_arg, "%d", err_fd);

  size_t nargs = 0;
  while (options->args[nargs]) nargs++;
  char **args = malloc((CHILD_FIXED_ARGS + nargs + 1) * sizeof *args);
  uv_stdio_container_t *stdio = malloc(((size_t)options->stdio_count + 1) * sizeof *stdio);
  if (!args || !stdio) abort();
  /* /proc/self/exe is this very program even if its file was replaced
   * since it started; execve resolves it in the child, which is still us. */
  args[0] = "/proc/self/exe";
  args[1] = CHILD_ARG;
  args[2] = owner;
  args[3] = err_arg;
  args[4] = (char *)options->file;
  memcpy(args + CHILD_FIXED_ARGS, options->args, (nargs + 1) * sizeof *args);
  memcpy(stdio, options->stdio, (size_t)options->stdio_count * sizeof *stdio);
  stdio[options->stdio_count].flags = UV_INHERIT_FD;
  stdio[options->stdio_count].data.fd = pipe_fds[1];

  uv_process_options_t go_between = *options;
  go_between.file = args[0];
  go_between.args = args;
  go_between.flags &= ~(unsigned)UV_PROCESS_DETACHED; /* a session of its own would hide it from our owner */
  go_between.stdio = stdio;
  go_between.stdio_count = options->stdio_count + (have_pipe ? 1 : 0);
  int rc = uv_spawn(loop, process, &go_between);
  free(args);
  free(stdio);
  if (!have_pipe) return rc;
  close(pipe_fds[1]);
  if (rc == 0) {
    /* Until the program is running: end of file when its exec closed the
     * pipe, or the errno of what failed. Short: the go-between does
     * nothing else first. */
    int child_err = 0;
    ssize_t n;
    do n = read(pipe_fds[0], &child_err, sizeof child_err);
    while (n < 0 && errno == EINTR);
    if (n == (ssize_t)sizeof child_err) {
      /* It exits at once: reap it here, so that no zombie waits for a
       * handle the caller is about to close. libuv, finding it gone,
       * leaves it be. */
      while (waitpid(process->pid, NULL, 0) < 0 && errno == EINTR) {
      }
      rc = uv_translate_sys_error(child_err);
    }
  }
  close(pipe_fds[0]);
  return rc;
}

int os_proc_kill(uv_process_t *process, int signum) {
  /* The child leads its own process group (the go-between made it one):
   * take its children along. A go-between that has not made it yet is
   * signalled alone. A pid of 0 or 1 (no child, or not ours) would make
   * -pid our own group or every process we may signal. */
  if (process->pid <= 1) return UV_ESRCH;
  int rc = uv_kill(-process->pid, signum);
  return rc == 0 ? 0 : uv_process_kill(process, signum);
}

void os_proc_release(uv_process_t *process) { (void)process; }

/* Variables the dynamic loader and the C library act on when any program
 * starts: glibc's unsecvars.h (what it drops for a setuid program), less
 * TMPDIR (a confined child writes only where the rules allow anyway), plus
 * every LD_ and MALLOC_ name. */
static const char *const LOADER_VARIABLES[] = {
    "GCONV_PATH", "GETCONF_DIR", "GLIBC_TUNABLES", "HOSTALIASES", "LOCALDOMAIN", "LOCPATH",
    "NIS_PATH",   "NLSPATH",     "RESOLV_HOST_CONF", "RES_OPTIONS", "TZDIR",
};

static bool drop_loader_variables;

void os_proc_drop_loader_variables(void) { drop_loader_variables = true; }

bool os_proc_drops_variable(const char *name) {
  if (!drop_loader_variables) return false;
  if (strncmp(name, "LD_", 3) == 0 || strncmp(name, "MALLOC_", 7) == 0) return true;
  for (size_t i = 0; i < sizeof LOADER_VARIABLES / sizeof *LOADER_VARIABLES; i++)
    if (strcmp(name, LOADER_VARIABLES[i]) == 0) return true;
  return false;
}
