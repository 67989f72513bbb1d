#!/bin/sh
# Draws DIR/lookup.png and DIR/lookup.svg from DIR/lookup_plot.csv (chring-bench-lookup's output)
# and DIR/scale.png and DIR/scale.svg from DIR/scale_plot.csv (chring-bench-scale's) and
# DIR/batch.png and DIR/batch.svg from DIR/batch_plot.csv (chring-bench-batch's), with gnuplot;
# each when its CSV is there.
#   bench/plot.sh [DIR]        (default: the current directory)
# Exits 77 (skipped, for meson) when gnuplot or both CSV files are missing.
dir="${1:-.}"
here="$(cd "$(dirname "$0")" && pwd)"
if ! command -v gnuplot >/dev/null 2>&1; then
    echo "plot: gnuplot is not installed (Debian: gnuplot-nox); skipped"
    exit 77
fi
if [ ! -f "$dir/lookup_plot.csv" ] && [ ! -f "$dir/scale_plot.csv" ] && [ ! -f "$dir/batch_plot.csv" ]; then
    echo "plot: none of $dir/lookup_plot.csv, scale_plot.csv, batch_plot.csv: run chring-bench-lookup, chring-bench-scale or chring-bench-batch --out $dir first"
    exit 77
fi
for plot in lookup scale batch; do
    [ -f "$dir/${plot}_plot.csv" ] || continue
    for ext in png svg; do
        script="$here/$plot.gp"
        [ "$plot" = lookup ] && script="$here/plot.gp" # the lookup plot's script
        gnuplot -e "csv='$dir/${plot}_plot.csv'; out='$dir/$plot.$ext'" "$script" || exit 1
        echo "plot: wrote $dir/$plot.$ext"
    done
done
