#!/usr/bin/env bash
# build-at.sh: build the sbc binary of another commit, without touching the work tree.
#
# Usage (from anywhere inside the repo):
#   lab/bench/build-at.sh COMMIT OUTDIR
#   lab/bench/build-at.sh d22db82 /tmp/sbc-d22db82
#   SBC_OLD_BIN=/tmp/sbc-d22db82/sbc RELAYS="sbc sbc-old" lab/bench/relay-vs-kamailio.sh
#
# What it does: `git worktree add --detach` of COMMIT into a temporary directory,
# `cargo build --release --locked -p sbc` there with a target directory of its own,
# copies the binary to OUTDIR/sbc, writes OUTDIR/sbc.commit (the commit, short and full,
# and its subject: relay-vs-kamailio.sh names the binary's commit from it), then removes
# the temporary worktree (also on failure or Ctrl-C). The current work tree, its branch
# and its target/ are not touched; only the repository's worktree list changes, for the
# duration of the build.
#
# Environment (defaults in brackets):
#   BUILD_TARGET_DIR  cargo target directory of the build [OUTDIR/target]: kept, so that
#                     building the same or a nearby commit again is incremental; delete it
#                     when done (a few GB). CARGO_TARGET_DIR from the environment is ignored,
#                     so that a shared target directory is never written to by mistake.
#   CARGO             cargo binary [cargo]
#
# Exit status: 0 when OUTDIR/sbc was written; 2 on bad arguments; cargo's status if the
# build failed.
set -euo pipefail

die() { echo "build-at: $*" >&2; exit 2; }
log() { echo "[$(date +%T)] $*" >&2; }

(( $# == 2 )) || die "usage: $0 COMMIT OUTDIR"
REV=$1; OUTDIR=$2
CARGO=${CARGO:-cargo}
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(git -C "$SCRIPT_DIR" rev-parse --show-toplevel 2>/dev/null) || die "not inside a git repository"
COMMIT=$(git -C "$ROOT" rev-parse --verify --quiet "$REV^{commit}") || die "no such commit: $REV"
SHORT=$(git -C "$ROOT" rev-parse --short "$COMMIT")
command -v "$CARGO" >/dev/null || die "cargo not found"

mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
TARGET=${BUILD_TARGET_DIR:-$OUTDIR/target}
case $TARGET in
  "$ROOT"|"$ROOT"/*) die "BUILD_TARGET_DIR must not be inside the work tree ($ROOT)" ;;
esac

TMP=$(mktemp -d "${TMPDIR:-/tmp}/build-at-$SHORT.XXXXXX")
SRC=$TMP/src
ADDED=0
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if (( ADDED )); then
    git -C "$ROOT" worktree remove --force "$SRC" 2>/dev/null || log "could not remove the worktree $SRC (git worktree prune will)"
  fi
  rm -rf "$TMP"
  git -C "$ROOT" worktree prune 2>/dev/null || true
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log "worktree of $SHORT in $SRC"
git -C "$ROOT" worktree add --detach --quiet "$SRC" "$COMMIT"
ADDED=1

log "cargo build --release --locked -p sbc (target dir $TARGET)"
rc=0
( cd "$SRC" && CARGO_TARGET_DIR=$TARGET "$CARGO" build --release --locked -p sbc ) || rc=$?
(( rc == 0 )) || { log "build of $SHORT failed (cargo exit $rc)"; exit "$rc"; }

[[ -x $TARGET/release/sbc ]] || die "the build left no $TARGET/release/sbc"
cp -f "$TARGET/release/sbc" "$OUTDIR/sbc.tmp"
mv -f "$OUTDIR/sbc.tmp" "$OUTDIR/sbc"
printf '%s %s %s\n' "$SHORT" "$COMMIT" "$(git -C "$ROOT" log -1 --format=%s "$COMMIT")" >"$OUTDIR/sbc.commit"
log "wrote $OUTDIR/sbc ($SHORT) and $OUTDIR/sbc.commit"
echo "$OUTDIR/sbc"
