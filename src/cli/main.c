/*
 * main.c - the einc program: dispatches to a subcommand. Every diagnostic
 * is printed here, in the CLI; the library only records errors.
 */
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "commands.h"

static const cli_command commands[] = {
    {"check", "check an expression against input shapes; print the output "
              "shape",
     cmd_check, cmd_check_help},
    {"plan", "print the plan of an expression: steps, FLOPs, bytes, "
             "predicted time",
     cmd_plan, cmd_plan_help},
    {"eval", "evaluate an expression on .npy files", cmd_eval,
     cmd_eval_help},
    {"bench", "time an expression on random inputs against the measured "
              "floor",
     cmd_bench, cmd_bench_help},
    {"cuda-src", "print the CUDA C that einc generates for an expression",
     cmd_cuda_src, cmd_cuda_src_help},
};

enum { NCOMMANDS = sizeof commands / sizeof commands[0] };

static void main_help(void) {
  printf("einc %s - an einsum/einops expression compiler\n\n",
         ein_version());
  puts("usage: einc COMMAND [ARGS...]\n"
       "       einc COMMAND --help\n"
       "       einc --version\n"
       "\n"
       "commands:");
  for (int i = 0; i < NCOMMANDS; i++)
    printf("  %-10s %s\n", commands[i].name, commands[i].summary);
  fputs("\n"
       "Expressions name axes: 'b h i d, b h j d -> b h i j' (einsum),\n"
       "'b (heads d) -> b heads d' (split), 'b c (h 2) (w 2) -> b c h w'\n"
       "with --reduce mean (pooling), 'h w -> h w r' with -D r=3 (repeat).\n"
       "The grammar is in docs/language.md.\n"
       "\n"
       CLI_HELP_EXIT,
       stdout);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    main_help();
    return EXIT_INVALID;
  }
  const char *name = argv[1];
  if (strcmp(name, "-h") == 0 || strcmp(name, "--help") == 0 ||
      strcmp(name, "help") == 0) {
    if (argc > 2) {
      for (int i = 0; i < NCOMMANDS; i++)
        if (strcmp(argv[2], commands[i].name) == 0) {
          commands[i].help();
          return EXIT_OK;
        }
      cli_errorf("unknown command '%.80s' (see einc --help)", argv[2]);
      return EXIT_INVALID;
    }
    main_help();
    return EXIT_OK;
  }
  if (strcmp(name, "--version") == 0) {
    printf("einc %s\n", ein_version());
    return EXIT_OK;
  }
  for (int i = 0; i < NCOMMANDS; i++)
    if (strcmp(name, commands[i].name) == 0)
      return commands[i].run(argc - 2, argv + 2);
  cli_errorf("unknown command '%.80s' (see einc --help)", name);
  return EXIT_INVALID;
}
