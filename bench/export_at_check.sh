#!/usr/bin/env bash
# Run exported tests (./ovstest export-at) inside upstream's own testsuite.
#
#   bash bench/export_at_check.sh TREE [FILE.at ...]
#
# TREE is a configured and built OVS source tree (in-tree build) that this
# script may write to: use a copy (cp -a), never a tree someone else builds in.
# The exported tests (default: reports/out-export/*.at) are appended to
# TREE/tests/dpif-netdev.at (the pristine file is kept once as
# dpif-netdev.at.export-orig and restored on every run, so reruns do not pile
# up), the testsuite is rebuilt (make tests/testsuite), and the exported tests
# run with `make check TESTSUITEFLAGS=...`, selected by their AT_SETUP titles.
#
# Prints, per test, ok or FAILED; for a failure, the testsuite.log lines from
# the first failing check (the failing diff).  Exit status: make check's
# (0 = every exported test passed), 2 = bad usage or the testsuite did not build.
set -u
usage() { echo "usage: bash $0 TREE [FILE.at ...]" >&2; exit 2; }
[ $# -ge 1 ] || usage
TREE=$(cd "$1" 2>/dev/null && pwd) || { echo "error: no directory $1" >&2; exit 2; }
shift
AT=$TREE/tests/dpif-netdev.at
for f in "$AT" "$TREE/tests/testsuite.at" "$TREE/Makefile"; do
    [ -f "$f" ] || { echo "error: $TREE is not a configured OVS tree (no $f)" >&2; exit 2; }
done
[ -w "$AT" ] || { echo "error: $AT is not writable: work on a copy of the tree" >&2; exit 2; }
configured=$(sed -n 's/^abs_top_builddir = //p' "$TREE/Makefile")
if [ -n "$configured" ] && [ "$configured" != "$TREE" ]; then
    # A cp -a of a build keeps the original's absolute paths (Makefile,
    # config.status, tests/atconfig): fix them in place, keeping their times.
    echo "note: $TREE was configured as $configured; its Makefile, config.status and" \
         "tests/atconfig still name it (sed them, then touch -d their old times)" >&2
fi
HERE=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -eq 0 ]; then
    set -- "$HERE"/reports/out-export/*.at
fi
for f in "$@"; do
    [ -f "$f" ] || { echo "error: no exported test $f (run ./ovstest export-at first)" >&2; exit 2; }
done

[ -f "$AT.export-orig" ] || cp -p "$AT" "$AT.export-orig"
cp "$AT.export-orig" "$AT"
titles=()
for f in "$@"; do
    { echo; echo "dnl ---- exported by ovs-dpif-pytest export-at: $(basename "$f")"; cat "$f"; } >> "$AT"
    while IFS= read -r t; do titles+=("$t"); done < <(sed -n 's/^AT_SETUP(\[\(.*\)\])$/\1/p' "$f")
done
echo "== $TREE: ${#titles[@]} exported test(s) appended to tests/dpif-netdev.at"

start=$(date +%s.%N)
if ! make -C "$TREE" tests/testsuite > "$TREE/tests/export-at-build.log" 2>&1; then
    tail -20 "$TREE/tests/export-at-build.log" >&2
    echo "error: the testsuite did not build (see $TREE/tests/export-at-build.log)" >&2
    exit 2
fi
built=$(date +%s.%N)

# The test numbers, from the testsuite's own list (titles are unique).
list=$("$TREE/tests/testsuite" -l)
numbers=()
for t in "${titles[@]}"; do
    n=$(printf '%s\n' "$list" | awk -v t="$t" '
        match($0, /^ *[0-9]+: [^ ]+ +/) && substr($0, RLENGTH + 1) == t {
            sub(/^ */, ""); sub(/:.*/, ""); print; exit }')
    [ -n "$n" ] || { echo "error: test '$t' is not in the built testsuite" >&2; exit 2; }
    numbers+=("$n")
done

make -C "$TREE" check TESTSUITEFLAGS="${numbers[*]}" > "$TREE/tests/export-at-check.log" 2>&1
status=$?
done_at=$(date +%s.%N)

for i in "${!numbers[@]}"; do
    n=${numbers[i]}
    dir=$TREE/tests/testsuite.dir/$(printf '%04d' "$n")
    if [ -d "$dir" ]; then
        echo "FAILED  #$n ${titles[i]}"
        # The first failing check: its command, then expected (-) and actual (+).
        awk '/^[^ ]*\.at:[0-9]+: / && !/exit code was/ { cmd = $0 }
             /^--- / { if (!started) print "    " cmd; started = 1; next }
             /^\+\+\+ |^@@ / { next }
             started && /^-/ { minus = substr($0, 2); print "    expected: " cut(minus); next }
             started && /^\+/ { plus = substr($0, 2); print "    actual:   " cut(plus)
                 if (minus != "" && plus ~ /^[0-9a-f]+$/) {
                     for (i = 1; substr(minus, i, 1) == substr(plus, i, 1); i++) ;
                     at = i - (i - 1) % 2
                     print "    first difference at byte " int((i - 1) / 2) ": expected " \
                         substr(minus, at, 4) ", got " substr(plus, at, 4)
                 }
                 next }
             started && /exit code was/ { print "    " $0 }
             function cut(s) { return length(s) > 100 ? substr(s, 1, 100) "..." : s }' \
            "$dir/testsuite.log"
        tail -n 3 "$dir/ovs-vswitchd.log" 2>/dev/null | grep -E 'EMER|assert' | sed 's/^/    log: /'
    else
        echo "ok      #$n ${titles[i]}"
    fi
done
awk -v a="$start" -v b="$built" -v c="$done_at" -v s="$status" -v l="$TREE/tests/export-at-check.log" \
    'BEGIN { printf "testsuite build %.1f s, make check %.1f s; exit status %d (log: %s)\n", b - a, c - b, s, l }' 
exit "$status"
