/* common/fs — small file-system helpers shared by the commands.
 *
 * common_mkdirs creates a directory and its missing parents (mkdir -p): an
 * existing directory is fine, an existing file of another kind is an error.
 * New directories get `mode` (before the umask). Returns 0, or -1 with a
 * one-line message naming the path.
 */
#ifndef COMMON_FS_H
#define COMMON_FS_H

#include <stddef.h>

/* Longest path common_mkdirs takes, including the NUL. */
#define COMMON_FS_PATH_MAX 4096u

int common_mkdirs(const char *dir, unsigned mode, char *err, size_t errlen);

#endif
