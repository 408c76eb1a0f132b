/* agent/version — see version.h. */
#include "agent/version.h"

#include "include/murmur.h"

#if defined(__has_include)
#if __has_include("commit.h")
#include "commit.h" /* build/gen/commit.h, written by the Makefile */
#endif
#endif
#ifndef MURMUR_COMMIT
#define MURMUR_COMMIT "unknown"
#endif

const char *agent_version(void)
{
    return MURMUR_VERSION_STRING;
}

const char *agent_version_commit(void)
{
    return MURMUR_COMMIT;
}
