/*
 * disk_cache.h - compiled kernels kept on disk between processes.
 *
 * The directory is $EINC_CACHE_DIR, else $XDG_CACHE_HOME/einc, else
 * $HOME/.cache/einc. An entry is named by a 128-bit hash of its key and
 * holds the whole key (so a hash collision is a miss, never a wrong
 * kernel) and a checksum of the payload; a short, truncated or corrupted
 * file reads as a miss. Entries are written to a temporary file in the
 * same directory and renamed into place, so a reader (another process
 * too) sees either no entry or a whole one. A directory that cannot be
 * created or written only disables storing. Plain file I/O: no CUDA here.
 */
#ifndef EIN_DISK_CACHE_H
#define EIN_DISK_CACHE_H

#include <stdbool.h>
#include <stddef.h>

/* The cache directory (not created). False when no variable names one. */
bool ein_disk_cache_dir(char *buf, size_t cap);

/* The entry stored under key, as a malloc'd payload; false on a miss or a
 * damaged entry. */
bool ein_disk_cache_load(const char *dir, const void *key, size_t keylen,
                         char **payload, size_t *size);

/* Stores payload under key (creating the directory). False when the
 * directory or the file cannot be written; nothing partial remains. */
bool ein_disk_cache_store(const char *dir, const void *key, size_t keylen,
                          const void *payload, size_t size);

/* The file an entry lives in (for tests that damage it on purpose). */
void ein_disk_cache_path(const char *dir, const void *key, size_t keylen,
                         char *buf, size_t cap);

/* mkdir -p, 0700 for what it creates (kernels are code the process
 * runs). False when a directory cannot be made. */
bool ein_make_dirs(const char *dir);

#endif
