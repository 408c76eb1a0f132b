#!/bin/sh
# Enforce the sans-IO rules of the protocol core (../shared/ARCHITECTURE.md):
# gossip/ and model/ never read a clock, open a socket, start a thread, sleep,
# call a global RNG or include NNG; gossip/ allocates only through its env.
# Each finding names the file, the line and the replacement.
set -u
status=0
# a call, not a member (env->free, ops.send) or part of a longer name
P='(^|[^>.a-zA-Z0-9_])'
check() { # dirs regex replacement
    dirs=$1 re=$2 hint=$3
    out=$(grep -n -E "$re" $dirs 2>/dev/null | grep -v -E '^[^:]+:[0-9]+:\s*(//|\*|/\*)' | grep -v 'lint: allow')
    if [ -n "$out" ]; then
        echo "$out" | sed "s|\$|    <- $hint|"
        status=1
    fi
}
core="gossip/*.c gossip/*.h model/*.c model/*.h"
check "$core" "$P(time|clock|clock_gettime|gettimeofday|timespec_get)\s*\(" 'take "now" as an argument from the caller'
check "$core" "$P(socket|connect|bind|listen|accept|sendto|recvfrom|send|recv)\s*\(" 'sockets belong in net/'
check "$core" "$P(pthread_[a-z_]+|thrd_[a-z_]+|fork)\s*\(" 'threads belong in agent/'
check "$core" "$P(sleep|usleep|nanosleep)\s*\(" 'return a deadline instead of sleeping'
check "$core" "$P(rand|srand|random|srandom|drand48|rand_r|arc4random|getrandom)\s*\(" 'use a caller-owned model_rng'
check "$core" '#\s*include\s*[<"](nng|pthread|threads|sys/socket|time)' 'no NNG, thread, socket or clock header in the core'
check "gossip/*.c gossip/*.h" "$P(malloc|calloc|realloc|free)\s*\(" 'allocate through gossip_env (env->alloc / env->free)'
# common/ sits under every folder and knows nothing of them
check "common/*.c common/*.h" '#\s*include\s*"(model|gossip|net|agent|sim)/' 'common/ may include only common/ and libc headers'
[ $status -eq 0 ] && echo "lint: ok"
exit $status
