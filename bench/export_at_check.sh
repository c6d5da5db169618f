#!/usr/bin/env bash
# Run exported tests (./ovstest export-at) inside upstream's own testsuite.
#
#   bash bench/export_at_check.sh TREE [FILE.at ...]
#   bash bench/export_at_check.sh --fixes TREE [FILE.at ...]
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
#
# --fixes: TREE is a pristine build of the OVS release the tests were exported
# from.  Each test KEY.at is run on it as it is, then with the fix of its bug
# applied: export/fixes/GROUP.patch (one per root-cause group) whose "Bugs:"
# line names KEY (a test without one, e.g. of a by-design entry, runs only
# as given).  Each patch is applied to TREE's sources, the tree rebuilt
# (make check does), its tests run, and the patch reverted (also on an
# interrupt); at the end the tree is rebuilt as it was.  Prints a table
# key | TREE as given | with fix.  Exit status: 0 when every test that has a
# fix fails as given and passes with it, 1 otherwise, 2 = bad usage, a patch
# that does not apply, or a build that failed.
#
# Run it where TREE was built (e.g. sealed in the toolchain root: see
# bench/toolchain_run.py), so that its binaries find their libraries.
set -u
usage() { echo "usage: bash $0 [--fixes] TREE [FILE.at ...]" >&2; exit 2; }
fail() { echo "error: $*" >&2; exit 2; }
FIXES=0
if [ "${1:-}" = --fixes ]; then FIXES=1; shift; fi
case "${1:-}" in -*) usage ;; esac
[ $# -ge 1 ] || usage
TREE=$(cd "$1" 2>/dev/null && pwd) || fail "no directory $1"
shift
AT=$TREE/tests/dpif-netdev.at
for f in "$AT" "$TREE/tests/testsuite.at" "$TREE/Makefile"; do
    [ -f "$f" ] || fail "$TREE is not a configured OVS tree (no $f)"
done
[ -w "$AT" ] || fail "$AT is not writable: work on a copy of the tree"
configured=$(sed -n 's/^abs_top_builddir = //p' "$TREE/Makefile")
if [ -n "$configured" ] && [ "$configured" != "$TREE" ]; then
    # A cp -a of a build keeps the original's absolute paths (Makefile,
    # config.status, tests/atconfig): the testsuite would run the original's
    # binaries.
    fail "$TREE was configured as $configured: its Makefile, config.status and" \
         "tests/atconfig still name that tree (configure the copy, or sed them)"
fi
HERE=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -eq 0 ]; then
    set -- "$HERE"/reports/out-export/*.at
fi
for f in "$@"; do
    [ -f "$f" ] || fail "no exported test $f (run ./ovstest export-at first)"
done

# The fix of each test (--fixes): the patch whose "Bugs:" line names its key.
declare -A fix_of=()
if [ $FIXES = 1 ]; then
    for f in "$@"; do
        key=$(basename "$f" .at)
        patch=$(grep -l -E "^Bugs:( .*)? $key( |$)" "$HERE"/export/fixes/*.patch 2>/dev/null | head -1)
        [ -n "$patch" ] || continue  # no fix (a by-design or latent entry): run as given only
        fix_of[$key]=$patch
        patch -d "$TREE" -p1 --dry-run --silent < "$patch" > /dev/null 2>&1 ||
            fail "$(basename "$patch") does not apply to $TREE (not the pristine release?)"
    done
fi

[ -f "$AT.export-orig" ] || cp -p "$AT" "$AT.export-orig"
cp "$AT.export-orig" "$AT"
titles=()
keys=()
for f in "$@"; do
    { echo; echo "dnl ---- exported by ovs-dpif-pytest export-at: $(basename "$f")"; cat "$f"; } >> "$AT"
    while IFS= read -r t; do titles+=("$t"); keys+=("$(basename "$f" .at)"); done \
        < <(sed -n 's/^AT_SETUP(\[\(.*\)\])$/\1/p' "$f")
done
echo "== $TREE: ${#titles[@]} exported test(s) appended to tests/dpif-netdev.at"

start=$(date +%s.%N)
if ! make -C "$TREE" tests/testsuite > "$TREE/tests/export-at-build.log" 2>&1; then
    tail -20 "$TREE/tests/export-at-build.log" >&2
    fail "the testsuite did not build (see $TREE/tests/export-at-build.log)"
fi
built=$(date +%s.%N)

# The test numbers, from the testsuite's own list (titles are unique).
list=$("$TREE/tests/testsuite" -l)
numbers=()
for t in "${titles[@]}"; do
    n=$(printf '%s\n' "$list" | awk -v t="$t" '
        match($0, /^ *[0-9]+: [^ ]+ +/) && substr($0, RLENGTH + 1) == t {
            sub(/^ */, ""); sub(/:.*/, ""); print; exit }')
    [ -n "$n" ] || fail "test '$t' is not in the built testsuite"
    numbers+=("$n")
done

