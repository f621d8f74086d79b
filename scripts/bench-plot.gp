# GB/s versus object size for every objdirect-bench path (size sweep, 1 process x 1 thread),
# GET and PUT side by side, with the memcpy and loopback TCP baselines.
# Usage: gnuplot -e "csv='bench.csv'; png='bench.png'" scripts/bench-plot.gp
if (!exists("csv")) csv = 'bench.csv'
if (!exists("png")) png = 'bench.png'

set terminal pngcairo size 1400,560 noenhanced font ",10"
set output png
set logscale x 2
set logscale y 10
set format x "%.0b%B"
set xlabel "object size (bytes)"
set ylabel "GB/s"
set grid
set key left top font ",9"

# Rows of one path in one sweep and op, as "size gbps" pairs (awk keeps the CSV order).
sel(sweep, op, path) = sprintf("< awk -F, '$1==\"%s\" && $2==\"%s\" && $3==\"%s\" && $7!=\"\" {print $4, $7}' '%s'", sweep, op, path, csv)

paths = "http lf-shm lf-tcp ucx-sm ucx-tcp nginx"
set multiplot layout 1,2
set title "GET throughput vs size (1 client, 1 transfer)"
plot for [p in paths] sel("size", "get", p) using 1:2 with linespoints lw 2 title p, \
     sel("baseline", "copy", "memcpy") using 1:2 with lines dt 2 lw 2 lc rgb "black" title "memcpy (1 thread)", \
     sel("baseline", "copy", "tcp") using 1:2 with lines dt 3 lw 2 lc rgb "gray40" title "loopback TCP"
set title "PUT throughput vs size (1 client, 1 transfer)"
plot for [p in paths] sel("size", "put", p) using 1:2 with linespoints lw 2 title p, \
     sel("baseline", "copy", "memcpy") using 1:2 with lines dt 2 lw 2 lc rgb "black" title "memcpy (1 thread)", \
     sel("baseline", "copy", "tcp") using 1:2 with lines dt 3 lw 2 lc rgb "gray40" title "loopback TCP"
unset multiplot
