/* common/fs — see fs.h. */
#include "common/fs.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "common/errmsg.h"

int common_mkdirs(const char *dir, unsigned mode, char *err, size_t errlen)
{
    char p[COMMON_FS_PATH_MAX];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof p)
        return common_errf(err, errlen, -1, "directory '%s': empty or longer than %u bytes", dir,
                           COMMON_FS_PATH_MAX - 1);
    memcpy(p, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (p[i] != '/' && p[i] != '\0')
            continue;
        char c = p[i];
        p[i] = '\0';
        if (mkdir(p, (mode_t)mode) && errno != EEXIST)
            return common_errf(err, errlen, -1, "cannot create directory %s: %s", p,
                               strerror(errno));
        p[i] = c;
    }
    struct stat st;
    if (stat(dir, &st) || !S_ISDIR(st.st_mode))
        return common_errf(err, errlen, -1, "%s: not a directory", dir);
    return 0;
}
