#!/bin/sh
# Draws DIR/lookup.png and DIR/lookup.svg from DIR/lookup_plot.csv (chring-bench-lookup's output)
# with gnuplot.
#   bench/plot.sh [DIR]        (default: the current directory)
# Exits 77 (skipped, for meson) when gnuplot or the CSV is missing.
dir="${1:-.}"
here="$(cd "$(dirname "$0")" && pwd)"
if ! command -v gnuplot >/dev/null 2>&1; then
    echo "plot: gnuplot is not installed (Debian: gnuplot-nox); skipped"
    exit 77
fi
if [ ! -f "$dir/lookup_plot.csv" ]; then
    echo "plot: $dir/lookup_plot.csv not found: run chring-bench-lookup --out $dir first"
    exit 77
fi
for ext in png svg; do
    gnuplot -e "csv='$dir/lookup_plot.csv'; out='$dir/lookup.$ext'" "$here/plot.gp" || exit 1
    echo "plot: wrote $dir/lookup.$ext"
done
