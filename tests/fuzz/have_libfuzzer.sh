#!/bin/sh
# Exit 0 when the C compiler $1 (default clang) can build a libFuzzer target
# with AddressSanitizer (Debian: clang and libclang-rt-14-dev), else 1.
cc=${1:-clang}
command -v "$cc" >/dev/null 2>&1 || exit 1
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n);\nint LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return d && n > 99; }\n' >"$d/t.c"
"$cc" -fsanitize=fuzzer,address,undefined "$d/t.c" -o "$d/t" >/dev/null 2>&1
