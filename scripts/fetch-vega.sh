#!/usr/bin/env bash
# Re-creates third_party/vega/*.min.js from the npm registry, verified against the pinned
# integrity values in third_party/vega/SOURCES. The files are committed, so building
# trainbench never needs the network; this script is for auditing or upgrading them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$root/third_party/vega
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
grep -v '^#' "$dir/SOURCES" | while read -r pkg version integrity file sha; do
  [ -n "$pkg" ] || continue
  tgz=$tmp/$pkg-$version.tgz
  curl -fsSL "https://registry.npmjs.org/$pkg/-/$pkg-$version.tgz" -o "$tgz"
  got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
  if [ "$got" != "$integrity" ]; then
    echo "fetch-vega: $pkg@$version: tarball integrity $got, expected $integrity" >&2
    exit 1
  fi
  tar xzf "$tgz" -C "$tmp" "package/$file"
  out=$dir/$(basename "$file")
  cp "$tmp/package/$file" "$out.new"
  if [ "$(sha256sum "$out.new" | cut -d' ' -f1)" != "$sha" ]; then
    echo "fetch-vega: $pkg@$version: $file differs from the pinned sha256" >&2
    rm -f "$out.new"
    exit 1
  fi
  mv "$out.new" "$out"
  rm -rf "$tmp/package"
  echo "fetch-vega: $pkg@$version ok"
done
