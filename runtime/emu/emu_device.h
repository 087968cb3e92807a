/*
 * emu_device.h - an emulated CUDA device: the kernels of codegen.c run on
 * the host CPU, faithfully enough that the mistakes a GPU punishes are
 * punished here (a missing __syncthreads, a wrong shuffle mask, a barrier
 * some threads skip, an out-of-bounds access under ASan). Needs no CUDA
 * toolkit and no GPU, only a host C++ compiler at run time.
 *
 * Takes: kernel sources as codegen.c writes them (without a prelude; the
 * host prelude, src/codegen/prelude_host.h, is added here), and host
 * memory standing in for the device's.
 * Gives: "device" allocations kept apart from host memory, copies that
 * check which side is which, and kernel launches run by a small pool of
 * worker threads, each GPU thread a cooperative fiber.
 * Owns: the allocations until ein_emu_free, the loaded modules until
 * ein_emu_module_free, the worker threads and fiber stacks for the life of
 * the process, and compiled modules on disk under <cache dir>/emu
 * (disk_cache.h chooses the directory).
 *
 * Thread safety: every call may come from any thread. Device access is a
 * bracket: a backend calls ein_emu_device_begin before it runs a plan's
 * steps and ein_emu_device_end after; the bracket holds one process-wide
 * (recursive) lock, so plans on different threads take turns, as they
 * would on one GPU stream. Allocation, free and copies take the same lock.
 *
 * Under AddressSanitizer (libein built with -Db_sanitize=address) kernels
 * are compiled with the same sanitizers, and device allocations stay
 * poisoned outside the bracket and outside copies, so host code that reads
 * a device pointer directly is reported as on a GPU it would fault.
 *
 * Environment: EINC_EMU_CXX (the compiler, default "c++"; may carry
 * leading words such as "ccache c++"), EINC_EMU_THREADS (worker threads,
 * default min(CPUs, 4); always 1 in sanitizer builds, where __shared__
 * variables are globals, see prelude_host.h).
 */
#ifndef EIN_EMU_DEVICE_H
#define EIN_EMU_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "emu_counters.h"
#include "error.h"

/* ------------------------------------------------------------- memory */

/* A device allocation of `bytes` (0 allowed: a unique pointer with no
 * bytes), aligned to 256 as cudaMalloc's, filled with 0xff bytes (NaN as a
 * float) so reading what was never written shows. EIN_ERR_DEVICE_MEMORY
 * when the host has no memory left. */
ein_status ein_emu_malloc(void **ptr, size_t bytes, ein_error_rec *err);

/* Frees a device allocation; NULL and pointers that are not the start of
 * a live device allocation are ignored. */
void ein_emu_free(void *ptr);

typedef enum { EIN_EMU_H2D, EIN_EMU_D2H, EIN_EMU_D2D } ein_emu_copy_kind;

/* memmove of `bytes` bytes; each side must be (for D) or must not be (for
 * H) inside one live device allocation for all its bytes, else
 * EIN_ERR_DEVICE naming the side and the pointer. */
ein_status ein_emu_copy(void *dst, const void *src, size_t bytes,
                        ein_emu_copy_kind kind, ein_error_rec *err);

/* Whether [p, p + bytes) lies inside one live device allocation (for
 * bytes == 0: p anywhere from its first byte to one past its last). */
bool ein_emu_is_device(const void *p, size_t bytes);

/* The device this thread's later allocations, kernels and cuBLAS calls act
 * on (cudaSetDevice's; 0 until set). Each allocation keeps the device it
 * was made on: several emulated devices share host memory underneath, and
 * this is how a kernel or cuBLAS call of one device touching another's
 * memory is caught (copies may cross devices, as peer copies do). */
void ein_emu_set_device(int device);
int ein_emu_current_device(void);

typedef enum { EIN_EMU_OWN, EIN_EMU_OTHER, EIN_EMU_HOST } ein_emu_where;

/* Where [p, p + bytes) lies (bytes as ein_emu_is_device's): in one live
 * allocation of the current device, of another (*device: which, when
 * device is not NULL), or not in device memory (*device: -1). */
ein_emu_where ein_emu_locate(const void *p, size_t bytes, int *device);

