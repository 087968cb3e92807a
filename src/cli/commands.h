/*
 * commands.h - the subcommands of einc. Each takes the arguments after its
 * name and returns the process exit status (see args.h).
 */
#ifndef EINC_COMMANDS_H
#define EINC_COMMANDS_H

typedef struct cli_command {
  const char *name;
  const char *summary; /* one line for `einc --help` */
  int (*run)(int argc, char **argv);
  void (*help)(void); /* `einc NAME --help` */
} cli_command;

int cmd_check(int argc, char **argv);
void cmd_check_help(void);
int cmd_plan(int argc, char **argv);
void cmd_plan_help(void);
int cmd_eval(int argc, char **argv);
void cmd_eval_help(void);
int cmd_bench(int argc, char **argv);
void cmd_bench_help(void);
int cmd_cuda_src(int argc, char **argv);
void cmd_cuda_src_help(void);

#endif