# The first failing check of test number $1: its command, then expected (-)
# and actual (+), and an abort's log line.
failure() {
    local dir
    dir=$TREE/tests/testsuite.dir/$(printf '%04d' "$1")
    awk '/^[^ ]*\.at:[0-9]+: / && !/exit code was/ { cmd = $0 }
         /^--- / { if (!started) print "    " cmd; started = 1; next }
         /^\+\+\+ |^@@ / { next }
         started && /^-/ { minus[++m] = substr($0, 2); print "    expected: " cut(minus[m]); next }
         started && /^\+/ { plus = substr($0, 2); print "    actual:   " cut(plus)
             # The k-th frame sent against the k-th expected (diff lists the
             # removed lines of a hunk before the added ones).
             want = minus[++p]
             if (want != "" && plus ~ /^[0-9a-f]+$/) {
                 for (i = 1; substr(want, i, 1) == substr(plus, i, 1); i++) ;
                 at = i - (i - 1) % 2
                 print "    first difference at byte " int((i - 1) / 2) ": expected " \
                     substr(want, at, 4) ", got " substr(plus, at, 4)
             }
             next }
         started && /exit code was/ { print "    " $0 }
         END { if (!started && cmd != "") print "    " cmd }
         function cut(s) { return length(s) > 100 ? substr(s, 1, 100) "..." : s }' \
        "$dir/testsuite.log"
    tail -n 3 "$dir/ovs-vswitchd.log" 2>/dev/null | grep -E 'EMER|assert' | sed 's/^/    log: /'
}

# make check of the tests whose indexes are given; sets result[index] to ok or
# FAILED and prints each; returns make check's status.
declare -A result=()
run() {
    local i n sel=() status log=$TREE/tests/export-at-check.log
    for i in "$@"; do sel+=("${numbers[i]}"); done
    rm -f "$TREE/tests/testsuite.log"
    make -C "$TREE" check TESTSUITEFLAGS="${sel[*]}" > "$log" 2>&1
    status=$?
    if [ $status -ne 0 ] && ! grep -q '^## Test results' "$TREE/tests/testsuite.log" 2>/dev/null; then
        tail -20 "$log" >&2
        return 3  # the build or the testsuite itself failed: no verdicts
    fi
    for i in "$@"; do
        n=${numbers[i]}
        if [ -d "$TREE/tests/testsuite.dir/$(printf '%04d' "$n")" ]; then
            result[$i]=FAILED
            echo "FAILED  #$n ${titles[i]}"
            failure "$n"
        else
            result[$i]=ok
            echo "ok      #$n ${titles[i]}"
        fi
    done
    return $status
}

if [ $FIXES = 0 ]; then
    run "${!numbers[@]}"
    status=$?
    [ $status -ne 3 ] || fail "make check did not run the tests (see $TREE/tests/export-at-check.log)"
    done_at=$(date +%s.%N)
    awk -v a="$start" -v b="$built" -v c="$done_at" -v s="$status" -v l="$TREE/tests/export-at-check.log" \
        'BEGIN { printf "testsuite build %.1f s, make check %.1f s; exit status %d (log: %s)\n", b - a, c - b, s, l }'
    exit "$status"
fi

# --fixes: every test as given, then each fix with its tests.
applied=""
revert() {
    if [ -n "$applied" ]; then
        patch -d "$TREE" -p1 -R --silent < "$applied" > /dev/null || echo "error: could not revert $applied in $TREE" >&2
        applied=""
    fi
}
trap 'revert; exit 130' INT TERM
declare -A given=() fixed=()
echo "== as given"
run "${!numbers[@]}"
[ $? -ne 3 ] || fail "make check did not run the tests (see $TREE/tests/export-at-check.log)"
for i in "${!numbers[@]}"; do given[$i]=${result[$i]}; done
# Fixes of the same file one after the other: a header's dependents are
# rebuilt fewer times.
for patch in $(for p in $(printf '%s\n' "${fix_of[@]}" | sort -u); do
                   echo "$(grep -m1 '^+++ ' "$p") $p"; done | sort | awk '{ print $NF }'); do
    sel=()
    for i in "${!numbers[@]}"; do [ "${fix_of[${keys[i]}]:-}" = "$patch" ] && sel+=("$i"); done
    echo "== with $(basename "$patch")"
    patch -d "$TREE" -p1 --silent < "$patch" > /dev/null || fail "$(basename "$patch") did not apply"
    applied=$patch
    t0=$(date +%s)
    run "${sel[@]}"
    st=$?
    revert
    [ $st -ne 3 ] || fail "the tree did not build with $(basename "$patch") (see $TREE/tests/export-at-check.log)"
    echo "   (build and tests $(( $(date +%s) - t0 )) s)"
    for i in "${sel[@]}"; do fixed[$i]=${result[$i]}; done
done
trap - INT TERM
make -C "$TREE" > "$TREE/tests/export-at-build.log" 2>&1 || fail "$TREE did not rebuild as given"

version=$(sed -n 's/^PACKAGE_VERSION = //p' "$TREE/Makefile")
status=0
echo
printf '%-30s | %-10s | %-8s | %s\n' key "${version:-as given}" "with fix" fix
for i in "${!numbers[@]}"; do
    fix=${fix_of[${keys[i]}]:-}
    printf '%-30s | %-10s | %-8s | %s\n' "${keys[i]}" "${given[$i]}" "${fixed[$i]:--}" \
        "$([ -n "$fix" ] && basename "$fix" || echo "(no fix: run as given only)")"
    if [ -n "$fix" ]; then
        [ "${given[$i]}" = FAILED ] && [ "${fixed[$i]}" = ok ] || status=1
    fi
done
exit $status