/* ---------------------------------------------------- device bracket */

/* Takes the device lock (recursive); the outermost begin unpoisons device
 * memory under ASan and the matching end poisons it again. */
void ein_emu_device_begin(void);
void ein_emu_device_end(void);

/* ------------------------------------------------------------ kernels */

typedef struct ein_emu_module ein_emu_module;

/* Compiles sources[0..n) (each defines ein_main and maybe ein_vec) into
 * one shared object with one compiler run, or loads it from the disk
 * cache (keyed by a hash of the compiler command, its flags, the host
 * prelude and the sources; an entry that does not load is recompiled).
 * EIN_ERR_BACKEND when the compiler fails (the message carries the
 * command and the first lines of its output) or the object does not load;
 * EIN_ERR_NO_MEMORY. */
ein_status ein_emu_module_load(const char *const *sources, int n,
                               ein_emu_module **out, ein_error_rec *err);

/* Whether ein_emu_module_load found m in the disk cache (else it was
 * compiled): a backend counts the two apart, as the CUDA backend does. */
bool ein_emu_module_from_disk(const ein_emu_module *m);

/* Whether counting is on: ein_emu_counting_set's value, else
 * EINC_EMU_COUNTERS=1 in the environment (read on each call). */
bool ein_emu_counting(void);

/* Test hook: 1 on, 0 off, -1 back to the environment's choice. */
void ein_emu_counting_set(int on);

/* ein_emu_module_load, in the counting flavour when `counting`: every
 * memory access the host compiler leaves in the kernels calls into the
 * emulator (compiled with -fsanitize=thread, whose entry points the
 * prelude defines: no sanitizer runtime). Several times slower; cached
 * apart from the plain flavour. */
ein_status ein_emu_module_load_ex(const char *const *sources, int n,
                                  bool counting, ein_emu_module **out,
                                  ein_error_rec *err);

/* Counted launches of larger grids run only about max_blocks of their
 * blocks, evenly spaced, and scale the counts to the whole grid (the
 * distinct sectors capped at the allocations' size); 0 (the default):
 * every block. For the time model's profiles of large kernels, whose
 * blocks do alike: the launches' outputs are then incomplete, so only a
 * caller that discards them (ein_emu_profile) may set it. */
void ein_emu_sample_set(uint64_t max_blocks);

/* Whether m is the counting flavour. */
bool ein_emu_module_counting(const ein_emu_module *m);

/* ein_emu_launch that, when counters is not NULL, sets *counters to what
 * the launch did (EIN_ERR_INVALID_ARGUMENT if m is not the counting
 * flavour). */
ein_status ein_emu_launch_counted(ein_emu_module *m, int index, bool vec,
                                  const unsigned grid[3],
                                  const unsigned block[3], void *d,
                                  const void *s0, const void *s1,
                                  ein_emu_counters *counters,
                                  ein_error_rec *err);

/* Runs kernel `index` (ein_vec when vec) as kernel<<<grid, block>>>(d, s0,
 * s1) and returns when every block has finished. Must be called between
 * ein_emu_device_begin and ein_emu_device_end. Errors:
 *  EIN_ERR_DEVICE   d, s0 or s1 (when not NULL) is not device memory;
 *  EIN_ERR_BACKEND  a launch CUDA would refuse (block or grid sizes out of
 *                   range, more threads than the kernel's
 *                   __launch_bounds__, ein_vec on unaligned pointers), or
 *                   a block that went wrong: threads at different
 *                   barriers, a barrier or shuffle some threads can never
 *                   reach, a shuffle called by a lane outside its mask.
 *                   The message names the kernel, the block and the
 *                   threads. The output is then unspecified.
 *  EIN_ERR_INVALID_ARGUMENT  index out of range or no ein_vec. */
ein_status ein_emu_launch(ein_emu_module *m, int index, bool vec,
                          const unsigned grid[3], const unsigned block[3],
                          void *d, const void *s0, const void *s1,
                          ein_error_rec *err);

/* Unloads the module (NULL is ignored). */
void ein_emu_module_free(ein_emu_module *m);

/* How many times this process ran the compiler (tests: cache reuse). */
unsigned long ein_emu_compile_count(void);

#endif
