# ns per key against batch size for chring_snap_lookup_many and the hand-written prefetching
# batch, beside the rwlock ring (1 and 2 reading threads) and chring's single lookup, at 10 and
# 10,000 members x 160 points, from batch_plot.csv written by chring-bench-batch.  Run through
# plot.sh, or:
#   gnuplot -e "csv='batch_plot.csv'; out='batch.png'" bench/batch.gp
# The output's extension picks the terminal: .svg gives SVG, anything else PNG (pngcairo).
if (!exists("csv")) csv = 'batch_plot.csv'
if (!exists("out")) out = 'batch.png'
if (out[strlen(out)-2:] eq 'svg') {
    set terminal svg size 900,600 dynamic enhanced font 'sans,12' background rgb 'white'
} else {
    set terminal pngcairo size 900,600 enhanced font 'sans,10' background rgb 'white'
}
set output out
set datafile separator ','
set datafile missing 'nan'
set logscale x 2
set logscale y
set xrange [0.8:80]
set xtics (1, 4, 16, 64)
set xlabel 'keys per batch'
set ylabel 'ns per key, throughput (median; log scale)'
set grid ytics mytics xtics
set style data linespoints
set ytics (5, 10, 20, 50, 100, 200, 500, 1000)
set yrange [5:1000]
set key top right box opaque noenhanced font ',9'
set title 'chring-bench-batch: hash64, 16-byte keys; same run' noenhanced
colours = '#1f77b4 #1f77b4 #2ca02c #2ca02c #d62728 #d62728 #ff7f0e #ff7f0e #7f7f7f #7f7f7f'
do for [i=1:10] { set linetype i lc rgb word(colours, i) lw 2 }
# columns: batch, chring_many 10 / 10000, hand 10 / 10000, rwlock 10 / 10000, rwlock with 2
# threads 10 / 10000, chring one key 10 / 10000; 10 members dashed, 10,000 solid
plot for [i=2:11:2] csv using 1:i title columnhead(i) lt (i-1) pt 4 dt 2, \
     for [i=3:11:2] csv using 1:i title columnhead(i) lt (i-1) pt 7
