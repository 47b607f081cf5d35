#!/usr/bin/env bash
# Bandwidth table of the README's "Memory system" section.
set -euo pipefail
out=${1:-out/membench}
mkdir -p "$out"
for map in default capsnet; do
  for pat in seq random pe-burst; do
    pimforge membench default --pattern "$pat" --mapping "$map" --requests 8192 \
      --json "$out/$pat-$map.json"
  done
done
