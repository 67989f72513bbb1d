# ns per lookup against ring size for chring and each baseline, throughput and latency, from
# scale_plot.csv written by chring-bench-scale.  Run through plot.sh, or:
#   gnuplot -e "csv='scale_plot.csv'; out='scale.png'" bench/scale.gp
# The output's extension picks the terminal: .svg gives SVG, anything else PNG (pngcairo).
if (!exists("csv")) csv = 'scale_plot.csv'
if (!exists("out")) out = 'scale.png'
if (out[strlen(out)-2:] eq 'svg') {
    set terminal svg size 1400,600 dynamic enhanced font 'sans,12' background rgb 'white'
} else {
    set terminal pngcairo size 1400,600 enhanced font 'sans,10' background rgb 'white'
}
set output out
set datafile separator ','
set datafile missing 'nan'
set logscale x
set logscale y
set xrange [6:160000]
set xtics ('10 x 160' 10, '100 x 160' 100, '1000 x 160' 1000, '10^4 x 160' 10000, '10^5 x 16' 100000)
set xlabel 'ring size (members x points per member)'
set ylabel 'ns per lookup (median; log scale)'
set grid ytics mytics xtics
set style data linespoints
set ytics (5, 10, 20, 50, 100, 200, 500, 1000, 2000)
set yrange [5:3000]
set key top left box opaque noenhanced font ',9'
colours = '#1f77b4 #d62728 #ff7f0e #2ca02c #17becf #9467bd #7f7f7f #000000'
do for [i=1:8] { set linetype i lc rgb word(colours, i) lw 2 }
# columns: members, 8 structures' throughput, then the same 8 structures' latency; chring solid
# circles, the baselines squares, the two DRAM floors dashed
set multiplot layout 1,2 title 'chring-bench-scale: hash64, 16-byte keys written just before each lookup (in L1); same run' noenhanced
set title 'throughput (independent keys)' noenhanced
plot for [i=2:7] csv using 1:i title columnhead(i) lt (i-1) pt (i == 2 ? 7 : 5), \
     for [i=8:9] csv using 1:i title columnhead(i) lt (i-1) pt 4 dt 2
set title 'latency (each key depends on the previous answer)' noenhanced
plot for [i=10:15] csv using 1:i title columnhead(i) lt (i-9) pt (i == 10 ? 7 : 5), \
     for [i=16:17] csv using 1:i title columnhead(i) lt (i-9) pt 4 dt 2
unset multiplot
