#!/usr/bin/env bash
# Installs DynamoDB Local, AWS's DynamoDB emulator (a Java program), in
# .dynamodb-local/ at the module root, for the tests that run against it
# (internal/testing/dynamodblocal). It is installed for the tests, never
# committed: DynamoDB Local is under AWS's own licence
# (.dynamodb-local/LICENSE.txt).
#
# DynamoDB Local comes from the npm package amplify-dynamodb-simulator, which
# ships it, unchanged, in its folder emulator/. Only that package's tarball is
# fetched (npm pack), and only its emulator/ folder is kept: the package's own
# Node.js code and dependencies are not needed.
#
# Three checks, each fatal:
#   - the tarball against the integrity npm publishes for it, pinned below;
#   - emulator/sha256, which holds the SHA-256 of AWS's DynamoDB Local
#     archive the package was built from (one hash, of the archive, not a
#     list of files), against the hash of the 1.25.1 archive, pinned below;
#   - every file of the folder against scripts/dynamodb-local.sha256, and the
#     folder holding no other file.
#
# Idempotent: when .dynamodb-local/ is there and passes the last check,
# nothing is fetched. To move to another version, change the pins, and run
# this script with --write-manifest, which writes scripts/dynamodb-local.sha256
# from the fetched folder once the first two checks pass.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

package=amplify-dynamodb-simulator
version=2.9.30
# npm view amplify-dynamodb-simulator@2.9.30 dist.integrity
integrity=sha512-xTeeRLvzEfqyd5lh3bH4c0kHvSHHmmhD5ZDsHFKAQ5g2Zl6JqlFdutaQhCLHzxEp6Ry1o7TB6niIoXuQAnSewQ==
# The content of the package's emulator/sha256: DynamoDB Local 1.25.1.
archive_sha256=55b425a9a42cfc728436eaf0e4ae64d688b64d177c99c4f4c4d7e3dbb3ac6c09
dest=.dynamodb-local
manifest=scripts/dynamodb-local.sha256

write_manifest=0
case "${1:-}" in
	"") ;;
	--write-manifest) write_manifest=1 ;;
	*) echo "usage: $0 [--write-manifest]" >&2; exit 2 ;;
esac

# list_files DIR: the files below DIR, as sha256sum names them, sorted.
list_files() { (cd "$1" && find . -type f | LC_ALL=C sort); }

# verify DIR: DIR holds exactly the files of the manifest, with their hashes.
verify() {
	local dir=$1
	[ -f "$manifest" ] || { echo "$manifest is missing" >&2; return 1; }
	if ! diff <(list_files "$dir") <(awk '{print $2}' "$manifest" | LC_ALL=C sort) >&2; then
		echo "$dir: the files differ from those $manifest lists (< in the folder only, > in the manifest only)" >&2
		return 1
	fi
	(cd "$dir" && sha256sum --quiet --strict -c "$root/$manifest" >&2)
}

if [ "$write_manifest" = 0 ] && [ -d "$dest" ]; then
	if verify "$dest" 2>/dev/null; then
		exit 0
	fi
	echo "$dest does not match $manifest; installing it again" >&2
fi

command -v npm >/dev/null || { echo "npm is required to fetch $package" >&2; exit 1; }
# The tarball goes to a temporary directory, the folder next to $dest, so
# that it replaces $dest in one rename once verified.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dynamodb-local.XXXXXX")
new=$dest.new
trap 'rm -rf "$tmp" "$new"' EXIT
rm -rf "$new"

echo "fetching $package@$version (DynamoDB Local)"
tarball=$(npm pack "$package@$version" --ignore-scripts --silent --pack-destination "$tmp")
tarball="$tmp/$tarball"
got=$(node -e 'const c = require("crypto"), fs = require("fs");
process.stdout.write("sha512-" + c.createHash("sha512").update(fs.readFileSync(process.argv[1])).digest("base64"));' "$tarball")
if [ "$got" != "$integrity" ]; then
	echo "FAILED: $package@$version tarball integrity mismatch" >&2
	echo "  expected $integrity" >&2
	echo "  got      $got" >&2
	exit 1
fi

mkdir "$new"
tar -xzf "$tarball" -C "$new" --strip-components=2 --no-same-owner package/emulator
got=$(cat "$new/sha256")
if [ "$got" != "$archive_sha256" ]; then
	echo "FAILED: $package@$version ships another DynamoDB Local archive" >&2
	echo "  expected emulator/sha256 $archive_sha256" >&2
	echo "  got                      $got" >&2
	exit 1
fi

if [ "$write_manifest" = 1 ]; then
	(cd "$new" && list_files . | xargs sha256sum) >"$manifest"
	echo "wrote $manifest ($(wc -l <"$manifest") files)"
fi
if ! verify "$new"; then
	echo "FAILED: the emulator/ folder of $package@$version does not match $manifest" >&2
	exit 1
fi

rm -rf "$dest"
mv "$new" "$dest"
echo "installed DynamoDB Local in $dest"
