/*
 * test_version.c - ein_version() of the shared library this program loads:
 * the build's project version (meson.build), and the same as the
 * EIN_VERSION_* macros of the header the program was compiled with, since
 * both come from one build here.
 */
#include <stdio.h>

#include "harness.h"

int main(void) {
  const char *v = ein_version();
  CHECK_STR(v, EIN_TEST_PROJECT_VERSION, "ein_version() is meson's version");
  char header[64];
  snprintf(header, sizeof header, "%d.%d.%d", EIN_VERSION_MAJOR,
           EIN_VERSION_MINOR, EIN_VERSION_PATCH);
  CHECK_STR(v, header, "ein_version() matches the header's macros");
  return test_summary("version");
}
