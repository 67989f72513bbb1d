# ns per lookup against ring size, per profile and baseline (16-byte keys), from lookup_plot.csv
# written by chring-bench-lookup.  Run through plot.sh, or:
#   gnuplot -e "csv='lookup_plot.csv'; out='lookup.png'" bench/plot.gp
# The output's extension picks the terminal: .svg gives SVG, anything else PNG (pngcairo).
if (!exists("csv")) csv = 'lookup_plot.csv'
if (!exists("out")) out = 'lookup.png'
if (out[strlen(out)-2:] eq 'svg') {
    set terminal svg size 1000,600 dynamic enhanced font 'sans,12' background rgb 'white'
} else {
    set terminal pngcairo size 1000,600 enhanced font 'sans,10' background rgb 'white'
}
set output out
set datafile separator ','
set datafile missing 'nan'
set key outside right top box
set logscale x
set logscale y
set xrange [7:1400]
set xtics ('10 x 160' 10, '100 x 160' 100, '1000 x 160' 1000)
set xlabel 'ring size (members x points per member)'
set ylabel 'ns per lookup (median; log scale)'
set title 'chring: ns per lookup, 16-byte keys, one read section per lookup' noenhanced
set grid ytics mytics xtics
set style data linespoints
set ytics (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000)
set yrange [2:*]
# 8 chring lines (solid, circles), 5 baselines (dashed, squares), each its own colour
colours = '#1f77b4 #2ca02c #17becf #bcbd22 #8c564b #e377c2 #ff7f0e #000000 #d62728 #9467bd #7f7f7f #aec7e8 #98df8a'
do for [i=1:13] { set linetype i lc rgb word(colours, i) lw 2 }
# columns: members, 7 profiles, hash64 pre-hashed, then the baselines
plot for [i=2:9] csv using 1:i title columnhead(i) noenhanced lt (i-1) pt 7, \
     for [i=10:14] csv using 1:i title sprintf('baseline: %s', columnhead(i)) noenhanced lt (i-1) dt 2 pt 5
