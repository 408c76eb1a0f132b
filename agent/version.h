/* agent/version — the version of murmur and the commit it was built from
 * (`murmur --version`, the murmur_build_info metric, /status).
 *
 * The commit comes from build/gen/commit.h, which the Makefile rewrites only
 * when `git describe --always --dirty` changes (so only this file is
 * rebuilt); a build outside a git checkout says "unknown".
 */
#ifndef AGENT_VERSION_H
#define AGENT_VERSION_H

#include "include/murmur.h"

/* The one version of murmur: the public header's. */
#define MURMUR_VERSION MURMUR_VERSION_STRING

/* MURMUR_VERSION_STRING, e.g. "0.2.0" */
const char *agent_version(void);
/* "507400c", "507400c-dirty" or "unknown" */
const char *agent_version_commit(void);

#endif
