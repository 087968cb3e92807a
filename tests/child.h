/*
 * child.h - waiting for a forked test child with a time limit: a child
 * that hangs (a parallel region waiting for a thread fork did not copy) is
 * killed and reported, not waited for forever.
 */
#ifndef EIN_TEST_CHILD_H
#define EIN_TEST_CHILD_H

#include <signal.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <unistd.h>

/* Waits up to `seconds` for child `pid`; kills it past that. Whether it
 * exited with status 0; *hung says whether it was killed. */
static bool child_exits_ok(pid_t pid, int seconds, bool *hung) {
  int status = 0;
  bool done = false;
  for (int i = 0; i < 10 * seconds && pid > 0 && !done; i++) {
    done = waitpid(pid, &status, WNOHANG) == pid;
    if (!done) usleep(100000);
  }
  if (!done && pid > 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  *hung = !done;
  return done && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

#endif
