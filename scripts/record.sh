# shellcheck shell=sh
# Sourced by the benchmark and soak scripts (from the source tree's top):
#   record_block RECORD TAG BLOCK
# replaces the lines of RECORD from "<!-- TAG begin -->" to "<!-- TAG end -->"
# with the file BLOCK (which starts and ends with those two lines), or, when
# RECORD has no such block, appends a blank line and BLOCK. RECORD is
# rewritten in place (its other lines unchanged); returns non-zero when it
# cannot be written.
record_block() {
    rb_begin="<!-- $2 begin -->" rb_end="<!-- $2 end -->"
    if grep -qxF "$rb_begin" "$1" && grep -qxF "$rb_end" "$1"; then
        rb_tmp=$(mktemp) || return 1
        awk -v t="$3" -v b="$rb_begin" -v e="$rb_end" '
            $0 == b { while ((getline l < t) > 0) print l; skip = 1; next }
            $0 == e { skip = 0; next }
            !skip { print }' "$1" >"$rb_tmp" && cat "$rb_tmp" >"$1"
        rb_rc=$?
        rm -f "$rb_tmp"
        return $rb_rc
    fi
    { echo ""; cat "$3"; } >>"$1"
}
