# ns per lookup against ring size, per profile and baseline (16-byte keys), from lookup_plot.csv
# written by chring-bench-lookup.  Run through plot.sh, or:
#   gnuplot -e "csv='lookup_plot.csv'; out='lookup.svg'" bench/plot.gp
if (!exists("csv")) csv = 'lookup_plot.csv'
if (!exists("out")) out = 'lookup.svg'
set terminal svg size 960,600 dynamic enhanced font 'sans,12' background rgb 'white'
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
# columns: members, 7 profiles, hash64 pre-hashed, then the baselines
plot for [i=2:9] csv using 1:i title columnhead(i) noenhanced lw 2 pt 7, \
     for [i=10:14] csv using 1:i title sprintf('baseline: %s', columnhead(i)) noenhanced dt 2 lw 2 pt 5
