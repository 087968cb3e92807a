/*
 * test_limits.h - the sizes of the test programs' fixed arrays of
 * operands and axes. The library's own limits (EIN_MAX_OPERANDS,
 * EIN_MAX_AXES) are far larger and size nothing; the random cases stay
 * within these.
 */
#ifndef EIN_TEST_LIMITS_H
#define EIN_TEST_LIMITS_H

#define TEST_MAX_OPERANDS 64
#define TEST_MAX_AXES 256

#endif
