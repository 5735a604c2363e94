# Plots of bench/step_model.sh's report (gnuplot -e "dir='docs/step_model'" bench/step_model.gp):
# the allreduce fits, the validation, and the predictions to 256 ranks and over bucket sizes.
set terminal pngcairo size 900,560 font "DejaVu Sans,11" noenhanced
set grid
set key top left

# Files present decide what is drawn (QUICK runs measure one link and one model).
links = system("cd ".dir." && ls allreduce_*.dat 2>/dev/null | sed 's/allreduce_//; s/.dat//' | tr '\\n' ' '")
models = system("cd ".dir." && ls scaling_*.dat 2>/dev/null | sed 's/scaling_//; s/.dat//' | tr '\\n' ' '")

do for [link in links] {
  set output dir."/allreduce_".link.".png"
  set title "ember allreduce on ".link." links: measured and the fitted alpha-beta ring model"
  set logscale xy
  set xlabel "bytes"
  set ylabel "ms per allreduce"
  f = dir."/allreduce_".link.".dat"
  plot f using ($2 == 2 ? $1 : 1/0):3 with points pt 7 lc 1 title "2 hosts, measured", \
       f using ($2 == 2 ? $1 : 1/0):4 with lines lc 1 title "2 hosts, model", \
       f using ($2 == 4 ? $1 : 1/0):3 with points pt 5 lc 2 title "4 hosts, measured", \
       f using ($2 == 4 ? $1 : 1/0):4 with lines lc 2 title "4 hosts, model"
  unset logscale
}

set output dir."/validation.png"
set title "DDP step: measured vs predicted (dashed: +-15%)"
set xlabel "measured ms per step"
set ylabel "predicted ms per step"
set key top left
f = dir."/validation.dat"
stats f using 2 nooutput
hi = STATS_max * 1.25
set xrange [0:hi]
set yrange [0:hi]
plot x with lines lc rgb "black" title "exact", 1.15 * x with lines dt 2 lc rgb "gray" notitle, \
     0.85 * x with lines dt 2 lc rgb "gray" notitle, \
     f using 2:3 with points pt 7 ps 1.3 lc 1 title "runs", \
     f using 2:3:1 with labels offset char 0.5,0.6 left font ",7" notitle
set autoscale

do for [model in models] {
  set output dir."/scaling_".model.".png"
  set title model.": predicted scaling efficiency (compute / step), one rank per host"
  set logscale x 2
  set xlabel "ranks"
  set ylabel "efficiency"
  set yrange [0:1.05]
  set key bottom left
  f = dir."/scaling_".model.".dat"
  header = system("head -1 ".f)
  # Header words: "#", "ranks", then <link>_<algo>_ms and <link>_<algo>_eff per data column.
  plot for [i = 0:(words(header) - 2) / 2 - 1] f using 1:(column(3 + 2 * i)) with linespoints \
       title word(header, 4 + 2 * i)[1:strlen(word(header, 4 + 2 * i)) - 4]
  unset logscale
  set autoscale

  set output dir."/buckets_".model.".png"
  set title model.": predicted step time over the bucket cap (ring)"
  set logscale x
  set xlabel "bucket cap (MB; first bucket the same)"
  set ylabel "ms per step"
  set key top right
  f = dir."/buckets_".model.".dat"
  header = system("head -1 ".f)
  plot for [i = 2:words(header) - 1] f using 1:i with linespoints title word(header, i + 1)[1:strlen(word(header, i + 1)) - 3]
  unset logscale
  set autoscale
}
